//! The checks that drive our connection state machines: a [`Central`] and a [`Peripheral`]
//! dropping the controls the vectors say to ignore, and both replaying the recorded
//! `key_exchange.json` transcripts byte for byte, with the fixed keys and nonces served by a
//! [`Script`].

use core::cell::Cell;
use core::ops::Range;

use blerpc_proto::Instant;
use blerpc_proto::buf::Buffer;
use blerpc_proto::connection::{
    CallId, CallKind, Central, CentralConfig, CentralEvent, Peripheral, PeripheralConfig,
    PeripheralEvent, Pinning,
};
use blerpc_proto::crypto::{CryptoProvider, IdentitySeed};
use blerpc_proto::wire::command::Command;
use blerpc_proto::wire::container::Container;
use blerpc_proto::{Direction, Role};
use rand_core::{CryptoRng, RngCore};

use crate::control::direction;
use crate::fail::{At, Fail, ensure, same_bytes, same_int};
use crate::session::session;
use crate::{Buffers, Check, Node, Scratch, sized};

/// The largest PDU the checks drive through a connection (ATT MTU 515).
const MAX_PDU: usize = 512;

/// The central and peripheral the checks drive (four reassembly slots, as on a host).
type TestCentral<'s, P, B> =
    Central<P, ScriptedRng<'s>, <B as Buffers>::Connection, <B as Buffers>::Connection, 4>;
type TestPeripheral<'s, P, B> =
    Peripheral<P, ScriptedRng<'s>, <B as Buffers>::Connection, <B as Buffers>::Connection, 4>;

/// The planned "random" bytes of one check (the vectors' fixed ephemeral keys and nonces),
/// served in order by [`Script`]. Afterwards, [`Script::all_drawn`] says whether exactly
/// the plan was drawn: a draw beyond it gets zeros and fails the check.
#[derive(Debug)]
pub(crate) struct Script {
    bytes: [u8; 64],
    len: usize,
    drawn: Cell<usize>,
    overdrawn: Cell<bool>,
}

impl Script {
    /// Plans `parts`, concatenated (at most 64 bytes).
    pub(crate) fn new(parts: &[&[u8]]) -> Result<Self, Fail> {
        let mut bytes = [0; 64];
        let mut len = 0;
        for part in parts {
            let end = len + part.len();
            bytes
                .get_mut(len..end)
                .ok_or(Fail::new("more than 64 planned random bytes"))?
                .copy_from_slice(part);
            len = end;
        }
        Ok(Script {
            bytes,
            len,
            drawn: Cell::new(0),
            overdrawn: Cell::new(false),
        })
    }

    /// An RNG serving this plan.
    pub(crate) fn rng(&self) -> ScriptedRng<'_> {
        ScriptedRng(self)
    }

    /// `Ok` if the plan was drawn exactly: nothing left, nothing more asked for.
    pub(crate) fn all_drawn(&self) -> Result<(), Fail> {
        ensure(!self.overdrawn.get(), "unplanned randomness drawn")?;
        same_int("planned random bytes drawn", self.drawn.get(), self.len)
    }
}

/// The RNG of a [`Script`].
#[derive(Debug)]
pub(crate) struct ScriptedRng<'s>(&'s Script);

impl RngCore for ScriptedRng<'_> {
    fn next_u32(&mut self) -> u32 {
        rand_core::impls::next_u32_via_fill(self)
    }
    fn next_u64(&mut self) -> u64 {
        rand_core::impls::next_u64_via_fill(self)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        let script = self.0;
        let (from, end) = (script.drawn.get(), script.drawn.get() + dest.len());
        match script.bytes.get(from..end).filter(|_| end <= script.len) {
            Some(planned) => {
                dest.copy_from_slice(planned);
                script.drawn.set(end);
            }
            None => {
                dest.fill(0);
                script.overdrawn.set(true);
            }
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoRng for ScriptedRng<'_> {}

/// The TIMEOUT request a fresh central sends first.
const TIMEOUT_REQUEST: &[u8] = &[0x00, 0x00, 0xc4, 0x00];
/// The peripheral's TIMEOUT reply (100 ms).
const TIMEOUT_REPLY: &[u8] = &[0x00, 0x00, 0xc4, 0x02, 0x64, 0x00];
/// The CAPABILITIES request that follows it (tid 1).
const CAPABILITIES_REQUEST: &[u8] = &[0x01, 0x00, 0xd0, 0x06, 0, 0, 0, 0, 0, 0];

/// The central sends exactly `want`, in order.
fn central_sends<P: CryptoProvider, B: Buffers>(
    c: &mut TestCentral<'_, P, B>,
    want: &[&[u8]],
) -> Result<(), Fail> {
    let mut out = [0u8; MAX_PDU];
    let mut sent = 0;
    while let Some(n) = c.poll_transmit(Instant::ZERO, &mut out) {
        let expected = want.get(sent).ok_or(Fail::new("the central sent more"))?;
        same_bytes("the central's PDU", out.get(..n).unwrap_or(&[]), expected).at(sent)?;
        sent += 1;
    }
    same_int("PDUs the central sent", sent, want.len())
}

/// A fresh central (its TIMEOUT request on tid 0 sent, awaiting the reply) is fed `pdu`: it
/// neither transmits nor reports anything but a warning, and still accepts the real reply.
pub(crate) fn central_ignores<P: CryptoProvider, B: Buffers>(provider: &P, pdu: &[u8]) -> Check {
    let config = CentralConfig {
        require_encryption: false,
        ..CentralConfig::default()
    };
    let script = Script::new(&[])?;
    let mut c: TestCentral<'_, P, B> =
        Central::new(config, provider.clone(), script.rng(), Instant::ZERO)
            .map_err(|_| Fail::new("Central::new"))?;
    central_sends::<P, B>(&mut c, &[TIMEOUT_REQUEST])?;
    c.handle_input(Instant::ZERO, pdu)
        .map_err(|_| Fail::new("the central's event queue is full"))?;
    central_sends::<P, B>(&mut c, &[]).map_err(|_| Fail::new("the central replied"))?;
    while let Some(e) = c.poll_event() {
        ensure(
            matches!(e, CentralEvent::Warning(_)),
            "the central reported an event",
        )?;
    }
    // Setup continues normally: the TIMEOUT reply triggers the CAPABILITIES request.
    c.handle_input(Instant::ZERO, TIMEOUT_REPLY)
        .map_err(|_| Fail::new("the central's event queue is full"))?;
    central_sends::<P, B>(&mut c, &[CAPABILITIES_REQUEST])?;
    same_int("peer timeout", c.peer_timeout_ms(), 100)?;
    Ok(script.all_drawn()?)
}

/// A fresh peripheral is fed `pdu`: no reply, only warnings.
pub(crate) fn peripheral_ignores<P: CryptoProvider, B: Buffers>(provider: &P, pdu: &[u8]) -> Check {
    let config = PeripheralConfig {
        require_encryption: false,
        ..PeripheralConfig::default()
    };
    let script = Script::new(&[])?;
    let mut p: TestPeripheral<'_, P, B> =
        Peripheral::new(config, provider.clone(), None, script.rng())
            .map_err(|_| Fail::new("Peripheral::new"))?;
    p.handle_input(Instant::ZERO, pdu)
        .map_err(|_| Fail::new("the peripheral's event queue is full"))?;
    let mut out = [0u8; MAX_PDU];
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
    Ok(script.all_drawn()?)
}

/// The fixed keys, nonces and identity of the transcripts (the `exchange` case's inputs).
pub(crate) struct Fixture {
    pub central_priv: [u8; 32],
    pub periph_priv: [u8; 32],
    pub seed: [u8; 32],
    pub nonce_c: [u8; 12],
    pub nonce_p: [u8; 12],
    pub identity_pub: [u8; 32],
}

impl Fixture {
    /// From the `exchange` case of `key_exchange.json` (`doc`).
    pub(crate) fn of(doc: Node<'_>) -> Result<Self, Fail> {
        let ex = doc
            .list("cases")?
            .find(|c| c.str("kind") == Ok("exchange"))
            .ok_or(Fail::new("no exchange case"))?;
        let i = ex.field("inputs")?;
        Ok(Fixture {
            central_priv: i.array("central_x25519_private")?,
            periph_priv: i.array("peripheral_x25519_private")?,
            seed: i.array("peripheral_ed25519_seed")?,
            nonce_c: i.array("central_confirm_nonce")?,
            nonce_p: i.array("peripheral_confirm_nonce")?,
            identity_pub: ex.field("values")?.array("peripheral_ed25519_public")?,
        })
    }
}

/// One recorded frame: its direction and bytes (its `tid` checked against the bytes).
fn frame(f: Node<'_>) -> Result<(Direction, &[u8]), Fail> {
    let bytes = f.bytes("container_hex")?;
    ensure(bytes.first() == Some(&f.u8("tid")?), "frame tid")?;
    Ok((direction(f.str("dir")?)?, bytes))
}

/// The command carried by the encrypted data frames of `dir`, reassembled and decrypted with
/// the transcript's session key into `out`: the plaintext's range, or `None` without data
/// frames. The calls we make are exactly the recorded ones.
fn recorded_command<P: CryptoProvider, B: Buffers>(
    provider: &P,
    case: Node<'_>,
    dir: Direction,
    out: &mut B::Message,
    assembler: &mut blerpc_proto::assemble::Assembler<B::Message, 4>,
) -> Result<Option<Range<usize>>, crate::Stop> {
    assembler.reset();
    assembler.set_config(blerpc_proto::assemble::AssemblerConfig::default());
    let mut done = None;
    for (i, f) in case.list("frames")?.enumerate() {
        let (d, bytes) = frame(f).at(i)?;
        // Data frames only: CONTROL is flags 0b11xx_xxxx.
        if d != dir || bytes.get(2).is_none_or(|flags| flags >> 6 == 0b11) {
            continue;
        }
        let c = Container::parse(bytes)
            .map_err(|_| Fail::new("Container::parse"))
            .at(i)?;
        ensure(done.is_none(), "a data frame after the message completed").at(i)?;
        done = assembler
            .feed(&c)
            .map_err(|_| Fail::new("the recorded data frames do not reassemble"))
            .at(i)?;
    }
    let Some(done) = done else {
        return Ok(None);
    };
    let frame = sized(out, assembler.message(done).len())?;
    frame.copy_from_slice(assembler.message(done));
    assembler.release(done);
    let receiver = match dir {
        Direction::CentralToPeripheral => Role::Peripheral,
        Direction::PeripheralToCentral => Role::Central,
    };
    let mut session = session(provider, &case.array("session_key")?, receiver)?;
    let range = session
        .open_in_place(frame)
        .map_err(|_| Fail::new("decrypting the recorded frame"))?;
    Command::parse(frame.get(range.clone()).unwrap_or(&[]))
        .map_err(|_| Fail::new("the recorded plaintext is not a command"))?;
    Ok(Some(range))
}

/// The commands of a transcript's encrypted data frames: the request (c2p) in the scratch's
/// `message`, the response (p2c) in its `frame`.
fn recorded<'s, P: CryptoProvider, B: Buffers>(
    provider: &P,
    s: &'s mut Scratch<B>,
    case: Node<'_>,
) -> Result<(Option<Command<'s>>, Option<Command<'s>>), crate::Stop> {
    let c2p = Direction::CentralToPeripheral;
    let request = recorded_command::<P, B>(provider, case, c2p, &mut s.message, &mut s.assembler)?;
    let p2c = Direction::PeripheralToCentral;
    let response = recorded_command::<P, B>(provider, case, p2c, &mut s.frame, &mut s.assembler)?;
    let parse = |buf: &'s [u8], range: Option<Range<usize>>| Command::parse(buf.get(range?)?).ok();
    Ok((
        parse(s.message.as_slice(), request),
        parse(s.frame.as_slice(), response),
    ))
}

/// A PDU buffer for `mtu`.
fn pdu(buf: &mut [u8; MAX_PDU], mtu: usize) -> Result<&mut [u8], Fail> {
    buf.get_mut(..mtu.saturating_sub(3))
        .ok_or(Fail::field("an MTU over 515", "mtu"))
}

/// Our [`Central`], drawing the fixed ephemeral key and nonce, must send exactly the recorded
/// c2p frames when fed the recorded p2c frames, and report the connection and the response.
pub(crate) fn transcript_central<P: CryptoProvider, B: Buffers>(
    provider: &P,
    s: &mut Scratch<B>,
    case: Node<'_>,
    fx: &Fixture,
) -> Check {
    let mtu = case.usize("mtu")?;
    let (request, response) = recorded(provider, s, case)?;
    // The central draws X25519Secret::random (32 bytes) at CAPABILITIES, then the step 3 nonce.
    let script = Script::new(&[&fx.central_priv, &fx.nonce_c])?;
    let config = CentralConfig {
        att_mtu: mtu,
        pinning: Pinning::Expect(fx.identity_pub),
        ..CentralConfig::default()
    };
    let now = Instant::ZERO;
    let mut c: TestCentral<'_, P, B> = Central::new(config, provider.clone(), script.rng(), now)
        .map_err(|_| Fail::new("Central::new"))?;
    let mut buf = [0u8; MAX_PDU];
    let out = pdu(&mut buf, mtu)?;
    // Expected events: Connected { encrypted: true }, then the response to our call.
    let mut events = 0;
    let mut call: Option<CallId> = None;
    for (i, f) in case.list("frames")?.enumerate() {
        let (dir, bytes) = frame(f).at(i)?;
        match dir {
            Direction::CentralToPeripheral => {
                let mut n = c.poll_transmit(now, out);
                if n.is_none() && call.is_none() && c.is_ready() {
                    let cmd = request
                        .ok_or(Fail::new("a data frame but no request"))
                        .at(i)?;
                    let id = c
                        .start_call(now, cmd.name, cmd.data, CallKind::Unary)
                        .map_err(|_| Fail::new("start_call"))
                        .at(i)?;
                    call = Some(id);
                    n = c.poll_transmit(now, out);
                }
                let n = n.ok_or(Fail::new("the central sent nothing")).at(i)?;
                same_bytes("the central's frame", out.get(..n).unwrap_or(&[]), bytes).at(i)?;
            }
            Direction::PeripheralToCentral => {
                c.handle_input(now, bytes)
                    .map_err(|_| Fail::new("the central's event queue is full"))
                    .at(i)?;
                while let Some(e) = c.poll_event() {
                    match (events, e) {
                        (0, CentralEvent::Connected { encrypted: true }) => {}
                        (1, CentralEvent::Response { call: id, data }) => {
                            ensure(Some(id) == call, "a response to another call").at(i)?;
                            let want = response.ok_or(Fail::new("a response but none recorded"));
                            same_bytes("the response", data, want.at(i)?.data).at(i)?;
                        }
                        _ => return Err(Fail::new("an unexpected central event").at(i).into()),
                    }
                    events += 1;
                }
            }
        }
    }
    ensure(
        c.poll_transmit(now, out).is_none(),
        "the central sends more than recorded",
    )?;
    ensure(c.is_encrypted(), "the central is not encrypted")?;
    let want = 1 + usize::from(call.is_some() && response.is_some());
    same_int("central events", events, want)?;
    Ok(script.all_drawn()?)
}

/// Our [`Peripheral`] must answer the recorded c2p frames with exactly the recorded p2c frames,
/// reporting `Secured` first and the recorded request.
pub(crate) fn transcript_peripheral<P: CryptoProvider, B: Buffers>(
    provider: &P,
    s: &mut Scratch<B>,
    case: Node<'_>,
    fx: &Fixture,
) -> Check {
    let mtu = case.usize("mtu")?;
    let (request, response) = recorded(provider, s, case)?;
    let identity = provider
        .load_identity(&IdentitySeed::from_bytes(fx.seed))
        .map_err(|_| Fail::new("load_identity"))?;
    // The peripheral draws X25519Secret::random at step 1, then the step 4 nonce.
    let script = Script::new(&[&fx.periph_priv, &fx.nonce_p])?;
    let config = PeripheralConfig {
        att_mtu: mtu,
        ..PeripheralConfig::default()
    };
    let now = Instant::ZERO;
    let mut per: TestPeripheral<'_, P, B> =
        Peripheral::new(config, provider.clone(), Some(identity), script.rng())
            .map_err(|_| Fail::new("Peripheral::new"))?;
    let mut buf = [0u8; MAX_PDU];
    let out = pdu(&mut buf, mtu)?;
    let mut first_secured = None;
    for (i, f) in case.list("frames")?.enumerate() {
        let (dir, bytes) = frame(f).at(i)?;
        match dir {
            Direction::CentralToPeripheral => {
                per.handle_input(now, bytes)
                    .map_err(|_| Fail::new("the peripheral's event queue is full"))
                    .at(i)?;
                let mut requests = [0u8; 4];
                let mut pending = 0;
                while let Some(e) = per.poll_event() {
                    first_secured.get_or_insert(matches!(e, PeripheralEvent::Secured));
                    if let PeripheralEvent::Request {
                        tid, name, data, ..
                    } = e
                    {
                        let want = request.ok_or(Fail::new("a request but none recorded"));
                        let want = want.at(i)?;
                        ensure(
                            name == want.name && data == want.data,
                            "the request differs",
                        )
                        .at(i)?;
                        let slot = requests.get_mut(pending);
                        *slot.ok_or(Fail::new("more than 4 requests")).at(i)? = tid;
                        pending += 1;
                    }
                }
                for &tid in requests.get(..pending).unwrap_or(&[]) {
                    let resp = response.ok_or(Fail::new("a request but no recorded response"));
                    let resp = resp.at(i)?;
                    ensure(
                        request.is_some_and(|r| r.name == resp.name),
                        "response name",
                    )
                    .at(i)?;
                    per.respond(now, tid, resp.name, resp.data)
                        .map_err(|_| Fail::new("respond"))
                        .at(i)?;
                }
            }
            Direction::PeripheralToCentral => {
                let n = per
                    .poll_transmit(now, out)
                    .ok_or(Fail::new("the peripheral sent nothing"))
                    .at(i)?;
                same_bytes("the peripheral's frame", out.get(..n).unwrap_or(&[]), bytes).at(i)?;
            }
        }
    }
    ensure(
        per.poll_transmit(now, out).is_none(),
        "the peripheral sends more than recorded",
    )?;
    ensure(per.is_encrypted(), "the peripheral is not encrypted")?;
    ensure(
        first_secured == Some(true),
        "the first event is not Secured",
    )?;
    Ok(script.all_drawn()?)
}
