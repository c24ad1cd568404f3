//! Identity seeds: the 32-byte Ed25519 seed a peripheral signs its key exchange with, kept in a
//! file as 64 hex digits (what `blerpc keygen` writes and `blerpc serve --identity` reads).
//!
//! # Wiping
//!
//! The copies of the secret this module makes are wiped when it is done with them
//! ([`zeroize::Zeroizing`]): the bytes [`load`] reads from the file, the hex string [`store`]
//! writes, and the seed [`public_key`] hands to the crypto provider (an
//! [`IdentitySeed`], zeroized on drop by blerpc-proto). Not wiped: the `[u8; 32]` that
//! [`generate`] and [`load`] return (the caller owns it: `blerpc serve` moves it into its
//! `ServerConfig`), copies the compiler makes when it moves an array between stack frames,
//! the file itself and the kernel's page cache.

use std::io::{Read as _, Write as _};
use std::path::Path;

use anyhow::{Context as _, bail};
use blerpc::known_keys::{parse_key, to_hex};
use blerpc_proto::crypto::{CryptoProvider as _, DefaultProvider, IdentitySeed};
use rand_core::{OsRng, RngCore as _};
use zeroize::Zeroizing;

/// A fresh random identity seed.
pub fn generate() -> [u8; 32] {
    let mut seed = [0u8; 32];
    OsRng.fill_bytes(&mut seed);
    seed
}

/// The Ed25519 public key of `seed` (what centrals pin).
pub fn public_key(seed: &[u8; 32]) -> anyhow::Result<[u8; 32]> {
    let provider = DefaultProvider::default();
    let identity = provider
        .load_identity(&IdentitySeed::from_bytes(*seed))
        .map_err(|e| anyhow::anyhow!("identity seed does not load: {e}"))?;
    Ok(provider.identity_public(&identity))
}

/// The seed in the contents of an identity file: 64 hex digits (either case), surrounding
/// whitespace allowed; `None` for anything else (not UTF-8, another length, a binary seed, a
/// PEM key). What [`load`] accepts.
pub fn parse_seed(bytes: &[u8]) -> Option<[u8; 32]> {
    std::str::from_utf8(bytes).ok().and_then(parse_key)
}

/// Reads a seed file (64 hex digits, surrounding whitespace allowed). On Unix, a file that
/// other users can read or write gets a warning on stderr naming the fix (`chmod 600 FILE`).
pub fn load(path: &Path) -> anyhow::Result<[u8; 32]> {
    let read = || -> std::io::Result<Zeroizing<Vec<u8>>> {
        let mut file = std::fs::File::open(path)?;
        let meta = file.metadata()?;
        warn_if_shared(path, &meta);
        // Room for the whole file up front: growing the buffer would leave unwiped copies.
        let len = usize::try_from(meta.len()).unwrap_or(0);
        let mut bytes = Zeroizing::new(Vec::with_capacity(len.saturating_add(1)));
        file.read_to_end(&mut bytes)?;
        Ok(bytes)
    };
    let bytes = read().with_context(|| format!("cannot read identity file {}", path.display()))?;
    // Raw bytes (a binary seed, a PEM key, another tool's format) get the same one answer.
    parse_seed(&bytes).with_context(|| {
        format!(
            "identity file {} is not a seed: it must hold a 32-byte Ed25519 seed as 64 hex \
             digits (create one with `blerpc keygen --out FILE`)",
            path.display()
        )
    })
}

/// The warning [`load`] prints for an identity file with `mode` (its permission bits) on
/// Unix, or `None` when only its owner has access.
pub fn shared_mode_warning(path: &Path, mode: u32) -> Option<String> {
    let mode = mode & 0o777;
    if mode & 0o077 == 0 {
        return None;
    }
    let who = if mode & 0o044 != 0 {
        "other users can read the secret seed"
    } else {
        "other users can replace it"
    };
    Some(format!(
        "blerpc: warning: identity file {path} has mode {mode:04o}: {who}; \
         fix it with `chmod 600 {path}`",
        path = path.display()
    ))
}

#[cfg(unix)]
fn warn_if_shared(path: &Path, meta: &std::fs::Metadata) {
    use std::os::unix::fs::PermissionsExt as _;
    if let Some(warning) = shared_mode_warning(path, meta.permissions().mode()) {
        eprintln!("{warning}");
    }
}

#[cfg(not(unix))]
fn warn_if_shared(_: &Path, _: &std::fs::Metadata) {}

/// Writes `seed` as hex to a new file with mode 0600. An existing file is kept unless `force`.
pub fn store(path: &Path, seed: &[u8; 32], force: bool) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = match options.open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => bail!(
            "{} already exists; pass --force to overwrite it (the old identity is lost)",
            path.display()
        ),
        Err(e) => {
            return Err(e)
                .with_context(|| format!("cannot create identity file {}", path.display()));
        }
    };
    // An overwritten file keeps its old mode: tighten it.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("cannot set mode 0600 on {}", path.display()))?;
    }
    let hex = Zeroizing::new(to_hex(seed));
    file.write_all(hex.as_bytes())
        .and_then(|()| file.write_all(b"\n"))
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write identity file {}", path.display()))
}

/// Writes `bytes` to `path` (created or truncated) with mode 0600.
pub fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    options
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn store_load_round_trip_is_private_and_refuses_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("id.key");
        store(&path, &[7; 32], false).unwrap();
        assert_eq!(load(&path).unwrap(), [7; 32]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let e = store(&path, &[8; 32], false).unwrap_err().to_string();
        assert!(e.contains("--force"), "{e}");
        store(&path, &[8; 32], true).unwrap();
        assert_eq!(load(&path).unwrap(), [8; 32]);
    }

    #[test]
    fn bad_file_names_the_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("id.key");
        std::fs::write(&path, "zz").unwrap();
        let e = format!("{:#}", load(&path).unwrap_err());
        assert!(e.contains("64 hex digits"), "{e}");
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
        assert_eq!(shared_mode_warning(p, 0o100600), None);
        assert_eq!(shared_mode_warning(p, 0o400), None);
        assert_eq!(
            shared_mode_warning(p, 0o100644).unwrap(),
            "blerpc: warning: identity file /k/id.key has mode 0644: other users can read the \
             secret seed; fix it with `chmod 600 /k/id.key`"
        );
        assert!(
            shared_mode_warning(p, 0o620)
                .unwrap()
                .contains("mode 0620: other users can replace it")
        );
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
