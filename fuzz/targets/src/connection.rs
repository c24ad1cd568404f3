//! Targets 10–12: whole connections on the two-peer harness of blerpc-sim
//! ([`blerpc_sim::harness::Pair`]) over a [`Scripted`] wire, driven by a program of [`Op`]s: the
//! fuzzer moves, drops, duplicates, reorders and corrupts PDUs, injects raw ones, and plays the
//! user and the application. The harness asserts its invariants at every step (PDUs within the
//! MTU, no `EventQueueFull` while events are drained, deadlines that move on, one outcome per
//! call); `two_party` also checks that every echo (the harness's `loop` command) response equals its own request.
//!
//! Input: [`WorldConfig::LEN`] bytes of [`WorldConfig`], then [`Op`]s until the input ends.

use std::time::Duration;

use blerpc_proto::connection::{
    CallError, CallKind, CentralConfig, PeripheralConfig, Pinning, SetupPipelining,
};
use blerpc_proto::wire::command::{Command, CommandType};
use blerpc_proto::wire::container::Container;
use blerpc_proto::wire::error_code::ErrorCode;
use blerpc_sim::Dir;
use blerpc_sim::harness::{Answer, AppConfig, Pair, PairBuilder, Scripted, identity_public};

use crate::input::{Cursor, encode_chunk};

/// The setup of a connection target, decoded from the first [`WorldConfig::LEN`] input bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorldConfig {
    /// Bits 0–3: the ATT MTU from a table of 13 to 512; bits 4 and 5: the long-container
    /// extension configured on the central and the peripheral; bits 6 and 7: the setup order.
    pub mtu: u8,
    /// Bit 0: encryption required; bits 1–2: pinning; bit 3: no TIMEOUT request; bit 4: the
    /// empty CAPABILITIES request; bits 5–6: calls in flight − 1; bit 7: the application
    /// answers at once (else it holds requests for `Serve` ops).
    pub central: u8,
    /// Bit 0: encryption required; bit 1: an identity; bits 2–3: pending requests − 1; bits
    /// 4–5: the stream item cap; bit 6: a small outbox; bit 7: small requests only.
    pub peripheral: u8,
    /// Bits 0–1: BUSY retries; 2–3: the response limit; 4: a small central outbox; 5 and 6: the
    /// large-message extension on the central and the peripheral; 7: a mid-size response limit.
    pub limits: u8,
    /// The seed of both sides' RNGs.
    pub seed: u32,
}

impl WorldConfig {
    /// Bytes of a `WorldConfig` at the start of an input.
    pub const LEN: usize = 8;
    /// ATT MTUs the targets run at: from the connection minimum (13) to 512.
    const MTUS: [usize; 16] = [
        23, 23, 27, 13, 14, 50, 100, 135, 136, 185, 247, 247, 251, 263, 300, 512,
    ];

    /// Reads one from the input.
    pub fn decode(cur: &mut Cursor<'_>) -> Self {
        WorldConfig {
            mtu: cur.u8(),
            central: cur.u8(),
            peripheral: cur.u8(),
            limits: cur.u8(),
            seed: cur.u32(),
        }
    }
    /// Writes it as [`WorldConfig::decode`] reads it.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[self.mtu, self.central, self.peripheral, self.limits]);
        out.extend_from_slice(&self.seed.to_le_bytes());
    }
    /// An encrypted, auto-serving, TOFU (`Decide`) setup at MTU 247.
    pub const ENCRYPTED: WorldConfig = WorldConfig {
        mtu: 10,
        central: 0b1111_0001,
        peripheral: 0b0000_0011,
        limits: 0,
        seed: 1,
    };
    /// A plaintext setup (the peripheral offers no encryption) at MTU 23.
    pub const PLAINTEXT: WorldConfig = WorldConfig {
        mtu: 0,
        central: 0b1110_0010,
        peripheral: 0,
        limits: 0,
        seed: 2,
    };

    fn att_mtu(&self) -> usize {
        Self::MTUS[usize::from(self.mtu & 0x0F)]
    }
    /// The application answers at once (else it holds requests for `Serve` ops).
    fn auto_serve(&self) -> bool {
        self.central & 0x80 != 0
    }
    fn central_config(&self) -> CentralConfig {
        let c = self.central;
        let pinning = match (c >> 1) & 3 {
            0 => Pinning::Decide,
            1 => Pinning::Disabled,
            2 => Pinning::Expect(identity_public()),
            _ => Pinning::Expect([0x42; 32]),
        };
        CentralConfig {
            att_mtu: self.att_mtu(),
            require_encryption: c & 1 != 0,
            pinning,
            skip_timeout_request: c & 0x08 != 0,
            capabilities_payload: c & 0x10 == 0,
            max_calls_in_flight: usize::from((c >> 5) & 3) + 1,
            busy_retries: self.limits & 3,
            max_response_len: [65_535, 300, 64, 20][usize::from((self.limits >> 2) & 3)],
            // (65,535 also caps large responses; bit 5 turns the extension on.)
            max_outbox_bytes: if self.limits & 0x10 != 0 {
                600
            } else {
                128 * 1024
            },
            large_messages: self.limits & 0x20 != 0,
            // Bits 4 and 5 of the MTU byte: the long-container extension on each side.
            long_containers: self.mtu & 0x10 != 0,
            // Bits 6 and 7 of the MTU byte: how the setup requests are pipelined.
            setup_pipelining: match self.mtu >> 6 {
                0 => SetupPipelining::Off,
                1 => SetupPipelining::Requests,
                _ => SetupPipelining::KeyExchange,
            },
            // The seed's bit 0 (clear): the cancel extension announced (the RNG uses all of it).
            cancel: self.seed & 1 == 0,
            // The seed's bit 2 (clear): the deadline extension announced.
            deadline: self.seed & 4 == 0,
            // The seed's bit 4 (clear): the streams extension announced; bits 6 and 7 its
            // window.
            streams: self.seed & 16 == 0,
            stream_window: [32, 1, 2, 5][((self.seed >> 6) & 3) as usize],
            ..CentralConfig::default()
        }
    }
    fn peripheral_config(&self) -> (PeripheralConfig, bool) {
        let p = self.peripheral;
        let require = p & 1 != 0;
        let has_identity = require || p & 2 != 0;
        let config = PeripheralConfig {
            att_mtu: self.att_mtu(),
            require_encryption: require,
            max_pending_requests: usize::from((p >> 2) & 3) + 1,
            max_stream_items: [10_000, 1, 3, 10][usize::from((p >> 4) & 3)],
            max_outbox_bytes: if p & 0x40 != 0 { 700 } else { 128 * 1024 },
            max_request_len: if p & 0x80 != 0 { 100 } else { 12_288 },
            // Bit 7: a response limit between the classic and the stretched message sizes.
            max_response_len: if self.limits & 0x80 != 0 {
                5_000
            } else {
                64 * 1024
            },
            large_messages: self.limits & 0x40 != 0,
            long_containers: self.mtu & 0x20 != 0,
            // The seed's bit 1 (clear): the cancel extension agreed to.
            cancel: self.seed & 2 == 0,
            // The seed's bit 3 (clear): the deadline extension agreed to.
            deadline: self.seed & 8 == 0,
            // The seed's bit 5 (clear): the streams extension agreed to; bits 8 and 9 its
            // window.
            streams: self.seed & 32 == 0,
            stream_window: [8, 1, 3, 300][((self.seed >> 8) & 3) as usize],
            ..PeripheralConfig::default()
        };
        (config, has_identity)
    }
}

/// What a channel operation does with the PDU at the head of a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chan {
    /// Hand it over.
    Deliver,
    /// Lose it.
    Drop,
    /// Hand it over and keep a copy at the head.
    Duplicate,
    /// Move it to the back of the queue.
    Reorder,
    /// Flip one bit (position `pos` of the payload, past the container header, in `two_party`).
    Flip {
        /// Which byte (modulo the length).
        pos: u8,
        /// Which bit (modulo 8).
        bit: u8,
    },
    /// Cut it to this length (modulo its length).
    Truncate(u8),
}

/// One step of a connection target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Advance the clock by this many ms, then handle due timeouts.
    Advance(u16),
    /// Jump to the earliest deadline of either side and handle it.
    FireTimeout,
    /// Deliver everything in both directions until the link is quiet.
    Run,
    /// What happens to the PDU at the head of the central→peripheral queue.
    C2P(Chan),
    /// What happens to the PDU at the head of the peripheral→central queue.
    P2C(Chan),
    /// `kind % 3`: unary, server stream, client stream; `name` indexes [`NAMES`].
    StartCall {
        /// The call kind (`% 3`) and how it is started (`/ 3 % 4`: copied, framed, framed
        /// again, a malformed frame).
        kind: u8,
        /// The command name.
        name: u8,
        /// The request data (stretched to 10 KB when it starts above 0xF0).
        data: Vec<u8>,
    },
    /// An item of a central→peripheral stream.
    SendStreamItem {
        /// Which call (modulo the calls started).
        call: u8,
        /// The item.
        data: Vec<u8>,
    },
    /// STREAM_END_C2P.
    FinishStream {
        /// Which call.
        call: u8,
    },
    /// Forget a call.
    Cancel {
        /// Which call.
        call: u8,
    },
    /// Trust the identity presented.
    AcceptIdentity,
    /// Refuse the identity presented.
    RejectIdentity,
    /// Close the central.
    CloseCentral,
    /// The peripheral application handles its oldest unanswered request (see `World::serve`).
    Serve {
        /// `% 8`: 0–4 the demo service, 5 BUSY, 6 an error code, 7 silence; bit 4: take
        /// requests out of the assembler from now on.
        choice: u8,
        /// The error code of choice 6.
        arg: u8,
    },
    /// Close the peripheral.
    ClosePeripheral,
    /// A raw PDU straight into the central.
    InjectCentral(Vec<u8>),
    /// A raw PDU straight into the peripheral.
    InjectPeripheral(Vec<u8>),
    /// A peripheral user operation on an arbitrary transaction id.
    PeripheralRaw {
        /// `% 7`: respond, error, ack, stream item, end stream, upload response, respond in
        /// place; `>> 3`: the command name.
        what: u8,
        /// The transaction id.
        tid: u8,
        /// The data.
        data: Vec<u8>,
    },
}

/// Command names the harness calls (the last ones are invalid or unknown).
pub const NAMES: [&str; 6] = [
    "echo",
    "counter_stream",
    "counter_upload",
    "flash_read",
    "",
    "x",
];

impl Op {
    const COUNT: u8 = 17;

    /// Reads one from the input.
    pub fn decode(cur: &mut Cursor<'_>) -> Op {
        fn chan(cur: &mut Cursor<'_>) -> Chan {
            match cur.u8() % 8 {
                0..=2 => Chan::Deliver,
                3 => Chan::Drop,
                4 => Chan::Duplicate,
                5 => Chan::Reorder,
                6 => Chan::Flip {
                    pos: cur.u8(),
                    bit: cur.u8(),
                },
                _ => Chan::Truncate(cur.u8()),
            }
        }
        match cur.u8() % Self::COUNT {
            0 => Op::Advance(cur.u16()),
            1 => Op::FireTimeout,
            2 => Op::Run,
            3 => Op::C2P(chan(cur)),
            4 => Op::P2C(chan(cur)),
            5 => Op::StartCall {
                kind: cur.u8(),
                name: cur.u8(),
                data: cur.chunk().to_vec(),
            },
            6 => Op::SendStreamItem {
                call: cur.u8(),
                data: cur.chunk().to_vec(),
            },
            7 => Op::FinishStream { call: cur.u8() },
            8 => Op::Cancel { call: cur.u8() },
            9 => Op::AcceptIdentity,
            10 => Op::RejectIdentity,
            11 => Op::CloseCentral,
            12 => Op::Serve {
                choice: cur.u8(),
                arg: cur.u8(),
            },
            13 => Op::ClosePeripheral,
            14 => Op::InjectCentral(cur.chunk().to_vec()),
            15 => Op::InjectPeripheral(cur.chunk().to_vec()),
            _ => Op::PeripheralRaw {
                what: cur.u8(),
                tid: cur.u8(),
                data: cur.chunk().to_vec(),
            },
        }
    }

    /// Writes it as [`Op::decode`] reads it.
    pub fn encode(&self, out: &mut Vec<u8>) {
        fn chan(c: &Chan, out: &mut Vec<u8>) {
            match c {
                Chan::Deliver => out.push(0),
                Chan::Drop => out.push(3),
                Chan::Duplicate => out.push(4),
                Chan::Reorder => out.push(5),
                Chan::Flip { pos, bit } => out.extend_from_slice(&[6, *pos, *bit]),
                Chan::Truncate(n) => out.extend_from_slice(&[7, *n]),
            }
        }
        match self {
            Op::Advance(ms) => {
                out.push(0);
                out.extend_from_slice(&ms.to_le_bytes());
            }
            Op::FireTimeout => out.push(1),
            Op::Run => out.push(2),
            Op::C2P(c) => {
                out.push(3);
                chan(c, out);
            }
            Op::P2C(c) => {
                out.push(4);
                chan(c, out);
            }
            Op::StartCall { kind, name, data } => {
                out.extend_from_slice(&[5, *kind, *name]);
                encode_chunk(data, out);
            }
            Op::SendStreamItem { call, data } => {
                out.extend_from_slice(&[6, *call]);
                encode_chunk(data, out);
            }
            Op::FinishStream { call } => out.extend_from_slice(&[7, *call]),
            Op::Cancel { call } => out.extend_from_slice(&[8, *call]),
            Op::AcceptIdentity => out.push(9),
            Op::RejectIdentity => out.push(10),
            Op::CloseCentral => out.push(11),
            Op::Serve { choice, arg } => out.extend_from_slice(&[12, *choice, *arg]),
            Op::ClosePeripheral => out.push(13),
            Op::InjectCentral(d) => {
                out.push(14);
                encode_chunk(d, out);
            }
            Op::InjectPeripheral(d) => {
                out.push(15);
                encode_chunk(d, out);
            }
            Op::PeripheralRaw { what, tid, data } => {
                out.extend_from_slice(&[16, *what, *tid]);
                encode_chunk(data, out);
            }
        }
    }
}

/// Request data whose first byte is above 0xF0 is repeated to `first * 40` bytes (9,640 to
/// 10,200), so that messages beyond the classic limits of small MTUs (LARGE FIRST transactions at
/// MTU 23 or 27) and within the default request limit (12,288) are reachable.
fn stretch(data: Vec<u8>) -> Vec<u8> {
    match data.split_first() {
        Some((&rep, rest)) if rep > 0xF0 && !rest.is_empty() => rest
            .iter()
            .cycle()
            .take(usize::from(rep) * 40)
            .copied()
            .collect(),
        _ => data,
    }
}

/// Encodes a whole connection-target input.
pub fn encode_program(config: &WorldConfig, ops: &[Op]) -> Vec<u8> {
    let mut out = Vec::new();
    config.encode(&mut out);
    for op in ops {
        op.encode(&mut out);
    }
    out
}

/// Which connection target is running: decides the allowed ops and the invariants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Central,
    Peripheral,
    TwoParty,
    /// A peripheral configured as the `blerpc` server configures it (16 MiB requests and
    /// responses, both extensions, the server's reassembly budget), beside a central that
    /// announces both extensions: what a peer of `blerpc serve` meets.
    RuntimePeripheral,
}

/// A program's world: the pair, and what the interpreter tracks beside it.
struct World {
    target: Target,
    pair: Pair<Scripted>,
    /// The calls started, in order (the ops name them by index).
    calls: Vec<blerpc_proto::connection::CallId>,
    /// Calls, stream items and stream ends started by a two-party program (bounded so that
    /// transaction ids never wrap: a wrapped tid can make a held-back stale response look
    /// current, a known v1 limitation).
    tid_ops: usize,
}

/// Bounds the ops of one program, so a long input cannot run for ever.
const MAX_OPS: usize = 2_000;

impl World {
    fn new(target: Target, cfg: WorldConfig) -> World {
        let (mut peripheral, has_identity) = cfg.peripheral_config();
        let mut central = cfg.central_config();
        if target == Target::RuntimePeripheral {
            peripheral = PeripheralConfig {
                att_mtu: peripheral.att_mtu,
                require_encryption: peripheral.require_encryption,
                max_pending_requests: peripheral.max_pending_requests,
                long_containers: peripheral.long_containers,
                ..blerpc::ServerConfig::default().peripheral
            };
            central.large_messages = true;
            central.long_containers = true;
            central.max_response_len = blerpc_proto::connection::DEFAULT_MAX_LARGE_MESSAGE_LEN;
        }
        let builder = PairBuilder {
            central,
            peripheral,
            identity: has_identity,
            latency: Duration::ZERO,
            seed: u64::from(cfg.seed),
            app: AppConfig {
                hold: !cfg.auto_serve(),
                max_stream_items: 4,
                strict: false,
                ..AppConfig::default()
            },
        };
        let mut pair = builder.build_with(|_| Scripted::default());
        pair.strict_calls = true;
        pair.log_pdus = false;
        pair.check_echo = target == Target::TwoParty;
        World {
            target,
            pair,
            calls: Vec::new(),
            tid_ops: 0,
        }
    }

    fn call(&self, sel: u8) -> blerpc_proto::connection::CallId {
        match self.calls.len() {
            0 => blerpc_proto::connection::CallId(u32::from(sel) + 1_000),
            n => self.calls[usize::from(sel) % n],
        }
    }

    /// Delivers both directions until the link is quiet (central → peripheral first).
    fn run(&mut self) {
        for _ in 0..10_000 {
            let next = self
                .pair
                .wire
                .pop(Dir::C2P)
                .map(|pdu| (Dir::C2P, pdu))
                .or_else(|| self.pair.wire.pop(Dir::P2C).map(|pdu| (Dir::P2C, pdu)));
            let Some((dir, pdu)) = next else { return };
            self.pair.deliver(dir, &pdu);
        }
    }

    fn channel(&mut self, dir: Dir, action: Chan) {
        let Some(mut pdu) = self.pair.wire.pop(dir) else {
            return;
        };
        match action {
            Chan::Drop => return,
            Chan::Reorder => {
                self.pair.wire.push_back(dir, pdu);
                return;
            }
            Chan::Duplicate => self.pair.wire.push_front(dir, pdu.clone()),
            Chan::Deliver => {}
            Chan::Flip { pos, bit } => {
                let secure =
                    self.pair.central.is_encrypted() && self.pair.peripheral.is_encrypted();
                let start = if self.target == Target::TwoParty {
                    // Headers and plaintext are not authenticated in bleRPC v1: corrupting them
                    // can legitimately misroute data, so the two-party target only flips
                    // payload bytes of an encrypted link.
                    if !secure {
                        return;
                    }
                    Container::parse(&pdu).map_or(pdu.len(), |c| c.header_len())
                } else {
                    0
                };
                if pdu.len() > start {
                    let i = start + usize::from(pos) % (pdu.len() - start);
                    pdu[i] ^= 1 << (bit % 8);
                }
            }
            Chan::Truncate(n) => pdu.truncate(usize::from(n) % pdu.len().max(1)),
        }
        self.pair.deliver(dir, &pdu);
    }

    fn start_call(&mut self, kind_bits: u8, name: u8, data: Vec<u8>) {
        let deadline_ms = u64::from(name) * 10;
        let kind = match (kind_bits % 4, self.target) {
            (_, Target::TwoParty) | (0, _) => CallKind::Unary,
            (1, _) => CallKind::ServerStream,
            (2, _) => CallKind::ClientStream,
            _ => CallKind::BidiStream,
        };
        // The two-party program echoes any bytes: the harness's `loop` test command (the demo
        // service's `echo` answers only an `EchoRequest` of at most 256 bytes).
        let name = if self.target == Target::TwoParty {
            "loop"
        } else if kind == CallKind::BidiStream {
            // The harness application's bidirectional stream (it echoes each item).
            blerpc_sim::harness::chat::NAME
        } else {
            NAMES[usize::from(name) % NAMES.len()]
        };
        // Client streams take no request data; keep one byte now and then to hit WrongCallKind.
        let data = if kind.sends_items() && data.len() != 1 {
            Vec::new()
        } else {
            stretch(data)
        };
        let ready = self.pair.central.is_ready();
        let now = self.pair.now;
        // The top bit of `kind`: the caller's deadline, `name` × 10 ms from now (0 passes at
        // once), which the deadline extension sends with the request.
        let deadline =
            (kind_bits & 0x80 != 0).then(|| now + core::time::Duration::from_millis(deadline_ms));
        // Other bits of `kind`: start it framed (`start_call_framed`), and then now and then
        // from a buffer that is not one REQUEST command.
        let started = match kind_bits / 4 % 4 {
            0 => self
                .pair
                .central
                .start_call_until(now, name, &data, kind, deadline),
            variant => {
                let header_len = Command::header_len_large(name.len(), data.len());
                let mut command = vec![0u8; header_len];
                let emitted = Command::emit_header_large(
                    CommandType::Request,
                    name,
                    data.len(),
                    &mut command,
                );
                assert!(emitted.is_ok(), "{emitted:?}");
                command.extend_from_slice(&data);
                let malformed = variant == 3;
                if malformed {
                    // A trailing byte: never exactly one command.
                    command.push(0);
                }
                let given = command.clone();
                let result =
                    self.pair
                        .central
                        .start_call_framed_until(now, &mut command, kind, deadline);
                match &result {
                    Ok(_) => assert!(command.is_empty(), "the call takes the buffer"),
                    Err(_) => assert_eq!(command, given, "refused: given back unchanged"),
                }
                if malformed {
                    assert_eq!(result, Err(CallError::MalformedCommand));
                }
                result
            }
        };
        match started {
            Ok(id) => {
                assert!(ready, "call started before the connection was ready");
                self.pair.register(id, kind, name, &data);
                self.calls.push(id);
            }
            Err(e) if !ready => assert!(
                matches!(
                    e,
                    CallError::NotReady | CallError::Closed | CallError::MalformedCommand
                ),
                "{e:?}"
            ),
            Err(_) => {}
        }
        self.pair.flush();
    }

    /// The application answers its oldest held request: mostly the demo service, sometimes
    /// BUSY, an error, or silence; `choice` also decides whether requests are taken out of the
    /// assembler from now on.
    fn serve(&mut self, choice: u8, arg: u8) {
        self.pair.app.take_requests = choice & 0x10 != 0;
        let answer = match choice % 8 {
            5 => Answer::Busy,
            6 => Answer::Error(ErrorCode::from_byte(arg)),
            7 => Answer::Ignore,
            _ => Answer::Serve,
        };
        self.pair.serve(answer);
    }

    fn apply(&mut self, op: Op) {
        let allowed = match (&op, self.target) {
            (Op::InjectPeripheral(_), Target::Central) => false,
            (Op::InjectCentral(_), Target::Peripheral | Target::RuntimePeripheral) => false,
            (
                Op::InjectCentral(_) | Op::InjectPeripheral(_) | Op::PeripheralRaw { .. },
                Target::TwoParty,
            ) => false,
            (
                Op::StartCall { .. } | Op::SendStreamItem { .. } | Op::FinishStream { .. },
                Target::TwoParty,
            ) => {
                self.tid_ops += 1;
                self.tid_ops <= 40
            }
            _ => true,
        };
        if !allowed {
            return;
        }
        let now = self.pair.now;
        match op {
            Op::Advance(ms) => self.pair.advance(Duration::from_millis(u64::from(ms))),
            Op::FireTimeout => {
                self.pair.fire_next_timeout();
            }
            Op::Run => self.run(),
            Op::C2P(c) => self.channel(Dir::C2P, c),
            Op::P2C(c) => self.channel(Dir::P2C, c),
            Op::StartCall { kind, name, data } => self.start_call(kind, name, data),
            Op::SendStreamItem { call, data } => {
                let id = self.call(call);
                if data.is_empty() {
                    // An empty item: the reader made room for `call` items instead (the
                    // streams extension's credits).
                    let _ = self.pair.central.grant(now, id, usize::from(call));
                } else {
                    let _ = self.pair.central.send_stream_item(now, id, &stretch(data));
                }
                self.pair.flush();
            }
            Op::FinishStream { call } => {
                let id = self.call(call);
                let _ = self.pair.central.finish_stream(now, id);
                self.pair.flush();
            }
            Op::Cancel { call } => {
                let id = self.call(call);
                let _ = self.pair.cancel(id);
            }
            Op::AcceptIdentity => {
                self.pair.central.accept_identity(now);
                self.pair.flush();
            }
            Op::RejectIdentity => {
                self.pair.central.reject_identity(now);
                self.pair.flush();
            }
            Op::CloseCentral => self.pair.close_central(),
            Op::Serve { choice, arg } => self.serve(choice, arg),
            Op::ClosePeripheral => self.pair.close_peripheral(),
            Op::InjectCentral(pdu) => self.pair.deliver(Dir::P2C, &pdu),
            Op::InjectPeripheral(pdu) => self.pair.deliver(Dir::C2P, &pdu),
            Op::PeripheralRaw { what, tid, data } => {
                let p = &mut self.pair.peripheral;
                let name = NAMES[usize::from(what >> 3) % NAMES.len()];
                let _ = match what % 8 {
                    0 => p.respond(now, tid, name, &data),
                    1 => p.respond_error(
                        now,
                        tid,
                        ErrorCode::from_byte(data.first().copied().unwrap_or(2)),
                    ),
                    2 => p.ack(tid),
                    3 => p.send_stream_item(now, tid, name, &data),
                    4 => p.end_stream(now, tid),
                    5 => p.respond_upload(now, name, &data),
                    7 => p.consumed(now, tid, u32::from(data.first().copied().unwrap_or(1))),
                    _ => p.respond_with(now, tid, name, data.len(), |d| d.copy_from_slice(&data)),
                };
                self.pair.flush();
            }
        }
    }

    fn run_program(target: Target, data: &[u8]) -> World {
        let mut cur = Cursor::new(data);
        let cfg = WorldConfig::decode(&mut cur);
        let mut w = World::new(target, cfg);
        let mut steps = 0;
        while !cur.is_empty() && steps < MAX_OPS {
            steps += 1;
            let op = Op::decode(&mut cur);
            w.apply(op);
        }
        // Whatever happened, the connection winds down: deliver, then let every deadline pass.
        w.run();
        for _ in 0..64 {
            if !w.pair.fire_next_timeout() {
                break;
            }
            w.run();
        }
        w
    }
}

/// A Central fed arbitrary PDUs and user operations, next to a genuine peripheral (so encrypted
/// states are reachable).
pub fn connection_central(data: &[u8]) {
    let _ = World::run_program(Target::Central, data);
}

/// A Peripheral fed arbitrary PDUs and user operations (respond, errors, streams, upload), next
/// to a genuine central.
pub fn connection_peripheral(data: &[u8]) {
    let _ = World::run_program(Target::Peripheral, data);
}

/// [`connection_peripheral`] with the peripheral configured as `blerpc serve` configures it
/// (16 MiB limits, both extensions, the server's reassembly budget and deadlines).
pub fn connection_runtime_limits(data: &[u8]) {
    let _ = World::run_program(Target::RuntimePeripheral, data);
}

/// A Central and an echo Peripheral through a lossy, duplicating, reordering channel (and, on an
/// encrypted link, payload bit flips). Every unary response must equal its own request.
pub fn two_party(data: &[u8]) {
    let _ = World::run_program(Target::TwoParty, data);
}

/// Runs a two-party program and reports how many echo responses were checked (for the corpus
/// generator and its tests).
pub fn two_party_responses(data: &[u8]) -> usize {
    World::run_program(Target::TwoParty, data)
        .pair
        .responses_checked
}

/// The PDUs of an encrypted (or plaintext) session: setup, a few echo calls, a server stream and
/// an upload, as (c2p, p2c). Used to seed the corpora with real traffic.
pub fn capture_traffic(encrypted: bool) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let cfg = if encrypted {
        WorldConfig::ENCRYPTED
    } else {
        WorldConfig::PLAINTEXT
    };
    let mut w = World::new(Target::Central, cfg);
    let (mut c2p, mut p2c) = (Vec::new(), Vec::new());
    let mut pump = |w: &mut World| {
        for _ in 0..10_000 {
            if let Some(pdu) = w.pair.wire.pop(Dir::C2P) {
                c2p.push(pdu.clone());
                w.pair.deliver(Dir::C2P, &pdu);
            } else if let Some(pdu) = w.pair.wire.pop(Dir::P2C) {
                p2c.push(pdu.clone());
                w.pair.deliver(Dir::P2C, &pdu);
            } else {
                return;
            }
        }
    };
    pump(&mut w);
    w.apply(Op::AcceptIdentity);
    pump(&mut w);
    let big: Vec<u8> = (0..600u16).map(|i| i as u8).collect();
    for (kind, name, data) in [
        (0u8, 0u8, b"\x0a\x05hello".to_vec()),
        (0, 0, big),
        (1, 1, vec![8, 3]),
        (2, 2, vec![]),
    ] {
        w.apply(Op::StartCall { kind, name, data });
        if kind == 2 {
            let sel = w.calls.len().saturating_sub(1) as u8;
            w.apply(Op::SendStreamItem {
                call: sel,
                data: vec![8, 1],
            });
            w.apply(Op::FinishStream { call: sel });
        }
        pump(&mut w);
    }
    (c2p, p2c)
}
