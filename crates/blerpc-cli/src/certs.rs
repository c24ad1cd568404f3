//! A throwaway local PKI for TLS demos and tests: a CA and a server certificate it signs for
//! `localhost`, `127.0.0.1` and `::1` (rcgen). The client verifies the server against the CA as it
//! would a real one: chain, validity and name. Keys are ECDSA P-256 ([`LocalPki::generate`]), or
//! any algorithm rcgen's enabled backend can generate ([`LocalPki::generate_with`]: the
//! benchmarks enable aws-lc-rs for RSA-2048, as the published loopback figures used).

use anyhow::Context as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SignatureAlgorithm,
};

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
    pub fn generate() -> anyhow::Result<LocalPki> {
        Self::generate_with(&PKCS_ECDSA_P256_SHA256)
    }

    /// The same with keys of `alg` (rcgen generates RSA keys only with its `aws_lc_rs`
    /// feature).
    pub fn generate_with(alg: &'static SignatureAlgorithm) -> anyhow::Result<LocalPki> {
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "blerpc local demo CA");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate_for(alg).context("cannot generate the CA key")?;
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);

        let names = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
        let mut leaf = CertificateParams::new(names)?;
        leaf.distinguished_name
            .push(DnType::CommonName, "localhost");
        leaf.use_authority_key_identifier_extension = true;
        leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate_for(alg).context("cannot generate the server key")?;
        let cert = leaf.signed_by(&key, &issuer)?;
        Ok(LocalPki {
            ca_pem: ca_cert.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Writes `ca.pem`, `cert.pem` and `key.pem` (mode 0600) into `dir`.
    pub fn write_to(&self, dir: &std::path::Path) -> anyhow::Result<()> {
        std::fs::write(dir.join("ca.pem"), &self.ca_pem)?;
        std::fs::write(dir.join("cert.pem"), &self.cert_pem)?;
        Ok(blerpc::identity::write_private(
            &dir.join("key.pem"),
            self.key_pem.as_bytes(),
        )?)
    }
}
