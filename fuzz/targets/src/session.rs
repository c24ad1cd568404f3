//! Target 9: a session opening genuine, replayed, mutated and raw frames.

use blerpc_proto::Role;
use blerpc_proto::crypto::{CryptoProvider, RustCrypto, SessionKey};
use blerpc_proto::session::{COUNTER_LEN, SESSION_OVERHEAD, Session, SessionError};

use crate::input::Cursor;
use crate::keys::SESSION_KEY;

/// `Session::open_in_place` on a mix of genuine sealed frames, replays, mutations and raw bytes
/// under the vectors' key. Invariants: accepted counters strictly increase, a failed open leaves
/// `last_rx_counter` unchanged and zeroes the plaintext region, genuine fresh frames open to
/// their plaintext, and mutated frames never open.
pub fn session_open(data: &[u8]) {
    let mut cur = Cursor::new(data);
    let p = RustCrypto;
    let key = SessionKey::from_bytes(SESSION_KEY);
    let rx_role = if cur.u8() & 1 == 0 {
        Role::Peripheral
    } else {
        Role::Central
    };
    let tx_role = match rx_role {
        Role::Peripheral => Role::Central,
        Role::Central => Role::Peripheral,
    };
    let mut rx = Session::new(p.aead(&key).expect("aead"), rx_role);
    let mut tx = Session::new(p.aead(&key).expect("aead"), tx_role);
    // Frames we sealed: (sealed bytes, plaintext).
    let mut sent: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut steps = 0;
    while !cur.is_empty() && steps < 256 {
        steps += 1;
        let op = cur.u8();
        let before = rx.last_rx_counter();
        let (mut frame, genuine): (Vec<u8>, Option<Vec<u8>>) = match op % 5 {
            0 => {
                let plain = cur.chunk().to_vec();
                let mut buf = vec![0u8; plain.len() + SESSION_OVERHEAD];
                buf[COUNTER_LEN..COUNTER_LEN + plain.len()].copy_from_slice(&plain);
                let counter = tx.tx_counter();
                match tx.seal_in_place(&mut buf) {
                    Ok(()) => {
                        assert_eq!(buf[..4], counter.to_le_bytes());
                        assert_eq!(tx.tx_counter(), counter + 1);
                        sent.push((buf.clone(), plain.clone()));
                        (buf, Some(plain))
                    }
                    Err(e) => {
                        assert_eq!(e, SessionError::CounterExhausted);
                        assert_eq!(counter, u32::MAX);
                        continue;
                    }
                }
            }
            1 if !sent.is_empty() => {
                // Replay (or late delivery) of an earlier frame.
                let (f, plain) = sent[usize::from(cur.u8()) % sent.len()].clone();
                (f, Some(plain))
            }
            2 if !sent.is_empty() => {
                let (mut f, _) = sent[usize::from(cur.u8()) % sent.len()].clone();
                let pos = usize::from(cur.u16()) % f.len();
                let bit = 1u8 << (cur.u8() % 8);
                f[pos] ^= bit;
                let before = rx.last_rx_counter();
                let mut g = f.clone();
                assert!(
                    rx.open_in_place(&mut g).is_err(),
                    "bit-flipped frame opened"
                );
                assert_eq!(rx.last_rx_counter(), before);
                continue;
            }
            3 => {
                // Move the sender's counter (gaps, and going backwards to test the replay rule).
                blerpc_proto::fuzzing::set_tx_counter(&mut tx, cur.u32());
                continue;
            }
            _ => (cur.chunk().to_vec(), None),
        };
        let len = frame.len();
        let counter = frame
            .get(..4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()));
        match rx.open_in_place(&mut frame) {
            Ok(range) => {
                let counter = counter.expect("opened frames have a counter");
                assert_eq!(range, COUNTER_LEN..len - 16);
                if let Some(b) = before {
                    assert!(counter > b, "accepted counter {counter} after {b}");
                }
                assert_eq!(rx.last_rx_counter(), Some(counter));
                if let Some(plain) = genuine {
                    assert_eq!(&frame[range], plain.as_slice());
                }
            }
            Err(e) => {
                assert_eq!(
                    rx.last_rx_counter(),
                    before,
                    "failed open changed state: {e:?}"
                );
                if len >= SESSION_OVERHEAD {
                    assert!(
                        frame[COUNTER_LEN..len - 16].iter().all(|b| *b == 0),
                        "plaintext region not zeroed"
                    );
                } else {
                    assert_eq!(e, SessionError::TooShort { len });
                }
                if let (Some(_), Some(c)) = (&genuine, counter) {
                    // A genuine frame fails only by the replay rule.
                    assert!(
                        matches!(e, SessionError::Replay { .. }),
                        "genuine frame failed: {e:?}"
                    );
                    assert!(before.is_some_and(|b| c <= b));
                }
            }
        }
    }
}
