//! The host provider: each primitive from the library measured fastest for it.
//!
//! ring's AES-128-GCM is the fastest of the three (it runs on every message), aws-lc-rs's
//! X25519 and Ed25519 are the fastest (they run once per handshake). `Host` combines them; it
//! exists when both the `ring` and `aws-lc-rs` features are on, and is then the
//! [`DefaultProvider`](super::DefaultProvider). Measurements: `docs/benchmarks/codec.md`.

use super::{
    AwsLc, CryptoError, CryptoProvider, ED25519_PUBLIC_LEN, ED25519_SIGNATURE_LEN, IdentitySeed,
    Ring, RingAead, SessionKey, SharedSecret, X25519_KEY_LEN, X25519Secret,
};

/// ring for AES-GCM and HKDF, aws-lc-rs for X25519 and Ed25519.
#[derive(Clone, Copy, Debug, Default)]
pub struct Host;

impl CryptoProvider for Host {
    type Aead = RingAead;
    type Identity = <AwsLc as CryptoProvider>::Identity;

    fn aead(&self, key: &SessionKey) -> Result<Self::Aead, CryptoError> {
        Ring.aead(key)
    }
    fn load_identity(&self, seed: &IdentitySeed) -> Result<Self::Identity, CryptoError> {
        AwsLc.load_identity(seed)
    }
    fn identity_public(&self, identity: &Self::Identity) -> [u8; ED25519_PUBLIC_LEN] {
        AwsLc.identity_public(identity)
    }
    fn ed25519_sign(&self, identity: &Self::Identity, msg: &[u8]) -> [u8; ED25519_SIGNATURE_LEN] {
        AwsLc.ed25519_sign(identity, msg)
    }
    fn ed25519_verify(
        &self,
        public: &[u8; ED25519_PUBLIC_LEN],
        msg: &[u8],
        sig: &[u8; ED25519_SIGNATURE_LEN],
    ) -> Result<(), CryptoError> {
        AwsLc.ed25519_verify(public, msg, sig)
    }
    fn x25519_public(&self, secret: &X25519Secret) -> [u8; X25519_KEY_LEN] {
        AwsLc.x25519_public(secret)
    }
    fn x25519_agree(
        &self,
        secret: &X25519Secret,
        peer_public: &[u8; X25519_KEY_LEN],
    ) -> Result<SharedSecret, CryptoError> {
        AwsLc.x25519_agree(secret, peer_public)
    }
    fn derive_session_key(
        &self,
        shared: &SharedSecret,
        central_pub: &[u8; X25519_KEY_LEN],
        periph_pub: &[u8; X25519_KEY_LEN],
    ) -> Result<SessionKey, CryptoError> {
        Ring.derive_session_key(shared, central_pub, periph_pub)
    }
}
