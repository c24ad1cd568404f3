//! The reference vectors, checked both ways on whatever CPU runs this: our codecs must emit the
//! reference's bytes (split, control, command, session frames, handshake steps), and parse the
//! reference's bytes back to the same values (reassembly, parse, open, the other role's
//! handshake step). The same semantics as `crates/blerpc-proto/tests/vectors.rs`, on fixed
//! buffers instead of `Vec`.

use blerpc_proto::assemble::{AssembleError, Assembler, AssemblerConfig};
use blerpc_proto::buf::ArrayBuf;
use blerpc_proto::connection::{
    Central, CentralConfig, CentralEvent, Peripheral, PeripheralConfig, PeripheralEvent,
};
use blerpc_proto::crypto::{
    CryptoProvider, IdentitySeed, RustCrypto, SESSION_KEY_LEN, SessionKey, X25519Secret,
};
use blerpc_proto::handshake::{CentralHandshake, PeripheralHandshake};
use blerpc_proto::session::{SESSION_OVERHEAD, Session, SessionError, data_nonce};
use blerpc_proto::split::{SplitCursor, SplitError, Splitter, container_count, max_message_len};
use blerpc_proto::wire::capabilities::{Capabilities, CapabilityFlags};
use blerpc_proto::wire::command::{Command, CommandType};
use blerpc_proto::wire::container::{Container, ContainerKind};
use blerpc_proto::wire::control::ControlMessage;
use blerpc_proto::wire::error_code::ErrorCode;
use blerpc_proto::wire::key_exchange::{KeyExchangeStep, Step2};
use blerpc_proto::{Direction, Instant, Role};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use sha2::Digest;

use crate::blob::*;
use crate::{Fail, Tally, ensure};

/// The vectors `build.rs` extracted from `testdata/vectors/`.
pub static VECTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/vectors.bin"));
/// Cases deliberately not run here, with the reason.
pub static SKIPPED: &[&str] = include!(concat!(env!("OUT_DIR"), "/skipped.rs"));

/// The longest classic message (65,535 bytes) plus room.
const MAX_MESSAGE: usize = 65_536;

/// Buffers the checks share (large: the caller puts them where memory allows).
pub struct Scratch {
    payload: [u8; MAX_MESSAGE],
    frame: [u8; MAX_MESSAGE + 64],
    assembler: Assembler<ArrayBuf<MAX_MESSAGE>, 1>,
}

impl Scratch {
    /// Fresh buffers.
    pub fn new() -> Self {
        Scratch {
            payload: [0; MAX_MESSAGE],
            frame: [0; MAX_MESSAGE + 64],
            assembler: Assembler::new(AssemblerConfig {
                max_in_flight: 1,
                ..AssemblerConfig::default()
            }),
        }
    }
}

impl Default for Scratch {
    fn default() -> Self {
        Self::new()
    }
}

/// Runs every embedded vector; failures go to `log`.
pub fn run(scratch: &mut Scratch, tally: &mut Tally, log: &mut dyn FnMut(&str, &str)) {
    let mut r = Reader::new(VECTORS);
    while !r.is_empty() {
        let (kind, name, body) = match (r.u8(), r.str(), r.bytes()) {
            (Ok(k), Ok(n), Ok(b)) => (k, n, b),
            _ => {
                log("vector file", "unreadable record header");
                tally.fail("vector file");
                return;
            }
        };
        let r = &mut Reader::new(body);
        let (family, result) = match kind {
            KIND_SPLIT => ("splits", split(r, scratch)),
            KIND_SPLIT_ERROR => ("splits", split_error(r)),
            KIND_CONTROL => ("control", control(r)),
            KIND_COMMAND => ("commands", command(r, scratch)),
            KIND_ENCRYPT => ("session", encrypt(r, scratch)),
            KIND_NONCE => ("session", nonce(r)),
            KIND_EXHAUST => ("session", exhaust(r, scratch)),
            KIND_DECRYPT => ("session", decrypt(r, scratch)),
            KIND_EXCHANGE => ("key_exchange", exchange(r)),
            KIND_ASSEMBLY => ("assembly", assembly(r)),
            _ => {
                log(
                    name,
                    "unknown record kind: the vector file and this image disagree",
                );
                tally.fail("vector file");
                return;
            }
        };
        match result {
            Ok(()) => tally.pass(family),
            Err(Fail(what)) => {
                log(name, what);
                tally.fail(family);
            }
        }
    }
}

fn role(b: u8) -> Role {
    if b == 0 {
        Role::Central
    } else {
        Role::Peripheral
    }
}

fn direction(b: u8) -> Direction {
    if b == 0 {
        Direction::CentralToPeripheral
    } else {
        Direction::PeripheralToCentral
    }
}

// ----- splits.json (and session.json's split case) ----------------------------------------------

fn split(r: &mut Reader<'_>, s: &mut Scratch) -> Result<(), Fail> {
    let tid = r.u8()?;
    let mtu = usize::from(r.u16()?);
    let pattern = r.u8()?;
    let len = r.u32()? as usize;
    let payload = s
        .payload
        .get_mut(..len)
        .ok_or(Fail("payload over 64 KiB"))?;
    match pattern {
        0 => payload
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = (i % 251) as u8),
        1 => payload
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = (i % 256) as u8),
        _ => payload.copy_from_slice(r.take(len)?),
    }
    let sha: [u8; 32] = r.array()?;
    ensure(
        sha2::Sha256::digest(&*payload).as_slice() == sha,
        "payload sha256 differs from the reference's",
    )?;
    let count = usize::from(r.u16()?);
    ensure(container_count(len, mtu) == Ok(count), "container_count")?;

    // Emit: our splitter gives the reference's containers, byte for byte.
    let mut splitter = Splitter::new(tid, payload, mtu).map_err(|_| Fail("Splitter::new"))?;
    let mut out = [0u8; 1024];
    let out = out.get_mut(..mtu - 3).ok_or(Fail("MTU over 1027"))?;
    let mut refs = *r;
    for _ in 0..count {
        let want = refs.bytes()?;
        ensure(splitter.cursor().next_len() == Some(want.len()), "next_len")?;
        let n = splitter
            .next_into(out)
            .ok_or(Fail("our splitter ended early"))?;
        ensure(
            out.get(..n) == Some(want),
            "a container differs from the reference's",
        )?;
    }
    ensure(
        splitter.next_into(out).is_none(),
        "our splitter gives more containers",
    )?;
    ensure(splitter.cursor().is_done(), "cursor not done")?;

    // Parse: the reference's containers re-emit identically and reassemble to the payload.
    let asm = &mut s.assembler;
    asm.reset();
    let mut done = None;
    for i in 0..count {
        let want = r.bytes()?;
        ensure(
            want.len() <= mtu - 3,
            "a reference container exceeds the MTU",
        )?;
        let c = Container::parse(want).map_err(|_| Fail("Container::parse"))?;
        let mut again = [0u8; 1024];
        let n = c.emit(&mut again).map_err(|_| Fail("Container::emit"))?;
        ensure(again.get(..n) == Some(want), "parse→emit differs")?;
        match asm.feed(&c) {
            Ok(None) if i + 1 < count => {}
            Ok(Some(d)) if i + 1 == count => done = Some(d),
            _ => return Err(Fail("the reference containers do not reassemble")),
        }
    }
    let d = done.ok_or(Fail("no containers"))?;
    ensure(
        asm.message(d) == s.payload.get(..len).unwrap_or(&[]),
        "reassembled payload differs",
    )?;
    asm.release(d);
    Ok(())
}

fn split_error(r: &mut Reader<'_>) -> Result<(), Fail> {
    let tid = r.u8()?;
    let mtu = usize::from(r.u16()?);
    let len = r.u32()? as usize;
    let max = r.u32()? as usize;
    let want = Err(SplitError::MessageTooLarge { len, max });
    ensure(
        container_count(len, mtu) == want.map(|_: ()| 0),
        "container_count error",
    )?;
    ensure(
        SplitCursor::new(tid, len, mtu).err() == want.err(),
        "SplitCursor error",
    )?;
    ensure(max_message_len(mtu) == max, "max_message_len")
}

// ----- control.json ------------------------------------------------------------------------------

fn expected_control(
    message: u8,
    f: [u16; 3],
    cmd: u8,
    payload: &[u8],
) -> Result<ControlMessage<'_>, Fail> {
    let caps = Capabilities {
        max_request: f[0],
        max_response: f[1],
        flags: CapabilityFlags::from_bits_retain(f[2]),
        large: None,
    };
    Ok(match message {
        0 => ControlMessage::TimeoutRequest,
        1 => ControlMessage::TimeoutResponse { timeout_ms: f[0] },
        2 => ControlMessage::StreamEndC2P,
        3 => ControlMessage::StreamEndP2C,
        4 => ControlMessage::CapabilitiesRequest { advertised: None },
        5 => ControlMessage::CapabilitiesRequest {
            advertised: Some(caps),
        },
        6 => ControlMessage::CapabilitiesResponse(caps),
        7 => ControlMessage::Error(ErrorCode::from_byte(f[0] as u8)),
        8 => {
            let step =
                KeyExchangeStep::parse(payload).map_err(|_| Fail("KeyExchangeStep::parse"))?;
            ensure(u16::from(step.step()) == f[0], "key exchange step")?;
            let mut out = [0u8; 160];
            let n = step
                .emit(&mut out)
                .map_err(|_| Fail("KeyExchangeStep::emit"))?;
            ensure(out.get(..n) == Some(payload), "step parse→emit")?;
            ControlMessage::KeyExchange(payload)
        }
        _ => ControlMessage::Unknown { cmd, payload },
    })
}

fn control(r: &mut Reader<'_>) -> Result<(), Fail> {
    let dir = r.u8()?;
    let emit = r.u8()? == 1;
    let outcome = r.u8()?;
    let message = r.u8()?;
    let fields = [r.u16()?, r.u16()?, r.u16()?];
    let cmd_field = r.u8()?;
    let bytes = r.bytes()?;
    let c = Container::parse(bytes).map_err(|_| Fail("Container::parse"))?;
    let dirs: &[Direction] = match dir {
        0 => &[Direction::CentralToPeripheral],
        1 => &[Direction::PeripheralToCentral],
        _ => &[
            Direction::CentralToPeripheral,
            Direction::PeripheralToCentral,
        ],
    };
    if outcome != 0 {
        // Ignored by both roles: the codec's sentinel, then no reply and no event but a warning.
        match (outcome, c.kind) {
            (1, ContainerKind::Unknown) => {}
            (2 | 3, ContainerKind::Control(cmd)) => {
                for &d in dirs {
                    match (outcome, ControlMessage::parse(cmd, c.payload, d)) {
                        (2, Ok(ControlMessage::Unknown { cmd, payload })) => {
                            ensure(cmd == cmd_field && payload == c.payload, "unknown control")?
                        }
                        (3, Err(_)) => {}
                        _ => return Err(Fail("an ignored control parsed as something else")),
                    }
                }
            }
            _ => return Err(Fail("the container kind differs")),
        }
        for &d in dirs {
            match d {
                Direction::PeripheralToCentral => central_ignores(bytes)?,
                Direction::CentralToPeripheral => peripheral_ignores(bytes)?,
            }
        }
        return Ok(());
    }
    let ContainerKind::Control(cmd) = c.kind else {
        return Err(Fail("not a CONTROL container"));
    };
    let want = expected_control(message, fields, cmd_field, c.payload)?;
    for &d in dirs {
        let got =
            ControlMessage::parse(cmd, c.payload, d).map_err(|_| Fail("ControlMessage::parse"))?;
        ensure(got == want, "parsed control differs")?;
        ensure(
            ControlMessage::from_container(&c, d) == Some(Ok(want)),
            "ControlMessage::from_container",
        )?;
    }
    if emit {
        let mut out = [0u8; 160];
        let n = want
            .emit_container(c.tid, &mut out)
            .map_err(|_| Fail("emit_container"))?;
        ensure(out.get(..n) == Some(bytes), "emitted control differs")?;
    }
    Ok(())
}

type SmallCentral = Central<RustCrypto, ChaCha20Rng, ArrayBuf<512>, ArrayBuf<512>, 2>;
type SmallPeripheral = Peripheral<RustCrypto, ChaCha20Rng, ArrayBuf<512>, ArrayBuf<512>, 2>;

/// A fresh central (its TIMEOUT request sent) fed `pdu`: no reply, only warnings, and setup
/// continues at the real TIMEOUT reply.
fn central_ignores(pdu: &[u8]) -> Result<(), Fail> {
    let config = CentralConfig {
        require_encryption: false,
        max_calls_in_flight: 2,
        max_outbox_bytes: 512,
        max_response_len: 512,
        ..CentralConfig::default()
    };
    let mut c = SmallCentral::new(
        config,
        RustCrypto,
        ChaCha20Rng::seed_from_u64(0),
        Instant::ZERO,
    )
    .map_err(|_| Fail("Central::new"))?;
    let mut out = [0u8; 244];
    let n = c
        .poll_transmit(Instant::ZERO, &mut out)
        .ok_or(Fail("no TIMEOUT request"))?;
    ensure(
        out.get(..n) == Some(&[0x00, 0x00, 0xc4, 0x00][..]),
        "setup start",
    )?;
    c.handle_input(Instant::ZERO, pdu)
        .map_err(|_| Fail("handle_input"))?;
    ensure(
        c.poll_transmit(Instant::ZERO, &mut out).is_none(),
        "the central replied",
    )?;
    while let Some(e) = c.poll_event() {
        ensure(
            matches!(e, CentralEvent::Warning(_)),
            "the central reported an event",
        )?;
    }
    c.handle_input(Instant::ZERO, &[0x00, 0x00, 0xc4, 0x02, 0x64, 0x00])
        .map_err(|_| Fail("handle_input"))?;
    let n = c
        .poll_transmit(Instant::ZERO, &mut out)
        .ok_or(Fail("setup stalled"))?;
    ensure(
        out.get(..n) == Some(&[0x01, 0x00, 0xd0, 0x06, 0, 0, 0, 0, 0, 0][..]),
        "CAPABILITIES request after the ignored control",
    )
}

/// A fresh peripheral fed `pdu`: no reply, only warnings.
fn peripheral_ignores(pdu: &[u8]) -> Result<(), Fail> {
    let config = PeripheralConfig {
        require_encryption: false,
        max_request_len: 512,
        max_reassembly_bytes: 512,
        max_outbox_bytes: 512,
        ..PeripheralConfig::default()
    };
    let mut p = SmallPeripheral::new(config, RustCrypto, None, ChaCha20Rng::seed_from_u64(0))
        .map_err(|_| Fail("Peripheral::new"))?;
    p.handle_input(Instant::ZERO, pdu)
        .map_err(|_| Fail("handle_input"))?;
    let mut out = [0u8; 244];
    ensure(
        p.poll_transmit(Instant::ZERO, &mut out).is_none(),
        "the peripheral replied",
    )?;
    while let Some(e) = p.poll_event() {
        ensure(
            matches!(e, PeripheralEvent::Warning(_)),
            "the peripheral reported an event",
        )?;
    }
    Ok(())
}

// ----- commands.json -----------------------------------------------------------------------------

fn command(r: &mut Reader<'_>, s: &mut Scratch) -> Result<(), Fail> {
    let kind = if r.u8()? == 0 {
        CommandType::Request
    } else {
        CommandType::Response
    };
    let name = r.str()?;
    let data = r.bytes()?;
    let packet = r.bytes()?;
    let parsed = Command::parse(packet).map_err(|_| Fail("Command::parse"))?;
    ensure(
        parsed.kind == kind && parsed.name == name,
        "parsed kind or name",
    )?;
    ensure(parsed.data == data, "parsed data")?;
    let cmd = Command { kind, name, data };
    ensure(cmd.emitted_len() == packet.len(), "emitted_len")?;
    let out = s
        .frame
        .get_mut(..packet.len())
        .ok_or(Fail("packet over 64 KiB"))?;
    cmd.emit(out).map_err(|_| Fail("Command::emit"))?;
    ensure(&*out == packet, "emitted command differs")
}

// ----- session.json ------------------------------------------------------------------------------

fn session(
    key: [u8; SESSION_KEY_LEN],
    role: Role,
) -> Result<Session<<RustCrypto as CryptoProvider>::Aead>, Fail> {
    let aead = RustCrypto
        .aead(&SessionKey::from_bytes(key))
        .map_err(|_| Fail("aead"))?;
    Ok(Session::new(aead, role))
}

/// Seals `plaintext` with `s` into `frame`; returns the frame length.
fn seal<A: blerpc_proto::crypto::Aead>(
    s: &mut Session<A>,
    plaintext: &[u8],
    frame: &mut [u8],
) -> Result<usize, SessionError> {
    let len = plaintext.len() + SESSION_OVERHEAD;
    let Some(buf) = frame.get_mut(..len) else {
        return Err(SessionError::TooShort { len });
    };
    if let Some(body) = buf.get_mut(4..4 + plaintext.len()) {
        body.copy_from_slice(plaintext);
    }
    s.seal_in_place(buf)?;
    Ok(len)
}

fn encrypt(r: &mut Reader<'_>, s: &mut Scratch) -> Result<(), Fail> {
    let key = r.array()?;
    let role = role(r.u8()?);
    let dir = direction(r.u8()?);
    let counter = r.u32()?;
    let nonce: [u8; 12] = r.array()?;
    let plaintext = r.bytes()?;
    let frame = r.bytes()?;
    ensure(dir == role.tx_direction(), "direction")?;
    ensure(data_nonce(counter, dir) == nonce, "nonce")?;
    let mut tx = session(key, role)?;
    if counter <= 1 {
        for _ in 0..counter {
            seal(&mut tx, plaintext, &mut s.frame).map_err(|_| Fail("seal"))?;
        }
    } else {
        blerpc_proto::fuzzing::set_tx_counter(&mut tx, counter);
    }
    let n = seal(&mut tx, plaintext, &mut s.frame).map_err(|_| Fail("seal"))?;
    ensure(
        s.frame.get(..n) == Some(frame),
        "sealed frame differs from the reference's",
    )?;
    ensure(tx.tx_counter() == counter + 1, "tx counter after")?;
    let other = if role == Role::Central {
        Role::Peripheral
    } else {
        Role::Central
    };
    let mut rx = session(key, other)?;
    let buf = s
        .frame
        .get_mut(..frame.len())
        .ok_or(Fail("frame over 64 KiB"))?;
    buf.copy_from_slice(frame);
    let range = rx.open_in_place(buf).map_err(|_| Fail("open"))?;
    ensure(
        buf.get(range) == Some(plaintext),
        "opened plaintext differs",
    )?;
    ensure(rx.last_rx_counter() == Some(counter), "last rx counter")
}

fn nonce(r: &mut Reader<'_>) -> Result<(), Fail> {
    let dir = direction(r.u8()?);
    let counter = r.u32()?;
    let nonce: [u8; 12] = r.array()?;
    ensure(data_nonce(counter, dir) == nonce, "nonce")
}

fn exhaust(r: &mut Reader<'_>, s: &mut Scratch) -> Result<(), Fail> {
    let key = r.array()?;
    let role = role(r.u8()?);
    let start = r.u32()?;
    let plaintext = r.bytes()?;
    let last = r.bytes()?;
    let mut tx = session(key, role)?;
    blerpc_proto::fuzzing::set_tx_counter(&mut tx, start);
    let n = seal(&mut tx, plaintext, &mut s.frame).map_err(|_| Fail("last seal"))?;
    ensure(s.frame.get(..n) == Some(last), "last frame differs")?;
    for _ in 0..2 {
        ensure(
            matches!(
                seal(&mut tx, plaintext, &mut s.frame),
                Err(SessionError::CounterExhausted)
            ),
            "sealed at counter 0xFFFFFFFF",
        )?;
        ensure(tx.tx_counter() == u32::MAX, "tx counter moved")?;
    }
    Ok(())
}

fn decrypt(r: &mut Reader<'_>, s: &mut Scratch) -> Result<(), Fail> {
    let key = r.array()?;
    let role = role(r.u8()?);
    let mut rx = session(key, role)?;
    for _ in 0..r.u16()? {
        let frame = r.bytes()?;
        let buf = s
            .frame
            .get_mut(..frame.len())
            .ok_or(Fail("frame over 64 KiB"))?;
        buf.copy_from_slice(frame);
        let before = rx.last_rx_counter();
        let result = rx.open_in_place(buf);
        match (r.u8()?, result) {
            (0, Ok(range)) => {
                let want = r.bytes()?;
                ensure(buf.get(range) == Some(want), "opened plaintext differs")?;
                let counter = frame
                    .get(..4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
                ensure(rx.last_rx_counter() == counter, "last rx counter")?;
            }
            (1, Err(SessionError::Replay { .. }))
            | (2, Err(SessionError::AuthenticationFailed))
            | (3, Err(SessionError::TooShort { .. })) => {
                ensure(
                    rx.last_rx_counter() == before,
                    "a refused frame moved the state",
                )?;
            }
            _ => return Err(Fail("a step's outcome differs from the reference's")),
        }
    }
    Ok(())
}

// ----- key_exchange.json -------------------------------------------------------------------------

fn exchange(r: &mut Reader<'_>) -> Result<(), Fail> {
    let p = RustCrypto;
    let central_priv: [u8; 32] = r.array()?;
    let periph_priv: [u8; 32] = r.array()?;
    let seed: [u8; 32] = r.array()?;
    let nonce_c: [u8; 12] = r.array()?;
    let nonce_p: [u8; 12] = r.array()?;
    let c_pub: [u8; 32] = r.array()?;
    let p_pub: [u8; 32] = r.array()?;
    let id_pub: [u8; 32] = r.array()?;
    let shared: [u8; 32] = r.array()?;
    let key: [u8; 16] = r.array()?;
    let swapped_key: [u8; 16] = r.array()?;
    let signature: [u8; 64] = r.array()?;
    let mut steps: [(&[u8], &[u8]); 4] = [(&[], &[]); 4];
    for step in steps.iter_mut() {
        let tid = r.u8()?;
        let payload = r.bytes()?;
        let container = r.bytes()?;
        // The step as a KEY_EXCHANGE control, both ways.
        let mut out = [0u8; 160];
        let n = ControlMessage::KeyExchange(payload)
            .emit_container(tid, &mut out)
            .map_err(|_| Fail("emit_container"))?;
        ensure(out.get(..n) == Some(container), "step container differs")?;
        let c = Container::parse(container).map_err(|_| Fail("Container::parse"))?;
        ensure(
            c.payload == payload && c.tid == tid,
            "parsed step container",
        )?;
        *step = (payload, container);
    }

    // The primitives.
    let c_secret = X25519Secret::from_bytes(central_priv);
    let p_secret = X25519Secret::from_bytes(periph_priv);
    ensure(
        p.x25519_public(&c_secret) == c_pub,
        "central X25519 public key",
    )?;
    ensure(
        p.x25519_public(&p_secret) == p_pub,
        "peripheral X25519 public key",
    )?;
    let ss = p
        .x25519_agree(&c_secret, &p_pub)
        .map_err(|_| Fail("x25519_agree"))?;
    ensure(ss.as_bytes() == &shared, "shared secret (central)")?;
    let ss_p = p
        .x25519_agree(&p_secret, &c_pub)
        .map_err(|_| Fail("x25519_agree"))?;
    ensure(ss_p.as_bytes() == &shared, "shared secret (peripheral)")?;
    let k = p
        .derive_session_key(&ss, &c_pub, &p_pub)
        .map_err(|_| Fail("hkdf"))?;
    ensure(k.as_bytes() == &key, "session key")?;
    let k = p
        .derive_session_key(&ss, &p_pub, &c_pub)
        .map_err(|_| Fail("hkdf"))?;
    ensure(
        k.as_bytes() == &swapped_key,
        "session key with the salt swapped",
    )?;
    let identity = p
        .load_identity(&IdentitySeed::from_bytes(seed))
        .map_err(|_| Fail("load_identity"))?;
    ensure(
        p.identity_public(&identity) == id_pub,
        "identity public key",
    )?;
    let msg = Step2::signed_message(&c_pub, &p_pub);
    ensure(p.ed25519_sign(&identity, &msg) == signature, "signature")?;
    ensure(
        p.ed25519_verify(&id_pub, &msg, &signature).is_ok(),
        "verify",
    )?;

    // The typestates, each fed the reference's bytes, each emitting the reference's bytes.
    let (c, s1) = CentralHandshake::start(p, X25519Secret::from_bytes(central_priv));
    ensure(s1.as_slice() == steps[0].0, "our step 1")?;
    let per = PeripheralHandshake::new(p, identity);
    let (per, s2) = per
        .receive_step1(steps[0].0, X25519Secret::from_bytes(periph_priv))
        .map_err(|_| Fail("receive_step1"))?;
    ensure(s2.as_slice() == steps[1].0, "our step 2")?;
    let c = c
        .receive_step2(steps[1].0)
        .map_err(|_| Fail("receive_step2"))?;
    ensure(*c.identity() == id_pub, "identity presented")?;
    let (c, s3) = c.accept(nonce_c).map_err(|_| Fail("accept"))?;
    ensure(s3.as_slice() == steps[2].0, "our step 3")?;
    let (mut per_session, s4) = per
        .receive_step3(steps[2].0, nonce_p)
        .map_err(|_| Fail("receive_step3"))?;
    ensure(s4.as_slice() == steps[3].0, "our step 4")?;
    let mut c_session = c
        .receive_step4(steps[3].0)
        .map_err(|_| Fail("receive_step4"))?;

    // Both sessions seal as sessions built from the reference's key.
    let hello = b"\x00\x04echo\x07\x00\x0a\x05hello";
    let (mut a, mut b) = ([0u8; 64], [0u8; 64]);
    for (ours, role) in [
        (&mut c_session, Role::Central),
        (&mut per_session, Role::Peripheral),
    ] {
        let n = seal(ours, hello, &mut a).map_err(|_| Fail("seal"))?;
        let m = seal(&mut session(key, role)?, hello, &mut b).map_err(|_| Fail("seal"))?;
        ensure(
            a.get(..n) == b.get(..m),
            "session frame differs from the reference key's",
        )?;
    }
    Ok(())
}

// ----- assembly.json -----------------------------------------------------------------------------

fn assembly(r: &mut Reader<'_>) -> Result<(), Fail> {
    let mut asm: Assembler<ArrayBuf<8192>, 4> = Assembler::new(AssemblerConfig {
        max_message_len: 8192,
        ..AssemblerConfig::default()
    });
    for _ in 0..r.u16()? {
        let bytes = r.bytes()?;
        let c = Container::parse(bytes).map_err(|_| Fail("Container::parse"))?;
        let result = asm.feed(&c);
        match (r.u8()?, result) {
            (0, Ok(Some(done))) => {
                let want = r.bytes()?;
                ensure(asm.message(done) == want, "assembled payload differs")?;
                asm.release(done);
            }
            (1, Ok(None)) => ensure(
                matches!(
                    c.kind,
                    ContainerKind::First { .. } | ContainerKind::Subsequent
                ),
                "pending on a non-data container",
            )?,
            (2, Err(AssembleError::SequenceGap { .. })) => ensure(
                !asm.is_receiving(c.tid),
                "tid still in progress after a gap",
            )?,
            (3, Err(AssembleError::UnknownTransaction { .. })) => {}
            (4, Ok(None)) => ensure(matches!(c.kind, ContainerKind::Control(_)), "control")?,
            (5, Ok(None)) => ensure(c.kind == ContainerKind::Unknown, "unknown type")?,
            _ => return Err(Fail("a feed result differs from the expected one")),
        }
    }
    Ok(())
}
