//! Identity seeds: the 32-byte Ed25519 seed a peripheral signs its key exchange with, kept in a
//! file as 64 hex digits (what `blerpc keygen` writes and `blerpc serve --identity` reads).

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context as _, bail};
use blerpc::known_keys::{parse_key, to_hex};
use blerpc_proto::crypto::{CryptoProvider as _, DefaultProvider, IdentitySeed};
use rand_core::{OsRng, RngCore as _};

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

/// Reads a seed file (64 hex digits, surrounding whitespace allowed).
pub fn load(path: &Path) -> anyhow::Result<[u8; 32]> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read identity file {}", path.display()))?;
    // Raw bytes (a binary seed, a PEM key, another tool's format) get the same one answer.
    std::str::from_utf8(&bytes)
        .ok()
        .and_then(parse_key)
        .with_context(|| {
            format!(
                "identity file {} is not a seed: it must hold a 32-byte Ed25519 seed as 64 hex \
                 digits (create one with `blerpc keygen --out FILE`)",
                path.display()
            )
        })
}

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
    writeln!(file, "{}", to_hex(seed))
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
