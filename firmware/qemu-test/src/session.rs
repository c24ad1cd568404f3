//! A full encrypted session in memory: the core's `Central` (no allocator) against the
//! firmware's own connection (`blerpc_fw_service::Connection`: the core's `Peripheral` on the
//! firmware's buffers with the demo service over a flash image), PDUs of ATT MTU 247 passed by
//! hand. Setup (TIMEOUT, CAPABILITIES, the key exchange with the identity pinned), then the
//! reference's twelve functional tests (`blerpc_demo::functional::CASES`, the table the host's
//! runner uses too, with the same checks) and the refusals of the demo service's limits
//! (`blerpc_demo::functional::refusals`). Then a second session with the streams extension: a
//! `chat` echoed both ways through the firmware's two-item window, and a counter stream sent
//! against the central's credits of four. Last, the diagnostics answer (`blerpc.diagnostics`):
//! the first session's counts, buffer marks and the link as the application set it.

use blerpc_demo::flash::{DemoFlash, SliceFlash};
use blerpc_demo::functional::{self, CASES, Call};
use blerpc_demo::noalloc::{
    CounterStreamRequest, CounterStreamResponse, CounterUploadRequest, CounterUploadResponse,
    DataWriteRequest, DataWriteResponse, EchoRequest, EchoResponse, FlashReadRequest,
    FlashReadResponse,
};
use blerpc_demo::{DemoLimits, DemoService};
use blerpc_fw_service::device::Device;
use blerpc_fw_service::{Connection, firmware_config};
use blerpc_proto::Instant;
use blerpc_proto::buf::ArrayBuf;
use blerpc_proto::connection::{
    CallError, CallId, CallKind, Central, CentralConfig, CentralEvent, Pinning,
};
use blerpc_proto::crypto::{CryptoProvider, IdentitySeed, RustCrypto};
use blerpc_proto::wire::capabilities::CapabilityFlags;
use blerpc_proto::wire::diagnostics::LinkFields;
use blerpc_proto::wire::diagnostics::{DIAGNOSTICS_COMMAND, Diagnostics, Field};
use blerpc_proto::wire::error_code::ErrorCode;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

use crate::{Fail, Note, Tally, ensure};

/// The flash image `flash_read` reads: byte `i` is `(i * 31 + 7) mod 256`, as the host demo's
/// synthetic image.
static FLASH: [u8; 16 * 1024] = {
    let mut a = [0u8; 16 * 1024];
    let mut i = 0;
    while i < a.len() {
        a[i] = (i.wrapping_mul(31).wrapping_add(7)) as u8;
        i += 1;
    }
    a
};

/// The central's buffers: a 12 KB reassembly slot (an 8 KB `flash_read` response) and 12 KB
/// for a request (`data_write` of 8 KB) and the outbox.
type TestCentral = Central<RustCrypto, ChaCha20Rng, ArrayBuf<12_288>, ArrayBuf<12_288>, 1>;
type TestConnection = Connection<RustCrypto, ChaCha20Rng, SliceFlash>;

/// The central's window when it announces the streams extension.
const STREAM_WINDOW: u16 = 4;

/// The two ends and the link between them.
pub struct Pair {
    central: TestCentral,
    conn: TestConnection,
    now: Instant,
    /// PDUs carried each way.
    pub pdus: (u32, u32),
}

/// What a call gave back.
#[derive(Default)]
struct Outcome {
    response: Option<[u8; 64]>,
    response_len: usize,
    items: u32,
    items_ok: bool,
    ended: bool,
    failed: Option<CallError>,
}

impl Pair {
    /// A connected, encrypted pair (or why not).
    pub fn connect() -> Result<Pair, Fail> {
        Self::connect_with(false)
    }

    /// A connected, encrypted pair; with `streams` the central announces the streams
    /// extension with a window of 4 items.
    pub fn connect_with(streams: bool) -> Result<Pair, Fail> {
        let now = Instant::from_millis(0);
        let identity = RustCrypto
            .load_identity(&IdentitySeed::from_bytes(
                blerpc_fw_service::identity::DEVELOPMENT_SEED,
            ))
            .map_err(|_| Fail("load_identity"))?;
        let key = RustCrypto.identity_public(&identity);
        let len = FLASH.len() as u32;
        let flash = DemoFlash::new(SliceFlash(&FLASH), 0..len, len..len)
            .map_err(|_| Fail("flash layout"))?;
        let conn = Connection::new(
            now,
            firmware_config(true),
            RustCrypto,
            Some(identity),
            ChaCha20Rng::seed_from_u64(1),
            DemoService::new(flash, DemoLimits::REFERENCE),
        )
        .map_err(|_| Fail("Connection::new"))?
        // The RAM mark as the boards measure it: the statics and the painted stack.
        .with_device(Device {
            ram_high_water: ram_mark().map(|m| m.read),
            ..Device::new(now, env!("CARGO_PKG_VERSION"), None)
        });
        let config = CentralConfig {
            pinning: Pinning::Expect(key),
            max_outbox_bytes: 12_288,
            max_response_len: 12_288,
            max_calls_in_flight: 1,
            streams,
            stream_window: STREAM_WINDOW,
            ..CentralConfig::default()
        };
        let central = TestCentral::new(config, RustCrypto, ChaCha20Rng::seed_from_u64(2), now)
            .map_err(|_| Fail("Central::new"))?;
        let mut pair = Pair {
            central,
            conn,
            now,
            pdus: (0, 0),
        };
        let mut connected = None;
        for _ in 0..16 {
            pair.exchange()?;
            while let Some(e) = pair.central.poll_event() {
                if let CentralEvent::Connected { encrypted } = e {
                    connected = Some(encrypted);
                }
            }
            if connected.is_some() {
                break;
            }
        }
        ensure(
            connected == Some(true),
            "the session did not come up encrypted",
        )?;
        ensure(pair.conn.is_secured(), "the peripheral is not secured")?;
        ensure(
            pair.central.peer_identity() == Some(key),
            "the pinned identity",
        )?;
        Ok(pair)
    }

    /// Moves every queued PDU both ways until both ends are quiet.
    fn exchange(&mut self) -> Result<(), Fail> {
        let mut pdu = [0u8; 244];
        for _ in 0..100_000 {
            let mut moved = false;
            while let Some(n) = self.central.poll_transmit(self.now, &mut pdu) {
                self.conn.handle_pdu(self.now, pdu.get(..n).unwrap_or(&[]));
                self.pdus.0 += 1;
                moved = true;
            }
            // One notification at a time, then the central's events are drained by the caller's
            // loop: a stream of thousands of items never needs more than the outbox.
            if let Some(n) = self.conn.poll_transmit(self.now, &mut pdu) {
                self.central
                    .handle_input(self.now, pdu.get(..n).unwrap_or(&[]))
                    .map_err(|_| Fail("the central's event queue is full"))?;
                self.pdus.1 += 1;
                return Ok(());
            }
            if !moved {
                return Ok(());
            }
        }
        Err(Fail("the link never went quiet"))
    }

    /// Runs one call to its end.
    fn call(
        &mut self,
        name: &str,
        request: &[u8],
        kind: CallKind,
        upload: u32,
    ) -> Result<Outcome, Fail> {
        let call = self
            .central
            .start_call(self.now, name, request, kind)
            .map_err(|_| Fail("start_call"))?;
        if kind == CallKind::ClientStream {
            let mut item = [0u8; CounterUploadRequest::MAX_ENCODED_LEN];
            for i in 0..upload {
                let (seq, value) = functional::counter_item(i);
                let n = CounterUploadRequest { seq, value }
                    .encode(&mut item)
                    .map_err(|_| Fail("encode"))?;
                loop {
                    match self.central.send_stream_item(
                        self.now,
                        call,
                        item.get(..n).unwrap_or(&[]),
                    ) {
                        Ok(()) => break,
                        Err(CallError::OutboxFull { .. }) => self.exchange()?,
                        Err(_) => return Err(Fail("send_stream_item")),
                    }
                }
            }
            self.central
                .finish_stream(self.now, call)
                .map_err(|_| Fail("finish_stream"))?;
        }
        let mut out = Outcome {
            items_ok: true,
            ..Outcome::default()
        };
        for _ in 0..1_000_000 {
            self.exchange()?;
            if self.drain(call, &mut out) {
                return Ok(out);
            }
        }
        Err(Fail("the call never ended"))
    }

    /// Takes the central's events for `call`; `true` once it ended.
    fn drain(&mut self, call: CallId, out: &mut Outcome) -> bool {
        let mut ended = false;
        while let Some(e) = self.central.poll_event() {
            match e {
                CentralEvent::Response { call: c, data } if c == call => {
                    let mut keep = [0u8; 64];
                    let n = data.len().min(64);
                    keep[..n].copy_from_slice(&data[..n]);
                    out.response = Some(keep);
                    out.response_len = data.len();
                    if data.len() > 64 {
                        // A flash read: check it here, against the image.
                        out.items_ok &= FlashReadResponse::decode(data).is_ok_and(|m| {
                            FLASH
                                .get(m.address as usize..)
                                .is_some_and(|f| f.starts_with(m.data))
                        });
                        out.items =
                            FlashReadResponse::decode(data).map_or(0, |m| m.data.len() as u32);
                    }
                    ended = true;
                }
                CentralEvent::StreamItem { call: c, data } if c == call => {
                    let item = CounterStreamResponse::decode(data).unwrap_or_default();
                    out.items_ok &= functional::check_item(out.items, item.seq, item.value).is_ok();
                    out.items += 1;
                }
                CentralEvent::StreamEnd { call: c } if c == call => {
                    out.ended = true;
                    ended = true;
                }
                CentralEvent::CallFailed { call: c, error } if c == call => {
                    out.failed = Some(error);
                    ended = true;
                }
                _ => {}
            }
        }
        ended
    }

    /// Calls `blerpc.diagnostics` and checks the answer against what this session did: at
    /// least `calls` requests and `errors` ERROR answers, the 8 KB read's encrypted response
    /// held in the outbox at once, and the link as set here.
    fn diagnostics(&mut self, calls: u64, errors: u64) -> Result<(), Fail> {
        let announced = self
            .central
            .capabilities()
            .is_some_and(|c| c.flags.contains(CapabilityFlags::DIAGNOSTICS));
        ensure(announced, "DIAGNOSTICS is not announced")?;
        self.conn.set_link(LinkFields {
            conn_interval_us: Some(15_000),
            phy: Some(2),
            ..LinkFields::default()
        });
        let call = self
            .central
            .start_call(self.now, DIAGNOSTICS_COMMAND, &[], CallKind::Unary)
            .map_err(|_| Fail("start_call"))?;
        for _ in 0..100 {
            self.exchange()?;
            while let Some(e) = self.central.poll_event() {
                let CentralEvent::Response { call: c, data } = e else {
                    continue;
                };
                ensure(c == call, "a response to another call")?;
                let d = Diagnostics::parse(data).map_err(|_| Fail("the answer does not parse"))?;
                ensure(d.calls.is_some_and(|n| n >= calls), "calls counted")?;
                ensure(
                    d.errors().map(|(_, n)| n).sum::<u64>() >= errors,
                    "errors counted",
                )?;
                ensure(
                    d.outbox_high_water.is_some_and(|b| b >= 8_229),
                    "the outbox mark holds the 8 KB read",
                )?;
                ensure(
                    d.reassembly_high_water.is_some_and(|b| b > 0),
                    "the reassembly mark",
                )?;
                ensure(d.att_mtu == Some(247), "the ATT MTU")?;
                ensure(
                    d.conn_interval_us == Some(15_000) && d.phy == Some(2),
                    "the link as the application set it",
                )?;
                ensure(
                    d.reason(Field::RssiDbm).is_some() && d.rssi_dbm.is_none(),
                    "a missing RSSI is named with its reason",
                )?;
                ensure(d.uptime_ms.is_some(), "the uptime")?;
                match ram_mark() {
                    // The session's calls have run: more than the statics, less than all.
                    Some(m) => ensure(
                        d.ram_high_water
                            .is_some_and(|b| b > m.statics && b < m.total),
                        "the RAM mark: above the statics, below the RAM's end",
                    )?,
                    None => ensure(
                        d.ram_high_water.is_none() && d.reason(Field::RamHighWater).is_some(),
                        "a RAM mark not measured is named with its reason",
                    )?,
                }
                return Ok(());
            }
        }
        Err(Fail("no diagnostics answer"))
    }

    fn echo(&mut self, message: &str) -> Result<(), Fail> {
        let mut req = [0u8; 300];
        let n = EchoRequest { message }
            .encode(&mut req)
            .map_err(|_| Fail("encode"))?;
        let out = self.call("echo", req.get(..n).unwrap_or(&[]), CallKind::Unary, 0)?;
        ensure(out.failed.is_none(), "echo failed")?;
        let keep = out.response.ok_or(Fail("no response"))?;
        if out.response_len <= keep.len() {
            let m = EchoResponse::decode(keep.get(..out.response_len).unwrap_or(&[]))
                .map_err(|_| Fail("decode"))?;
            return functional::check_echo(message, m.message).map_err(|_| Fail("echoed text"));
        }
        // Longer than what was kept: the same encoding, so compare its length, then its head.
        ensure(out.response_len == n, "echoed length differs")?;
        ensure(
            keep.get(..n.min(64)) == req.get(..n.min(64)),
            "echoed bytes differ",
        )
    }

    fn flash_read(&mut self, address: u32, length: u32) -> Result<(), Fail> {
        let mut req = [0u8; FlashReadRequest::MAX_ENCODED_LEN];
        let n = FlashReadRequest { address, length }
            .encode(&mut req)
            .map_err(|_| Fail("encode"))?;
        let out = self.call(
            "flash_read",
            req.get(..n).unwrap_or(&[]),
            CallKind::Unary,
            0,
        )?;
        ensure(out.failed.is_none(), "flash_read failed")?;
        if out.response_len <= 64 {
            let keep = out.response.ok_or(Fail("no response"))?;
            let m = FlashReadResponse::decode(keep.get(..out.response_len).unwrap_or(&[]))
                .map_err(|_| Fail("decode"))?;
            functional::check_flash_read(length, m.data.len())
                .map_err(|_| Fail("flash_read length"))?;
            ensure(
                FLASH
                    .get(address as usize..)
                    .is_some_and(|f| f.starts_with(m.data)),
                "flash_read bytes",
            )
        } else {
            functional::check_flash_read(length, out.items as usize)
                .map_err(|_| Fail("flash_read length"))?;
            ensure(out.items_ok, "flash_read bytes")
        }
    }

    fn data_write(&mut self, len: usize) -> Result<(), Fail> {
        let mut req = [0u8; 8200];
        let mut data = [0u8; 8192];
        let data = data.get_mut(..len).ok_or(Fail("data over 8 KiB"))?;
        data.iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = functional::data_byte(i));
        let n = DataWriteRequest { data: &*data }
            .encode(&mut req)
            .map_err(|_| Fail("encode"))?;
        let out = self.call(
            "data_write",
            req.get(..n).unwrap_or(&[]),
            CallKind::Unary,
            0,
        )?;
        ensure(out.failed.is_none(), "data_write failed")?;
        let keep = out.response.ok_or(Fail("no response"))?;
        let m = DataWriteResponse::decode(keep.get(..out.response_len).unwrap_or(&[]))
            .map_err(|_| Fail("decode"))?;
        functional::check_data_write(len, m.length).map_err(|_| Fail("data_write count"))
    }

    fn counter_stream(&mut self, count: u32) -> Result<(), Fail> {
        let mut req = [0u8; CounterStreamRequest::MAX_ENCODED_LEN];
        let n = CounterStreamRequest { count }
            .encode(&mut req)
            .map_err(|_| Fail("encode"))?;
        let out = self.call(
            "counter_stream",
            req.get(..n).unwrap_or(&[]),
            CallKind::ServerStream,
            0,
        )?;
        ensure(
            out.failed.is_none() && out.ended,
            "counter_stream did not end",
        )?;
        functional::check_item_count(count, out.items)
            .map_err(|_| Fail("counter_stream item count"))?;
        ensure(out.items_ok, "counter_stream items")
    }

    fn counter_upload(&mut self, count: u32) -> Result<(), Fail> {
        let out = self.call("counter_upload", &[], CallKind::ClientStream, count)?;
        ensure(out.failed.is_none(), "counter_upload failed")?;
        let keep = out.response.ok_or(Fail("no response"))?;
        let m = CounterUploadResponse::decode(keep.get(..out.response_len).unwrap_or(&[]))
            .map_err(|_| Fail("decode"))?;
        functional::check_upload(count, m.received_count).map_err(|_| Fail("received_count"))
    }

    /// `chat` (the streams extension): `count` items of 40 bytes sent as the firmware's credits
    /// allow, each echoed back in order, the reader granting room as it reads.
    fn chat(&mut self, count: u8) -> Result<(), Fail> {
        let call = self
            .central
            .start_call(self.now, "chat", &[], CallKind::BidiStream)
            .map_err(|_| Fail("start the chat"))?;
        let (mut sent, mut echoed, mut finished, mut ended) = (0u8, 0u8, false, false);
        for _ in 0..100_000 {
            if sent < count {
                match self.central.send_stream_item(self.now, call, &[sent; 40]) {
                    Ok(()) => sent += 1,
                    Err(CallError::NoCredit | CallError::OutboxFull { .. }) => {}
                    Err(_) => return Err(Fail("send a chat item")),
                }
            } else if !finished {
                finished = self.central.finish_stream(self.now, call).is_ok();
            }
            self.exchange()?;
            while let Some(e) = self.central.poll_event() {
                match e {
                    CentralEvent::StreamItem { call: c, data } if c == call => {
                        ensure(data == [echoed; 40], "a chat echo out of order")?;
                        echoed += 1;
                    }
                    CentralEvent::StreamEnd { call: c } if c == call => ended = true,
                    CentralEvent::CallFailed { call: c, .. } if c == call => {
                        return Err(Fail("the chat failed"));
                    }
                    _ => {}
                }
            }
            // The reader took every echo: room for the whole window.
            let _ = self
                .central
                .grant(self.now, call, usize::from(STREAM_WINDOW));
            if ended {
                return ensure(echoed == count, "chat echo count");
            }
        }
        Err(Fail("the chat never ended"))
    }

    /// A counter stream of `count` items against the central's credits: never more than the
    /// window beyond what the reader took.
    fn credited_counter_stream(&mut self, count: u32) -> Result<(), Fail> {
        let mut req = [0u8; CounterStreamRequest::MAX_ENCODED_LEN];
        let n = CounterStreamRequest { count }
            .encode(&mut req)
            .map_err(|_| Fail("encode"))?;
        let call = self
            .central
            .start_call(
                self.now,
                "counter_stream",
                req.get(..n).unwrap_or(&[]),
                CallKind::ServerStream,
            )
            .map_err(|_| Fail("start_call"))?;
        let mut out = Outcome {
            items_ok: true,
            ..Outcome::default()
        };
        let mut granted = u32::from(STREAM_WINDOW);
        for _ in 0..1_000_000 {
            self.exchange()?;
            let ended = self.drain(call, &mut out);
            ensure(out.items <= granted, "items beyond the central's credits")?;
            if ended {
                ensure(
                    out.failed.is_none() && out.ended,
                    "counter_stream did not end",
                )?;
                functional::check_item_count(count, out.items)
                    .map_err(|_| Fail("counter_stream item count"))?;
                return ensure(out.items_ok, "counter_stream items");
            }
            if out.items == granted {
                // The reader took them all: credit for a whole window more.
                let _ = self
                    .central
                    .grant(self.now, call, usize::from(STREAM_WINDOW));
                granted += u32::from(STREAM_WINDOW);
            }
        }
        Err(Fail("the credited stream never ended"))
    }

    /// Runs one functional test's call and checks what came back.
    fn run(&mut self, call: Call) -> Result<(), Fail> {
        match call {
            Call::Echo(message) => self.echo(message),
            Call::FlashRead { address, length } => self.flash_read(address, length),
            Call::DataWrite { len } => self.data_write(len),
            Call::CounterStream { count } => self.counter_stream(count),
            Call::CounterUpload { count } => self.counter_upload(count),
        }
    }

    /// A call the service must refuse with `code`.
    fn refused(&mut self, call: Call, code: ErrorCode) -> Result<(), Fail> {
        let mut req = [0u8; 300];
        let encoded = match call {
            Call::Echo(message) => EchoRequest { message }.encode(&mut req),
            Call::FlashRead { address, length } => {
                FlashReadRequest { address, length }.encode(&mut req)
            }
            Call::CounterStream { count } => CounterStreamRequest { count }.encode(&mut req),
            Call::DataWrite { .. } | Call::CounterUpload { .. } => {
                return Err(Fail("no refusal of data_write or counter_upload"));
            }
        };
        let n = encoded.map_err(|_| Fail("encode"))?;
        let (name, kind) = match call {
            Call::Echo(_) => ("echo", CallKind::Unary),
            Call::CounterStream { .. } => ("counter_stream", CallKind::ServerStream),
            _ => ("flash_read", CallKind::Unary),
        };
        self.expect_refusal(name, req.get(..n).unwrap_or(&[]), kind, code)
    }

    /// A request the service must refuse with `code`.
    fn expect_refusal(
        &mut self,
        name: &str,
        request: &[u8],
        kind: CallKind,
        code: ErrorCode,
    ) -> Result<(), Fail> {
        let out = self.call(name, request, kind, 0)?;
        ensure(
            out.failed == Some(CallError::Peer(code)),
            "not refused with the expected ERROR",
        )
    }
}

/// Connects, runs the twelve tests and the three limits; failures go to `log`.
pub fn run(tally: &mut Tally, log: &mut dyn FnMut(Note<'_>)) -> Option<Pair> {
    let mut pair = match Pair::connect() {
        Ok(p) => {
            tally.pass("session setup");
            p
        }
        Err(Fail(what)) => {
            log(Note::Fail("setup", &what));
            tally.fail("session setup");
            return None;
        }
    };
    for case in CASES {
        match pair.run(case.call) {
            Ok(()) => tally.pass("functional"),
            Err(Fail(what)) => {
                log(Note::Fail(case.name, &what));
                tally.fail("functional");
            }
        }
    }
    for refusal in functional::refusals(FLASH.len() as u32) {
        match pair.refused(refusal.call, refusal.code) {
            Ok(()) => tally.pass("limits"),
            Err(Fail(what)) => {
                log(Note::Fail(refusal.name, &what));
                tally.fail("limits");
            }
        }
    }
    // The session still works after the refusals.
    match pair.echo("still there") {
        Ok(()) => tally.pass("limits"),
        Err(Fail(what)) => {
            log(Note::Fail("echo after the refusals", &what));
            tally.fail("limits");
        }
    }
    let refusals = functional::refusals(FLASH.len() as u32).len() as u64;
    // Every functional case and refusal is one request at least, and the echo after them.
    let calls = CASES.len() as u64 + refusals + 1;
    match pair.diagnostics(calls, refusals) {
        Ok(()) => tally.pass("diagnostics"),
        Err(Fail(what)) => {
            log(Note::Fail("diagnostics", &what));
            tally.fail("diagnostics");
        }
    }
    streams(tally, log);
    Some(pair)
}

/// One check on a connected pair.
type Check = fn(&mut Pair) -> Result<(), Fail>;

/// The streams extension on the firmware's connection: a chat both ways, a credited stream,
/// and the session usable after them.
fn streams(tally: &mut Tally, log: &mut dyn FnMut(Note<'_>)) {
    let mut pair = match Pair::connect_with(true) {
        Ok(p) => p,
        Err(Fail(what)) => {
            log(Note::Fail("streams setup", &what));
            tally.fail("streams");
            return;
        }
    };
    let checks: [(&str, Check); 3] = [
        ("chat of 20 items", |p| p.chat(20)),
        ("credited counter_stream of 100", |p| {
            p.credited_counter_stream(100)
        }),
        ("echo after the streams", |p| p.echo("after the streams")),
    ];
    for (name, check) in checks {
        match check(&mut pair) {
            Ok(()) => tally.pass("streams"),
            Err(Fail(what)) => {
                log(Note::Fail(name, &what));
                tally.fail("streams");
            }
        }
    }
}

/// The RAM mark's reader and its bounds, where it is measured.
#[derive(Clone, Copy, Debug)]
pub struct RamMark {
    /// Reads the mark (`blerpc_fw_service::ram::high_water`).
    pub read: fn() -> u32,
    /// The statics: the mark's floor.
    pub statics: u32,
    /// All the RAM: the mark's ceiling.
    pub total: u32,
}

/// The RAM mark on the Cortex-M33, where cortex-m-rt painted the stack; none when the checks
/// run natively.
#[cfg(all(target_arch = "arm", target_os = "none"))]
pub fn ram_mark() -> Option<RamMark> {
    use blerpc_fw_service::ram;
    Some(RamMark {
        read: ram::high_water,
        statics: ram::statics(),
        total: ram::total(),
    })
}

/// Natively: not measured.
#[cfg(not(all(target_arch = "arm", target_os = "none")))]
pub fn ram_mark() -> Option<RamMark> {
    None
}
