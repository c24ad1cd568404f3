//! The pure-Rust provider: `aes-gcm`, `ed25519-dalek`, `x25519-dalek` and `hkdf`. `no_std`, no
//! allocator, constant-time implementations; the default on microcontrollers.

use aes_gcm::aead::AeadInPlace;
use aes_gcm::{Aes128Gcm, KeyInit};
use ed25519_dalek::Signer;
use sha2::Sha256;
use zeroize::Zeroize;

use super::{
    Aead, CryptoError, CryptoProvider, IdentitySeed, NONCE_LEN, SESSION_KEY_INFO, SESSION_KEY_LEN,
    SessionKey, SharedSecret, TAG_LEN, X25519_KEY_LEN, X25519Secret,
};

/// The pure-Rust, `no_std` crypto provider (RustCrypto + dalek crates).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RustCrypto;

/// AES-128-GCM from the `aes-gcm` crate. The AES round keys are zeroized on drop.
#[derive(Clone)]
pub struct RustCryptoAead(Aes128Gcm);

impl core::fmt::Debug for RustCryptoAead {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("RustCryptoAead(..)")
    }
}

impl Aead for RustCryptoAead {
    fn seal_in_place(
        &self,
        nonce: &[u8; NONCE_LEN],
        buf: &mut [u8],
    ) -> Result<[u8; TAG_LEN], CryptoError> {
        self.0
            .encrypt_in_place_detached(&(*nonce).into(), &[], buf)
            .map(Into::into)
            .map_err(|_| CryptoError::InvalidLength)
    }

    fn open_in_place(
        &self,
        nonce: &[u8; NONCE_LEN],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), CryptoError> {
        self.0
            .decrypt_in_place_detached(&(*nonce).into(), &[], buf, &(*tag).into())
            .map_err(|_| CryptoError::AuthenticationFailed)
    }
}

/// X25519 public key with `x25519-dalek` (also used by the `Ring` provider).
pub(crate) fn dalek_x25519_public(secret: &X25519Secret) -> [u8; X25519_KEY_LEN] {
    let s = x25519_dalek::StaticSecret::from(*secret.as_bytes());
    x25519_dalek::PublicKey::from(&s).to_bytes()
}

/// X25519 agreement with `x25519-dalek` (also used by the `Ring` provider).
pub(crate) fn dalek_x25519_agree(
    secret: &X25519Secret,
    peer_public: &[u8; X25519_KEY_LEN],
) -> Result<SharedSecret, CryptoError> {
    let s = x25519_dalek::StaticSecret::from(*secret.as_bytes());
    let shared = s.diffie_hellman(&x25519_dalek::PublicKey::from(*peer_public));
    SharedSecret::new_checked(shared.to_bytes())
}

impl CryptoProvider for RustCrypto {
    type Aead = RustCryptoAead;
    /// The dalek signing key (seed plus expanded public key), zeroized on drop.
    type Identity = ed25519_dalek::SigningKey;

    fn aead(&self, key: &SessionKey) -> Result<Self::Aead, CryptoError> {
        Ok(RustCryptoAead(Aes128Gcm::new(&(*key.as_bytes()).into())))
    }

    fn load_identity(&self, seed: &IdentitySeed) -> Result<Self::Identity, CryptoError> {
        Ok(ed25519_dalek::SigningKey::from_bytes(seed.as_bytes()))
    }

    fn identity_public(&self, identity: &Self::Identity) -> [u8; 32] {
        identity.verifying_key().to_bytes()
    }

    fn ed25519_sign(&self, identity: &Self::Identity, msg: &[u8]) -> [u8; 64] {
        identity.sign(msg).to_bytes()
    }

    fn ed25519_verify(
        &self,
        public: &[u8; 32],
        msg: &[u8],
        sig: &[u8; 64],
    ) -> Result<(), CryptoError> {
        // A key that does not decode cannot have made the signature: report it as a bad
        // signature, as ring and aws-lc-rs do, so callers see one error whatever the provider.
        let key = ed25519_dalek::VerifyingKey::from_bytes(public)
            .map_err(|_| CryptoError::BadSignature)?;
        key.verify_strict(msg, &ed25519_dalek::Signature::from_bytes(sig))
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
        let hk = hkdf::Hkdf::<Sha256>::new(Some(&salt), shared.as_bytes());
        let mut okm = [0u8; SESSION_KEY_LEN];
        let result = hk
            .expand(SESSION_KEY_INFO, &mut okm)
            .map_err(|_| CryptoError::InvalidLength);
        let key = result.map(|()| SessionKey::from_bytes(okm));
        okm.zeroize();
        key
    }
}
