//! The demo service's five commands, answered on a [`Peripheral`] of the core, with the
//! reference firmware's limits (`handlers.c`, `blerpc.options`; the same defaults as
//! `blerpc_demo::DemoLimits` on the host).
//!
//! | command | answer | refused with |
//! |---|---|---|
//! | `echo` | the same message | `DECODE_FAILED` over `max_echo` bytes (the reference cannot decode it either) |
//! | `flash_read` | `length` bytes of flash at `address`, copied straight into the outbox | `HANDLER_FAILED` over `max_read` or outside the readable range |
//! | `data_write` | the number of bytes received | — |
//! | `counter_stream` | `count` items `{seq, seq × 10}`, each under a fresh tid, then STREAM_END_P2C | `STREAM_LIMIT` over `max_stream_items`; `BUSY` while another stream runs |
//! | `counter_upload` | nothing per item; `{received_count}` after STREAM_END_C2P | — |
//!
//! Every other command is answered `UNKNOWN_COMMAND`, an undecodable request `DECODE_FAILED`
//! (the reference stays silent on both, wire.md §5.6). Stream items are sent as the outbox
//! drains ([`DemoService::pump`]), so a 10,000-item stream needs no more memory than one item.

use blerpc_proto::Instant;
use blerpc_proto::buf::Buffer;
use blerpc_proto::connection::{Peripheral, SendError};
use blerpc_proto::crypto::CryptoProvider;
use blerpc_proto::wire::error_code::ErrorCode;
use rand_core::CryptoRngCore;

use crate::flash::{DemoFlash, Flash};
use crate::pb;

/// The longest echo message the service can hold (the reference's nanopb `max_size: 257`,
/// less its terminator); [`DemoLimits::max_echo`] can only lower it.
pub const ECHO_CAPACITY: usize = 256;

/// Limits of the demo service. Defaults are the reference firmware's, as
/// `blerpc_demo::DemoLimits::default()` on the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DemoLimits {
    /// Longest echo message in bytes, at most [`ECHO_CAPACITY`]. Default 256.
    pub max_echo: usize,
    /// Longest flash read in bytes. Default 8,192.
    pub max_read: u32,
    /// Most items of one counter stream. Default 10,000.
    pub max_stream_items: u32,
}

impl DemoLimits {
    /// The reference firmware's limits.
    pub const REFERENCE: DemoLimits = DemoLimits {
        max_echo: 256,
        max_read: 8192,
        max_stream_items: 10_000,
    };
}

impl Default for DemoLimits {
    fn default() -> Self {
        DemoLimits::REFERENCE
    }
}

/// What the service counted on its connection (reported by the runtimes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests answered with a response.
    pub responses: u32,
    /// Requests refused with an ERROR.
    pub refused: u32,
    /// Counter stream items sent.
    pub stream_items: u32,
    /// Counter upload items received.
    pub upload_items: u32,
}

#[derive(Clone, Copy, Debug)]
struct CounterStream {
    tid: u8,
    next: u32,
    count: u32,
}

/// A request decoded out of the event that carried it (the event borrows the peripheral, which
/// the answer needs).
#[derive(Clone, Copy, Debug)]
// The echo text travels by value (no allocator to box it); a `Work` lives on the stack only
// between decoding a request and answering it.
#[allow(clippy::large_enum_variant)]
pub enum Work {
    /// `echo` with its message.
    Echo {
        /// The request's tid.
        tid: u8,
        /// The message length.
        len: usize,
        /// The message bytes (UTF-8).
        text: [u8; ECHO_CAPACITY],
    },
    /// `flash_read`.
    FlashRead {
        /// The request's tid.
        tid: u8,
        /// The request.
        request: pb::FlashReadRequest,
    },
    /// `data_write` of `length` bytes.
    DataWrite {
        /// The request's tid.
        tid: u8,
        /// Bytes received.
        length: u32,
    },
    /// `counter_stream` of `count` items.
    CounterStream {
        /// The request's tid.
        tid: u8,
        /// Items asked for.
        count: u32,
    },
    /// One `counter_upload` item.
    UploadItem {
        /// The item's tid.
        tid: u8,
    },
    /// The central ended its upload.
    UploadEnd,
    /// A request refused with an ERROR.
    Refuse {
        /// The request's tid.
        tid: u8,
        /// Why.
        code: ErrorCode,
    },
}

/// The demo service on one connection.
#[derive(Debug)]
pub struct DemoService<F> {
    flash: DemoFlash<F>,
    limits: DemoLimits,
    stream: Option<CounterStream>,
    uploaded: u32,
    stats: Stats,
}

impl<F: Flash> DemoService<F> {
    /// A service reading `flash` within `limits` (`max_echo` is capped at [`ECHO_CAPACITY`]).
    pub fn new(flash: DemoFlash<F>, mut limits: DemoLimits) -> Self {
        limits.max_echo = limits.max_echo.min(ECHO_CAPACITY);
        DemoService {
            flash,
            limits,
            stream: None,
            uploaded: 0,
            stats: Stats::default(),
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> DemoLimits {
        self.limits
    }

    /// What was counted so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// `true` while a counter stream is being sent.
    pub fn is_streaming(&self) -> bool {
        self.stream.is_some()
    }

    /// Decodes a request event's command into owned [`Work`].
    pub fn decode(&self, tid: u8, name: &str, data: &[u8]) -> Work {
        let refuse = |code| Work::Refuse { tid, code };
        let decode_failed = refuse(ErrorCode::DecodeFailed);
        match name {
            "echo" => match pb::Echo::decode(data) {
                Ok(m) if m.message.len() <= self.limits.max_echo => {
                    let mut text = [0u8; ECHO_CAPACITY];
                    let len = m.message.len();
                    if let Some(dst) = text.get_mut(..len) {
                        dst.copy_from_slice(m.message.as_bytes());
                    }
                    Work::Echo { tid, len, text }
                }
                _ => decode_failed,
            },
            "flash_read" => match pb::FlashReadRequest::decode(data) {
                Ok(request) => Work::FlashRead { tid, request },
                Err(_) => decode_failed,
            },
            "data_write" => match pb::DataWriteRequest::decode(data) {
                Ok(m) => Work::DataWrite {
                    tid,
                    length: u32::try_from(m.data.len()).unwrap_or(u32::MAX),
                },
                Err(_) => decode_failed,
            },
            "counter_stream" => match pb::Count::decode(data) {
                Ok(m) => Work::CounterStream {
                    tid,
                    count: m.value,
                },
                Err(_) => decode_failed,
            },
            "counter_upload" => match pb::Counter::decode(data) {
                Ok(_) => Work::UploadItem { tid },
                Err(_) => decode_failed,
            },
            _ => refuse(ErrorCode::UnknownCommand),
        }
    }

    /// Answers `work` on `p`. An error means the answer could not be queued (the connection is
    /// closed, or its outbox cannot take it: the core has already told the central where the
    /// protocol allows).
    pub fn run<P, R, A, O, const SLOTS: usize>(
        &mut self,
        now: Instant,
        p: &mut Peripheral<P, R, A, O, SLOTS>,
        work: Work,
    ) -> Result<(), SendError>
    where
        P: CryptoProvider,
        P::Identity: Clone,
        R: CryptoRngCore,
        A: Buffer + Default,
        O: Buffer + Default,
    {
        let mut small = [0u8; 16];
        match work {
            Work::Echo { tid, len, text } => {
                let message = core::str::from_utf8(text.get(..len).unwrap_or(&[])).unwrap_or("");
                let m = pb::Echo { message };
                let n = m.encoded_len();
                self.stats.responses += 1;
                p.respond_with(now, tid, "echo", n, |out| {
                    let _ = m.encode(out);
                })
            }
            Work::FlashRead { tid, request } => {
                let pb::FlashReadRequest { address, length } = request;
                if length > self.limits.max_read || !self.flash.can_read(address, length) {
                    return self.refuse(now, p, tid, ErrorCode::HandlerFailed);
                }
                let len = length as usize;
                let header = pb::FlashReadResponse::header_len(address, len);
                let flash = &self.flash;
                self.stats.responses += 1;
                p.respond_with(now, tid, "flash_read", header + len, |out| {
                    if let Ok(n) = pb::FlashReadResponse::encode_header(address, len, out)
                        && let Some(data) = out.get_mut(n..n + len)
                    {
                        flash.read(address, data);
                    }
                })
            }
            Work::DataWrite { tid, length } => {
                let n = pb::Count { value: length }.encode(&mut small).unwrap_or(0);
                self.stats.responses += 1;
                p.respond(now, tid, "data_write", small.get(..n).unwrap_or(&[]))
            }
            Work::CounterStream { tid, count } => {
                if count > self.limits.max_stream_items {
                    return self.refuse(now, p, tid, ErrorCode::StreamLimit);
                }
                if self.stream.is_some() {
                    return self.refuse(now, p, tid, ErrorCode::Busy);
                }
                self.stream = Some(CounterStream {
                    tid,
                    next: 0,
                    count,
                });
                self.pump(now, p);
                Ok(())
            }
            Work::UploadItem { tid } => {
                self.uploaded = self.uploaded.saturating_add(1);
                self.stats.upload_items = self.stats.upload_items.saturating_add(1);
                p.ack(tid)
            }
            Work::UploadEnd => {
                let received = core::mem::take(&mut self.uploaded);
                let n = pb::Count { value: received }
                    .encode(&mut small)
                    .unwrap_or(0);
                self.stats.responses += 1;
                p.respond_upload(now, "counter_upload", small.get(..n).unwrap_or(&[]))
            }
            Work::Refuse { tid, code } => self.refuse(now, p, tid, code),
        }
    }

    fn refuse<P, R, A, O, const SLOTS: usize>(
        &mut self,
        now: Instant,
        p: &mut Peripheral<P, R, A, O, SLOTS>,
        tid: u8,
        code: ErrorCode,
    ) -> Result<(), SendError>
    where
        P: CryptoProvider,
        P::Identity: Clone,
        R: CryptoRngCore,
        A: Buffer + Default,
        O: Buffer + Default,
    {
        self.stats.refused += 1;
        p.respond_error(now, tid, code)
    }

    /// Queues as many items of the running counter stream as the outbox takes, then its end.
    /// Call it whenever the link has taken PDUs.
    pub fn pump<P, R, A, O, const SLOTS: usize>(
        &mut self,
        now: Instant,
        p: &mut Peripheral<P, R, A, O, SLOTS>,
    ) where
        P: CryptoProvider,
        P::Identity: Clone,
        R: CryptoRngCore,
        A: Buffer + Default,
        O: Buffer + Default,
    {
        while let Some(s) = self.stream.as_mut() {
            if s.next == s.count {
                match p.end_stream(now, s.tid) {
                    Err(SendError::OutboxFull { .. }) => {}
                    _ => self.stream = None,
                }
                return;
            }
            let item = pb::Counter {
                seq: s.next,
                value: (s.next as i32).wrapping_mul(10),
            };
            let mut buf = [0u8; pb::Counter::MAX_LEN];
            let n = item.encode(&mut buf).unwrap_or(0);
            match p.send_stream_item(now, s.tid, "counter_stream", buf.get(..n).unwrap_or(&[])) {
                Ok(()) => {
                    s.next += 1;
                    self.stats.stream_items = self.stats.stream_items.saturating_add(1);
                }
                Err(SendError::OutboxFull { .. }) => return,
                Err(_) => {
                    // The connection closed or the core refused the stream: nothing more to send.
                    self.stream = None;
                    return;
                }
            }
        }
    }
}
