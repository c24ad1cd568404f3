//! `chat`: the demo's bidirectional stream (the streams extension), next to the bleRPC demo
//! service's commands. The reference service has no stream both ways, so it is served beside
//! the generated dispatch rather than from the reference's `.proto`: each item the central
//! sends comes back as one item, in order, as it is read; the call ends once the central ended
//! its half and every echo went.
//!
//! Two servings of the one behaviour: [`ChatEcho`], on the core's peripheral with fixed buffers
//! and no allocator (the firmware, the test harness), and `WithChat`, beside a runtime
//! server's dispatch (feature `std`).
//!
//! ```
//! use blerpc::server::{CallKind, Dispatch};
//! use blerpc_demo::chat::{CHAT, WithChat};
//! use blerpc_demo::{DemoService, pb};
//!
//! let service = WithChat(pb::BlerpcServer::new(DemoService::default()));
//! assert_eq!(service.kind(CHAT), Some(CallKind::BidiStream));
//! assert_eq!(service.kind("echo"), Some(CallKind::Unary));
//! ```

#[cfg(feature = "std")]
use blerpc::server::{BoxFuture, BoxStream, Bytes, CallKind, Dispatch, Status};
use blerpc_proto::Instant;
use blerpc_proto::buf::Buffer;
use blerpc_proto::connection::{Peripheral, SendError};
use blerpc_proto::crypto::CryptoProvider;
use blerpc_proto::wire::error_code::ErrorCode;
#[cfg(feature = "std")]
use futures_util::StreamExt as _;
use rand_core::CryptoRngCore;

/// The command name of the demo's bidirectional stream.
pub const CHAT: &str = "chat";

/// `chat` on the core's peripheral: at most `N` items of at most `LEN` bytes held while their
/// echoes wait for the central's credit or outbox room (the peripheral's window, its
/// `stream_window`, must not exceed `N`). An item is reported consumed once its echo is
/// queued, so the central's credits follow what this side can hold.
#[derive(Debug)]
pub struct ChatEcho<const N: usize, const LEN: usize> {
    /// The open stream's id (its open request's tid).
    stream: Option<u8>,
    items: [([u8; LEN], usize); N],
    head: usize,
    len: usize,
    /// The central ended its half.
    ended: bool,
    /// Items received in all (every stream).
    received: u32,
}

impl<const N: usize, const LEN: usize> Default for ChatEcho<N, LEN> {
    fn default() -> Self {
        ChatEcho {
            stream: None,
            items: [([0; LEN], 0); N],
            head: 0,
            len: 0,
            ended: false,
            received: 0,
        }
    }
}

impl<const N: usize, const LEN: usize> ChatEcho<N, LEN> {
    /// Request `tid` for `chat` arrived: it must have opened a stream both ways (else it is
    /// refused UNKNOWN_COMMAND, as a runtime server refuses it), and only one is open at once.
    pub fn open<P, R, A, O, const SLOTS: usize>(
        &mut self,
        now: Instant,
        p: &mut Peripheral<P, R, A, O, SLOTS>,
        tid: u8,
    ) -> Result<(), SendError>
    where
        P: CryptoProvider,
        P::Identity: Clone,
        R: CryptoRngCore,
        A: Buffer + Default,
        O: Buffer + Default,
    {
        if !p.is_bidi_open(tid) || self.stream.is_some() {
            return p.respond_error(now, tid, ErrorCode::UnknownCommand);
        }
        let received = self.received;
        *self = ChatEcho {
            stream: Some(tid),
            received,
            ..ChatEcho::default()
        };
        Ok(())
    }

    /// An item of stream `stream` arrived: copied out of the event (which borrows the
    /// peripheral) to wait for its echo. One that does not fit (longer than `LEN`, or beyond
    /// `N` held) ends the stream here: the caller answers the stream with the code returned
    /// (`Peripheral::respond_error(now, stream, code)`).
    pub fn item(&mut self, stream: u8, data: &[u8]) -> Option<ErrorCode> {
        if self.stream != Some(stream) {
            return None;
        }
        self.received = self.received.saturating_add(1);
        let slot = (self.head + self.len) % N.max(1);
        match self.items.get_mut(slot) {
            Some((buf, len)) if self.len < N && data.len() <= LEN => {
                if let Some(dst) = buf.get_mut(..data.len()) {
                    dst.copy_from_slice(data);
                }
                *len = data.len();
                self.len += 1;
                None
            }
            _ => {
                self.stream = None;
                Some(if data.len() > LEN {
                    ErrorCode::RequestTooLarge
                } else {
                    ErrorCode::StreamLimit
                })
            }
        }
    }

    /// The central ended its half of stream `stream`.
    pub fn items_end(&mut self, stream: u8) {
        if self.stream == Some(stream) {
            self.ended = true;
        }
    }

    /// Request `tid` was cancelled (or the stream otherwise ended): nothing more is sent.
    pub fn cancelled(&mut self, tid: u8) {
        if self.stream == Some(tid) {
            self.stream = None;
            self.len = 0;
        }
    }

    /// Items held, their echoes not yet queued.
    pub fn held(&self) -> usize {
        self.len
    }

    /// Items received in all.
    pub fn received(&self) -> u32 {
        self.received
    }

    /// `true` while a stream is open.
    pub fn is_open(&self) -> bool {
        self.stream.is_some()
    }

    /// Queues the held items' echoes while the central's credits and the outbox allow (each
    /// reported consumed as it goes), then the end once the central ended its half and all
    /// went. With `hold` nothing moves (an application that consumes nothing).
    pub fn pump<P, R, A, O, const SLOTS: usize>(
        &mut self,
        now: Instant,
        p: &mut Peripheral<P, R, A, O, SLOTS>,
        hold: bool,
    ) -> Result<(), SendError>
    where
        P: CryptoProvider,
        P::Identity: Clone,
        R: CryptoRngCore,
        A: Buffer + Default,
        O: Buffer + Default,
    {
        let Some(stream) = self.stream else {
            return Ok(());
        };
        if hold {
            return Ok(());
        }
        while self.len > 0 {
            let Some((buf, len)) = self.items.get(self.head) else {
                return Ok(());
            };
            match p.send_stream_item(now, stream, CHAT, buf.get(..*len).unwrap_or(&[])) {
                Ok(()) => {
                    self.head = (self.head + 1) % N.max(1);
                    self.len -= 1;
                    p.consumed(now, stream, 1)?;
                }
                Err(SendError::NoCredit | SendError::OutboxFull { .. }) => return Ok(()),
                Err(e) => {
                    self.stream = None;
                    return Err(e);
                }
            }
        }
        if self.ended {
            match p.end_stream(now, stream) {
                Err(SendError::OutboxFull { .. }) => {}
                done => {
                    self.stream = None;
                    return done;
                }
            }
        }
        Ok(())
    }
}

/// A dispatch and `chat` beside it: every other command goes to the inner dispatch.
#[cfg(feature = "std")]
#[derive(Debug, Clone)]
pub struct WithChat<D>(pub D);

#[cfg(feature = "std")]
impl<D: Dispatch> Dispatch for WithChat<D> {
    fn kind(&self, name: &str) -> Option<CallKind> {
        if name == CHAT {
            Some(CallKind::BidiStream)
        } else {
            self.0.kind(name)
        }
    }
    fn unary(&self, name: &str, request: Bytes) -> BoxFuture<Result<Vec<u8>, Status>> {
        self.0.unary(name, request)
    }
    fn server_stream(&self, name: &str, request: Bytes) -> BoxStream<Result<Vec<u8>, Status>> {
        self.0.server_stream(name, request)
    }
    fn client_stream(
        &self,
        name: &str,
        items: BoxStream<Bytes>,
    ) -> BoxFuture<Result<Vec<u8>, Status>> {
        self.0.client_stream(name, items)
    }
    fn sole_upload(&self) -> Option<&'static str> {
        self.0.sole_upload()
    }
    fn bidi_stream(
        &self,
        name: &str,
        items: BoxStream<Bytes>,
    ) -> BoxStream<Result<Vec<u8>, Status>> {
        if name == CHAT {
            Box::pin(items.map(|item| Ok(item.to_vec())))
        } else {
            self.0.bidi_stream(name, items)
        }
    }
}
