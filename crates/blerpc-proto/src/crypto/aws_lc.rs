//! The `aws-lc-rs` provider (feature `aws-lc-rs`): AWS-LC's AES-128-GCM, Ed25519, X25519 agreement
//! and HKDF. Unlike ring, AWS-LC imports X25519 private keys; only the public-key computation is
//! left to `x25519-dalek` (see the module docs of [`crate::crypto`]).
//! Building it needs a C compiler (aws-lc-sys).

extern crate alloc;

use alloc::sync::Arc;

use aws_lc_rs::aead::{AES_128_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use aws_lc_rs::agreement::{self, UnparsedPublicKey as AgreementPublicKey, X25519};
use aws_lc_rs::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};

use super::{
    Aead, CryptoError, CryptoProvider, IdentitySeed, NONCE_LEN, SESSION_KEY_INFO, SESSION_KEY_LEN,
    SessionKey, SharedSecret, TAG_LEN, X25519_KEY_LEN, X25519Secret, to_array,
};

/// The aws-lc-rs-backed crypto provider.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AwsLc;

/// AES-128-GCM from AWS-LC.
pub struct AwsLcAead(LessSafeKey);

impl core::fmt::Debug for AwsLcAead {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("AwsLcAead(..)")
    }
}

impl Aead for AwsLcAead {
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
                tag,
                buf,
            )
            .map(|_| ())
            .map_err(|_| CryptoError::AuthenticationFailed)
    }
}

/// HKDF output length type for aws-lc-rs.
struct SessionKeyLen;

impl aws_lc_rs::hkdf::KeyType for SessionKeyLen {
    fn len(&self) -> usize {
        SESSION_KEY_LEN
    }
}

fn private_key(secret: &X25519Secret) -> Result<agreement::PrivateKey, CryptoError> {
    agreement::PrivateKey::from_private_key(&X25519, secret.as_bytes())
        .map_err(|_| CryptoError::InvalidLength)
}

impl CryptoProvider for AwsLc {
    type Aead = AwsLcAead;
    /// AWS-LC's parsed key pair, shared between connections (AWS-LC frees it with `EVP_PKEY_free`).
    type Identity = Arc<Ed25519KeyPair>;

    fn aead(&self, key: &SessionKey) -> Result<Self::Aead, CryptoError> {
        let key = UnboundKey::new(&AES_128_GCM, key.as_bytes())
            .map_err(|_| CryptoError::InvalidLength)?;
        Ok(AwsLcAead(LessSafeKey::new(key)))
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
        // aws-lc-rs's `compute_public_key` is fallible; for a 32-byte X25519 scalar it cannot
        // fail, and if it ever did, dalek computes the same value.
        private_key(secret)
            .ok()
            .and_then(|k| k.compute_public_key().ok())
            .and_then(|p| <[u8; X25519_KEY_LEN]>::try_from(p.as_ref()).ok())
            .unwrap_or_else(|| super::rustcrypto::dalek_x25519_public(secret))
    }

    fn x25519_agree(
        &self,
        secret: &X25519Secret,
        peer_public: &[u8; X25519_KEY_LEN],
    ) -> Result<SharedSecret, CryptoError> {
        let key = private_key(secret)?;
        // AWS-LC itself refuses the all-zero output; `new_checked` makes that explicit.
        agreement::agree(
            &key,
            AgreementPublicKey::new(&X25519, peer_public),
            CryptoError::AllZeroSharedSecret,
            |ss| SharedSecret::new_checked(to_array(ss)?),
        )
    }

    fn derive_session_key(
        &self,
        shared: &SharedSecret,
        central_pub: &[u8; X25519_KEY_LEN],
        periph_pub: &[u8; X25519_KEY_LEN],
    ) -> Result<SessionKey, CryptoError> {
        let salt = super::session_salt(central_pub, periph_pub);
        let prk = aws_lc_rs::hkdf::Salt::new(aws_lc_rs::hkdf::HKDF_SHA256, &salt)
            .extract(shared.as_bytes());
        let okm = prk
            .expand(&[SESSION_KEY_INFO], SessionKeyLen)
            .map_err(|_| CryptoError::InvalidLength)?;
        let mut key = SessionKey::from_bytes([0u8; SESSION_KEY_LEN]);
        okm.fill(&mut key.0)
            .map_err(|_| CryptoError::InvalidLength)?;
        Ok(key)
    }
}
