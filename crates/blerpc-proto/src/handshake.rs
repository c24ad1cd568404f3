//! The four-step key exchange as typestates: each step consumes the previous state, so steps cannot
//! be taken out of order or twice.
//!
//! ```text
//!  Central                                                        Peripheral
//!  CentralHandshake::start(eph_c)                                 PeripheralHandshake::new(identity)
//!    │ step 1: 01 ‖ central_pub[32]                  ──────────▶    │ receive_step1(eph_p)
//!    │                                                              │   K = HKDF(X25519(eph_p, central_pub))
//!    │ step 2: 02 ‖ periph_pub[32] ‖ sig[64] ‖ identity[32] ◀──────  │   sig = Ed25519(central_pub ‖ periph_pub)
//!  receive_step2: verify sig, K = HKDF(X25519(eph_c, periph_pub))    │
//!  CentralVerifyIdentity::identity() → TOFU / pinning decision     │
//!  accept(nonce_c)                                                  │
//!    │ step 3: 03 ‖ nonce_c[12] ‖ GCM(K, nonce_c, "BLERPC_CONFIRM_C") ─▶ receive_step3(nonce_p)
//!    │ step 4: 04 ‖ nonce_p[12] ‖ GCM(K, nonce_p, "BLERPC_CONFIRM_P") ◀─   → Session (P→C)
//!  receive_step4 → Session (C→P)
//! ```
//!
//! Byte layouts of the steps are in [`crate::wire::key_exchange`]; the key schedule is in
//! [`crate::crypto`]. The ephemeral keys and the confirmation nonces are passed in by the caller (from
//! a `CryptoRngCore` or from test vectors), so a handshake is deterministic given its inputs.
//!
//! The signature covers only the two ephemeral keys, so it proves nothing about *which* peripheral
//! answered: a man in the middle can sign with its own identity. The central must pin the identity
//! ([`tofu_verify`] with a [`KnownKeys`] store, or an out-of-band key) before it calls
//! [`CentralVerifyIdentity::accept`]. Dropping a [`CentralVerifyIdentity`] rejects the peer.
//!
//! Every failure consumes the state: as in the reference, a failed handshake is not retried on the
//! same connection.

use subtle::ConstantTimeEq;

use crate::Role;
use crate::crypto::{Aead, CryptoError, CryptoProvider, NONCE_LEN, SessionKey, X25519Secret};
use crate::session::Session;
use crate::wire::WireError;
use crate::wire::key_exchange::{
    Confirmation, KeyExchangeStep, STEP1_LEN, STEP2_LEN, STEP3_LEN, STEP4_LEN, Step1, Step2,
};

/// The plaintext of the central's confirmation (step 3).
pub const CONFIRM_CENTRAL: &[u8; 16] = b"BLERPC_CONFIRM_C";
/// The plaintext of the peripheral's confirmation (step 4).
pub const CONFIRM_PERIPHERAL: &[u8; 16] = b"BLERPC_CONFIRM_P";

/// A handshake step failed. The handshake is over; the connection should be closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The payload does not parse.
    Wire(WireError),
    /// A well-formed step arrived, but not the one this state waits for.
    UnexpectedStep {
        /// The step this state accepts.
        expected: u8,
        /// The step that arrived.
        got: u8,
    },
    /// A primitive failed: a bad step 2 signature, an all-zero shared secret (small-order peer key),
    /// or a backend error.
    Crypto(CryptoError),
    /// The peer's confirmation does not decrypt to its label under our session key: the two sides
    /// derived different keys (or the message was tampered with).
    BadConfirmation,
}

impl core::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            HandshakeError::Wire(e) => write!(f, "malformed key exchange step: {e}"),
            HandshakeError::UnexpectedStep { expected, got } => {
                write!(f, "expected key exchange step {expected}, got step {got}")
            }
            HandshakeError::Crypto(e) => write!(f, "key exchange failed: {e}"),
            HandshakeError::BadConfirmation => f.write_str("key confirmation failed"),
        }
    }
}

/// The message names the cause itself, so `source` is `None`: a report that walks the chain
/// prints each cause once.
#[cfg(feature = "std")]
impl std::error::Error for HandshakeError {}

impl From<WireError> for HandshakeError {
    fn from(e: WireError) -> Self {
        HandshakeError::Wire(e)
    }
}

impl From<CryptoError> for HandshakeError {
    fn from(e: CryptoError) -> Self {
        HandshakeError::Crypto(e)
    }
}

/// Seals `label` under `nonce` into a confirmation.
fn confirm<A: Aead>(
    aead: &A,
    nonce: [u8; NONCE_LEN],
    label: &[u8; 16],
) -> Result<Confirmation, HandshakeError> {
    let mut ct = *label;
    let tag = aead.seal_in_place(&nonce, &mut ct)?;
    Ok(Confirmation::new(nonce, &ct, &tag))
}

/// Opens a confirmation and checks, in constant time, that it holds `label`.
fn check_confirmation<A: Aead>(
    aead: &A,
    c: &Confirmation,
    label: &[u8; 16],
) -> Result<(), HandshakeError> {
    let mut pt = c.ciphertext();
    aead.open_in_place(&c.nonce, &mut pt, &c.tag())
        .map_err(|_| HandshakeError::BadConfirmation)?;
    if bool::from(pt.ct_eq(label)) {
        Ok(())
    } else {
        Err(HandshakeError::BadConfirmation)
    }
}

/// Parses `payload` and checks it is step `expected`.
fn parse_step(payload: &[u8], expected: u8) -> Result<KeyExchangeStep, HandshakeError> {
    let step = KeyExchangeStep::parse(payload)?;
    if step.step() != expected {
        return Err(HandshakeError::UnexpectedStep {
            expected,
            got: step.step(),
        });
    }
    Ok(step)
}

/// The key schedule shared by both roles: X25519, then HKDF, then the AES key.
fn derive_aead<P: CryptoProvider>(
    provider: &P,
    ephemeral: &X25519Secret,
    peer_public: &[u8; 32],
    central_public: &[u8; 32],
    peripheral_public: &[u8; 32],
) -> Result<P::Aead, HandshakeError> {
    let shared = provider.x25519_agree(ephemeral, peer_public)?;
    let key: SessionKey =
        provider.derive_session_key(&shared, central_public, peripheral_public)?;
    Ok(provider.aead(&key)?)
}

/// Entry point of the central (client) side.
#[derive(Clone, Copy, Debug)]
pub struct CentralHandshake;

impl CentralHandshake {
    /// Starts a handshake with a fresh ephemeral key; returns the state and the step 1 payload.
    pub fn start<P: CryptoProvider>(
        provider: P,
        ephemeral: X25519Secret,
    ) -> (CentralAwaitStep2<P>, [u8; STEP1_LEN]) {
        let central_public = provider.x25519_public(&ephemeral);
        let step1 = Step1 { central_public }.to_bytes();
        (
            CentralAwaitStep2 {
                provider,
                ephemeral,
                central_public,
            },
            step1,
        )
    }
}

/// Central, step 1 sent: waiting for the peripheral's step 2.
pub struct CentralAwaitStep2<P: CryptoProvider> {
    provider: P,
    ephemeral: X25519Secret,
    central_public: [u8; 32],
}

impl<P: CryptoProvider> core::fmt::Debug for CentralAwaitStep2<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CentralAwaitStep2").finish_non_exhaustive()
    }
}

impl<P: CryptoProvider> CentralAwaitStep2<P> {
    /// The central's ephemeral public key (sent in step 1).
    pub fn central_public(&self) -> &[u8; 32] {
        &self.central_public
    }

    /// Handles step 2: checks the signature over `central_pub ‖ periph_pub` with the presented
    /// identity and derives the session key. The identity is *not* trusted yet: decide with
    /// [`CentralVerifyIdentity::identity`].
    pub fn receive_step2(self, payload: &[u8]) -> Result<CentralVerifyIdentity<P>, HandshakeError> {
        let KeyExchangeStep::Step2(step2) = parse_step(payload, 2)? else {
            return Err(HandshakeError::UnexpectedStep {
                expected: 2,
                got: 0,
            });
        };
        let msg = Step2::signed_message(&self.central_public, &step2.peripheral_public);
        self.provider
            .ed25519_verify(&step2.identity, &msg, &step2.signature)?;
        let aead = derive_aead(
            &self.provider,
            &self.ephemeral,
            &step2.peripheral_public,
            &self.central_public,
            &step2.peripheral_public,
        )?;
        Ok(CentralVerifyIdentity {
            aead,
            identity: step2.identity,
        })
    }
}

/// Central, step 2 verified: the peripheral's identity must be accepted (pinned) or rejected.
/// Dropping this value rejects it.
pub struct CentralVerifyIdentity<P: CryptoProvider> {
    aead: P::Aead,
    identity: [u8; 32],
}

impl<P: CryptoProvider> core::fmt::Debug for CentralVerifyIdentity<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CentralVerifyIdentity")
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

impl<P: CryptoProvider> CentralVerifyIdentity<P> {
    /// The peripheral's Ed25519 identity key that signed step 2.
    pub fn identity(&self) -> &[u8; 32] {
        &self.identity
    }

    /// Accepts the identity and produces step 3, the central's key confirmation, sealed under a
    /// fresh random `confirm_nonce`.
    pub fn accept(
        self,
        confirm_nonce: [u8; NONCE_LEN],
    ) -> Result<(CentralAwaitStep4<P>, [u8; STEP3_LEN]), HandshakeError> {
        let step3 = confirm(&self.aead, confirm_nonce, CONFIRM_CENTRAL)?.to_step3_bytes();
        Ok((CentralAwaitStep4 { aead: self.aead }, step3))
    }
}

/// Central, step 3 sent: waiting for the peripheral's confirmation.
pub struct CentralAwaitStep4<P: CryptoProvider> {
    aead: P::Aead,
}

impl<P: CryptoProvider> core::fmt::Debug for CentralAwaitStep4<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CentralAwaitStep4").finish_non_exhaustive()
    }
}

impl<P: CryptoProvider> CentralAwaitStep4<P> {
    /// Handles step 4; on success the session is established.
    pub fn receive_step4(self, payload: &[u8]) -> Result<Session<P::Aead>, HandshakeError> {
        let KeyExchangeStep::Step4(c) = parse_step(payload, 4)? else {
            return Err(HandshakeError::UnexpectedStep {
                expected: 4,
                got: 0,
            });
        };
        check_confirmation(&self.aead, &c, CONFIRM_PERIPHERAL)?;
        Ok(Session::new(self.aead, Role::Central))
    }
}

/// Entry point of the peripheral (server) side.
#[derive(Clone, Copy, Debug)]
pub struct PeripheralHandshake;

impl PeripheralHandshake {
    /// A peripheral waiting for step 1, signing with `identity` (a cheap clone of the server's
    /// loaded identity, see [`CryptoProvider::Identity`]).
    #[expect(
        clippy::new_ret_no_self,
        reason = "PeripheralHandshake is a namespace; `new` returns the first typestate"
    )]
    pub fn new<P: CryptoProvider>(provider: P, identity: P::Identity) -> PeripheralAwaitStep1<P> {
        PeripheralAwaitStep1 { provider, identity }
    }
}

/// Peripheral: waiting for the central's step 1.
pub struct PeripheralAwaitStep1<P: CryptoProvider> {
    provider: P,
    identity: P::Identity,
}

impl<P: CryptoProvider> core::fmt::Debug for PeripheralAwaitStep1<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PeripheralAwaitStep1")
            .finish_non_exhaustive()
    }
}

impl<P: CryptoProvider> PeripheralAwaitStep1<P> {
    /// Handles step 1 with a fresh ephemeral key: derives the session key and returns step 2
    /// (the ephemeral public key, signed by the identity).
    pub fn receive_step1(
        self,
        payload: &[u8],
        ephemeral: X25519Secret,
    ) -> Result<(PeripheralAwaitStep3<P>, [u8; STEP2_LEN]), HandshakeError> {
        let KeyExchangeStep::Step1(step1) = parse_step(payload, 1)? else {
            return Err(HandshakeError::UnexpectedStep {
                expected: 1,
                got: 0,
            });
        };
        let p = &self.provider;
        let peripheral_public = p.x25519_public(&ephemeral);
        let aead = derive_aead(
            p,
            &ephemeral,
            &step1.central_public,
            &step1.central_public,
            &peripheral_public,
        )?;
        let msg = Step2::signed_message(&step1.central_public, &peripheral_public);
        let step2 = Step2 {
            peripheral_public,
            signature: p.ed25519_sign(&self.identity, &msg),
            identity: p.identity_public(&self.identity),
        };
        Ok((PeripheralAwaitStep3 { aead }, step2.to_bytes()))
    }
}

/// Peripheral, step 2 sent: waiting for the central's confirmation.
pub struct PeripheralAwaitStep3<P: CryptoProvider> {
    aead: P::Aead,
}

impl<P: CryptoProvider> core::fmt::Debug for PeripheralAwaitStep3<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PeripheralAwaitStep3")
            .finish_non_exhaustive()
    }
}

impl<P: CryptoProvider> PeripheralAwaitStep3<P> {
    /// Handles step 3; on success returns the established session and step 4, the peripheral's
    /// confirmation sealed under a fresh random `confirm_nonce`.
    ///
    /// `confirm_nonce` must come from a cryptographic RNG: it shares the session key with the
    /// central's confirmation and with all data traffic (a clash is about as likely as 2⁻⁶³).
    pub fn receive_step3(
        self,
        payload: &[u8],
        confirm_nonce: [u8; NONCE_LEN],
    ) -> Result<(Session<P::Aead>, [u8; STEP4_LEN]), HandshakeError> {
        let KeyExchangeStep::Step3(c) = parse_step(payload, 3)? else {
            return Err(HandshakeError::UnexpectedStep {
                expected: 3,
                got: 0,
            });
        };
        check_confirmation(&self.aead, &c, CONFIRM_CENTRAL)?;
        let step4 = confirm(&self.aead, confirm_nonce, CONFIRM_PERIPHERAL)?.to_step4_bytes();
        Ok((Session::new(self.aead, Role::Peripheral), step4))
    }
}

/// A store of pinned peripheral identities for trust on first use (TOFU).
///
/// `device_id` is whatever names a peripheral to the application (a BLE address, a host name).
/// Implementations decide persistence; the bleRPC Python central keeps a JSON file `{id: hex}`.
pub trait KnownKeys {
    /// The store's error (I/O, serialization, ...).
    type Error;
    /// The identity pinned for `device_id`, if any.
    fn get(&self, device_id: &str) -> Result<Option<[u8; 32]>, Self::Error>;
    /// Pins `key` for `device_id`.
    fn put(&mut self, device_id: &str, key: &[u8; 32]) -> Result<(), Self::Error>;
    /// Where the pins are, for messages (a file's path, a browser store): "the known-keys
    /// store" unless the store says more.
    fn describe(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("the known-keys store")
    }
}

#[cfg(feature = "alloc")]
impl KnownKeys for alloc::collections::BTreeMap<alloc::string::String, [u8; 32]> {
    type Error = core::convert::Infallible;
    fn get(&self, device_id: &str) -> Result<Option<[u8; 32]>, Self::Error> {
        Ok(alloc::collections::BTreeMap::get(self, device_id).copied())
    }
    fn put(&mut self, device_id: &str, key: &[u8; 32]) -> Result<(), Self::Error> {
        self.insert(alloc::string::String::from(device_id), *key);
        Ok(())
    }
}

/// The result of a successful [`tofu_verify`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TofuOutcome {
    /// No key was pinned for the device; the presented one is now pinned.
    FirstUse,
    /// The presented key equals the pinned one.
    Matched,
}

/// [`tofu_verify`] rejected the identity or could not use the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TofuError<E> {
    /// A different key is pinned for this device: possibly a man in the middle.
    Mismatch {
        /// The pinned key.
        pinned: [u8; 32],
        /// The key the peripheral presented.
        presented: [u8; 32],
    },
    /// The store failed.
    Store(E),
}

impl<E: core::fmt::Display> core::fmt::Display for TofuError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TofuError::Mismatch { .. } => {
                f.write_str("peripheral identity differs from the pinned key (possible MitM)")
            }
            TofuError::Store(e) => write!(f, "known-keys store failed: {e}"),
        }
    }
}

/// The message names the store's error itself, so `source` is `None` (printed once).
#[cfg(feature = "std")]
impl<E: std::error::Error + 'static> std::error::Error for TofuError<E> {}

/// Trust on first use: pins `presented` for `device_id` if nothing is pinned, otherwise requires
/// it to equal the pinned key (compared in constant time).
pub fn tofu_verify<K: KnownKeys + ?Sized>(
    store: &mut K,
    device_id: &str,
    presented: &[u8; 32],
) -> Result<TofuOutcome, TofuError<K::Error>> {
    match store.get(device_id).map_err(TofuError::Store)? {
        None => {
            store.put(device_id, presented).map_err(TofuError::Store)?;
            Ok(TofuOutcome::FirstUse)
        }
        Some(pinned) if bool::from(pinned.ct_eq(presented)) => Ok(TofuOutcome::Matched),
        Some(pinned) => Err(TofuError::Mismatch {
            pinned,
            presented: *presented,
        }),
    }
}

#[cfg(all(test, feature = "std"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::crypto::tests::{ALICE, BOB, SEED, SMALL_ORDER, h};
    use crate::crypto::{IdentitySeed, RustCrypto};
    use std::collections::BTreeMap;
    use std::string::String;

    const STEP1: &str = "018520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a";
    const STEP2: &str = concat!(
        "02de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f",
        "21e1fd6899395fcddad2e8c47c1559d360962fd6aea958a705e887a3063acf94507d3b284813b1a8a2b5e7e570dd44686941f768604fa72ea6b10d5c369a6703",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    );
    const STEP3: &str = "03000102030405060708090a0bdeab3e3f1abac538d48c34b53f5dfbf9a10f3b100a97271990fc4feb34984228";
    const STEP4: &str = "040c0d0e0f1011121314151617a8c38de0e9e241a418051789fa9f9a99c149db82f3c0bf86d68efc3c97d396a3";
    const N3: [u8; 12] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
    const N4: [u8; 12] = [12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23];

    struct Transcript<PA: CryptoProvider, PB: CryptoProvider> {
        steps: ([u8; 33], [u8; 129], [u8; 45], [u8; 45]),
        central: Session<PA::Aead>,
        peripheral: Session<PB::Aead>,
    }

    /// Runs a full handshake with the §6.5 inputs, central on `pc`, peripheral on `pp`.
    fn run<PC: CryptoProvider, PP: CryptoProvider>(pc: PC, pp: PP) -> Transcript<PC, PP> {
        let id = pp
            .load_identity(&IdentitySeed::from_bytes(h(SEED)))
            .unwrap();
        let (c, s1) = CentralHandshake::start(pc, X25519Secret::from_bytes(h(ALICE)));
        let p = PeripheralHandshake::new(pp, id);
        let (p, s2) = p
            .receive_step1(&s1, X25519Secret::from_bytes(h(BOB)))
            .unwrap();
        let c = c.receive_step2(&s2).unwrap();
        assert_eq!(c.identity(), &h::<32>(&STEP2[194..]));
        let (c, s3) = c.accept(N3).unwrap();
        let (peripheral, s4) = p.receive_step3(&s3, N4).unwrap();
        let central = c.receive_step4(&s4).unwrap();
        Transcript {
            steps: (s1, s2, s3, s4),
            central,
            peripheral,
        }
    }

    fn check_transcript<PC: CryptoProvider, PP: CryptoProvider>(pc: PC, pp: PP) {
        let mut t = run(pc, pp);
        assert_eq!(t.steps.0, h::<33>(STEP1));
        assert_eq!(t.steps.1, h::<129>(STEP2));
        assert_eq!(t.steps.2, h::<45>(STEP3));
        assert_eq!(t.steps.3, h::<45>(STEP4));
        // The sessions talk to each other in both directions.
        let mut buf = *b"\0\0\0\0ping\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";
        t.central.seal_in_place(&mut buf).unwrap();
        assert_eq!(t.peripheral.open_in_place(&mut buf), Ok(4..8));
        assert_eq!(&buf[4..8], b"ping");
        t.peripheral.seal_in_place(&mut buf).unwrap();
        assert_eq!(t.central.open_in_place(&mut buf), Ok(4..8));
    }

    #[test]
    fn full_handshake_matches_vectors_rustcrypto() {
        check_transcript(RustCrypto, RustCrypto);
    }

    #[cfg(feature = "ring")]
    #[test]
    fn full_handshake_matches_vectors_ring_and_cross_provider() {
        use crate::crypto::Ring;
        check_transcript(Ring, Ring);
        check_transcript(RustCrypto, Ring);
        check_transcript(Ring, RustCrypto);
    }

    #[cfg(feature = "aws-lc-rs")]
    #[test]
    fn full_handshake_matches_vectors_aws_lc_and_cross_provider() {
        use crate::crypto::AwsLc;
        check_transcript(AwsLc, AwsLc);
        check_transcript(RustCrypto, AwsLc);
        check_transcript(AwsLc, RustCrypto);
    }

    #[test]
    fn default_provider_matches_vectors() {
        check_transcript(crate::crypto::DefaultProvider::default(), RustCrypto);
    }

    fn periph() -> PeripheralAwaitStep1<RustCrypto> {
        let id = RustCrypto
            .load_identity(&IdentitySeed::from_bytes(h(SEED)))
            .unwrap();
        PeripheralHandshake::new(RustCrypto, id)
    }

    fn central() -> CentralAwaitStep2<RustCrypto> {
        CentralHandshake::start(RustCrypto, X25519Secret::from_bytes(h(ALICE))).0
    }

    #[test]
    fn small_order_keys_are_rejected_by_both_roles() {
        for point in SMALL_ORDER {
            let mut s1 = [1u8; 33];
            s1[1..].copy_from_slice(&h::<32>(point));
            let err = periph()
                .receive_step1(&s1, X25519Secret::from_bytes(h(BOB)))
                .unwrap_err();
            assert_eq!(
                err,
                HandshakeError::Crypto(CryptoError::AllZeroSharedSecret),
                "{point}"
            );

            // A step 2 with a small-order ephemeral key, validly signed by some identity.
            let id = RustCrypto
                .load_identity(&IdentitySeed::from_bytes([3; 32]))
                .unwrap();
            let c = central();
            let msg = Step2::signed_message(c.central_public(), &h(point));
            let s2 = Step2 {
                peripheral_public: h(point),
                signature: RustCrypto.ed25519_sign(&id, &msg),
                identity: RustCrypto.identity_public(&id),
            };
            let err = c.receive_step2(&s2.to_bytes()).unwrap_err();
            assert_eq!(
                err,
                HandshakeError::Crypto(CryptoError::AllZeroSharedSecret),
                "{point}"
            );
        }
    }

    #[test]
    fn tampered_step2_is_rejected() {
        let good = h::<129>(STEP2);
        for i in 1..129 {
            let mut s2 = good;
            s2[i] ^= 0x01;
            let err = central().receive_step2(&s2).unwrap_err();
            assert!(
                matches!(
                    err,
                    HandshakeError::Crypto(
                        CryptoError::BadSignature | CryptoError::InvalidPublicKey
                    )
                ),
                "byte {i}: {err:?}"
            );
        }
        assert!(central().receive_step2(&good).is_ok());
        // Trailing bytes are ignored, as by the reference.
        let mut longer = [0u8; 140];
        longer[..129].copy_from_slice(&good);
        assert!(central().receive_step2(&longer).is_ok());
    }

    #[test]
    fn tampered_confirmations_are_rejected() {
        let s1 = h::<33>(STEP1);
        for i in 1..45 {
            let (p, _) = periph()
                .receive_step1(&s1, X25519Secret::from_bytes(h(BOB)))
                .unwrap();
            let mut s3 = h::<45>(STEP3);
            s3[i] ^= 0x80;
            assert_eq!(
                p.receive_step3(&s3, N4).unwrap_err(),
                HandshakeError::BadConfirmation,
                "step 3 byte {i}"
            );

            let (c, _) = central()
                .receive_step2(&h::<129>(STEP2))
                .unwrap()
                .accept(N3)
                .unwrap();
            let mut s4 = h::<45>(STEP4);
            s4[i] ^= 0x80;
            assert_eq!(
                c.receive_step4(&s4).unwrap_err(),
                HandshakeError::BadConfirmation,
                "step 4 byte {i}"
            );
        }
        // A reflected confirmation (the central's own step 3 relabelled as step 4) has the wrong
        // plaintext and fails even though it authenticates.
        let (c, _) = central()
            .receive_step2(&h::<129>(STEP2))
            .unwrap()
            .accept(N3)
            .unwrap();
        let mut reflected = h::<45>(STEP3);
        reflected[0] = 4;
        assert_eq!(
            c.receive_step4(&reflected).unwrap_err(),
            HandshakeError::BadConfirmation
        );
    }

    #[test]
    fn steps_out_of_order_and_garbage() {
        let err = periph().receive_step1(&h::<45>(STEP3), X25519Secret::from_bytes(h(BOB)));
        assert_eq!(
            err.unwrap_err(),
            HandshakeError::UnexpectedStep {
                expected: 1,
                got: 3
            }
        );
        assert_eq!(
            central().receive_step2(&h::<33>(STEP1)).unwrap_err(),
            HandshakeError::UnexpectedStep {
                expected: 2,
                got: 1
            }
        );
        let (p, _) = periph()
            .receive_step1(&h::<33>(STEP1), X25519Secret::from_bytes(h(BOB)))
            .unwrap();
        assert_eq!(
            p.receive_step3(&h::<33>(STEP1), N4).unwrap_err(),
            HandshakeError::UnexpectedStep {
                expected: 3,
                got: 1
            }
        );
        let (c, _) = central()
            .receive_step2(&h::<129>(STEP2))
            .unwrap()
            .accept(N3)
            .unwrap();
        assert_eq!(
            c.receive_step4(&h::<45>(STEP3)).unwrap_err(),
            HandshakeError::UnexpectedStep {
                expected: 4,
                got: 3
            }
        );
        assert!(matches!(
            central().receive_step2(&[]),
            Err(HandshakeError::Wire(_))
        ));
        assert!(matches!(
            central().receive_step2(&[2; 128]),
            Err(HandshakeError::Wire(_))
        ));
        assert!(matches!(
            central().receive_step2(&[9; 129]),
            Err(HandshakeError::Wire(_))
        ));
    }

    #[test]
    fn tofu_pins_then_matches_then_rejects() {
        let mut store: BTreeMap<String, [u8; 32]> = BTreeMap::new();
        assert_eq!(
            tofu_verify(&mut store, "dev", &[1; 32]),
            Ok(TofuOutcome::FirstUse)
        );
        assert_eq!(
            tofu_verify(&mut store, "dev", &[1; 32]),
            Ok(TofuOutcome::Matched)
        );
        assert_eq!(
            tofu_verify(&mut store, "dev", &[2; 32]),
            Err(TofuError::Mismatch {
                pinned: [1; 32],
                presented: [2; 32]
            })
        );
        assert_eq!(
            tofu_verify(&mut store, "other", &[2; 32]),
            Ok(TofuOutcome::FirstUse)
        );
        assert_eq!(store.len(), 2);

        struct Broken;
        impl KnownKeys for Broken {
            type Error = &'static str;
            fn get(&self, _: &str) -> Result<Option<[u8; 32]>, Self::Error> {
                Err("disk on fire")
            }
            fn put(&mut self, _: &str, _: &[u8; 32]) -> Result<(), Self::Error> {
                Err("disk on fire")
            }
        }
        let err = tofu_verify(&mut Broken, "dev", &[1; 32]).unwrap_err();
        assert_eq!(err, TofuError::Store("disk on fire"));
        assert_eq!(
            std::format!("{err}"),
            "known-keys store failed: disk on fire"
        );
    }
}
