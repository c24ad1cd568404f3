//! Pinned peripheral identities: a JSON file `{"<device id>": "<ed25519 public key hex>"}`, as
//! the reference Python central keeps it, written with mode 0600.
//!
//! Trust on first use: the first identity seen for a device is pinned; a different one later is
//! refused. Every failure (unreadable file, bad JSON, a write that fails) refuses the connection:
//! fail-closed.
//!
//! # Several processes
//!
//! Any number of processes may share one file. A lookup reads it without a lock: a pin never
//! rewrites the file in place but writes a temporary file of its own
//! (`.<name>.<pid>.<random>.tmp`, in the same directory) and renames it over the file, so a
//! reader sees the old or the new contents, never a mix. A pin holds an exclusive advisory lock
//! ([`std::fs::File::lock`]: `flock` on Unix, `LockFileEx` on Windows) on the sidecar file
//! `<name>.lock` from reading the pins to the rename, so concurrent pins are serialised and none
//! is lost. The lock is on a sidecar because the file itself is replaced by every pin; the
//! sidecar is never removed. The lock is advisory: a program that writes the file without taking
//! it (the reference Python central, an older blerpc) can still overwrite a concurrent pin.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
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
    #[error(
        "known-keys file {path} is malformed: {reason}; connections are refused until the file is a \
         JSON object of \"device\": \"64 hex digits\" (fix the entry, or use another file)"
    )]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Another process pinned a different key for the device between this process's lookup
    /// and its pin (two first connections at once, to two different keys). Nothing is written.
    #[error(
        "known-keys file {path}: another process pinned a different key for {device_id:?} meanwhile"
    )]
    Conflict {
        /// The file.
        path: PathBuf,
        /// The device.
        device_id: String,
    },
}

/// A known-keys file. Reads on every lookup and writes atomically (temp file + rename, under a
/// lock) on every pin, so several processes sharing the file see each other's pins (see the
/// [module docs](self)).
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

    /// The sidecar file a pin locks: the file's path with `.lock` appended.
    pub fn lock_path(&self) -> PathBuf {
        let mut name = OsString::from(self.path.as_os_str());
        name.push(".lock");
        PathBuf::from(name)
    }

    fn io(&self, source: std::io::Error) -> KnownKeysError {
        KnownKeysError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn malformed(&self, reason: impl ToString) -> KnownKeysError {
        KnownKeysError::Malformed {
            path: self.path.clone(),
            reason: reason.to_string(),
        }
    }

    fn bad_entry(&self, device_id: &str) -> KnownKeysError {
        self.malformed(format!("entry for {device_id:?} is not a 32-byte hex key"))
    }

    fn load(&self) -> Result<BTreeMap<String, String>, KnownKeysError> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(source) => return Err(self.io(source)),
        };
        parse_pins(&bytes).map_err(|e| self.malformed(e))
    }

    /// Takes the exclusive lock on [`KnownKeysFile::lock_path`], creating the directory and the
    /// sidecar if needed; released when the returned file is dropped (or the process dies).
    /// `None` where the platform has no file locks.
    fn lock(&self) -> Result<Option<File>, KnownKeysError> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| self.io(e))?;
        }
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        private(&mut options);
        let file = options.open(self.lock_path()).map_err(|e| self.io(e))?;
        match file.lock() {
            Ok(()) => Ok(Some(file)),
            // No advisory locks here: the unique temporary file still keeps the file whole.
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => Ok(None),
            Err(e) => Err(self.io(e)),
        }
    }

    /// Replaces the file with `pins`: a new temporary file, synced, renamed over it. Called
    /// with the lock held.
    fn store(&self, pins: &BTreeMap<String, String>) -> Result<(), KnownKeysError> {
        let text = emit_pins(pins).map_err(|e| self.malformed(e))?;
        let tmp = self.temp_path();
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        private(&mut options);
        let written = options.open(&tmp).and_then(|mut file| {
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            drop(file);
            std::fs::rename(&tmp, &self.path)
        });
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map_err(|e| self.io(e))
    }

    /// Every pin in the file, by device id; fails on the first entry that is not a key (a
    /// missing file has none). [`KnownKeysFile::pins`] as a map.
    pub fn entries(&self) -> Result<BTreeMap<String, [u8; 32]>, KnownKeysError> {
        Ok(self.pins()?.into_iter().collect())
    }

    /// Every pin in the file as (device id, key), sorted by id, the last of a repeated id kept;
    /// fails on the first entry that is not a key (a missing file has none). What an allow-list
    /// of keys (the device gateway's known devices) reads once at start: the file is read as a
    /// stream, so what it holds is the result alone, without the file's text and a map of
    /// strings besides (for 300,000 devices, 73 MiB of a gateway's memory became 25).
    pub fn pins(&self) -> Result<Vec<(String, [u8; 32])>, KnownKeysError> {
        let file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(self.io(source)),
        };
        let reader = std::io::BufReader::with_capacity(64 << 10, file);
        let mut de = serde_json::Deserializer::from_reader(reader);
        let mut pins = match serde::Deserializer::deserialize_map(&mut de, PinsVisitor) {
            Ok(Ok(pins)) => pins,
            Ok(Err(bad_id)) => return Err(self.bad_entry(&bad_id)),
            Err(e) => return Err(self.malformed(e)),
        };
        de.end().map_err(|e| self.malformed(e))?;
        // By id; of a repeated id, the last (the sort is stable; `dedup_by` keeps the first of
        // a run, so the later one is swapped into its place).
        pins.sort_by(|a, b| a.0.cmp(&b.0));
        pins.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                std::mem::swap(later, kept);
            }
            same
        });
        Ok(pins)
    }

    /// Pins every `(device id, key)` of `pins` in one read-modify-write under the lock (what
    /// [`KnownKeys::put`] does for one): a pin already there with the same key is kept, one
    /// with a different key fails the whole batch with [`KnownKeysError::Conflict`] and
    /// nothing is written.
    pub fn put_all(&self, pins: &[(String, [u8; 32])]) -> Result<(), KnownKeysError> {
        let _lock = self.lock()?;
        let mut map = self.load()?;
        let mut changed = false;
        for (device_id, key) in pins {
            match map.get(device_id) {
                Some(existing) => match parse_key(existing) {
                    Some(pinned) if pinned == *key => {}
                    Some(_) => {
                        return Err(KnownKeysError::Conflict {
                            path: self.path.clone(),
                            device_id: device_id.clone(),
                        });
                    }
                    None => return Err(self.bad_entry(device_id)),
                },
                None => {
                    map.insert(device_id.clone(), to_hex(key));
                    changed = true;
                }
            }
        }
        if changed { self.store(&map) } else { Ok(()) }
    }

    /// `.<name>.<pid>.<random>.tmp` next to the file: unique per process and per pin.
    fn temp_path(&self) -> PathBuf {
        let mut random = [0u8; 8];
        if rand_core::RngCore::try_fill_bytes(&mut rand_core::OsRng, &mut random).is_err() {
            // No OS randomness: the clock still separates two pins of one process.
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            random = (nanos as u64).to_le_bytes();
        }
        let mut name = OsString::from(".");
        name.push(
            self.path
                .file_name()
                .unwrap_or_else(|| std::ffi::OsStr::new("known_keys.json")),
        );
        name.push(format!(".{}.{}.tmp", std::process::id(), to_hex(&random)));
        self.path.with_file_name(name)
    }
}

/// Mode 0600 for files the store creates (Unix).
fn private(options: &mut OpenOptions) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = options;
}

impl KnownKeys for KnownKeysFile {
    type Error = KnownKeysError;

    fn describe(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.path.display())
    }

    fn get(&self, device_id: &str) -> Result<Option<[u8; 32]>, KnownKeysError> {
        let map = self.load()?;
        let Some(hex) = map.get(device_id) else {
            return Ok(None);
        };
        parse_key(hex)
            .map(Some)
            .ok_or_else(|| self.bad_entry(device_id))
    }

    /// Pins `key` for `device_id`, keeping every other pin. The read-modify-write runs under
    /// the file's lock; if another process pinned the same key meanwhile nothing is written,
    /// and if it pinned a different one the pin fails with [`KnownKeysError::Conflict`].
    fn put(&mut self, device_id: &str, key: &[u8; 32]) -> Result<(), KnownKeysError> {
        let _lock = self.lock()?;
        let mut map = self.load()?;
        if let Some(existing) = map.get(device_id) {
            return match parse_key(existing) {
                Some(pinned) if pinned == *key => Ok(()),
                Some(_) => Err(KnownKeysError::Conflict {
                    path: self.path.clone(),
                    device_id: device_id.to_string(),
                }),
                None => Err(self.bad_entry(device_id)),
            };
        }
        map.insert(device_id.to_string(), to_hex(key));
        self.store(&map)
    }
}

/// The pins in the contents of a known-keys file: a JSON object of device id → key hex (what
/// [`KnownKeysFile`] reads). The values are checked only when a device is looked up
/// ([`parse_key`]), so one bad entry refuses only its own device. Duplicate ids: the last wins.
pub fn parse_pins(bytes: &[u8]) -> Result<BTreeMap<String, String>, serde_json::Error> {
    serde_json::from_slice(bytes)
}

/// Reads a known-keys object as (id, key) pairs in file order: `Err(id)` for the first entry
/// whose value is not a key.
struct PinsVisitor;

impl<'de> serde::de::Visitor<'de> for PinsVisitor {
    type Value = Result<Vec<(String, [u8; 32])>, String>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object of device id to key hex")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut pins = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some((id, hex)) = map.next_entry::<String, String>()? {
            match parse_key(&hex) {
                Some(key) => pins.push((id, key)),
                None => return Ok(Err(id)),
            }
        }
        Ok(Ok(pins))
    }
}

/// The contents [`KnownKeysFile`] writes for `pins`: pretty-printed JSON, sorted by device id,
/// and a final newline. [`parse_pins`] gives `pins` back.
pub fn emit_pins(pins: &BTreeMap<String, String>) -> Result<String, serde_json::Error> {
    let mut text = serde_json::to_string_pretty(pins)?;
    text.push('\n');
    Ok(text)
}

/// Lowercase hex of `bytes`, written into one allocation of exactly its length (no
/// intermediate strings, so wrapping the result in `zeroize::Zeroizing` leaves no other copy).
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// Parses 64 hex digits (either case, surrounding whitespace allowed) into a key. Anything else
/// is `None`: a sign, a `0x` prefix, inner whitespace or a different length.
pub fn parse_key(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim().as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let [hi, lo] = pair else { return None };
        *byte = (hex_digit(*hi)? << 4) | hex_digit(*lo)?;
    }
    Some(out)
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
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
    fn a_batch_of_pins_is_one_write_and_a_conflict_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("devices.json");
        let store = KnownKeysFile::new(&path);
        assert!(store.entries().unwrap().is_empty());
        store
            .put_all(&[("a".into(), [1; 32]), ("b".into(), [2; 32])])
            .unwrap();
        let all = store.entries().unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all["b"], [2; 32]);
        // The same pins again: nothing changes; a different key for "a": nothing is written.
        store.put_all(&[("a".into(), [1; 32])]).unwrap();
        let e = store
            .put_all(&[("c".into(), [3; 32]), ("a".into(), [9; 32])])
            .unwrap_err();
        assert!(matches!(e, KnownKeysError::Conflict { .. }), "{e}");
        assert_eq!(store.entries().unwrap().len(), 2);
        std::fs::write(&path, r#"{"x": "not a key"}"#).unwrap();
        assert!(matches!(
            store.entries().unwrap_err(),
            KnownKeysError::Malformed { .. }
        ));
    }

    #[test]
    fn pins_are_read_sorted_by_id_and_the_last_of_a_repeated_id_wins() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("devices.json");
        let store = KnownKeysFile::new(&path);
        assert!(store.pins().unwrap().is_empty(), "a missing file has none");
        let (k1, k2, k3) = ("01".repeat(32), "02".repeat(32), "AB".repeat(32));
        std::fs::write(
            &path,
            format!(r#"{{"b": "{k1}", "a": " {k2} ", "b": "{k3}", "c\u0041": "{k1}"}}"#),
        )
        .unwrap();
        assert_eq!(
            store.pins().unwrap(),
            vec![
                ("a".to_string(), [2; 32]),
                ("b".to_string(), [0xab; 32]),
                ("cA".to_string(), [1; 32]),
            ]
        );
        std::fs::write(&path, format!(r#"{{"a": "{k1}", "bad": "{k1}00"}}"#)).unwrap();
        let e = store.pins().unwrap_err();
        assert!(e.to_string().contains(r#""bad""#), "{e}");
        for not_pins in ["[]", r#"{"a": 1}"#, r#"{"a": "x"} {}"#, "{"] {
            std::fs::write(&path, not_pins).unwrap();
            assert!(
                matches!(store.pins(), Err(KnownKeysError::Malformed { .. })),
                "{not_pins}"
            );
        }
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
        assert_eq!(to_hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        let upper = format!(" \t{}\n", "AB".repeat(32));
        assert_eq!(parse_key(&upper), Some(k));
    }

    #[test]
    fn a_key_is_exactly_64_hex_digits() {
        // `u8::from_str_radix` takes a sign: "+f" must not pass as a digit pair.
        assert_eq!(parse_key(&"+f".repeat(32)), None);
        assert_eq!(parse_key(&format!("0x{}", "ab".repeat(31))), None);
        assert_eq!(
            parse_key(&format!("{} {}", "ab".repeat(16), "ab".repeat(15))),
            None
        );
        assert_eq!(parse_key(&"gg".repeat(32)), None);
        assert_eq!(parse_key(&"ab".repeat(33)), None);
        // 64 bytes but not 64 characters.
        assert_eq!(parse_key(&format!("é{}", "a".repeat(62))), None);
    }

    #[test]
    fn pins_parse_and_emit_as_the_file_holds_them() {
        let text = b"{\n  \"a\": \"01\",\n  \"b\": \"zz\"\n}\n";
        let pins = parse_pins(text).unwrap();
        assert_eq!(pins.len(), 2);
        assert_eq!(pins["b"], "zz");
        assert_eq!(emit_pins(&pins).unwrap().as_bytes(), text);
        assert_eq!(emit_pins(&BTreeMap::new()).unwrap(), "{}\n");
        assert!(parse_pins(b"[]").is_err());
        assert!(parse_pins(b"{\"a\": 1}").is_err());
        assert!(parse_pins(b"{\"a\": \"\xff\"}").is_err());
    }

    #[test]
    fn a_pin_keeps_the_others_and_refuses_a_concurrent_different_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("known_keys.json");
        std::fs::write(&path, r#"{"other": "zz"}"#).unwrap();
        let mut store = KnownKeysFile::new(&path);
        store.put("dev", &[1; 32]).unwrap();
        // What a second process sees after its own lookup found nothing.
        store.put("dev", &[1; 32]).unwrap();
        assert!(matches!(
            store.put("dev", &[2; 32]),
            Err(KnownKeysError::Conflict { ref device_id, .. }) if device_id == "dev"
        ));
        let pins = parse_pins(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(pins["other"], "zz");
        assert_eq!(pins["dev"], "01".repeat(32));
        assert_eq!(store.lock_path(), dir.path().join("known_keys.json.lock"));
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["known_keys.json", "known_keys.json.lock"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.lock_path())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn temp_names_are_unique_and_hidden_next_to_the_file() {
        let store = KnownKeysFile::new("/x/y/known_keys.json");
        let (a, b) = (store.temp_path(), store.temp_path());
        assert_ne!(a, b);
        assert_eq!(a.parent(), Some(Path::new("/x/y")));
        let name = a.file_name().unwrap().to_string_lossy().into_owned();
        let prefix = format!(".known_keys.json.{}.", std::process::id());
        assert!(
            name.starts_with(&prefix) && name.ends_with(".tmp"),
            "{name}"
        );
    }
}
