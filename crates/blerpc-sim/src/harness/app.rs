//! The demo application on the harness's peripheral: the five demo commands (wire.md §1.7) plus
//! two for the large-message tests, and the ways a test makes it misbehave.

use std::collections::VecDeque;
use std::time::Duration;

use blerpc_proto::Instant;
use blerpc_proto::connection::SendError;
use blerpc_proto::wire::error_code::ErrorCode;

use super::pb::{pb_bytes, pb_get_bytes, pb_get_uint, pb_uint};
use super::{TestPeripheral, pb};

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
    /// Items a `counter_stream` may ask for; more is a handler error. Default 10,000 (the
    /// firmware's cap).
    pub max_stream_items: u32,
    /// A send the core refuses is a test failure (a panic naming it), except where the
    /// application expects it (a full outbox under a stream, a response over the limit of the
    /// `big` command). Default `true`; the fuzz targets, whose peers do anything, turn it off.
    pub strict: bool,
}

impl AppConfig {
    fn check(&self, result: Result<(), SendError>, what: &str) {
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
            max_stream_items: 10_000,
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
#[derive(Debug, Default)]
pub(super) struct Service {
    /// Requests waiting for their handler delay: (due, request).
    deferred: Vec<(Instant, Request)>,
    /// Requests held for [`Pair::serve`](super::Pair::serve).
    pub(super) held: VecDeque<Request>,
    /// Peripheral→central streams in progress: (request tid, next seq, count).
    streams: Vec<(u8, u32, u32)>,
    /// Items of the upload in progress.
    upload_items: u32,
    busy_sent: u32,
}

impl Service {
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
            // STREAM_END_C2P: answer the upload with the count of its items.
            let count = std::mem::take(&mut self.upload_items);
            let resp = pb_uint(1, u64::from(count));
            app.check(
                p.respond_upload(now, "counter_upload", &resp),
                "answer an upload",
            );
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
        self.streams.retain_mut(|(tid, next, count)| {
            while *next < *count {
                let mut item = pb_uint(1, u64::from(*next));
                item.extend(pb_uint(2, u64::from(*next * 10)));
                match p.send_stream_item(now, *tid, "counter_stream", &item) {
                    Ok(()) => *next += 1,
                    Err(SendError::OutboxFull { .. }) => return true,
                    Err(e) => {
                        app.check(Err(e), "send a stream item");
                        return false;
                    }
                }
            }
            match p.end_stream(now, *tid) {
                Ok(()) => false,
                Err(SendError::OutboxFull { .. }) => true,
                Err(e) => {
                    app.check(Err(e), "end a stream");
                    false
                }
            }
        });
    }

    /// The demo service (wire.md §1.7): echo, flash_read, data_write, counter_stream,
    /// counter_upload; and `big` / `big_stream` for the large-message tests. Send errors are
    /// the core's business (a closed connection, a response over the limit the core turned
    /// into an ERROR reply): the application ignores them, as an application must be able to.
    fn handle(&mut self, app: &AppConfig, p: &mut TestPeripheral, now: Instant, r: &Request) {
        let (tid, name, data) = (r.tid, r.name.as_str(), r.data.as_slice());
        match name {
            "echo" => app.check(p.respond(now, tid, name, data), "answer echo"),
            "flash_read" => {
                let address = pb_get_uint(data, 1).unwrap_or(0);
                let length = pb_get_uint(data, 2).unwrap_or(0);
                if length > 8192 {
                    app.check(
                        p.respond_error(now, tid, ErrorCode::HandlerFailed),
                        "refuse",
                    );
                    return;
                }
                let bytes: Vec<u8> = (0..length).map(|i| (address + i) as u8).collect();
                let mut resp = pb_uint(1, address);
                resp.extend(pb_bytes(2, &bytes));
                app.check(p.respond(now, tid, name, &resp), "answer flash_read");
            }
            "data_write" => {
                let len = pb_get_bytes(data, 1).map_or(0, |b| b.len());
                let resp = pb_uint(1, len as u64);
                app.check(p.respond(now, tid, name, &resp), "answer data_write");
            }
            "counter_stream" => {
                let count = pb_get_uint(data, 1).unwrap_or(0);
                match u32::try_from(count) {
                    Ok(count) if count <= app.max_stream_items => {
                        self.streams.push((tid, 0, count));
                        self.pump_streams(app, p, now);
                    }
                    _ => app.check(
                        p.respond_error(now, tid, ErrorCode::HandlerFailed),
                        "refuse",
                    ),
                }
            }
            "counter_upload" => {
                self.upload_items += 1;
                app.check(p.ack(tid), "take an upload item");
            }
            // `big` answers `[len u32 LE]` with `len` pattern bytes (a response over the limit
            // becomes ERROR RESPONSE_TOO_LARGE, sent by the core).
            "big" => {
                let len = pb::le_u32(data).unwrap_or(0) as usize;
                let _ = p.respond_with(now, tid, name, len, |out| {
                    for (i, b) in out.iter_mut().enumerate() {
                        *b = (i % 251) as u8;
                    }
                });
            }
            // `big_stream` answers `[count u8][len u32 LE]` with `count` items of `len` bytes
            // (item i filled with i), then STREAM_END_P2C.
            "big_stream" => {
                let count = data.first().copied().unwrap_or(0);
                let len = data.get(1..).and_then(pb::le_u32).unwrap_or(0) as usize;
                for i in 0..count {
                    let sent = p.send_stream_item(now, tid, name, &vec![i; len]);
                    if sent.is_err() {
                        app.check(sent, "send a big stream item");
                        break;
                    }
                }
                app.check(p.end_stream(now, tid), "end a big stream");
            }
            _ => app.check(
                p.respond_error(now, tid, ErrorCode::UnknownCommand),
                "refuse",
            ),
        }
    }
}
