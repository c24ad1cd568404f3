//! The `ring` provider (feature `ring`): ring's AES-128-GCM (AES-NI / ARMv8 crypto extensions),
//! Ed25519 and HKDF. X25519 comes from `x25519-dalek`, because ring cannot import an X25519
//! private key and the handshake must run with injected keys.

extern crate alloc;

use alloc::sync::Arc;

use ring::aead::{AES_128_GCM, Aad, LessSafeKey, Nonce, Tag, UnboundKey};
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};

use super::rustcrypto::{dalek_x25519_agree, dalek_x25519_public};
use super::{
    Aead, CryptoError, CryptoProvider, IdentitySeed, NONCE_LEN, SESSION_KEY_INFO, SESSION_KEY_LEN,
    SessionKey, SharedSecret, TAG_LEN, X25519_KEY_LEN, X25519Secret, to_array,
};

/// The ring-backed crypto provider (X25519 via `x25519-dalek`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ring;

/// AES-128-GCM from ring.
pub struct RingAead(LessSafeKey);

impl core::fmt::Debug for RingAead {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("RingAead(..)")
    }
}

impl Aead for RingAead {
    fn seal_in_place(
        &self,
        nonce: &[u8; NONCE_LEN],
        buf: &mut [u8],
    ) -> Result<[u8; TAG_LEN], CryptoError> {
        let tag = self
            .0
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(*nonce), Aad::empty(), buf)
            .map_err(|_| CryptoError::InvalidLength)?;
        to_array(tag.as_ref())
    }

    fn open_in_place(
        &self,
        nonce: &[u8; NONCE_LEN],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), CryptoError> {
        self.0
            .open_in_place_separate_tag(
                Nonce::assume_unique_for_key(*nonce),
                Aad::empty(),
                Tag::from(*tag),
                buf,
                0..,
            )
            .map(|_| ())
            .map_err(|_| CryptoError::AuthenticationFailed)
    }
}

/// HKDF output length type for ring.
struct SessionKeyLen;

impl ring::hkdf::KeyType for SessionKeyLen {
    fn len(&self) -> usize {
        SESSION_KEY_LEN
    }
}

impl CryptoProvider for Ring {
    type Aead = RingAead;
    /// ring's parsed key pair, shared between connections. ring does not zeroize it.
    type Identity = Arc<Ed25519KeyPair>;

    fn aead(&self, key: &SessionKey) -> Result<Self::Aead, CryptoError> {
        let key = UnboundKey::new(&AES_128_GCM, key.as_bytes())
            .map_err(|_| CryptoError::InvalidLength)?;
        Ok(RingAead(LessSafeKey::new(key)))
    }

    fn load_identity(&self, seed: &IdentitySeed) -> Result<Self::Identity, CryptoError> {
        Ed25519KeyPair::from_seed_unchecked(seed.as_bytes())
            .map(Arc::new)
            .map_err(|_| CryptoError::InvalidLength)
    }

    fn identity_public(&self, identity: &Self::Identity) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (d, s) in out.iter_mut().zip(identity.public_key().as_ref()) {
            *d = *s;
        }
        out
    }

    fn ed25519_sign(&self, identity: &Self::Identity, msg: &[u8]) -> [u8; 64] {
        let sig = identity.sign(msg);
        let mut out = [0u8; 64];
        for (d, s) in out.iter_mut().zip(sig.as_ref()) {
            *d = *s;
        }
        out
    }

    fn ed25519_verify(
        &self,
        public: &[u8; 32],
        msg: &[u8],
        sig: &[u8; 64],
    ) -> Result<(), CryptoError> {
        UnparsedPublicKey::new(&ED25519, public)
            .verify(msg, sig)
            .map_err(|_| CryptoError::BadSignature)
    }

    fn x25519_public(&self, secret: &X25519Secret) -> [u8; X25519_KEY_LEN] {
        dalek_x25519_public(secret)
    }

    fn x25519_agree(
        &self,
        secret: &X25519Secret,
        peer_public: &[u8; X25519_KEY_LEN],
    ) -> Result<SharedSecret, CryptoError> {
        dalek_x25519_agree(secret, peer_public)
    }

    fn derive_session_key(
        &self,
        shared: &SharedSecret,
        central_pub: &[u8; X25519_KEY_LEN],
        periph_pub: &[u8; X25519_KEY_LEN],
    ) -> Result<SessionKey, CryptoError> {
        let salt = super::session_salt(central_pub, periph_pub);
        let prk = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, &salt).extract(shared.as_bytes());
        let okm = prk
            .expand(&[SESSION_KEY_INFO], SessionKeyLen)
            .map_err(|_| CryptoError::InvalidLength)?;
        let mut key = SessionKey::from_bytes([0u8; SESSION_KEY_LEN]);
        okm.fill(&mut key.0)
            .map_err(|_| CryptoError::InvalidLength)?;
        Ok(key)
    }
}
