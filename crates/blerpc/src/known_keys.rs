//! Pinned peripheral identities: a JSON file `{"<device id>": "<ed25519 public key hex>"}`, as
//! the reference Python central keeps it, written with mode 0600.
//!
//! Trust on first use: the first identity seen for a device is pinned; a different one later is
//! refused. Every failure (unreadable file, bad JSON, a write that fails) refuses the connection:
//! fail-closed.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use blerpc_proto::handshake::KnownKeys;

/// Errors reading or writing a known-keys file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KnownKeysError {
    /// The file could not be read or written.
    #[error("known-keys file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a JSON object of hex keys.
    #[error("known-keys file {path} is malformed: {reason}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// A known-keys file. Reads on every lookup and writes atomically (temp file + rename) on every
/// pin, so several processes sharing the file see each other's pins.
#[derive(Clone, Debug)]
pub struct KnownKeysFile {
    path: PathBuf,
}

impl KnownKeysFile {
    /// The store at `path` (created on the first pin).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        KnownKeysFile { path: path.into() }
    }

    /// The default location: `$XDG_CONFIG_HOME/blerpc/known_keys.json`, else
    /// `$HOME/.config/blerpc/known_keys.json`, else `./known_keys.json`.
    pub fn default_path() -> PathBuf {
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
        match base {
            Some(b) => b.join("blerpc").join("known_keys.json"),
            None => PathBuf::from("known_keys.json"),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn load(&self) -> Result<BTreeMap<String, String>, KnownKeysError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(source) => {
                return Err(KnownKeysError::Io {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        serde_json::from_str(&text).map_err(|e| KnownKeysError::Malformed {
            path: self.path.clone(),
            reason: e.to_string(),
        })
    }

    fn store(&self, map: &BTreeMap<String, String>) -> Result<(), KnownKeysError> {
        let io = |source| KnownKeysError::Io {
            path: self.path.clone(),
            source,
        };
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let json = serde_json::to_string_pretty(map).map_err(|e| KnownKeysError::Malformed {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        let tmp = self.path.with_extension("json.tmp");
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&tmp).map_err(io)?;
        file.write_all(json.as_bytes()).map_err(io)?;
        file.write_all(b"\n").map_err(io)?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&tmp, &self.path).map_err(io)
    }
}

impl KnownKeys for KnownKeysFile {
    type Error = KnownKeysError;

    fn get(&self, device_id: &str) -> Result<Option<[u8; 32]>, KnownKeysError> {
        let map = self.load()?;
        let Some(hex) = map.get(device_id) else {
            return Ok(None);
        };
        parse_key(hex)
            .map(Some)
            .ok_or_else(|| KnownKeysError::Malformed {
                path: self.path.clone(),
                reason: format!("entry for {device_id:?} is not a 32-byte hex key"),
            })
    }

    fn put(&mut self, device_id: &str, key: &[u8; 32]) -> Result<(), KnownKeysError> {
        let mut map = self.load()?;
        map.insert(device_id.to_string(), to_hex(key));
        self.store(&map)
    }
}

/// Lowercase hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses 64 hex digits into a key.
pub fn parse_key(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use blerpc_proto::handshake::{TofuError, TofuOutcome, tofu_verify};

    #[test]
    fn first_use_pins_then_mismatch_is_refused_and_the_file_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("known_keys.json");
        let mut store = KnownKeysFile::new(&path);
        assert!(matches!(
            tofu_verify(&mut store, "dev", &[1; 32]),
            Ok(TofuOutcome::FirstUse)
        ));
        assert!(matches!(
            tofu_verify(&mut store, "dev", &[1; 32]),
            Ok(TofuOutcome::Matched)
        ));
        assert!(matches!(
            tofu_verify(&mut store, "dev", &[2; 32]),
            Err(TofuError::Mismatch { .. })
        ));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(&"01".repeat(32)));
    }

    #[test]
    fn a_corrupt_file_fails_closed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.json");
        std::fs::write(&path, "{not json").unwrap();
        let mut store = KnownKeysFile::new(&path);
        assert!(matches!(
            tofu_verify(&mut store, "dev", &[1; 32]),
            Err(TofuError::Store(_))
        ));
        std::fs::write(&path, r#"{"dev": "zz"}"#).unwrap();
        assert!(matches!(
            tofu_verify(&mut store, "dev", &[1; 32]),
            Err(TofuError::Store(_))
        ));
    }

    #[test]
    fn hex_roundtrip() {
        let k = [0xab; 32];
        assert_eq!(parse_key(&to_hex(&k)), Some(k));
        assert_eq!(parse_key("ab"), None);
    }
}
