//! The host provider: each primitive from the library measured fastest for it.
//!
//! aws-lc-rs's X25519 and Ed25519 are the fastest of the three (they run once per handshake).
//! AES-128-GCM, which runs on every message, depends on the CPU: where it has AVX-512 with VAES
//! and VPCLMULQDQ, aws-lc-rs's AVX-512 code is the fastest at every size; elsewhere (AVX2 and
//! VAES) ring's is. [`HostAead`] picks one when a session key is expanded, from the CPU's
//! features. `Host` exists when both the `ring` and `aws-lc-rs` features are on, and is then the
//! [`DefaultProvider`](super::DefaultProvider). The measurements: `docs/benchmarks/codec.md`
//! (`blerpc-bench aead`, `blerpc-bench handshake`).

extern crate alloc;

use alloc::boxed::Box;

use super::{
    Aead, AwsLc, AwsLcAead, CryptoError, CryptoProvider, ED25519_PUBLIC_LEN, ED25519_SIGNATURE_LEN,
    IdentitySeed, NONCE_LEN, Ring, RingAead, SessionKey, SharedSecret, TAG_LEN, X25519_KEY_LEN,
    X25519Secret,
};

/// AES-GCM from ring or aws-lc-rs (see [`HostAead`]), HKDF from ring, X25519 and Ed25519 from
/// aws-lc-rs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Host;

/// The host's AES-128-GCM: aws-lc-rs's where the CPU has AVX-512 with VAES and VPCLMULQDQ
/// (its AVX-512 code path), ring's elsewhere. Both compute the same function, so the choice
/// changes no byte.
///
/// 16 bytes inline either way: ring's 544-byte key schedule is boxed, as aws-lc-rs keeps its
/// own on the heap, so a session does not carry the larger one's room while using the other.
#[derive(Debug)]
pub enum HostAead {
    /// ring's AES-GCM.
    Ring(Box<RingAead>),
    /// aws-lc-rs's AES-GCM.
    AwsLc(AwsLcAead),
}

impl HostAead {
    /// Whether this CPU runs aws-lc-rs's AVX-512 AES-GCM (x86-64 with AVX-512 F, VL and BW,
    /// VAES and VPCLMULQDQ).
    pub fn prefers_aws_lc() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512vl")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("vaes")
                && std::arch::is_x86_feature_detected!("vpclmulqdq")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }
}

impl Aead for HostAead {
    fn seal_in_place(
        &self,
        nonce: &[u8; NONCE_LEN],
        buf: &mut [u8],
    ) -> Result<[u8; TAG_LEN], CryptoError> {
        match self {
            HostAead::Ring(a) => a.seal_in_place(nonce, buf),
            HostAead::AwsLc(a) => a.seal_in_place(nonce, buf),
        }
    }

    fn open_in_place(
        &self,
        nonce: &[u8; NONCE_LEN],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), CryptoError> {
        match self {
            HostAead::Ring(a) => a.open_in_place(nonce, buf, tag),
            HostAead::AwsLc(a) => a.open_in_place(nonce, buf, tag),
        }
    }
}

impl CryptoProvider for Host {
    type Aead = HostAead;
    type Identity = <AwsLc as CryptoProvider>::Identity;

    fn aead(&self, key: &SessionKey) -> Result<Self::Aead, CryptoError> {
        if HostAead::prefers_aws_lc() {
            AwsLc.aead(key).map(HostAead::AwsLc)
        } else {
            Ring.aead(key).map(|a| HostAead::Ring(Box::new(a)))
        }
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn both(key: [u8; 16]) -> [HostAead; 2] {
        let k = SessionKey::from_bytes(key);
        [
            HostAead::Ring(Box::new(Ring.aead(&k).unwrap())),
            HostAead::AwsLc(AwsLc.aead(&k).unwrap()),
        ]
    }

    #[test]
    fn both_backends_seal_the_same_bytes_and_open_each_other() {
        let [ring, aws] = both([0x5a; 16]);
        for len in [0usize, 1, 15, 16, 35, 100, 4096, 65_536 + 7] {
            let plain: Vec<u8> = (0..len).map(|i| (i * 7 % 256) as u8).collect();
            let nonce = [len as u8; NONCE_LEN];
            let (mut a, mut b) = (plain.clone(), plain.clone());
            let tag_a = ring.seal_in_place(&nonce, &mut a).unwrap();
            let tag_b = aws.seal_in_place(&nonce, &mut b).unwrap();
            assert_eq!((&a, tag_a), (&b, tag_b), "{len} bytes");
            // Each opens what the other sealed.
            aws.open_in_place(&nonce, &mut a, &tag_a).unwrap();
            ring.open_in_place(&nonce, &mut b, &tag_b).unwrap();
            assert_eq!((&a, &b), (&plain, &plain), "{len} bytes");
            // A flipped tag bit fails in both.
            let mut bad = tag_a;
            bad[0] ^= 1;
            for aead in [&ring, &aws] {
                let mut sealed = plain.clone();
                let tag = aead.seal_in_place(&nonce, &mut sealed).unwrap();
                assert_ne!(tag, bad);
                assert_eq!(
                    aead.open_in_place(&nonce, &mut sealed, &bad),
                    Err(CryptoError::AuthenticationFailed),
                    "{len} bytes"
                );
            }
        }
    }

    #[test]
    fn the_host_picks_the_backend_the_cpu_prefers() {
        let aead = Host.aead(&SessionKey::from_bytes([1; 16])).unwrap();
        assert_eq!(
            matches!(aead, HostAead::AwsLc(_)),
            HostAead::prefers_aws_lc()
        );
    }
}
