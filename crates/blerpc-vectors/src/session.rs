//! `session.json`: frames sealed from a fixed key and counter are the reference's and open back;
//! nonces; the counter refusing to reach 0xFFFFFFFF; replayed, forged and short frames refused
//! without moving the receive state.

use blerpc_proto::Role;
use blerpc_proto::buf::Buffer;
use blerpc_proto::crypto::{Aead, CryptoProvider, SESSION_KEY_LEN, SessionKey};
use blerpc_proto::session::{SESSION_OVERHEAD, Session, SessionError, data_nonce};
use blerpc_proto::wire::command::{Command, MAX_DATA_LEN};

use crate::control::direction;
use crate::errors::{self, expect_match};
use crate::fail::{At, Fail, ensure, same_bytes, same_int, same_len};
use crate::payload::sha256;
use crate::splits::split_output;
use crate::{Buffers, Check, Ctx, Node, Stop, sized};

/// The AEAD of `key` from `provider`.
pub(crate) fn aead<P: CryptoProvider>(
    provider: &P,
    key: &[u8; SESSION_KEY_LEN],
) -> Result<P::Aead, Fail> {
    provider
        .aead(&SessionKey::from_bytes(*key))
        .map_err(|_| Fail::new("aead"))
}

/// A session of `role` on `key`.
pub(crate) fn session<P: CryptoProvider>(
    provider: &P,
    key: &[u8; SESSION_KEY_LEN],
    role: Role,
) -> Result<Session<P::Aead>, Fail> {
    Ok(Session::new(aead(provider, key)?, role))
}

/// The role a case names.
pub(crate) fn role(name: &str) -> Result<Role, Fail> {
    match name {
        "central" => Ok(Role::Central),
        "peripheral" => Ok(Role::Peripheral),
        _ => Err(Fail::field("unknown role", "role")),
    }
}

/// The other role.
pub(crate) fn peer(role: Role) -> Role {
    match role {
        Role::Central => Role::Peripheral,
        Role::Peripheral => Role::Central,
    }
}

/// Seals `plaintext` with `session` into `buf`, resized to the frame: `Ok(Err(_))` when the
/// session refuses.
pub(crate) fn seal<'b, A: Aead, M: Buffer + Default>(
    session: &mut Session<A>,
    plaintext: &[u8],
    buf: &'b mut M,
) -> Result<Result<&'b [u8], SessionError>, Stop> {
    let frame = sized(buf, plaintext.len() + SESSION_OVERHEAD)?;
    if let Some(body) = frame.get_mut(4..4 + plaintext.len()) {
        body.copy_from_slice(plaintext);
    }
    Ok(session.seal_in_place(frame).map(|()| &*frame))
}

/// Opens a copy of `frame` with `session` in `buf`: the plaintext, or the session's error.
pub(crate) fn open<'b, A: Aead, M: Buffer + Default>(
    session: &mut Session<A>,
    frame: &[u8],
    buf: &'b mut M,
) -> Result<Result<&'b [u8], SessionError>, Stop> {
    let copy = sized(buf, frame.len())?;
    copy.copy_from_slice(frame);
    Ok(session
        .open_in_place(copy)
        .map(|range| copy.get(range).unwrap_or(&[])))
}

/// `Command::request(name, data)` emitted by our command encoder (the extended header only
/// where the data needs it) and sealed by a central's session on `key` from `counter`, into
/// `buf`; the plaintext must hash to `plaintext_sha256`. Returns the frame.
pub(crate) fn sealed_request<'b, P: CryptoProvider, M: Buffer + Default>(
    provider: &P,
    (key, counter): (&[u8; SESSION_KEY_LEN], u32),
    (name, data): (&str, &[u8]),
    plaintext_sha256: &[u8],
    buf: &'b mut M,
) -> Result<&'b [u8], Stop> {
    let mut tx = session(provider, key, Role::Central)?;
    blerpc_proto::fuzzing::set_tx_counter(&mut tx, counter);
    let cmd = Command::request(name, data);
    let plain_len = cmd.emitted_len_large();
    let frame = sized(buf, plain_len + SESSION_OVERHEAD)?;
    let body = frame.get_mut(4..4 + plain_len).ok_or(Fail::new("frame"))?;
    let n = if data.len() > MAX_DATA_LEN {
        cmd.emit_large(body)
    } else {
        cmd.emit(body)
    }
    .map_err(|_| Fail::new("command emit"))?;
    same_len("plaintext length", n, plain_len)?;
    same_bytes("plaintext sha256", &sha256(body), plaintext_sha256)?;
    tx.seal_in_place(frame).map_err(|_| Fail::new("seal"))?;
    Ok(frame)
}

pub(crate) fn check<P: CryptoProvider, B: Buffers>(
    ctx: &mut Ctx<'_, P, B>,
    case: Node<'_>,
) -> Check {
    let (p, s) = (ctx.provider, &mut *ctx.scratch);
    let op = case.str("op")?;
    let expect = case.field("expect");
    if op != "decrypt_sequence" {
        ensure(expect?.as_object().is_some(), "expect is not an object")?;
    }
    match op {
        "encrypt" => {
            expect_match(case.field("expect")?)?;
            let key = case.array("session_key")?;
            let role = role(case.str("role")?)?;
            let dir = direction(case.str("direction")?)?;
            ensure(dir == role.tx_direction(), "direction")?;
            let counter = case.u32("counter")?;
            same_bytes("nonce", &data_nonce(counter, dir), case.bytes("nonce_hex")?)?;
            let plaintext = case.bytes("plaintext_hex")?;
            let frame = case.bytes("frame_hex")?;
            let mut tx = session(p, &key, role)?;
            if counter <= 1 {
                // The natural path: seal `counter` times first.
                for _ in 0..counter {
                    seal(&mut tx, plaintext, &mut s.frame)?.map_err(|_| Fail::new("seal"))?;
                }
            } else {
                blerpc_proto::fuzzing::set_tx_counter(&mut tx, counter);
            }
            same_int("tx counter", tx.tx_counter(), counter)?;
            let ours = seal(&mut tx, plaintext, &mut s.frame)?.map_err(|_| Fail::new("seal"))?;
            same_bytes("sealed frame", ours, frame)?;
            same_int("tx counter after", tx.tx_counter(), counter + 1)?;
            let mut rx = session(p, &key, peer(role))?;
            let plain = open(&mut rx, frame, &mut s.frame)?.map_err(|_| Fail::new("open"))?;
            same_bytes("opened plaintext", plain, plaintext)?;
            ensure(rx.last_rx_counter() == Some(counter), "last rx counter")?;
            Ok(())
        }
        "split" => {
            expect_match(case.field("expect")?)?;
            let frame = case.bytes("frame_hex")?;
            let want = case.list("containers")?;
            let (tid, mtu) = (case.u8("tid")?, case.usize("mtu")?);
            split_output(tid, frame, mtu, want, &mut s.container, &mut s.assembler)
        }
        "nonce" => {
            expect_match(case.field("expect")?)?;
            let dir = direction(case.str("direction")?)?;
            let nonce = data_nonce(case.u32("counter")?, dir);
            Ok(same_bytes("nonce", &nonce, case.bytes("nonce_hex")?)?)
        }
        "encrypt_exhaust" => {
            let expect = case.field("expect")?;
            let key = case.array("session_key")?;
            let plaintext = case.bytes("plaintext_hex")?;
            let mut tx = session(p, &key, role(case.str("role")?)?)?;
            blerpc_proto::fuzzing::set_tx_counter(&mut tx, case.u32("start_counter")?);
            let last =
                seal(&mut tx, plaintext, &mut s.frame)?.map_err(|_| Fail::new("last seal"))?;
            same_bytes("last frame", last, case.bytes("last_frame_hex")?)?;
            for _ in 0..2 {
                let err = seal(&mut tx, plaintext, &mut s.frame)?
                    .err()
                    .ok_or(Fail::new("sealed at counter 0xFFFFFFFF"))?;
                errors::session(&err, expect)?;
                same_int("tx counter stays", tx.tx_counter(), u32::MAX)?;
            }
            Ok(())
        }
        "decrypt_sequence" => {
            let key = case.array("session_key")?;
            let role = role(case.str("role")?)?;
            ensure(
                direction(case.str("direction")?)? == role.rx_direction(),
                "direction",
            )?;
            let mut rx = session(p, &key, role)?;
            for (i, step) in case.list("steps")?.enumerate() {
                let frame = step.bytes("frame_hex").at(i)?;
                let expect = step.field("expect").at(i)?;
                let before = rx.last_rx_counter();
                match (
                    open(&mut rx, frame, &mut s.frame)?,
                    expect.get("plaintext_hex"),
                ) {
                    (Ok(plain), Some(_)) => {
                        same_bytes("opened plaintext", plain, expect.bytes("plaintext_hex")?)
                            .at(i)?;
                        let counter = frame
                            .get(..4)
                            .and_then(|c| c.try_into().ok())
                            .map(u32::from_le_bytes);
                        ensure(rx.last_rx_counter() == counter, "last rx counter").at(i)?;
                    }
                    (Err(e), None) => {
                        errors::session(&e, expect).at(i)?;
                        ensure(
                            rx.last_rx_counter() == before,
                            "a refused frame moved the state",
                        )
                        .at(i)?;
                    }
                    _ => return Err(Fail::new("a step's outcome differs").at(i).into()),
                }
            }
            Ok(())
        }
        _ => Err(Fail::field("unknown op", "op").into()),
    }
}
