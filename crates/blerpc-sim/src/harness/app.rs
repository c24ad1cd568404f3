//! The demo application on the harness's peripheral: the demo service the firmware runs
//! ([`blerpc_demo::Responder`] over [`DemoService`]), wrapped with the ways a test makes it
//! misbehave ([`AppConfig`]), plus three test commands the service has no business answering:
//!
//! | command | answer |
//! |---|---|
//! | `loop` | the request bytes unchanged, any length (the core's large-message and framing tests) |
//! | `big` | `[len u32 LE]` → `len` bytes `i mod 251` (a response over the limit becomes ERROR RESPONSE_TOO_LARGE, sent by the core) |
//! | `big_stream` | `[count u8][len u32 LE]` → `count` items of `len` bytes (item i filled with i), then STREAM_END_P2C |
//!
//! Everything else (echo, flash_read, data_write, counter_stream, counter_upload, unknown
//! names) is the demo service's, with the firmware's limits, over [`FLASH`].

use std::collections::VecDeque;
use std::time::Duration;

use blerpc_demo::flash::{DemoFlash, SliceFlash};
use blerpc_demo::{DemoLimits, DemoService, Responder, Work};
use blerpc_proto::Instant;
use blerpc_proto::connection::SendError;
use blerpc_proto::wire::error_code::ErrorCode;

use super::TestPeripheral;

/// The flash `flash_read` reads on the harness: byte `i` is `i mod 256`, all readable.
pub static FLASH: [u8; 64 * 1024] = {
    let mut a = [0u8; 64 * 1024];
    let mut i = 0;
    while i < a.len() {
        a[i] = i as u8;
        i += 1;
    }
    a
};

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
    /// Hold every request until [`Pair::serve`](super::Pair::serve) answers it (the fuzz
    /// targets' "the application decides" mode) instead of answering at once.
    pub hold: bool,
    /// Items a `counter_stream` may ask for; more is refused STREAM_LIMIT. Default 10,000 (the
    /// firmware's cap). Read when the pair is built.
    pub max_stream_items: u32,
    /// A send the core refuses is a test failure (a panic naming it), except where the
    /// application expects it (a full outbox under a stream, a response over the limit of the
    /// `big` command). Default `true`; the fuzz targets, whose peers do anything, turn it off.
    pub strict: bool,
    /// The `chat` stream consumes nothing (the central's credits run out) while set.
    pub hold_items: bool,
}

impl AppConfig {
    pub(super) fn check(&self, result: Result<(), SendError>, what: &str) {
        if let Err(e) = result
            && self.strict
        {
            panic!("the demo application could not {what}: {e}");
        }
    }
}

impl Default for AppConfig {
    fn default() -> Self {
        AppConfig {
            handler_delay: Duration::ZERO,
            busy_first: 0,
            ignore: None,
            take_requests: false,
            hold: false,
            max_stream_items: DemoLimits::REFERENCE.max_stream_items,
            hold_items: false,
            strict: true,
        }
    }
}

/// A request the application has not answered yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Its transaction id.
    pub tid: u8,
    /// The command name.
    pub name: String,
    /// The protobuf data.
    pub data: Vec<u8>,
}

/// How [`Pair::serve`](super::Pair::serve) answers a held request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// As the demo service does.
    Serve,
    /// ERROR BUSY.
    Busy,
    /// ERROR with this code.
    Error(ErrorCode),
    /// Never.
    Ignore,
}

/// The application's state between events.
#[derive(Debug)]
pub(super) struct Service {
    /// The demo service on this connection.
    responder: Responder<SliceFlash>,
    /// Requests waiting for their handler delay: (due, request).
    deferred: Vec<(Instant, Request)>,
    /// Requests held for [`Pair::serve`](super::Pair::serve).
    pub(super) held: VecDeque<Request>,
    busy_sent: u32,
}

impl Service {
    /// The demo service with the firmware's limits but `app`'s stream cap.
    pub(super) fn new(app: &AppConfig) -> Service {
        let end = FLASH.len() as u32;
        let flash = match DemoFlash::new(SliceFlash(&FLASH), 0..end, end..end) {
            Ok(flash) => flash,
            Err(e) => unreachable!("the harness flash layout is valid: {e}"),
        };
        let limits = DemoLimits {
            max_stream_items: app.max_stream_items,
            ..DemoLimits::REFERENCE
        };
        Service {
            responder: Responder::new(DemoService::new(flash, limits)),
            deferred: Vec::new(),
            held: VecDeque::new(),
            busy_sent: 0,
        }
    }

    /// The earliest deferred answer.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.deferred.iter().map(|(at, _)| *at).min()
    }

    /// A request arrived (or STREAM_END_C2P, with an empty name).
    pub(super) fn on_request(
        &mut self,
        app: &AppConfig,
        p: &mut TestPeripheral,
        now: Instant,
        request: Request,
    ) {
        if request.name.is_empty() {
            // STREAM_END_C2P: the service answers the upload with the count of its items.
            let done = self.responder.run(now, p, Work::UploadEnd);
            app.check(done, "answer an upload");
            return;
        }
        if app.hold {
            self.held.push_back(request);
            return;
        }
        if app.ignore == Some(request.name.as_str()) {
            return;
        }
        if self.busy_sent < app.busy_first {
            self.busy_sent += 1;
            app.check(
                p.respond_error(now, request.tid, ErrorCode::Busy),
                "refuse a request",
            );
            return;
        }
        if app.handler_delay > Duration::ZERO {
            self.deferred.push((now + app.handler_delay, request));
        } else {
            self.handle(app, p, now, &request);
        }
    }

    /// Runs the handlers whose delay has passed.
    pub(super) fn run_due(&mut self, app: &AppConfig, p: &mut TestPeripheral, now: Instant) {
        let (due, keep): (Vec<_>, Vec<_>) = self.deferred.drain(..).partition(|(at, _)| *at <= now);
        self.deferred = keep;
        for (_, request) in due {
            self.handle(app, p, now, &request);
        }
    }

    /// Answers the oldest held request as `answer` says.
    pub(super) fn serve_held(
        &mut self,
        app: &AppConfig,
        p: &mut TestPeripheral,
        now: Instant,
        answer: Answer,
    ) -> bool {
        let Some(request) = self.held.pop_front() else {
            return false;
        };
        match answer {
            Answer::Serve => self.handle(app, p, now, &request),
            Answer::Busy => {
                let _ = p.respond_error(now, request.tid, ErrorCode::Busy);
            }
            Answer::Error(code) => {
                let _ = p.respond_error(now, request.tid, code);
            }
            Answer::Ignore => {}
        }
        true
    }

    /// Sends stream items while the peripheral's outbox has room (backpressure, as a runtime
    /// awaiting link capacity would).
    pub(super) fn pump_streams(&mut self, app: &AppConfig, p: &mut TestPeripheral, now: Instant) {
        if self.responder.is_streaming() {
            let sent = self.responder.pump(now, p);
            app.check(sent, "send a stream item");
        }
    }

    /// The test commands, then the demo service. Send errors the application expects (a
    /// response over the limit of `big`, which the core turned into an ERROR reply) are
    /// ignored, as an application must be able to.
    fn handle(&mut self, app: &AppConfig, p: &mut TestPeripheral, now: Instant, r: &Request) {
        let (tid, name, data) = (r.tid, r.name.as_str(), r.data.as_slice());
        match name {
            "loop" => app.check(p.respond(now, tid, name, data), "answer loopback"),
            "big" => {
                let len = le_u32(data).unwrap_or(0) as usize;
                let _ = p.respond_with(now, tid, name, len, |out| {
                    for (i, b) in out.iter_mut().enumerate() {
                        *b = (i % 251) as u8;
                    }
                });
            }
            "big_stream" => {
                let count = data.first().copied().unwrap_or(0);
                let len = data.get(1..).and_then(le_u32).unwrap_or(0) as usize;
                for i in 0..count {
                    let sent = p.send_stream_item(now, tid, name, &vec![i; len]);
                    if sent.is_err() {
                        app.check(sent, "send a big stream item");
                        break;
                    }
                }
                app.check(p.end_stream(now, tid), "end a big stream");
            }
            _ => {
                let work = self.responder.decode(tid, name, data);
                let done = self.responder.run(now, p, work);
                app.check(done, "answer a request");
            }
        }
    }
}

/// The `big` command's response of `len` bytes.
pub fn big_response(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// The first four bytes as a little-endian `u32`.
fn le_u32(b: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(..4)?.try_into().ok()?))
}
