//! The demo service answering a core [`Peripheral`]'s request events, one connection at a time:
//! what the firmware runs for each connection and what the simulator's demo application wraps
//! with its fault injection.
//!
//! A request event borrows the peripheral that must answer it, so answering takes two steps:
//! [`Responder::decode`] turns the event into owned [`Work`], then [`Responder::run`] answers it
//! on the peripheral. Stream items are queued as the outbox drains ([`Responder::pump`]), so a
//! 10,000-item stream needs no more memory than one item; one counter stream runs at a time per
//! connection, a second is refused `BUSY`. Every other command is answered `UNKNOWN_COMMAND`,
//! an undecodable request `DECODE_FAILED` (the reference stays silent on both, wire.md §5.6).

use blerpc_proto::Instant;
use blerpc_proto::buf::Buffer;
use blerpc_proto::connection::{Peripheral, SendError};
use blerpc_proto::crypto::CryptoProvider;
use blerpc_proto::wire::error_code::ErrorCode;
use rand_core::CryptoRngCore;

use crate::flash::Flash;
use crate::noalloc::{
    BlerpcCommand, CounterStreamRequest, CounterStreamResponse, CounterUploadRequest,
    DataWriteRequest, EchoRequest, FlashReadRequest,
};
use crate::service::{CounterItems, DemoService, ECHO_CAPACITY};

/// What the responder counted on its connection (reported by the runtimes).
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

/// A request decoded out of the event that carried it.
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
        request: FlashReadRequest,
    },
    /// `data_write` of `length` bytes.
    DataWrite {
        /// The request's tid.
        tid: u8,
        /// Bytes received.
        length: u32,
    },
    /// `counter_stream`.
    CounterStream {
        /// The request's tid.
        tid: u8,
        /// The request.
        request: CounterStreamRequest,
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
pub struct Responder<F> {
    service: DemoService<F>,
    stream: Option<(u8, CounterItems)>,
    uploaded: u32,
    stats: Stats,
}

impl<F: Flash> Responder<F> {
    /// The service's responder for a new connection.
    pub fn new(service: DemoService<F>) -> Self {
        Responder {
            service,
            stream: None,
            uploaded: 0,
            stats: Stats::default(),
        }
    }

    /// The service it answers with.
    pub fn service(&self) -> &DemoService<F> {
        &self.service
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
        let Some(command) = BlerpcCommand::from_name(name) else {
            return refuse(ErrorCode::UnknownCommand);
        };
        match command {
            BlerpcCommand::Echo => match EchoRequest::decode(data) {
                Ok(request) => match self.service.echo(request) {
                    Ok(reply) => {
                        let mut text = [0u8; ECHO_CAPACITY];
                        let len = reply.message.len();
                        if let Some(dst) = text.get_mut(..len) {
                            dst.copy_from_slice(reply.message.as_bytes());
                        }
                        Work::Echo { tid, len, text }
                    }
                    Err(refusal) => refuse(refusal.code()),
                },
                Err(_) => decode_failed,
            },
            BlerpcCommand::FlashRead => match FlashReadRequest::decode(data) {
                Ok(request) => Work::FlashRead { tid, request },
                Err(_) => decode_failed,
            },
            BlerpcCommand::DataWrite => match DataWriteRequest::decode(data) {
                Ok(request) => Work::DataWrite {
                    tid,
                    length: self.service.data_write(&request).length,
                },
                Err(_) => decode_failed,
            },
            BlerpcCommand::CounterStream => match CounterStreamRequest::decode(data) {
                Ok(request) => Work::CounterStream { tid, request },
                Err(_) => decode_failed,
            },
            BlerpcCommand::CounterUpload => match CounterUploadRequest::decode(data) {
                Ok(_) => Work::UploadItem { tid },
                Err(_) => decode_failed,
            },
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
        let name = |c: BlerpcCommand| c.name();
        match work {
            Work::Echo { tid, len, text } => {
                let message = core::str::from_utf8(text.get(..len).unwrap_or(&[])).unwrap_or("");
                let reply = crate::noalloc::EchoResponse { message };
                self.stats.responses = self.stats.responses.saturating_add(1);
                p.respond_with(
                    now,
                    tid,
                    name(BlerpcCommand::Echo),
                    reply.encoded_len(),
                    |out| {
                        let _ = reply.encode(out);
                    },
                )
            }
            Work::FlashRead { tid, request } => match self.service.flash_read(request) {
                Ok(reply) => {
                    self.stats.responses = self.stats.responses.saturating_add(1);
                    let n = reply.encoded_len();
                    p.respond_with(now, tid, name(BlerpcCommand::FlashRead), n, |out| {
                        let _ = reply.encode(out);
                    })
                }
                Err(refusal) => self.refuse(now, p, tid, refusal.code()),
            },
            Work::DataWrite { tid, length } => {
                let reply = crate::noalloc::DataWriteResponse { length };
                self.stats.responses = self.stats.responses.saturating_add(1);
                let n = reply.encoded_len();
                p.respond_with(now, tid, name(BlerpcCommand::DataWrite), n, |out| {
                    let _ = reply.encode(out);
                })
            }
            Work::CounterStream { tid, request } => {
                let items = match self.service.counter_stream(request) {
                    Ok(items) => items,
                    Err(refusal) => return self.refuse(now, p, tid, refusal.code()),
                };
                if self.stream.is_some() {
                    return self.refuse(now, p, tid, ErrorCode::Busy);
                }
                self.stream = Some((tid, items));
                self.pump(now, p)
            }
            Work::UploadItem { tid } => {
                self.uploaded = self.uploaded.saturating_add(1);
                self.stats.upload_items = self.stats.upload_items.saturating_add(1);
                p.ack(tid)
            }
            Work::UploadEnd => {
                let reply = self
                    .service
                    .counter_upload(core::mem::take(&mut self.uploaded));
                // Sized by the message's own bound: the encoding cannot fall short.
                let mut buf = [0u8; crate::noalloc::CounterUploadResponse::MAX_ENCODED_LEN];
                let n = reply.encode(&mut buf).unwrap_or(0);
                self.stats.responses = self.stats.responses.saturating_add(1);
                p.respond_upload(
                    now,
                    name(BlerpcCommand::CounterUpload),
                    buf.get(..n).unwrap_or(&[]),
                )
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
        self.stats.refused = self.stats.refused.saturating_add(1);
        p.respond_error(now, tid, code)
    }

    /// Queues as many items of the running counter stream as the outbox takes, then its end.
    /// Call it whenever the link has taken PDUs. A full outbox is not an error (the rest goes
    /// later); any other refusal of the core ends the stream and is returned.
    pub fn pump<P, R, A, O, const SLOTS: usize>(
        &mut self,
        now: Instant,
        p: &mut Peripheral<P, R, A, O, SLOTS>,
    ) -> Result<(), SendError>
    where
        P: CryptoProvider,
        P::Identity: Clone,
        R: CryptoRngCore,
        A: Buffer + Default,
        O: Buffer + Default,
    {
        while let Some((tid, items)) = self.stream.as_mut() {
            let tid = *tid;
            let Some(item) = items.peek() else {
                return match p.end_stream(now, tid) {
                    Err(SendError::OutboxFull { .. }) => Ok(()),
                    done => {
                        self.stream = None;
                        done
                    }
                };
            };
            let mut buf = [0u8; CounterStreamResponse::MAX_ENCODED_LEN];
            let n = item.encode(&mut buf).unwrap_or(0);
            let name = BlerpcCommand::CounterStream.name();
            match p.send_stream_item(now, tid, name, buf.get(..n).unwrap_or(&[])) {
                Ok(()) => {
                    items.next();
                    self.stats.stream_items = self.stats.stream_items.saturating_add(1);
                }
                // Room in the outbox, or the central's credit (the streams extension), comes later.
                Err(SendError::OutboxFull { .. } | SendError::NoCredit) => return Ok(()),
                Err(e) => {
                    // The connection closed or the core refused the stream: nothing more to send.
                    self.stream = None;
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}
