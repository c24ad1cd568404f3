//! A throwaway local PKI for TLS links in demos and tests (feature `local-ca`): a CA and a
//! server certificate it signs for `localhost`, `127.0.0.1` and `::1` (rcgen). A client verifies
//! the server against the CA as it would a real one: chain, validity and name. Keys are ECDSA
//! P-256 ([`LocalPki::generate`]), or any algorithm rcgen's enabled backend can generate
//! ([`LocalPki::generate_with`]: RSA needs rcgen's `aws_lc_rs` feature).
//!
//! ```
//! use blerpc::link::local_ca::LocalPki;
//! use blerpc::link::tls::{TlsClientConfig, TlsServerConfig};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let pki = LocalPki::generate()?;
//! let server = TlsServerConfig::from_pem(pki.cert_pem.as_bytes(), pki.key_pem.as_bytes())?;
//! let client = TlsClientConfig::with_ca_pem(pki.ca_pem.as_bytes())?; // trusts the CA
//! # let _ = (server, client);
//! # Ok(())
//! # }
//! ```

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SignatureAlgorithm,
};

/// Why a local PKI could not be made or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalCaError {
    /// rcgen could not generate a key of the algorithm, or sign.
    #[error("cannot generate the local CA's certificates")]
    Generate(#[source] rcgen::Error),
    /// A PEM file could not be written.
    #[error("cannot write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl From<rcgen::Error> for LocalCaError {
    fn from(e: rcgen::Error) -> Self {
        LocalCaError::Generate(e)
    }
}

/// PEM texts of a generated CA and server certificate.
#[derive(Clone, Debug)]
pub struct LocalPki {
    /// The CA certificate (what clients trust: `--tls-ca`).
    pub ca_pem: String,
    /// The server certificate, signed by the CA (`--tls-cert`).
    pub cert_pem: String,
    /// The server's private key, PKCS#8 (`--tls-key`).
    pub key_pem: String,
}

impl LocalPki {
    /// Generates a CA and a server certificate for `localhost`, `127.0.0.1` and `::1`, both with
    /// ECDSA P-256 keys.
    pub fn generate() -> Result<LocalPki, LocalCaError> {
        Self::generate_with(&PKCS_ECDSA_P256_SHA256)
    }

    /// The same with keys of `alg` (rcgen generates RSA keys only with its `aws_lc_rs`
    /// feature).
    pub fn generate_with(alg: &'static SignatureAlgorithm) -> Result<LocalPki, LocalCaError> {
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "blerpc local demo CA");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate_for(alg)?;
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);

        let names = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
        let mut leaf = CertificateParams::new(names)?;
        leaf.distinguished_name
            .push(DnType::CommonName, "localhost");
        leaf.use_authority_key_identifier_extension = true;
        leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate_for(alg)?;
        let cert = leaf.signed_by(&key, &issuer)?;
        Ok(LocalPki {
            ca_pem: ca_cert.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Writes `ca.pem`, `cert.pem` and `key.pem` (mode 0600 on Unix) into `dir`.
    pub fn write_to(&self, dir: &Path) -> Result<(), LocalCaError> {
        let write = |name: &str, text: &str, private: bool| {
            let path = dir.join(name);
            let written = if private {
                crate::identity::write_private(&path, text.as_bytes())
            } else {
                std::fs::write(&path, text)
            };
            written.map_err(|source| LocalCaError::Write { path, source })
        };
        write("ca.pem", &self.ca_pem, false)?;
        write("cert.pem", &self.cert_pem, false)?;
        write("key.pem", &self.key_pem, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_are_pem_and_the_key_is_private() {
        let pki = LocalPki::generate().unwrap_or_else(|e| panic!("{e}"));
        assert!(pki.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(pki.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(pki.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        pki.write_to(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap_or_default();
        assert_eq!(read("ca.pem"), pki.ca_pem);
        assert_eq!(read("key.pem"), pki.key_pem);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.path().join("key.pem"))
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0);
            assert_eq!(mode, 0o600);
        }
        let e = pki.write_to(&dir.path().join("missing")).err();
        assert!(matches!(e, Some(LocalCaError::Write { .. })), "{e:?}");
    }
}
