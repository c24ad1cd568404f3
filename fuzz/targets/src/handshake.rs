//! Targets 7 and 8: the key exchange's typestates on both sides, genuine transcripts with fuzz
//! mutations and raw steps.

use blerpc_proto::Role;
use blerpc_proto::crypto::{CryptoProvider, RustCrypto, X25519Secret};
use blerpc_proto::handshake::{CentralHandshake, PeripheralHandshake};
use blerpc_proto::session::{COUNTER_LEN, SESSION_OVERHEAD, Session};
use blerpc_proto::wire::key_exchange::{STEP2_LEN, STEP4_LEN};

use crate::input::Cursor;
use crate::keys::{
    CENTRAL_EPHEMERAL, CENTRAL_NONCE, PERIPHERAL_EPHEMERAL, PERIPHERAL_NONCE, identity,
};

/// Applies `[count][pos][xor]...` mutations to `bytes` (positions wrap) and appends
/// `[extra_len][extra...]` trailing bytes (which parsers must ignore).
fn mutate(cur: &mut Cursor<'_>, bytes: &mut Vec<u8>) {
    let count = cur.u8() % 4;
    for _ in 0..count {
        let pos = usize::from(cur.u8()) % bytes.len().max(1);
        let x = cur.u8();
        if let Some(b) = bytes.get_mut(pos) {
            *b ^= x;
        }
    }
    let extra = cur.u8() % 8;
    bytes.extend_from_slice(cur.bytes(usize::from(extra)));
}

fn genuine_session_check<A: blerpc_proto::crypto::Aead, B: blerpc_proto::crypto::Aead>(
    central: &mut Session<A>,
    peripheral: &mut Session<B>,
) {
    for (sender_is_central, msg) in [(true, b"ping".as_slice()), (false, b"pong".as_slice())] {
        let mut buf = vec![0u8; msg.len() + SESSION_OVERHEAD];
        buf[COUNTER_LEN..COUNTER_LEN + msg.len()].copy_from_slice(msg);
        let opened = if sender_is_central {
            central.seal_in_place(&mut buf).expect("seal");
            peripheral.open_in_place(&mut buf)
        } else {
            peripheral.seal_in_place(&mut buf).expect("seal");
            central.open_in_place(&mut buf)
        };
        let range = opened.expect("sessions of one handshake interoperate");
        assert_eq!(&buf[range], msg);
    }
}

/// Drives `CentralHandshake` with fuzz step 2 / step 4 payloads.
///
/// Mode bit 0 = 1: a genuine transcript (the vector keys) with fuzz mutations; any change to the
/// first 129 bytes of step 2 or 45 bytes of step 4 must be rejected, and an untouched transcript
/// (trailing bytes allowed) must give a working session. Mode bit 0 = 0: raw payloads, which must
/// never panic and whose success must be consistent.
pub fn handshake_central(data: &[u8]) {
    let mut cur = Cursor::new(data);
    let mode = cur.u8();
    let p = RustCrypto;
    let (hs, step1) = CentralHandshake::start(p, X25519Secret::from_bytes(CENTRAL_EPHEMERAL));
    assert_eq!(hs.central_public()[..], step1[1..33]);
    if mode & 1 == 0 {
        let step2 = cur.chunk();
        let step4 = cur.rest();
        let Ok(verify) = hs.receive_step2(step2) else {
            return;
        };
        assert_eq!(verify.identity()[..], step2[97..129]);
        let (hs, step3) = verify.accept(CENTRAL_NONCE).expect("accept");
        assert_eq!(step3[0], 3);
        let _ = hs.receive_step4(step4);
        return;
    }
    let periph = PeripheralHandshake::new(p, identity());
    let (periph, step2) = periph
        .receive_step1(&step1, X25519Secret::from_bytes(PERIPHERAL_EPHEMERAL))
        .expect("genuine step 1");
    let mut m2 = step2.to_vec();
    mutate(&mut cur, &mut m2);
    let intact2 = m2[..STEP2_LEN] == step2[..];
    let verify = match hs.receive_step2(&m2) {
        Ok(v) => {
            assert!(intact2, "mutated step 2 accepted: {m2:02x?}");
            v
        }
        Err(e) => {
            assert!(!intact2, "genuine step 2 rejected: {e:?}");
            return;
        }
    };
    assert_eq!(verify.identity()[..], step2[97..129]);
    let (hs, step3) = verify.accept(CENTRAL_NONCE).expect("accept");
    let (mut p_session, step4) = periph
        .receive_step3(&step3, PERIPHERAL_NONCE)
        .expect("genuine step 3");
    let mut m4 = step4.to_vec();
    mutate(&mut cur, &mut m4);
    let intact4 = m4[..STEP4_LEN] == step4[..];
    match hs.receive_step4(&m4) {
        Ok(mut c_session) => {
            assert!(intact4, "mutated step 4 accepted: {m4:02x?}");
            assert_eq!(c_session.role(), Role::Central);
            genuine_session_check(&mut c_session, &mut p_session);
        }
        Err(e) => assert!(!intact4, "genuine step 4 rejected: {e:?}"),
    }
}

/// Drives `PeripheralHandshake` with fuzz step 1 / step 3 payloads (same modes as
/// [`handshake_central`]). A mutated step 1 must make the genuine central reject step 2.
pub fn handshake_peripheral(data: &[u8]) {
    let mut cur = Cursor::new(data);
    let mode = cur.u8();
    let p = RustCrypto;
    let periph = PeripheralHandshake::new(p, identity());
    if mode & 1 == 0 {
        let step1 = cur.chunk();
        let step3 = cur.rest();
        let Ok((periph, step2)) =
            periph.receive_step1(step1, X25519Secret::from_bytes(PERIPHERAL_EPHEMERAL))
        else {
            return;
        };
        assert_eq!(step2[0], 2);
        assert_eq!(step2[97..129], p.identity_public(&identity()));
        // The signature covers the central key we were given and our ephemeral key.
        let msg = blerpc_proto::wire::key_exchange::Step2::signed_message(
            &step1[1..33].try_into().unwrap(),
            &step2[1..33].try_into().unwrap(),
        );
        p.ed25519_verify(
            &step2[97..129].try_into().unwrap(),
            &msg,
            &step2[33..97].try_into().unwrap(),
        )
        .expect("our own signature verifies");
        if let Ok((session, step4)) = periph.receive_step3(step3, PERIPHERAL_NONCE) {
            assert_eq!(step4[0], 4);
            assert_eq!(session.role(), Role::Peripheral);
        }
        return;
    }
    let (central, step1) = CentralHandshake::start(p, X25519Secret::from_bytes(CENTRAL_EPHEMERAL));
    let mut m1 = step1.to_vec();
    mutate(&mut cur, &mut m1);
    let intact1 = m1[..33] == step1[..];
    let (periph, step2) =
        match periph.receive_step1(&m1, X25519Secret::from_bytes(PERIPHERAL_EPHEMERAL)) {
            Ok(x) => x,
            Err(e) => {
                assert!(!intact1, "genuine step 1 rejected: {e:?}");
                return;
            }
        };
    let verify = match central.receive_step2(&step2) {
        Ok(v) => {
            assert!(
                intact1,
                "central accepted step 2 signed over a mutated step 1"
            );
            v
        }
        Err(e) => {
            assert!(
                !intact1,
                "central rejected step 2 of a genuine exchange: {e:?}"
            );
            return;
        }
    };
    let (central, step3) = verify.accept(CENTRAL_NONCE).expect("accept");
    let mut m3 = step3.to_vec();
    mutate(&mut cur, &mut m3);
    let intact3 = m3[..45] == step3[..];
    match periph.receive_step3(&m3, PERIPHERAL_NONCE) {
        Ok((mut p_session, step4)) => {
            assert!(intact3, "mutated step 3 accepted: {m3:02x?}");
            let mut c_session = central.receive_step4(&step4).expect("genuine step 4");
            genuine_session_check(&mut c_session, &mut p_session);
        }
        Err(e) => assert!(!intact3, "genuine step 3 rejected: {e:?}"),
    }
}
