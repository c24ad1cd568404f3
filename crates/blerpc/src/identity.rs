//! Identity seed files: the 32-byte Ed25519 seed a peripheral signs its key exchange with
//! ([`ServerConfig::identity`](crate::ServerConfig::identity)), kept in a file as 64 hex digits
//! and a newline, mode 0600 on Unix (what `blerpc keygen` writes and `blerpc serve --identity`
//! reads).
//!
//! ```
//! use blerpc::identity;
//!
//! # fn main() -> Result<(), identity::SeedFileError> {
//! # let dir = std::env::temp_dir().join(format!("blerpc-identity-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).map_err(|source| identity::SeedFileError::Create { path: dir.clone(), source })?;
//! let path = dir.join("device.key");
//! let seed = identity::generate();
//! identity::store(&path, &seed, false)?; // refuses to replace an existing file
//! let loaded = identity::load(&path)?;
//! assert_eq!(loaded.seed, seed);
//! assert!(loaded.shared.is_none()); // only its owner may read it
//! let public = identity::public_key(&seed)?; // what centrals pin
//! # let _ = public;
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(())
//! # }
//! ```
//!
//! # Wiping
//!
//! The copies of the secret this module makes are wiped when it is done with them
//! ([`zeroize::Zeroizing`]): the bytes [`load`] reads from the file, the hex string [`store`]
//! writes, and the seed [`public_key`] hands to the crypto provider (an [`IdentitySeed`],
//! zeroized on drop by blerpc-proto). Not wiped: the `[u8; 32]` that [`generate`] and [`load`]
//! return (the caller owns it: a server moves it into its `ServerConfig`), copies the compiler
//! makes when it moves an array between stack frames, the file itself and the kernel's page
//! cache. [`Seed`] (feature `process`) holds a seed that is wiped when dropped and
//! (de)serialises as 64 hex digits without a heap copy: how a parent hands its identity to its
//! workers ([`process::workers`](crate::process::workers)).

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

use blerpc_proto::crypto::{CryptoError, CryptoProvider as _, DefaultProvider, IdentitySeed};
use rand_core::{OsRng, RngCore as _};
use zeroize::Zeroizing;

use crate::known_keys::{KnownKeysFile, parse_key, to_hex};

/// Why a seed file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SeedFileError {
    /// The file could not be opened or read.
    #[error("cannot read identity file {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file does not hold a seed as 64 hex digits (raw bytes, a PEM key, another tool's
    /// format all get this one answer).
    #[error(
        "identity file {} is not a seed: it must hold a 32-byte Ed25519 seed as 64 hex digits",
        path.display()
    )]
    NotASeed {
        /// The file.
        path: PathBuf,
    },
    /// [`store`] without `overwrite` found a file there.
    #[error("{} already exists", path.display())]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// The file could not be created (a missing directory, no permission).
    #[error("cannot create identity file {}", path.display())]
    Create {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file was created but could not be written (or its mode set) in full.
    #[error("cannot write identity file {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The crypto provider refused the seed.
    #[error("the identity seed does not load: {0:?}")]
    Crypto(CryptoError),
}

/// A fresh random identity seed (from the operating system's generator).
pub fn generate() -> [u8; 32] {
    let mut seed = [0u8; 32];
    OsRng.fill_bytes(&mut seed);
    seed
}

/// The Ed25519 public key of `seed`: what centrals pin.
pub fn public_key(seed: &[u8; 32]) -> Result<[u8; 32], SeedFileError> {
    let provider = DefaultProvider::default();
    let identity = provider
        .load_identity(&IdentitySeed::from_bytes(*seed))
        .map_err(SeedFileError::Crypto)?;
    Ok(provider.identity_public(&identity))
}

/// The seed in the contents of an identity file: 64 hex digits (either case), surrounding
/// whitespace allowed; `None` for anything else (not UTF-8, another length, a binary seed, a
/// PEM key). What [`load`] accepts.
pub fn parse_seed(bytes: &[u8]) -> Option<[u8; 32]> {
    std::str::from_utf8(bytes).ok().and_then(parse_key)
}

/// Where `blerpc keygen` writes a seed and `blerpc serve` looks for one by default:
/// `identity.key` beside the default known-keys file
/// ([`KnownKeysFile::default_path`]: `$XDG_CONFIG_HOME/blerpc/`, else `~/.config/blerpc/`).
pub fn default_path() -> PathBuf {
    KnownKeysFile::default_path().with_file_name("identity.key")
}

/// A seed read by [`load`].
#[derive(Debug)]
pub struct Loaded {
    /// The seed.
    pub seed: [u8; 32],
    /// Set when other users may read or replace the file (Unix): say so and how to fix it.
    pub shared: Option<SharedFile>,
}

/// An identity file other users can read or write (Unix permission bits): its [`Display`]
/// names the file, its mode, the risk and the fix (`chmod 600 FILE`).
///
/// [`Display`]: std::fmt::Display
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedFile {
    /// The file.
    pub path: PathBuf,
    /// Its permission bits (`0o644`).
    pub mode: u32,
}

impl SharedFile {
    /// The file at `path` with permission bits `mode`, or `None` when only its owner has
    /// access.
    pub fn check(path: &Path, mode: u32) -> Option<SharedFile> {
        let mode = mode & 0o777;
        (mode & 0o077 != 0).then(|| SharedFile {
            path: path.to_path_buf(),
            mode,
        })
    }
}

impl std::fmt::Display for SharedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = if self.mode & 0o044 != 0 {
            "other users can read the secret seed"
        } else {
            "other users can replace it"
        };
        write!(
            f,
            "identity file {path} has mode {mode:04o}: {who}; fix it with `chmod 600 {path}`",
            path = self.path.display(),
            mode = self.mode
        )
    }
}

/// Reads a seed file (64 hex digits, surrounding whitespace allowed), and tells whether other
/// users may read or replace it ([`Loaded::shared`], Unix).
pub fn load(path: &Path) -> Result<Loaded, SeedFileError> {
    let read = || -> std::io::Result<(Zeroizing<Vec<u8>>, Option<SharedFile>)> {
        let mut file = std::fs::File::open(path)?;
        let meta = file.metadata()?;
        // Room for the whole file up front: growing the buffer would leave unwiped copies.
        let len = usize::try_from(meta.len()).unwrap_or(0);
        let mut bytes = Zeroizing::new(Vec::with_capacity(len.saturating_add(1)));
        file.read_to_end(&mut bytes)?;
        Ok((bytes, shared(path, &meta)))
    };
    let (bytes, shared) = read().map_err(|source| SeedFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let seed = parse_seed(&bytes).ok_or_else(|| SeedFileError::NotASeed {
        path: path.to_path_buf(),
    })?;
    Ok(Loaded { seed, shared })
}

#[cfg(unix)]
fn shared(path: &Path, meta: &std::fs::Metadata) -> Option<SharedFile> {
    use std::os::unix::fs::PermissionsExt as _;
    SharedFile::check(path, meta.permissions().mode())
}

#[cfg(not(unix))]
fn shared(_: &Path, _: &std::fs::Metadata) -> Option<SharedFile> {
    None
}

/// Writes `seed` as hex (and a newline) to `path` with mode 0600 (an existing file's mode is
/// tightened too). An existing file is kept ([`SeedFileError::Exists`]) unless `overwrite`.
pub fn store(path: &Path, seed: &[u8; 32], overwrite: bool) -> Result<(), SeedFileError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if overwrite {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::AlreadyExists => SeedFileError::Exists {
            path: path.to_path_buf(),
        },
        _ => SeedFileError::Create {
            path: path.to_path_buf(),
            source,
        },
    })?;
    let write = |file: &mut std::fs::File| -> std::io::Result<()> {
        // An overwritten file keeps its old mode: tighten it.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
        let hex = Zeroizing::new(to_hex(seed));
        file.write_all(hex.as_bytes())?;
        file.write_all(b"\n")?;
        file.sync_all()
    };
    write(&mut file).map_err(|source| SeedFileError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes `bytes` to `path` (created or truncated) with mode 0600 on Unix: for other secrets
/// kept beside a seed (a TLS private key).
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    // An overwritten file keeps its old mode: tighten it.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    file.write_all(bytes)
}

/// An identity seed that is wiped when dropped, and (de)serialises as 64 hex digits (lowercase
/// out, either case in) through a buffer on the stack: a secret to put in a configuration that
/// travels to another process. Its `Debug` shows no digit of it.
#[cfg(feature = "process")]
#[derive(Clone, PartialEq, Eq)]
pub struct Seed(Zeroizing<[u8; 32]>);

#[cfg(feature = "process")]
impl Seed {
    /// Takes `seed` (the caller's copy is the caller's to wipe).
    pub fn new(seed: [u8; 32]) -> Seed {
        Seed(Zeroizing::new(seed))
    }

    /// The seed, to give to a [`ServerConfig`](crate::ServerConfig).
    pub fn expose(&self) -> &[u8; 32] {
        &self.0
    }
}

#[cfg(feature = "process")]
impl std::fmt::Debug for Seed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seed(..)")
    }
}

#[cfg(feature = "process")]
impl serde::Serialize for Seed {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut hex = Zeroizing::new([0u8; 64]);
        for (pair, byte) in hex.chunks_exact_mut(2).zip(self.0.iter()) {
            if let [hi, lo] = pair {
                *hi = DIGITS[usize::from(byte >> 4)];
                *lo = DIGITS[usize::from(byte & 0x0f)];
            }
        }
        // ASCII hex digits: always UTF-8.
        let text = std::str::from_utf8(&hex[..]).map_err(serde::ser::Error::custom)?;
        serializer.serialize_str(text)
    }
}

#[cfg(feature = "process")]
impl<'de> serde::Deserialize<'de> for Seed {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Seed, D::Error> {
        struct Hex;
        impl serde::de::Visitor<'_> for Hex {
            type Value = Seed;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an identity seed as 64 hex digits")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Seed, E> {
                let mut seed = Seed::new([0; 32]);
                let digits = text.as_bytes();
                if digits.len() != 64 {
                    return Err(E::invalid_length(digits.len(), &self));
                }
                for (byte, pair) in seed.0.iter_mut().zip(digits.chunks_exact(2)) {
                    let nibble = |d: u8| (d as char).to_digit(16);
                    match pair {
                        [hi, lo] => match (nibble(*hi), nibble(*lo)) {
                            (Some(h), Some(l)) => *byte = (h << 4 | l) as u8,
                            _ => return Err(E::custom("an identity seed has hex digits only")),
                        },
                        _ => return Err(E::invalid_length(digits.len(), &self)),
                    }
                }
                Ok(seed)
            }
        }
        deserializer.deserialize_str(Hex)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_private_file_written_over_a_readable_one_becomes_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key.pem");
        std::fs::write(&path, b"old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&path, b"secret").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::read(&path).unwrap(), b"secret");
    }

    #[test]
    fn store_load_round_trip_is_private_and_refuses_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("id.key");
        store(&path, &[7; 32], false).unwrap();
        assert_eq!(load(&path).unwrap().seed, [7; 32]);
        assert!(load(&path).unwrap().shared.is_none());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let e = store(&path, &[8; 32], false).unwrap_err();
        assert!(
            matches!(&e, SeedFileError::Exists { path: p } if *p == path),
            "{e}"
        );
        assert_eq!(e.to_string(), format!("{} already exists", path.display()));
        store(&path, &[8; 32], true).unwrap();
        assert_eq!(load(&path).unwrap().seed, [8; 32]);
    }

    #[test]
    fn bad_file_names_the_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("id.key");
        std::fs::write(&path, "zz").unwrap();
        let e = load(&path).unwrap_err();
        assert!(matches!(e, SeedFileError::NotASeed { .. }), "{e}");
        assert!(e.to_string().contains("64 hex digits"), "{e}");
        let missing = dir.path().join("none.key");
        let e = load(&missing).unwrap_err();
        assert!(
            matches!(&e, SeedFileError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound),
            "{e}"
        );
    }

    #[test]
    fn the_file_format_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("id.key");
        store(&path, &[0xa5; 32], false).unwrap();
        let text = std::fs::read(&path).unwrap();
        assert_eq!(text, format!("{}\n", "a5".repeat(32)).as_bytes());
        assert_eq!(parse_seed(&text), Some([0xa5; 32]));
        assert_eq!(
            parse_seed(format!("\r\n {}\t", "A5".repeat(32)).as_bytes()),
            Some([0xa5; 32])
        );
        assert_eq!(parse_seed(&[0xa5; 32]), None);
        assert_eq!(parse_seed(b"\xff"), None);
        assert_eq!(parse_seed("+a".repeat(32).as_bytes()), None);
    }

    #[test]
    fn the_mode_warning_names_the_file_and_the_fix() {
        let p = Path::new("/k/id.key");
        assert_eq!(SharedFile::check(p, 0o100600), None);
        assert_eq!(SharedFile::check(p, 0o400), None);
        assert_eq!(
            SharedFile::check(p, 0o100644).unwrap().to_string(),
            "identity file /k/id.key has mode 0644: other users can read the secret seed; fix it \
             with `chmod 600 /k/id.key`"
        );
        assert!(
            SharedFile::check(p, 0o620)
                .unwrap()
                .to_string()
                .contains("mode 0620: other users can replace it")
        );
    }

    #[cfg(unix)]
    #[test]
    fn load_reports_a_shared_file() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("id.key");
        store(&path, &[3; 32], false).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.seed, [3; 32]);
        assert_eq!(loaded.shared, Some(SharedFile { path, mode: 0o640 }));
    }

    #[cfg(feature = "process")]
    #[test]
    fn a_seed_travels_as_hex_and_hides_in_debug() {
        let seed = Seed::new([0xa5; 32]);
        let json = serde_json::to_string(&seed).unwrap();
        assert_eq!(json, format!("\"{}\"", "a5".repeat(32)));
        assert_eq!(serde_json::from_str::<Seed>(&json).unwrap(), seed);
        let upper = format!("\"{}\"", "A5".repeat(32));
        assert_eq!(serde_json::from_str::<Seed>(&upper).unwrap(), seed);
        assert_eq!(format!("{seed:?}"), "Seed(..)");
        for bad in ["\"a5\"", "\"zz\"", "5", "null"] {
            assert!(serde_json::from_str::<Seed>(bad).is_err(), "{bad}");
        }
        let mut not_hex = "a5".repeat(31);
        not_hex.push_str("+5");
        assert!(serde_json::from_str::<Seed>(&format!("\"{not_hex}\"")).is_err());
    }

    #[test]
    fn public_key_matches_the_rfc8032_vector() {
        // RFC 8032 §7.1, test 1.
        let seed =
            parse_key("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60").unwrap();
        assert_eq!(
            to_hex(&public_key(&seed).unwrap()),
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
        );
    }
}
