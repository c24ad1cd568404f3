//! Cryptographic primitives of the bleRPC end-to-end encryption, behind a provider trait.
//!
//! bleRPC v1 uses four primitives (wire spec §1.5):
//!
//! | primitive | use |
//! |---|---|
//! | X25519 | ephemeral ECDH on both sides, one key pair per connection |
//! | Ed25519 | the peripheral's long-term identity signs `central_pub ‖ periph_pub` |
//! | HKDF-SHA256 | derives the 16-byte session key from the shared secret |
//! | AES-128-GCM | 16-byte tag, empty AAD: key confirmation and all data traffic |
//!
//! ## Key schedule
//!
//! ```text
//! ss  = X25519(own_ephemeral_secret, peer_ephemeral_public)          32 bytes, all-zero rejected
//! K   = HKDF-SHA256(ikm  = ss,
//!                   salt = central_x25519_pub[32] ‖ periph_x25519_pub[32],   (central first,
//!                   info = "blerpc-session-key",                              on both sides)
//!                   L    = 16)
//! sig = Ed25519(identity_seed, central_x25519_pub[32] ‖ periph_x25519_pub[32])   64 bytes
//! ```
//!
//! The handshake that carries these values is [`crate::handshake`]; the data-plane framing that
//! uses `K` is [`crate::session`].
//!
//! ## Providers
//!
//! [`CryptoProvider`] is the seam between the protocol and a crypto library, as in rustls. The
//! protocol code is generic over it and never names a library.
//!
//! | provider | feature | AES-GCM | Ed25519 | X25519 | HKDF | `no_std` |
//! |---|---|---|---|---|---|---|
//! | [`RustCrypto`] | always | `aes-gcm` | `ed25519-dalek` | `x25519-dalek` | `hkdf` | yes |
//! | `Ring` | `ring` | ring | ring | `x25519-dalek` (see below) | ring | no |
//! | `AwsLc` | `aws-lc-rs` | aws-lc | aws-lc | aws-lc (public key: `x25519-dalek`) | aws-lc | no |
//!
//! ring can only generate X25519 keys from its own system RNG and cannot import a private key, which
//! would make the handshake impossible to drive with injected keys (vectors, simulation, the
//! determinism contract). The `Ring` provider therefore does X25519 with `x25519-dalek`.
//!
//! All providers produce identical bytes for identical inputs; the unit tests check this against the
//! reference vectors and across providers. Ed25519 verification differs only on adversarial edge
//! cases: [`RustCrypto`] uses `verify_strict` (it also rejects small-order public keys and `R`
//! points), ring and aws-lc use their own (canonical-`S`, cofactorless) check. Honestly generated
//! signatures verify under all three.
//!
//! [`DefaultProvider`] is the provider a host runtime should use: [`Host`] with both host
//! features (X25519 and Ed25519 from aws-lc, AES-GCM from whichever library is faster on the CPU,
//! [`HostAead`]), else `Ring`, else `AwsLc`, else [`RustCrypto`]. Which library is faster for
//! which primitive, measured per CPU: `docs/benchmarks/codec.md`, from `blerpc-bench handshake`
//! and `blerpc-bench aead`.
//!
//! ## Secrets
//!
//! [`X25519Secret`], [`IdentitySeed`], [`SharedSecret`] and [`SessionKey`] are zeroized on drop,
//! are not `Clone`, and print as `..` in `Debug`. The all-zero shared secret check and all
//! comparisons of tags and keys are constant time (`subtle`).

use subtle::ConstantTimeEq;
use zeroize::{Zeroize, ZeroizeOnDrop};

mod rustcrypto;
pub use rustcrypto::{RustCrypto, RustCryptoAead};

#[cfg(feature = "ring")]
mod ring;
#[cfg(feature = "ring")]
#[cfg_attr(docsrs, doc(cfg(feature = "ring")))]
pub use self::ring::{Ring, RingAead};

#[cfg(feature = "aws-lc-rs")]
mod aws_lc;
#[cfg(feature = "aws-lc-rs")]
#[cfg_attr(docsrs, doc(cfg(feature = "aws-lc-rs")))]
pub use self::aws_lc::{AwsLc, AwsLcAead};

#[cfg(all(feature = "ring", feature = "aws-lc-rs"))]
mod host;
#[cfg(all(feature = "ring", feature = "aws-lc-rs"))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "ring", feature = "aws-lc-rs"))))]
pub use self::host::{Host, HostAead};

/// The provider a host runtime should use: [`Host`] (AES-GCM from ring or aws-lc-rs, whichever
/// is faster on the CPU, with aws-lc-rs's X25519 and Ed25519) with both host features, else `Ring`, else `AwsLc`, else [`RustCrypto`]. See the
/// module docs for the measurements.
#[cfg(all(feature = "ring", feature = "aws-lc-rs"))]
pub type DefaultProvider = Host;
/// The provider a host runtime should use: [`Host`] (AES-GCM from ring or aws-lc-rs, whichever
/// is faster on the CPU, with aws-lc-rs's X25519 and Ed25519) with both host features, else `Ring`, else `AwsLc`, else [`RustCrypto`].
#[cfg(all(feature = "ring", not(feature = "aws-lc-rs")))]
pub type DefaultProvider = Ring;
/// The provider a host runtime should use: [`Host`] (AES-GCM from ring or aws-lc-rs, whichever
/// is faster on the CPU, with aws-lc-rs's X25519 and Ed25519) with both host features, else `Ring`, else `AwsLc`, else [`RustCrypto`].
#[cfg(all(feature = "aws-lc-rs", not(feature = "ring")))]
pub type DefaultProvider = AwsLc;
/// The provider a host runtime should use: [`Host`] (AES-GCM from ring or aws-lc-rs, whichever
/// is faster on the CPU, with aws-lc-rs's X25519 and Ed25519) with both host features, else `Ring`, else `AwsLc`, else [`RustCrypto`].
#[cfg(not(any(feature = "ring", feature = "aws-lc-rs")))]
pub type DefaultProvider = RustCrypto;

/// Length of the AES-128-GCM session key.
pub const SESSION_KEY_LEN: usize = 16;
/// Length of an AES-GCM nonce.
pub const NONCE_LEN: usize = 12;
/// Length of an AES-GCM authentication tag.
pub const TAG_LEN: usize = 16;
/// Length of an X25519 public key, private key and shared secret.
pub const X25519_KEY_LEN: usize = 32;
/// Length of an Ed25519 public key (and of its private seed).
pub const ED25519_PUBLIC_LEN: usize = 32;
/// Length of an Ed25519 signature.
pub const ED25519_SIGNATURE_LEN: usize = 64;
/// The HKDF `info` string of the session key derivation.
pub const SESSION_KEY_INFO: &[u8] = b"blerpc-session-key";

/// A cryptographic operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CryptoError {
    /// X25519 produced the all-zero shared secret: the peer sent a small-order public key.
    AllZeroSharedSecret,
    /// An Ed25519 signature does not verify.
    BadSignature,
    /// An AES-GCM tag does not verify.
    AuthenticationFailed,
    /// A public key is not a valid encoding.
    InvalidPublicKey,
    /// A length a primitive does not accept (a buffer too long for AES-GCM, a key the backend
    /// refuses). Does not happen with the fixed sizes bleRPC uses.
    InvalidLength,
}

impl core::fmt::Display for CryptoError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            CryptoError::AllZeroSharedSecret => {
                "X25519 shared secret is all zero (small-order peer key)"
            }
            CryptoError::BadSignature => "Ed25519 signature does not verify",
            CryptoError::AuthenticationFailed => "AES-GCM authentication failed",
            CryptoError::InvalidPublicKey => "invalid public key encoding",
            CryptoError::InvalidLength => "length not accepted by the cryptographic primitive",
        })
    }
}

#[cfg(feature = "std")]
impl std::error::Error for CryptoError {}

macro_rules! secret_bytes {
    ($(#[$doc:meta])* $name:ident, $len:expr) => {
        $(#[$doc])*
        #[derive(Zeroize, ZeroizeOnDrop)]
        pub struct $name([u8; $len]);

        impl $name {
            /// Wraps secret bytes. The caller should zeroize its own copy.
            pub const fn from_bytes(bytes: [u8; $len]) -> Self {
                Self(bytes)
            }

            /// The secret bytes.
            ///
            /// Dangerous: any copy made from this reference is not zeroized. Meant for crypto
            /// providers and for test vectors.
            pub const fn as_bytes(&self) -> &[u8; $len] {
                &self.0
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str(concat!(stringify!($name), "(..)"))
            }
        }
    };
}

secret_bytes!(
    /// An X25519 private key (32 bytes, clamped by the primitive, not here). Use a fresh one per
    /// handshake.
    X25519Secret,
    X25519_KEY_LEN
);
secret_bytes!(
    /// The AES-128-GCM session key `K`.
    SessionKey,
    SESSION_KEY_LEN
);
secret_bytes!(
    /// An Ed25519 private key seed (RFC 8032 "private key"): the peripheral's long-term identity.
    IdentitySeed,
    32
);
secret_bytes!(
    /// An X25519 shared secret. Providers build it with [`SharedSecret::new_checked`], which
    /// rejects the all-zero value.
    SharedSecret,
    X25519_KEY_LEN
);

impl X25519Secret {
    /// Draws a fresh private key from `rng`.
    pub fn random(rng: &mut impl rand_core::CryptoRngCore) -> Self {
        let mut bytes = [0u8; X25519_KEY_LEN];
        rng.fill_bytes(&mut bytes);
        let secret = Self(bytes);
        bytes.zeroize();
        secret
    }
}

impl IdentitySeed {
    /// Draws a fresh identity seed from `rng`.
    pub fn random(rng: &mut impl rand_core::CryptoRngCore) -> Self {
        let mut bytes = [0u8; 32];
        rng.fill_bytes(&mut bytes);
        let secret = Self(bytes);
        bytes.zeroize();
        secret
    }
}

impl SharedSecret {
    /// Wraps an X25519 output, rejecting the all-zero value in constant time.
    pub fn new_checked(bytes: [u8; X25519_KEY_LEN]) -> Result<Self, CryptoError> {
        let secret = Self(bytes);
        if bool::from(secret.0.ct_eq(&[0u8; X25519_KEY_LEN])) {
            return Err(CryptoError::AllZeroSharedSecret);
        }
        Ok(secret)
    }
}

/// The HKDF salt: `central_pub ‖ periph_pub`.
pub(crate) fn session_salt(central_pub: &[u8; 32], periph_pub: &[u8; 32]) -> [u8; 64] {
    let mut salt = [0u8; 64];
    let (c, p) = salt.split_at_mut(32);
    c.copy_from_slice(central_pub);
    p.copy_from_slice(periph_pub);
    salt
}

/// Copies `src` into a fixed array if the lengths match.
#[cfg(any(feature = "ring", feature = "aws-lc-rs"))]
pub(crate) fn to_array<const N: usize>(src: &[u8]) -> Result<[u8; N], CryptoError> {
    <[u8; N]>::try_from(src).map_err(|_| CryptoError::InvalidLength)
}

/// AES-128-GCM under one key with an empty AAD (bleRPC v1 authenticates no header).
///
/// Implementations zeroize their key schedule on drop where the backend allows it.
pub trait Aead {
    /// Encrypts `buf` in place under `nonce` and returns the tag.
    ///
    /// Fails with [`CryptoError::InvalidLength`] only for a buffer longer than AES-GCM allows
    /// (about 64 GiB).
    fn seal_in_place(
        &self,
        nonce: &[u8; NONCE_LEN],
        buf: &mut [u8],
    ) -> Result<[u8; TAG_LEN], CryptoError>;

    /// Verifies `tag` and decrypts `buf` in place.
    ///
    /// On [`CryptoError::AuthenticationFailed`] the contents of `buf` are unspecified (some
    /// backends decrypt before they compare); callers must discard them.
    fn open_in_place(
        &self,
        nonce: &[u8; NONCE_LEN],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), CryptoError>;
}

/// A crypto library as bleRPC needs it.
///
/// Every method is deterministic in its inputs: randomness enters only through the
/// [`X25519Secret`] and nonces the caller passes in. Methods whose backend reports errors return
/// `Result`; with bleRPC's fixed sizes those errors do not occur, but they are surfaced rather than
/// turned into panics.
pub trait CryptoProvider: Clone {
    /// The AES-128-GCM key type.
    type Aead: Aead;
    /// A loaded Ed25519 signing key, parsed once so a server can reuse it for every connection.
    ///
    /// Required to be `Clone` and cheap to clone (an `Arc` inside for the host providers), because
    /// every handshake of a server takes its own handle.
    type Identity: Clone;

    /// Expands a session key into an AES-GCM key schedule.
    fn aead(&self, key: &SessionKey) -> Result<Self::Aead, CryptoError>;
    /// Loads an identity from its private seed.
    fn load_identity(&self, seed: &IdentitySeed) -> Result<Self::Identity, CryptoError>;
    /// The Ed25519 public key of an identity.
    fn identity_public(&self, identity: &Self::Identity) -> [u8; ED25519_PUBLIC_LEN];
    /// A pure Ed25519 signature over `msg`.
    fn ed25519_sign(&self, identity: &Self::Identity, msg: &[u8]) -> [u8; ED25519_SIGNATURE_LEN];
    /// Verifies a pure Ed25519 signature.
    fn ed25519_verify(
        &self,
        public: &[u8; ED25519_PUBLIC_LEN],
        msg: &[u8],
        sig: &[u8; ED25519_SIGNATURE_LEN],
    ) -> Result<(), CryptoError>;
    /// The X25519 public key of `secret`.
    fn x25519_public(&self, secret: &X25519Secret) -> [u8; X25519_KEY_LEN];
    /// X25519 key agreement; an all-zero result is [`CryptoError::AllZeroSharedSecret`].
    fn x25519_agree(
        &self,
        secret: &X25519Secret,
        peer_public: &[u8; X25519_KEY_LEN],
    ) -> Result<SharedSecret, CryptoError>;
    /// `HKDF-SHA256(ikm = shared, salt = central_pub ‖ periph_pub, info = "blerpc-session-key", L = 16)`.
    fn derive_session_key(
        &self,
        shared: &SharedSecret,
        central_pub: &[u8; X25519_KEY_LEN],
        periph_pub: &[u8; X25519_KEY_LEN],
    ) -> Result<SessionKey, CryptoError>;
}

#[cfg(all(test, feature = "std"))]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;
    use std::format;

    pub(crate) fn h<const N: usize>(s: &str) -> [u8; N] {
        let v = hex::decode(s).unwrap();
        <[u8; N]>::try_from(v.as_slice()).unwrap()
    }

    pub(crate) const ALICE: &str =
        "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a";
    pub(crate) const BOB: &str = "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb";
    pub(crate) const SEED: &str =
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
    const ALICE_PUB: &str = "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a";
    const BOB_PUB: &str = "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f";
    const SS: &str = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742";
    const K: &str = "12e68d830b3802896b9f0948a4f5fe5a";
    const K_SWAPPED: &str = "6b23601f4c3e9ce28269cd11f3cf0b09";
    const ED_PUB: &str = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
    const SIG: &str = "21e1fd6899395fcddad2e8c47c1559d360962fd6aea958a705e887a3063acf94507d3b284813b1a8a2b5e7e570dd44686941f768604fa72ea6b10d5c369a6703";

    /// Small-order X25519 points (and non-canonical encodings of them); each must give the all-zero
    /// shared secret for any scalar.
    pub(crate) const SMALL_ORDER: [&str; 7] = [
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0100000000000000000000000000000000000000000000000000000000000000",
        "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
        "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    ];

    /// The §6.5 vectors, for any provider.
    pub(crate) fn check_vectors<P: CryptoProvider>(p: &P) {
        let alice = X25519Secret::from_bytes(h(ALICE));
        let bob = X25519Secret::from_bytes(h(BOB));
        let a_pub = p.x25519_public(&alice);
        let b_pub = p.x25519_public(&bob);
        assert_eq!(a_pub, h::<32>(ALICE_PUB));
        assert_eq!(b_pub, h::<32>(BOB_PUB));
        let ss_a = p.x25519_agree(&alice, &b_pub).unwrap();
        let ss_b = p.x25519_agree(&bob, &a_pub).unwrap();
        assert_eq!(ss_a.as_bytes(), &h::<32>(SS));
        assert_eq!(ss_b.as_bytes(), &h::<32>(SS));
        let k = p.derive_session_key(&ss_a, &a_pub, &b_pub).unwrap();
        assert_eq!(k.as_bytes(), &h::<16>(K));
        let swapped = p.derive_session_key(&ss_a, &b_pub, &a_pub).unwrap();
        assert_eq!(swapped.as_bytes(), &h::<16>(K_SWAPPED));

        let id = p.load_identity(&IdentitySeed::from_bytes(h(SEED))).unwrap();
        assert_eq!(p.identity_public(&id), h::<32>(ED_PUB));
        let msg = session_salt(&a_pub, &b_pub);
        let sig = p.ed25519_sign(&id, &msg);
        assert_eq!(sig, h::<64>(SIG));
        p.ed25519_verify(&h(ED_PUB), &msg, &sig).unwrap();
        let mut bad = sig;
        bad[0] ^= 1;
        assert_eq!(
            p.ed25519_verify(&h(ED_PUB), &msg, &bad),
            Err(CryptoError::BadSignature)
        );
        let mut bad_msg = msg;
        bad_msg[63] ^= 0x80;
        assert_eq!(
            p.ed25519_verify(&h(ED_PUB), &bad_msg, &sig),
            Err(CryptoError::BadSignature)
        );

        // step 3 confirmation of §6.5: nonce 000102..0b, "BLERPC_CONFIRM_C".
        let aead = p.aead(&k).unwrap();
        let nonce: [u8; 12] = h("000102030405060708090a0b");
        let mut buf = *b"BLERPC_CONFIRM_C";
        let tag = aead.seal_in_place(&nonce, &mut buf).unwrap();
        assert_eq!(buf, h::<16>("deab3e3f1abac538d48c34b53f5dfbf9"));
        assert_eq!(tag, h::<16>("a10f3b100a97271990fc4feb34984228"));
        aead.open_in_place(&nonce, &mut buf, &tag).unwrap();
        assert_eq!(&buf, b"BLERPC_CONFIRM_C");
        aead.seal_in_place(&nonce, &mut buf).unwrap();
        let mut bad_tag = tag;
        bad_tag[15] ^= 1;
        assert_eq!(
            aead.open_in_place(&nonce, &mut buf, &bad_tag),
            Err(CryptoError::AuthenticationFailed)
        );

        for point in SMALL_ORDER {
            let pt: [u8; 32] = h(point);
            assert_eq!(
                p.x25519_agree(&alice, &pt).err(),
                Some(CryptoError::AllZeroSharedSecret),
                "{point}"
            );
            let mut high = pt;
            high[31] |= 0x80;
            assert_eq!(
                p.x25519_agree(&bob, &high).err(),
                Some(CryptoError::AllZeroSharedSecret),
                "{point} | 0x80"
            );
        }
    }

    #[test]
    fn rustcrypto_vectors() {
        check_vectors(&RustCrypto);
    }

    #[cfg(feature = "ring")]
    #[test]
    fn ring_vectors() {
        check_vectors(&Ring);
    }

    #[cfg(all(feature = "ring", feature = "aws-lc-rs"))]
    #[test]
    fn host_vectors() {
        check_vectors(&super::Host);
    }

    #[cfg(feature = "aws-lc-rs")]
    #[test]
    fn aws_lc_vectors() {
        check_vectors(&AwsLc);
    }

    #[test]
    fn shared_secret_rejects_zero_and_debug_hides_secrets() {
        assert_eq!(
            SharedSecret::new_checked([0; 32]).err(),
            Some(CryptoError::AllZeroSharedSecret)
        );
        assert!(SharedSecret::new_checked([1; 32]).is_ok());
        let s = X25519Secret::from_bytes([7; 32]);
        assert_eq!(format!("{s:?}"), "X25519Secret(..)");
        assert_eq!(
            format!("{:?}", SessionKey::from_bytes([7; 16])),
            "SessionKey(..)"
        );
    }

    #[test]
    fn random_secrets_come_from_the_rng() {
        use rand_chacha::rand_core::SeedableRng;
        let mut a = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        let mut b = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        assert_eq!(
            X25519Secret::random(&mut a).as_bytes(),
            X25519Secret::random(&mut b).as_bytes()
        );
        assert_eq!(
            IdentitySeed::random(&mut a).as_bytes(),
            IdentitySeed::random(&mut b).as_bytes()
        );
        assert_ne!(X25519Secret::random(&mut a).as_bytes(), &[0u8; 32]);
    }
}
