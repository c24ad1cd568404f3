//! The encrypted data plane: one serialized command packet in, one sealed message out.
//!
//! Applied to the whole command packet *before* it is split into containers (wire spec §1.5):
//!
//! ```text
//! sealed message   [0..4]      counter u32 LE (the sender's TX counter)
//!                  [4..n+4]    AES-128-GCM(K, nonce, command packet)     n = plaintext length
//!                  [n+4..n+20] tag
//! nonce (12 B)     [0..4] counter u32 LE  [4] direction  [5..12] 00 × 7
//! direction        0x00 central → peripheral, 0x01 peripheral → central
//! ```
//!
//! One key serves both directions; the direction byte keeps the two nonce spaces apart. The AAD is
//! empty: container headers and control containers are not authenticated in bleRPC v1.
//!
//! - TX: the counter starts at 0 and increments after every seal. Sealing at `0xFFFFFFFF` is
//!   refused with [`SessionError::CounterExhausted`], so a nonce is never reused; there is no
//!   rekey, the connection must be re-established.
//! - RX: the message is authenticated and decrypted first, then the replay rule applies: the first
//!   accepted message may carry any counter, every later one must be strictly greater than the last
//!   accepted one (gaps are allowed). A message that fails either check changes no state.
//!
//! Both operations work in place on the caller's buffer, so no allocation is needed.

use crate::Role;
use crate::crypto::{Aead, CryptoError, NONCE_LEN, TAG_LEN};

/// Length of the counter prefix.
pub const COUNTER_LEN: usize = 4;
/// Bytes a sealed message adds to its plaintext: counter (4) + tag (16).
pub const SESSION_OVERHEAD: usize = COUNTER_LEN + TAG_LEN;

/// A session operation failed. The session state is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionError {
    /// The buffer is shorter than [`SESSION_OVERHEAD`].
    TooShort {
        /// The buffer length.
        len: usize,
    },
    /// The AES-GCM tag does not verify (wrong key, wrong direction, or tampering).
    AuthenticationFailed,
    /// The message authenticated but its counter is not above the last accepted one.
    Replay {
        /// The counter in the message.
        counter: u32,
        /// The last accepted counter.
        last: u32,
    },
    /// The TX counter reached `0xFFFFFFFF`; the connection must be re-established.
    CounterExhausted,
    /// The backend refused the buffer (longer than AES-GCM allows).
    Crypto(CryptoError),
}

impl core::fmt::Display for SessionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            SessionError::TooShort { len } => {
                write!(
                    f,
                    "encrypted message of {len} bytes is shorter than the {SESSION_OVERHEAD}-byte overhead"
                )
            }
            SessionError::AuthenticationFailed => {
                f.write_str("encrypted message failed authentication")
            }
            SessionError::Replay { counter, last } => {
                write!(
                    f,
                    "replayed message: counter {counter} is not above the last accepted {last}"
                )
            }
            SessionError::CounterExhausted => {
                f.write_str("message counter exhausted; reconnect to rekey")
            }
            SessionError::Crypto(e) => write!(f, "encryption failed: {e}"),
        }
    }
}

/// The message names the cause itself, so `source` is `None` (printed once).
#[cfg(feature = "std")]
impl std::error::Error for SessionError {}

/// The AES-GCM nonce of a data message: `counter u32 LE ‖ direction ‖ 00 × 7`.
pub fn data_nonce(counter: u32, direction: crate::Direction) -> [u8; NONCE_LEN] {
    let [a, b, c, d] = counter.to_le_bytes();
    [a, b, c, d, direction.nonce_byte(), 0, 0, 0, 0, 0, 0, 0]
}

/// An established encrypted session for one endpoint: the key, its role, and both counters.
pub struct Session<A: Aead> {
    aead: A,
    role: Role,
    tx_counter: u32,
    last_rx: Option<u32>,
}

impl<A: Aead> core::fmt::Debug for Session<A> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Session")
            .field("role", &self.role)
            .field("tx_counter", &self.tx_counter)
            .field("last_rx", &self.last_rx)
            .finish_non_exhaustive()
    }
}

impl<A: Aead> Session<A> {
    /// A fresh session (TX counter 0, nothing received) for the endpoint playing `role`.
    pub fn new(aead: A, role: Role) -> Self {
        Session {
            aead,
            role,
            tx_counter: 0,
            last_rx: None,
        }
    }

    /// The role this session sends as.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Seals a message in place.
    ///
    /// `buf` must be laid out as `[4 spare bytes][plaintext][16 spare bytes]`, i.e.
    /// `buf.len() == plaintext_len + SESSION_OVERHEAD`; afterwards it holds the sealed message.
    /// The TX counter is written to the front and then incremented.
    pub fn seal_in_place(&mut self, buf: &mut [u8]) -> Result<(), SessionError> {
        let len = buf.len();
        if len < SESSION_OVERHEAD {
            return Err(SessionError::TooShort { len });
        }
        if self.tx_counter == u32::MAX {
            return Err(SessionError::CounterExhausted);
        }
        let counter = self.tx_counter;
        let nonce = data_nonce(counter, self.role.tx_direction());
        let (head, rest) = buf.split_at_mut(COUNTER_LEN);
        let (body, tag_out) = rest.split_at_mut(len - SESSION_OVERHEAD);
        let tag = self
            .aead
            .seal_in_place(&nonce, body)
            .map_err(SessionError::Crypto)?;
        head.copy_from_slice(&counter.to_le_bytes());
        tag_out.copy_from_slice(&tag);
        self.tx_counter = counter.saturating_add(1);
        Ok(())
    }

    /// Authenticates and decrypts a sealed message in place, then applies the replay rule.
    ///
    /// Returns the range of `buf` that holds the plaintext (`4..len - 16`). On error the session
    /// is unchanged and the plaintext region is zeroed (it may hold unauthenticated or replayed
    /// data).
    pub fn open_in_place(
        &mut self,
        buf: &mut [u8],
    ) -> Result<core::ops::Range<usize>, SessionError> {
        let len = buf.len();
        if len < SESSION_OVERHEAD {
            return Err(SessionError::TooShort { len });
        }
        let end = len - TAG_LEN;
        let (head, rest) = buf.split_at_mut(COUNTER_LEN);
        let (body, tag) = rest.split_at_mut(end - COUNTER_LEN);
        let mut counter_bytes = [0u8; COUNTER_LEN];
        counter_bytes.copy_from_slice(head);
        let counter = u32::from_le_bytes(counter_bytes);
        let mut tag_bytes = [0u8; TAG_LEN];
        tag_bytes.copy_from_slice(tag);
        let nonce = data_nonce(counter, self.role.rx_direction());
        if self.aead.open_in_place(&nonce, body, &tag_bytes).is_err() {
            body.fill(0);
            return Err(SessionError::AuthenticationFailed);
        }
        if let Some(last) = self.last_rx
            && counter <= last
        {
            body.fill(0);
            return Err(SessionError::Replay { counter, last });
        }
        self.last_rx = Some(counter);
        Ok(COUNTER_LEN..end)
    }

    /// The counter the next sealed message will carry.
    pub fn tx_counter(&self) -> u32 {
        self.tx_counter
    }

    /// Sets the counter the next sealed message will carry: for test vectors, tests and fuzz
    /// targets only (exhaustion at `0xFFFFFFFF`, the replay rule), through
    /// [`crate::fuzzing::set_tx_counter`] outside this crate. Moving the counter backwards on a
    /// live session reuses nonces and breaks AES-GCM, which is why nothing else can reach it.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn set_tx_counter(&mut self, next: u32) {
        self.tx_counter = next;
    }

    /// The counter of the last accepted message, `None` before the first.
    pub fn last_rx_counter(&self) -> Option<u32> {
        self.last_rx
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Direction;
    use crate::crypto::{CryptoProvider, RustCrypto, SessionKey};

    const K: [u8; 16] = [
        0x12, 0xe6, 0x8d, 0x83, 0x0b, 0x38, 0x02, 0x89, 0x6b, 0x9f, 0x09, 0x48, 0xa4, 0xf5, 0xfe,
        0x5a,
    ];
    /// REQUEST echo "hello" of §6.5: `00 04 "echo" 07 00` + protobuf `0a 05 "hello"`.
    const REQ: &[u8] = b"\x00\x04echo\x07\x00\x0a\x05hello";
    /// The matching RESPONSE (type bit `0x80`).
    const RESP: &[u8] = b"\x80\x04echo\x07\x00\x0a\x05hello";

    fn session<P: CryptoProvider>(p: &P, role: Role) -> Session<P::Aead> {
        Session::new(p.aead(&SessionKey::from_bytes(K)).unwrap(), role)
    }

    fn seal<A: Aead>(s: &mut Session<A>, pt: &[u8]) -> [u8; 64] {
        let mut buf = [0u8; 64];
        buf[4..4 + pt.len()].copy_from_slice(pt);
        s.seal_in_place(&mut buf[..pt.len() + SESSION_OVERHEAD])
            .unwrap();
        buf
    }

    fn unhex(s: &str) -> ([u8; 64], usize) {
        let mut buf = [0u8; 64];
        hex::decode_to_slice(s, &mut buf[..s.len() / 2]).unwrap();
        (buf, s.len() / 2)
    }

    const C0: &str = "000000009cf7d7150c42a6bf48b246912998ab4473c7ea2df3ba26f3bc8c6fa37d7401";
    const C1: &str = "0100000031494c30e582ce26f3500e51ecdc429b8ed06b11730bff9e3c0b96f22db879";
    const P0: &str = "0000000094b9b99b969c57df80be879f2458ccc9bc2474331c8760b2b702d566ec7be0";

    pub(crate) fn check_session_vectors<P: CryptoProvider>(p: &P) {
        assert_eq!(data_nonce(0, Direction::CentralToPeripheral), [0; 12]);
        assert_eq!(
            data_nonce(0x0102_0304, Direction::PeripheralToCentral),
            [4, 3, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0]
        );
        let mut central = session(p, Role::Central);
        let mut periph = session(p, Role::Peripheral);
        let n = REQ.len() + SESSION_OVERHEAD;
        assert_eq!(n, 35);
        let c0 = seal(&mut central, REQ);
        assert_eq!(&c0[..n], &unhex(C0).0[..n]);
        let c1 = seal(&mut central, REQ);
        assert_eq!(&c1[..n], &unhex(C1).0[..n]);
        assert_eq!(central.tx_counter(), 2);
        let p0 = seal(&mut periph, RESP);
        assert_eq!(&p0[..n], &unhex(P0).0[..n]);

        let (mut buf, len) = unhex(C0);
        let range = periph.open_in_place(&mut buf[..len]).unwrap();
        assert_eq!(range, 4..19);
        assert_eq!(&buf[range], REQ);
        let (mut buf, len) = unhex(P0);
        let range = central.open_in_place(&mut buf[..len]).unwrap();
        assert_eq!(&buf[range], RESP);
    }

    #[test]
    fn vectors_rustcrypto() {
        check_session_vectors(&RustCrypto);
    }

    #[cfg(feature = "ring")]
    #[test]
    fn vectors_ring() {
        check_session_vectors(&crate::crypto::Ring);
    }

    #[cfg(feature = "aws-lc-rs")]
    #[test]
    fn vectors_aws_lc() {
        check_session_vectors(&crate::crypto::AwsLc);
    }

    #[test]
    fn replay_rule_first_any_then_strictly_greater() {
        // §6.5: a peripheral first accepts counter 1, then rejects counter 0.
        let mut periph = session(&RustCrypto, Role::Peripheral);
        let (mut c1, n) = unhex(C1);
        assert_eq!(periph.open_in_place(&mut c1[..n]), Ok(4..19));
        assert_eq!(periph.last_rx_counter(), Some(1));
        let (mut c0, n) = unhex(C0);
        assert_eq!(
            periph.open_in_place(&mut c0[..n]),
            Err(SessionError::Replay {
                counter: 0,
                last: 1
            })
        );
        assert_eq!(&c0[4..19], &[0; 15], "replayed plaintext is wiped");
        let (mut c1, n) = unhex(C1);
        assert_eq!(
            periph.open_in_place(&mut c1[..n]),
            Err(SessionError::Replay {
                counter: 1,
                last: 1
            })
        );
        assert_eq!(periph.last_rx_counter(), Some(1));

        // Gaps are allowed.
        let mut central = session(&RustCrypto, Role::Central);
        central.set_tx_counter(1000);
        let mut m = seal(&mut central, REQ);
        assert_eq!(periph.open_in_place(&mut m[..35]), Ok(4..19));
        assert_eq!(periph.last_rx_counter(), Some(1000));
    }

    #[test]
    fn tampering_and_wrong_direction_fail_without_state_change() {
        let mut central = session(&RustCrypto, Role::Central);
        let mut periph = session(&RustCrypto, Role::Peripheral);
        let m = seal(&mut central, REQ);
        for i in 0..35 {
            let mut t = m;
            t[i] ^= 0x40;
            assert_eq!(
                periph.open_in_place(&mut t[..35]),
                Err(SessionError::AuthenticationFailed),
                "byte {i}"
            );
        }
        assert_eq!(periph.last_rx_counter(), None);
        // A central cannot open its own (C→P) message: the nonce direction differs.
        let mut own = m;
        assert_eq!(
            central.open_in_place(&mut own[..35]),
            Err(SessionError::AuthenticationFailed)
        );
        // A wrong key fails too.
        let mut other = Session::new(
            RustCrypto.aead(&SessionKey::from_bytes([0; 16])).unwrap(),
            Role::Peripheral,
        );
        let mut t = m;
        assert_eq!(
            other.open_in_place(&mut t[..35]),
            Err(SessionError::AuthenticationFailed)
        );
        let mut t = m;
        assert_eq!(periph.open_in_place(&mut t[..35]), Ok(4..19));
    }

    #[test]
    fn counter_exhaustion_never_wraps() {
        let mut central = session(&RustCrypto, Role::Central);
        central.set_tx_counter(u32::MAX - 1);
        let m = seal(&mut central, REQ);
        assert_eq!(&m[..4], &[0xfe, 0xff, 0xff, 0xff]);
        assert_eq!(central.tx_counter(), u32::MAX);
        let mut buf = [0u8; 35];
        assert_eq!(
            central.seal_in_place(&mut buf),
            Err(SessionError::CounterExhausted)
        );
        assert_eq!(
            central.seal_in_place(&mut buf),
            Err(SessionError::CounterExhausted)
        );
        assert_eq!(central.tx_counter(), u32::MAX);
        assert_eq!(buf, [0; 35], "nothing written");
    }

    #[test]
    fn short_buffers_and_empty_plaintext() {
        let mut central = session(&RustCrypto, Role::Central);
        let mut periph = session(&RustCrypto, Role::Peripheral);
        assert_eq!(
            central.seal_in_place(&mut [0u8; 19]),
            Err(SessionError::TooShort { len: 19 })
        );
        assert_eq!(
            periph.open_in_place(&mut [0u8; 19]),
            Err(SessionError::TooShort { len: 19 })
        );
        assert_eq!(central.tx_counter(), 0);
        let mut empty = [0u8; 20];
        central.seal_in_place(&mut empty).unwrap();
        assert_eq!(periph.open_in_place(&mut empty), Ok(4..4));
    }
}
