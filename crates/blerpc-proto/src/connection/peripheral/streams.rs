//! The streams extension on the peripheral: a stream's items sent only against the central's
//! credits, and the central→peripheral half of a bidirectional stream (its items handed out,
//! credited back as the application consumes them, its end).
//!
//! ```text
//! central                                   peripheral
//!   REQUEST [OPEN|BIDI, window W] tid 5 ──►  Request { tid 5 }; CREDIT [5][stream_window]
//!   REQUEST [ITEM, stream 5] ─────────────►  StreamItem { stream 5 }   (one central credit)
//!   ◄── RESPONSE items under fresh tids      (one of the W credits each)
//!   CREDIT [5][n] ────────────────────────►  n more items may go
//!   STREAM_END_C2P [5] ───────────────────►  ItemsEnd { stream 5 }
//!   ◄── STREAM_END_P2C                       the stream is over
//! ```

use rand_core::CryptoRngCore;

use super::Peripheral;
use super::event::Record;
use crate::buf::Buffer;
use crate::connection::SendError;
use crate::connection::endpoint::MsgRef;
use crate::connection::events::Warning;
use crate::crypto::CryptoProvider;
use crate::wire::command::{BIDI_FLAG, ITEM_FLAG, OPEN_FLAG};
use crate::wire::command::{DEADLINE_FLAG, StreamOpen};
use crate::wire::container::ControlCmd;
use crate::wire::error_code::ErrorCode;

/// The central→peripheral half of the open bidirectional stream.
#[derive(Clone, Copy, Debug)]
pub(super) struct BidiIn {
    /// The stream's id: its open request's tid.
    stream: u8,
    /// Credits the central holds: items it may still send.
    held: u32,
    /// Items handed out and not consumed yet.
    unconsumed: u32,
    /// Items consumed and not credited back yet.
    consumed: u32,
    /// The central ended its half (STREAM_END_C2P).
    ended: bool,
}

/// Where an arriving stream item goes.
pub(super) enum ItemFate {
    /// Handed out.
    Accepted,
    /// Beyond the central's credits: the stream ended with an error.
    OverCredit,
    /// No such open stream: dropped.
    Unknown,
}

impl<P, R, A, O, const SLOTS: usize> Peripheral<P, R, A, O, SLOTS>
where
    P: CryptoProvider,
    P::Identity: Clone,
    R: CryptoRngCore,
    A: Buffer + Default,
    O: Buffer + Default,
{
    /// Items of the stream opened by request `request_tid` the central accepts now: `None`
    /// for a stream without flow control (no streams extension), `Some(0)` when
    /// [`Peripheral::send_stream_item`] would answer [`SendError::NoCredit`].
    pub fn stream_credits(&self, request_tid: u8) -> Option<u32> {
        self.credit
            .filter(|(t, _)| *t == request_tid)
            .map(|(_, n)| n)
    }

    /// `true` if request `request_tid` opened a bidirectional stream (still open): what the
    /// application checks against its command's shape (a unary command opened as a stream
    /// both ways is refused, as is a bidirectional command called any other way).
    pub fn is_bidi_open(&self, request_tid: u8) -> bool {
        self.bidi.is_some_and(|b| b.stream == request_tid)
    }

    /// The application consumed `n` items of the bidirectional stream `stream` (the items
    /// [`PeripheralEvent::StreamItem`](super::PeripheralEvent::StreamItem) handed out): once
    /// half the window is consumed, a CREDIT control gives the central that many back. More
    /// than were handed out counts as all of them; an unknown stream is
    /// [`SendError::UnknownRequest`].
    pub fn consumed(&mut self, stream: u8, n: u32) -> Result<(), SendError> {
        self.check_open()?;
        let window = u32::from(self.config.stream_window.max(1));
        let Some(b) = self.bidi.as_mut().filter(|b| b.stream == stream) else {
            return Err(SendError::UnknownRequest);
        };
        let n = n.min(b.unconsumed);
        b.unconsumed -= n;
        b.consumed += n;
        if b.ended || b.consumed < (window / 2).max(1) {
            return Ok(());
        }
        let grant = u16::try_from(b.consumed).unwrap_or(u16::MAX);
        let [lo, hi] = grant.to_le_bytes();
        let tid = self.ep.next_tid;
        self.ep
            .outbox
            .push_control(tid, ControlCmd::Credit, &[stream, lo, hi])
            .map_err(|f| SendError::OutboxFull {
                needed: f.needed,
                free: f.free,
            })?;
        self.ep.next_tid = tid.wrapping_add(1);
        if let Some(b) = self.bidi.as_mut() {
            b.consumed -= u32::from(grant);
            b.held += u32::from(grant);
        }
        Ok(())
    }

    // ----- internals -------------------------------------------------------------------------

    /// The request flags in force: what [`Command::parse_extended`](crate::wire::command::Command::parse_extended)
    /// reads.
    pub(super) fn request_flags(&self) -> u8 {
        let mut flags = 0;
        if self.deadline {
            flags |= DEADLINE_FLAG;
        }
        if self.streams {
            flags |= OPEN_FLAG | ITEM_FLAG | BIDI_FLAG;
        }
        flags
    }

    /// Request `tid` opens a stream: its items are credited from `open.window`; a
    /// bidirectional one gets this side's window at once. `false` (and ERROR BUSY sent) while
    /// another credited stream is open.
    pub(super) fn on_open(&mut self, tid: u8, open: StreamOpen) -> bool {
        if self.credit.is_some() {
            self.send_error(tid, ErrorCode::Busy);
            return false;
        }
        self.credit = Some((tid, u32::from(open.window)));
        if open.bidi {
            let window = self.config.stream_window.max(1);
            self.bidi = Some(BidiIn {
                stream: tid,
                held: u32::from(window),
                unconsumed: 0,
                consumed: 0,
                ended: false,
            });
            let [lo, hi] = window.to_le_bytes();
            let credit_tid = self.ep.next_tid;
            // Behind what is queued, like every answer; refused only by a full outbox.
            if self
                .ep
                .outbox
                .push_control(credit_tid, ControlCmd::Credit, &[tid, lo, hi])
                .is_err()
            {
                self.stream_over(tid);
                self.send_error(tid, ErrorCode::Busy);
                return false;
            }
            self.ep.next_tid = credit_tid.wrapping_add(1);
        }
        true
    }

    /// An item of bidirectional stream `stream` arrived under `tid`.
    pub(super) fn on_stream_item(&mut self, tid: u8, stream: u8) -> ItemFate {
        let Some(b) = self
            .bidi
            .as_mut()
            .filter(|b| b.stream == stream && !b.ended)
        else {
            self.warn(Warning::UnknownStream { tid, stream });
            return ItemFate::Unknown;
        };
        if b.held == 0 {
            // Beyond the window: the stream ends with an error and its handler is stopped.
            self.warn(Warning::CreditExceeded { stream });
            self.end_with_error(stream, ErrorCode::StreamLimit);
            return ItemFate::OverCredit;
        }
        b.held -= 1;
        b.unconsumed += 1;
        ItemFate::Accepted
    }

    /// Hands out item `tid` of `stream`, its bytes at `msg`.
    pub(super) fn push_item(&mut self, tid: u8, stream: u8, name: (u32, u8), msg: MsgRef) {
        self.push(Record::StreamItem {
            tid,
            stream,
            name_start: name.0,
            name_len: name.1,
            msg,
        });
    }

    /// CREDIT from the central: `credits` more items of stream `stream` may go.
    pub(super) fn on_credit(&mut self, tid: u8, stream: u8, credits: u16) {
        match self.credit.as_mut().filter(|(t, _)| *t == stream) {
            Some((_, n)) => {
                let was_zero = *n == 0;
                *n = n.saturating_add(u32::from(credits));
                if was_zero && credits > 0 {
                    self.push(Record::Credit { stream });
                }
            }
            None => self.warn(Warning::UnknownStream { tid, stream }),
        }
    }

    /// STREAM_END_C2P naming bidirectional stream `stream`.
    pub(super) fn on_items_end(&mut self, tid: u8, stream: u8) {
        match self
            .bidi
            .as_mut()
            .filter(|b| b.stream == stream && !b.ended)
        {
            Some(b) => {
                b.ended = true;
                self.push(Record::ItemsEnd { stream });
            }
            None => self.warn(Warning::UnknownStream { tid, stream }),
        }
    }

    /// The stream opened by `tid` is over (ended, answered, failed or cancelled): its credits go.
    pub(super) fn stream_over(&mut self, tid: u8) {
        if self.credit.is_some_and(|(t, _)| t == tid) {
            self.credit = None;
        }
        if self.bidi.is_some_and(|b| b.stream == tid) {
            self.bidi = None;
        }
    }

    /// Ends stream `stream` with ERROR `code` under its tid: what is queued for it goes, and
    /// the application is told to stop as for a CANCEL.
    fn end_with_error(&mut self, stream: u8, code: ErrorCode) {
        let pending = self.pending.remove(stream);
        if self.stream.is_some_and(|(t, _)| t == stream) {
            self.stream = None;
            self.ep.outbox.abort_items();
        }
        self.stream_over(stream);
        self.send_error(stream, code);
        if pending {
            self.push(Record::Cancelled { tid: stream });
        }
    }
}
