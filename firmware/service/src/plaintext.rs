//! A crypto provider with no crypto in it, for the plaintext build (feature `plaintext`) that
//! measures what encryption costs, as the reference firmware built with
//! `CONFIG_BLERPC_ENCRYPTION=n`.
//!
//! With no identity the core never offers encryption (CAPABILITIES flags 0) and never calls a
//! provider, so every method here refuses; the point is that no AES, SHA-2, X25519 or Ed25519
//! code is linked.

use blerpc_proto::crypto::{
    Aead, CryptoError, CryptoProvider, ED25519_PUBLIC_LEN, ED25519_SIGNATURE_LEN, IdentitySeed,
    NONCE_LEN, SessionKey, SharedSecret, TAG_LEN, X25519_KEY_LEN, X25519Secret,
};

/// The provider of the plaintext build: every operation refuses.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoCrypto;

/// The [`NoCrypto`] AEAD: refuses to seal or open.
#[derive(Clone, Copy, Debug)]
pub struct NoAead;

impl Aead for NoAead {
    fn seal_in_place(
        &self,
        _nonce: &[u8; NONCE_LEN],
        _buf: &mut [u8],
    ) -> Result<[u8; TAG_LEN], CryptoError> {
        Err(CryptoError::InvalidLength)
    }
    fn open_in_place(
        &self,
        _nonce: &[u8; NONCE_LEN],
        _buf: &mut [u8],
        _tag: &[u8; TAG_LEN],
    ) -> Result<(), CryptoError> {
        Err(CryptoError::AuthenticationFailed)
    }
}

impl CryptoProvider for NoCrypto {
    type Aead = NoAead;
    type Identity = ();

    fn aead(&self, _key: &SessionKey) -> Result<NoAead, CryptoError> {
        Err(CryptoError::InvalidLength)
    }
    fn load_identity(&self, _seed: &IdentitySeed) -> Result<(), CryptoError> {
        Err(CryptoError::InvalidLength)
    }
    fn identity_public(&self, _identity: &()) -> [u8; ED25519_PUBLIC_LEN] {
        [0; ED25519_PUBLIC_LEN]
    }
    fn ed25519_sign(&self, _identity: &(), _msg: &[u8]) -> [u8; ED25519_SIGNATURE_LEN] {
        [0; ED25519_SIGNATURE_LEN]
    }
    fn ed25519_verify(
        &self,
        _public: &[u8; ED25519_PUBLIC_LEN],
        _msg: &[u8],
        _sig: &[u8; ED25519_SIGNATURE_LEN],
    ) -> Result<(), CryptoError> {
        Err(CryptoError::BadSignature)
    }
    fn x25519_public(&self, _secret: &X25519Secret) -> [u8; X25519_KEY_LEN] {
        [0; X25519_KEY_LEN]
    }
    fn x25519_agree(
        &self,
        _secret: &X25519Secret,
        _peer_public: &[u8; X25519_KEY_LEN],
    ) -> Result<SharedSecret, CryptoError> {
        Err(CryptoError::InvalidPublicKey)
    }
    fn derive_session_key(
        &self,
        _shared: &SharedSecret,
        _central_pub: &[u8; X25519_KEY_LEN],
        _periph_pub: &[u8; X25519_KEY_LEN],
    ) -> Result<SessionKey, CryptoError> {
        Err(CryptoError::InvalidLength)
    }
}
