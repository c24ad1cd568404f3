//! A deterministic two-peer harness on virtual time: one [`Central`] and one [`Peripheral`]
//! joined by an in-memory link with a fixed one-way latency, an optional interceptor that can
//! drop, corrupt or inject PDUs, and a demo-service application on the peripheral.
//!
//! Everything is seeded; the seed is printed when a test panics so a failure can be replayed
//! with `BLERPC_SEED=<seed>`.
#![allow(dead_code)]
// A test harness: panicking on an unexpected state is how it reports failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::VecDeque;
use std::time::Duration;

use blerpc_proto::Instant;
use blerpc_proto::connection::{
    CallError, CallId, CallKind, Central, CentralConfig, CentralEvent, CloseReason, Peripheral,
    PeripheralConfig, PeripheralEvent, Pinning, Warning,
};
use blerpc_proto::crypto::{CryptoProvider, IdentitySeed, RustCrypto};
use blerpc_proto::wire::error_code::ErrorCode;
use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

pub type TestCentral = Central<RustCrypto, ChaCha20Rng, Vec<u8>, Vec<u8>, 4>;
pub type TestPeripheral = Peripheral<RustCrypto, ChaCha20Rng, Vec<u8>, Vec<u8>, 4>;

/// The identity seed every harness peripheral uses (RFC 8032 test 1).
pub const IDENTITY_SEED: [u8; 32] = [
    0x9d, 0x61, 0xb1, 0x9d, 0xef, 0xfd, 0x5a, 0x60, 0xba, 0x84, 0x4a, 0xf4, 0x92, 0xec, 0x2c, 0xc4,
    0x44, 0x49, 0xc5, 0x69, 0x7b, 0x32, 0x69, 0x19, 0x70, 0x3b, 0xac, 0x03, 0x1c, 0xae, 0x7f, 0x60,
];

/// Its public key.
pub fn identity_public() -> [u8; 32] {
    let p = RustCrypto;
    p.identity_public(
        &p.load_identity(&IdentitySeed::from_bytes(IDENTITY_SEED))
            .unwrap(),
    )
}

/// The seed for this test: `BLERPC_SEED` or a fixed default.
pub fn seed() -> u64 {
    std::env::var("BLERPC_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_b1e5)
}

/// Prints the seed if the test panics.
pub struct SeedGuard(pub u64);
impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("scenario failed with BLERPC_SEED={}", self.0);
        }
    }
}

/// An owned copy of a central event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CEv {
    Connected { encrypted: bool },
    Identity([u8; 32]),
    Response { call: CallId, data: Vec<u8> },
    StreamItem { call: CallId, data: Vec<u8> },
    StreamEnd { call: CallId },
    Failed { call: CallId, error: CallError },
    Closed(CloseReason),
    Warning(Warning),
}

/// What the interceptor does with a PDU in flight.
pub enum Action {
    Deliver,
    Drop,
    /// Deliver this instead.
    Replace(Vec<u8>),
    /// Deliver the PDU, then these extra PDUs.
    Append(Vec<Vec<u8>>),
    /// Deliver these PDUs instead, in this order (none: drop).
    Sequence(Vec<Vec<u8>>),
}

/// Which way a PDU travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    C2P,
    P2C,
}

pub type Interceptor = Box<dyn FnMut(Dir, &[u8], &mut ChaCha20Rng) -> Action>;

/// Drops every peripheral→central container whose flags byte is `flags` (e.g. `0xc4`, the
/// TIMEOUT reply).
pub fn drop_p2c(flags: u8) -> Interceptor {
    Box::new(move |dir, pdu, _| {
        if dir == Dir::P2C && pdu.get(2) == Some(&flags) {
            Action::Drop
        } else {
            Action::Deliver
        }
    })
}

/// How the demo application on the peripheral behaves.
#[derive(Clone, Debug)]
pub struct AppConfig {
    /// Delay before the application answers a request.
    pub handler_delay: Duration,
    /// Answer the first N requests with BUSY.
    pub busy_first: u32,
    /// Never answer requests with this name.
    pub ignore: Option<&'static str>,
    /// Take each request's buffer out of the peripheral (`Peripheral::take_request`) and check
    /// it holds the event's data, instead of letting the next event release it.
    pub take_requests: bool,
}

impl Default for AppConfig {
    fn default() -> Self {
        AppConfig {
            handler_delay: Duration::ZERO,
            busy_first: 0,
            ignore: None,
            take_requests: false,
        }
    }
}

struct Deferred {
    at: Instant,
    tid: u8,
    name: String,
    data: Vec<u8>,
}

pub struct Pair {
    pub seed: u64,
    pub rng: ChaCha20Rng,
    pub now: Instant,
    pub latency: Duration,
    pub central: TestCentral,
    pub peripheral: TestPeripheral,
    pub c2p: VecDeque<(Instant, Vec<u8>)>,
    pub p2c: VecDeque<(Instant, Vec<u8>)>,
    pub interceptor: Option<Interceptor>,
    pub app: AppConfig,
    pub central_events: Vec<CEv>,
    pub peripheral_warnings: Vec<Warning>,
    pub peripheral_requests: Vec<(u8, String, Vec<u8>)>,
    pub sent_c2p: Vec<Vec<u8>>,
    pub sent_p2c: Vec<Vec<u8>>,
    deferred: Vec<Deferred>,
    /// Peripheral→central streams in progress: (request tid, next seq, count).
    stream_jobs: Vec<(u8, u32, u32)>,
    upload_counts: u32,
    busy_sent: u32,
    /// Requests taken out of the peripheral (`AppConfig::take_requests`).
    pub requests_taken: u32,
    _guard: SeedGuard,
}

/// Builds a pair. `identity: true` gives the peripheral the test identity (encryption offered).
pub struct PairBuilder {
    pub central: CentralConfig,
    pub peripheral: PeripheralConfig,
    pub identity: bool,
    pub latency: Duration,
    pub seed: u64,
}

impl Default for PairBuilder {
    fn default() -> Self {
        let central = CentralConfig {
            pinning: Pinning::Expect(identity_public()),
            ..Default::default()
        };
        let peripheral = PeripheralConfig {
            max_request_len: 65_535,
            max_pending_requests: 4,
            ..Default::default()
        };
        PairBuilder {
            central,
            peripheral,
            identity: true,
            latency: Duration::from_millis(1),
            seed: seed(),
        }
    }
}

impl PairBuilder {
    pub fn plaintext() -> Self {
        let mut b = PairBuilder {
            identity: false,
            ..PairBuilder::default()
        };
        b.central.require_encryption = false;
        b.peripheral.require_encryption = false;
        b
    }

    /// The default (encrypted) builder, or [`PairBuilder::plaintext`].
    pub fn encrypted(encrypted: bool) -> Self {
        if encrypted {
            PairBuilder::default()
        } else {
            PairBuilder::plaintext()
        }
    }

    pub fn mtu(mut self, mtu: usize) -> Self {
        self.central.att_mtu = mtu;
        self.peripheral.att_mtu = mtu;
        self
    }

    pub fn build(self) -> Pair {
        let mut rng = ChaCha20Rng::seed_from_u64(self.seed);
        let now = Instant::from_millis(1_000);
        let crng = ChaCha20Rng::seed_from_u64(rng.next_u64());
        let prng = ChaCha20Rng::seed_from_u64(rng.next_u64());
        let central =
            TestCentral::new(self.central, RustCrypto, crng, now).expect("central config");
        let identity = self.identity.then(|| {
            RustCrypto
                .load_identity(&IdentitySeed::from_bytes(IDENTITY_SEED))
                .unwrap()
        });
        let peripheral = TestPeripheral::new(self.peripheral, RustCrypto, identity, prng)
            .expect("peripheral config");
        Pair {
            seed: self.seed,
            rng,
            now,
            latency: self.latency,
            central,
            peripheral,
            c2p: VecDeque::new(),
            p2c: VecDeque::new(),
            interceptor: None,
            app: AppConfig::default(),
            central_events: Vec::new(),
            peripheral_warnings: Vec::new(),
            peripheral_requests: Vec::new(),
            sent_c2p: Vec::new(),
            sent_p2c: Vec::new(),
            deferred: Vec::new(),
            stream_jobs: Vec::new(),
            upload_counts: 0,
            busy_sent: 0,
            requests_taken: 0,
            _guard: SeedGuard(self.seed),
        }
    }
}

/// Upper bound on the steps of one `drive`, so a livelock fails instead of hanging.
const MAX_STEPS: usize = 2_000_000;

impl Pair {
    pub fn new() -> Pair {
        PairBuilder::default().build()
    }

    /// Runs until `done` holds, or fails after `limit` of virtual time.
    pub fn drive_until(&mut self, limit: Duration, mut done: impl FnMut(&Pair) -> bool) {
        let end = self.now + limit;
        for _ in 0..MAX_STEPS {
            self.flush();
            if done(self) {
                return;
            }
            let Some(next) = self.next_wake() else {
                panic!(
                    "idle before condition held (t={:?}); events: {:#?}",
                    self.now, self.central_events
                );
            };
            if next > end {
                panic!(
                    "condition not met within {limit:?}; events: {:#?}",
                    self.central_events
                );
            }
            self.now = self.now.max(next);
            self.deliver_due();
        }
        panic!("too many steps");
    }

    /// Runs until nothing is left to do or `limit` of virtual time passes.
    pub fn drive_idle(&mut self, limit: Duration) {
        let end = self.now + limit;
        for _ in 0..MAX_STEPS {
            self.flush();
            match self.next_wake() {
                Some(next) if next <= end => {
                    self.now = self.now.max(next);
                    self.deliver_due();
                }
                _ => return,
            }
        }
        panic!("too many steps");
    }

    /// Connects (setup + handshake) and asserts success.
    pub fn connect(&mut self) {
        self.drive_until(Duration::from_secs(10), |p| {
            p.central_events
                .iter()
                .any(|e| matches!(e, CEv::Connected { .. } | CEv::Closed(_)))
        });
        assert!(
            self.central.is_ready(),
            "not connected: {:#?}",
            self.central_events
        );
    }

    /// Starts a call and drives until it completes; returns the response data or the error.
    pub fn call(&mut self, name: &str, data: &[u8]) -> Result<Vec<u8>, CallError> {
        let id = self
            .central
            .start_call(self.now, name, data, CallKind::Unary)?;
        self.wait_call(id)
    }

    pub fn wait_call(&mut self, id: CallId) -> Result<Vec<u8>, CallError> {
        self.drive_until(Duration::from_secs(60), |p| p.call_outcome(id).is_some());
        self.call_outcome(id).unwrap()
    }

    pub fn call_outcome(&self, id: CallId) -> Option<Result<Vec<u8>, CallError>> {
        self.central_events.iter().find_map(|e| match e {
            CEv::Response { call, data } if *call == id => Some(Ok(data.clone())),
            CEv::Failed { call, error } if *call == id => Some(Err(*error)),
            _ => None,
        })
    }

    /// Items of a server stream and its end (Ok) or failure (Err).
    pub fn stream_outcome(&self, id: CallId) -> Option<Result<Vec<Vec<u8>>, CallError>> {
        let items: Vec<Vec<u8>> = self
            .central_events
            .iter()
            .filter_map(|e| match e {
                CEv::StreamItem { call, data } if *call == id => Some(data.clone()),
                _ => None,
            })
            .collect();
        self.central_events.iter().find_map(|e| match e {
            CEv::StreamEnd { call } if *call == id => Some(Ok(items.clone())),
            CEv::Failed { call, error } if *call == id => Some(Err(*error)),
            _ => None,
        })
    }

    pub fn warnings(&self) -> Vec<Warning> {
        self.central_events
            .iter()
            .filter_map(|e| {
                if let CEv::Warning(w) = e {
                    Some(*w)
                } else {
                    None
                }
            })
            .collect()
    }

    fn next_wake(&self) -> Option<Instant> {
        [
            self.c2p.front().map(|(t, _)| *t),
            self.p2c.front().map(|(t, _)| *t),
            self.central.poll_timeout(),
            self.peripheral.poll_timeout(),
            self.deferred.iter().map(|d| d.at).min(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn deliver_due(&mut self) {
        let now = self.now;
        while self.c2p.front().is_some_and(|(t, _)| *t <= now) {
            let (_, pdu) = self.c2p.pop_front().unwrap();
            self.peripheral
                .handle_input(now, &pdu)
                .expect("peripheral events drained");
            self.drain_peripheral();
        }
        while self.p2c.front().is_some_and(|(t, _)| *t <= now) {
            let (_, pdu) = self.p2c.pop_front().unwrap();
            self.central
                .handle_input(now, &pdu)
                .expect("central events drained");
            self.drain_central();
        }
        if self.central.poll_timeout().is_some_and(|t| t <= now) {
            self.central.handle_timeout(now);
        }
        if self.peripheral.poll_timeout().is_some_and(|t| t <= now) {
            self.peripheral.handle_timeout(now);
        }
        let due: Vec<Deferred> = {
            let (due, keep): (Vec<_>, Vec<_>) = self.deferred.drain(..).partition(|d| d.at <= now);
            self.deferred = keep;
            due
        };
        for d in due {
            self.run_handler(d.tid, &d.name, &d.data);
        }
    }

    /// Sends stream items while the peripheral's outbox has room (backpressure, as a runtime
    /// awaiting link capacity would).
    fn pump_streams(&mut self) {
        let now = self.now;
        let mut jobs = std::mem::take(&mut self.stream_jobs);
        jobs.retain_mut(|(tid, next, count)| {
            while *next < *count {
                let mut item = pb_uint(1, u64::from(*next));
                item.extend(pb_uint(2, u64::from(*next * 10)));
                match self
                    .peripheral
                    .send_stream_item(now, *tid, "counter_stream", &item)
                {
                    Ok(()) => *next += 1,
                    Err(blerpc_proto::connection::SendError::OutboxFull { .. }) => return true,
                    Err(e) => panic!("stream item: {e}"),
                }
            }
            match self.peripheral.end_stream(now, *tid) {
                Ok(()) => false,
                Err(blerpc_proto::connection::SendError::OutboxFull { .. }) => true,
                Err(e) => panic!("end stream: {e}"),
            }
        });
        self.stream_jobs = jobs;
    }

    /// Moves everything both sides want to send onto the link and handles all events.
    pub fn flush(&mut self) {
        loop {
            self.drain_central();
            self.drain_peripheral();
            self.pump_streams();
            let mut progressed = false;
            let (cmax, pmax) = (
                self.central.max_container_len(),
                self.peripheral.max_container_len(),
            );
            let mut buf = vec![0u8; cmax.max(pmax)];
            while let Some(n) = self.central.poll_transmit(self.now, &mut buf) {
                assert!(n <= cmax, "PDU above MTU");
                self.send(Dir::C2P, buf[..n].to_vec());
                progressed = true;
            }
            while let Some(n) = self.peripheral.poll_transmit(self.now, &mut buf) {
                assert!(n <= pmax, "PDU above MTU");
                self.send(Dir::P2C, buf[..n].to_vec());
                progressed = true;
            }
            if !progressed {
                return;
            }
        }
    }

    fn send(&mut self, dir: Dir, pdu: Vec<u8>) {
        let at = self.now + self.latency;
        let action = match self.interceptor.as_mut() {
            Some(f) => f(dir, &pdu, &mut self.rng),
            None => Action::Deliver,
        };
        let pdus = match action {
            Action::Deliver => vec![pdu],
            Action::Drop => vec![],
            Action::Replace(p) => vec![p],
            Action::Append(mut extra) => {
                extra.insert(0, pdu);
                extra
            }
            Action::Sequence(pdus) => pdus,
        };
        for p in pdus {
            match dir {
                Dir::C2P => {
                    self.sent_c2p.push(p.clone());
                    self.c2p.push_back((at, p));
                }
                Dir::P2C => {
                    self.sent_p2c.push(p.clone());
                    self.p2c.push_back((at, p));
                }
            }
        }
    }

    pub fn drain_central(&mut self) {
        while let Some(ev) = self.central.poll_event() {
            let owned = match ev {
                CentralEvent::Connected { encrypted } => CEv::Connected { encrypted },
                CentralEvent::IdentityPresented { identity } => CEv::Identity(identity),
                CentralEvent::Response { call, data } => CEv::Response {
                    call,
                    data: data.to_vec(),
                },
                CentralEvent::StreamItem { call, data } => CEv::StreamItem {
                    call,
                    data: data.to_vec(),
                },
                CentralEvent::StreamEnd { call } => CEv::StreamEnd { call },
                CentralEvent::CallFailed { call, error } => CEv::Failed { call, error },
                CentralEvent::Closed { reason } => CEv::Closed(reason),
                CentralEvent::Warning(w) => CEv::Warning(w),
                _ => continue,
            };
            self.central_events.push(owned);
        }
    }

    fn drain_peripheral(&mut self) {
        let mut requests = Vec::new();
        while let Some(ev) = self.peripheral.poll_event() {
            match ev {
                PeripheralEvent::Request { tid, name, data } => {
                    let (name, data) = (name.to_string(), data.to_vec());
                    if self.app.take_requests {
                        let (buf, range) = self.peripheral.take_request().expect("a request");
                        assert_eq!(buf.get(range), Some(&data[..]), "taken = the event's data");
                        assert!(self.peripheral.take_request().is_none(), "taken once");
                        self.requests_taken += 1;
                    }
                    requests.push((tid, name, data))
                }
                PeripheralEvent::StreamEndC2P { .. } => requests.push((0, String::new(), vec![])),
                PeripheralEvent::Warning(w) => self.peripheral_warnings.push(w),
                _ => {}
            }
        }
        for (tid, name, data) in requests {
            self.peripheral_requests
                .push((tid, name.clone(), data.clone()));
            if name.is_empty() {
                // STREAM_END_C2P: answer the upload with the count.
                let count = std::mem::take(&mut self.upload_counts);
                let resp = pb_uint(1, u64::from(count));
                self.peripheral
                    .respond_upload(self.now, "counter_upload", &resp)
                    .expect("upload response");
                continue;
            }
            if self.app.ignore == Some(leak(&name)) {
                continue;
            }
            if self.busy_sent < self.app.busy_first {
                self.busy_sent += 1;
                self.peripheral
                    .respond_error(self.now, tid, ErrorCode::Busy)
                    .unwrap();
                continue;
            }
            if self.app.handler_delay > Duration::ZERO {
                self.deferred.push(Deferred {
                    at: self.now + self.app.handler_delay,
                    tid,
                    name,
                    data,
                });
            } else {
                self.run_handler(tid, &name, &data);
            }
        }
    }

    /// The demo service (wire.md §1.7): echo, flash_read, data_write, counter_stream,
    /// counter_upload.
    fn run_handler(&mut self, tid: u8, name: &str, data: &[u8]) {
        let now = self.now;
        let p = &mut self.peripheral;
        match name {
            "echo" => p.respond(now, tid, name, data).unwrap(),
            "flash_read" => {
                let address = pb_get_uint(data, 1).unwrap_or(0) as u32;
                let length = pb_get_uint(data, 2).unwrap_or(0) as usize;
                if length > 8192 {
                    p.respond_error(now, tid, ErrorCode::HandlerFailed).unwrap();
                    return;
                }
                let bytes: Vec<u8> = (0..length).map(|i| (address as usize + i) as u8).collect();
                let mut resp = pb_uint(1, u64::from(address));
                resp.extend(pb_bytes(2, &bytes));
                p.respond(now, tid, name, &resp).unwrap();
            }
            "data_write" => {
                let len = pb_get_bytes(data, 1).map_or(0, |b| b.len());
                p.respond(now, tid, name, &pb_uint(1, len as u64)).unwrap();
            }
            "counter_stream" => {
                let count = pb_get_uint(data, 1).unwrap_or(0) as u32;
                if count > 10_000 {
                    p.respond_error(now, tid, ErrorCode::HandlerFailed).unwrap();
                    return;
                }
                self.stream_jobs.push((tid, 0, count));
                self.pump_streams();
            }
            "counter_upload" => {
                self.upload_counts += 1;
                p.ack(tid).unwrap();
            }
            // Large-message tests: `big` answers `[len u32 LE]` with `len` pattern bytes (a
            // response over the limit becomes ERROR RESPONSE_TOO_LARGE, sent by the core).
            "big" => {
                let len = u32::from_le_bytes(data[..4].try_into().unwrap()) as usize;
                let _ = p.respond_with(now, tid, name, len, |out| {
                    for (i, b) in out.iter_mut().enumerate() {
                        *b = (i % 251) as u8;
                    }
                });
            }
            // `big_stream` answers `[count u8][len u32 LE]` with `count` items of `len` bytes
            // (item i filled with i), then STREAM_END_P2C.
            "big_stream" => {
                let count = data[0];
                let len = u32::from_le_bytes(data[1..5].try_into().unwrap()) as usize;
                for i in 0..count {
                    p.send_stream_item(now, tid, name, &vec![i; len]).unwrap();
                }
                p.end_stream(now, tid).unwrap();
            }
            _ => p
                .respond_error(now, tid, ErrorCode::UnknownCommand)
                .unwrap(),
        }
    }
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

// ----- a few protobuf helpers (varint and length-delimited fields only) -----------------------

pub fn varint(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// A varint field, omitted when zero (proto3).
pub fn pb_uint(field: u32, v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    if v != 0 {
        varint(u64::from(field << 3), &mut out);
        varint(v, &mut out);
    }
    out
}

/// A length-delimited field, omitted when empty (proto3).
pub fn pb_bytes(field: u32, v: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    if !v.is_empty() {
        varint(u64::from(field << 3 | 2), &mut out);
        varint(v.len() as u64, &mut out);
        out.extend_from_slice(v);
    }
    out
}

fn read_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn fields(buf: &[u8]) -> Vec<(u32, Result<u64, Vec<u8>>)> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < buf.len() {
        let Some(key) = read_varint(buf, &mut pos) else {
            break;
        };
        match key & 7 {
            0 => {
                let Some(v) = read_varint(buf, &mut pos) else {
                    break;
                };
                out.push(((key >> 3) as u32, Ok(v)));
            }
            2 => {
                let Some(len) = read_varint(buf, &mut pos) else {
                    break;
                };
                let end = pos + len as usize;
                let Some(b) = buf.get(pos..end) else { break };
                out.push(((key >> 3) as u32, Err(b.to_vec())));
                pos = end;
            }
            _ => break,
        }
    }
    out
}

pub fn pb_get_uint(buf: &[u8], field: u32) -> Option<u64> {
    fields(buf)
        .into_iter()
        .find_map(|(f, v)| if f == field { v.ok() } else { None })
}

pub fn pb_get_bytes(buf: &[u8], field: u32) -> Option<Vec<u8>> {
    fields(buf)
        .into_iter()
        .find_map(|(f, v)| if f == field { v.err() } else { None })
}

/// `EchoRequest { message }`.
pub fn echo_req(msg: &str) -> Vec<u8> {
    pb_bytes(1, msg.as_bytes())
}

/// A random value for tests that need one.
/// The `big` handler's response of `len` bytes.
pub fn big_response(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

pub fn random_bytes(rng: &mut ChaCha20Rng, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rng.fill_bytes(&mut v);
    v
}
