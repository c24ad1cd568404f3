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
use crate::time::Instant;
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
    /// When the consumed items (fewer than half the window) are credited back.
    grant_at: Option<Instant>,
    /// This side sent an item of the stream since its last CREDIT (data flows both ways).
    sending: bool,
}

impl BidiIn {
    /// This side sent an item of the stream opened by `request_tid`.
    pub(super) fn sent_item(&mut self, request_tid: u8) {
        if self.stream == request_tid {
            self.sending = true;
        }
    }
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
    /// [`PeripheralEvent::StreamItem`](super::PeripheralEvent::StreamItem) handed out) at
    /// `now`: a CREDIT control gives the central that many back, at once when half the window
    /// is consumed, otherwise [`PeripheralConfig::credit_delay`](super::PeripheralConfig::credit_delay)
    /// after the first of them (so the items of one connection event go back in one CREDIT,
    /// and a remainder below half the window never waits for more items:
    /// [`Peripheral::poll_timeout`] names the instant; with no delay configured, it waits; it
    /// waits too while this side sends items of the stream and the central still holds three
    /// quarters of the window, where a CREDIT would take a data packet's place). More than
    /// were handed out counts as all of them; an unknown stream is
    /// [`SendError::UnknownRequest`].
    pub fn consumed(&mut self, now: Instant, stream: u8, n: u32) -> Result<(), SendError> {
        self.check_open()?;
        let window = u32::from(self.config.stream_window.max(1));
        let delay = self.config.credit_delay;
        let Some(b) = self.bidi.as_mut().filter(|b| b.stream == stream) else {
            return Err(SendError::UnknownRequest);
        };
        let n = n.min(b.unconsumed);
        b.unconsumed -= n;
        b.consumed += n;
        if b.ended || b.consumed == 0 {
            return Ok(());
        }
        if b.consumed < (window / 2).max(1) {
            let waits = crate::connection::remainder_waits(b.sending, b.held, window);
            if let Some(delay) = delay.filter(|_| !waits) {
                b.grant_at.get_or_insert(now.saturating_add(delay));
            }
            return Ok(());
        }
        self.grant()
    }

    /// When the consumed remainder of the open bidirectional stream is due to the central.
    pub(super) fn credit_deadline(&self) -> Option<Instant> {
        self.bidi.and_then(|b| b.grant_at)
    }

    /// Grants the consumed remainder once its instant passed; a full outbox tries again a
    /// delay later.
    pub(super) fn grant_due(&mut self, now: Instant) {
        let window = u32::from(self.config.stream_window.max(1));
        let Some(b) = self
            .bidi
            .as_mut()
            .filter(|b| b.grant_at.is_some_and(|at| at <= now))
        else {
            return;
        };
        if crate::connection::remainder_waits(b.sending, b.held, window) {
            // Items went out since it was due, and the central holds plenty: it waits.
            b.grant_at = None;
            return;
        }
        if self.grant().is_err() {
            let retry = self
                .config
                .credit_delay
                .unwrap_or_default()
                .max(crate::connection::MIN_CREDIT_RETRY);
            if let Some(b) = self.bidi.as_mut() {
                b.grant_at = Some(now.saturating_add(retry));
            }
        }
    }

    /// Queues a CREDIT for every consumed item of the open bidirectional stream.
    fn grant(&mut self) -> Result<(), SendError> {
        let Some(b) = self.bidi.as_mut() else {
            return Ok(());
        };
        b.grant_at = None;
        b.sending = false;
        if b.ended || b.consumed == 0 {
            return Ok(());
        }
        let (stream, grant) = (b.stream, u16::try_from(b.consumed).unwrap_or(u16::MAX));
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
                grant_at: None,
                sending: false,
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use alloc::vec::Vec;
    use core::time::Duration;

    use super::super::PeripheralEvent;
    use super::super::tests::{T0, TestPeripheral, peripheral, sent};

    /// A peripheral with the streams extension agreed and `chat` opened as a bidirectional
    /// stream by request 5 (the peripheral's window of 8 granted).
    fn chat_open() -> TestPeripheral {
        chat_open_with(|_| {})
    }

    /// [`chat_open`] with the configuration tuned by `tune`.
    fn chat_open_with(tune: impl FnOnce(&mut super::super::PeripheralConfig)) -> TestPeripheral {
        let mut p = peripheral(false, |c| {
            c.streams = true;
            tune(c);
        });
        // CAPABILITIES announcing STREAMS (flags 0x0040).
        p.handle_input(T0, &[0x00, 0x00, 0xd0, 0x06, 0, 0, 0, 0, 0x40, 0x00])
            .unwrap();
        sent(&mut p);
        // 14 04 "chat" 0800 0000: open chat both ways, the central's window 8, no data.
        p.handle_input(
            T0,
            &[
                0x05, 0x00, 0x00, 0x0a, 0x00, 0x0a, 0x14, 0x04, b'c', b'h', b'a', b't', 0x08, 0x00,
                0x00, 0x00,
            ],
        )
        .unwrap();
        assert!(matches!(
            p.poll_event(),
            Some(PeripheralEvent::Request { tid: 5, .. })
        ));
        // CREDIT (0xe4) [stream 5][8].
        assert_eq!(credits(&mut p), [[0x05, 0x08, 0x00]]);
        p
    }

    /// The CREDIT controls sent now: each one's `[stream][credits u16]`.
    fn credits(p: &mut TestPeripheral) -> Vec<[u8; 3]> {
        sent(p)
            .into_iter()
            .map(|c| {
                assert_eq!(&c[1..4], &[0x00, 0xe4, 0x03], "a CREDIT: {c:02x?}");
                [c[4], c[5], c[6]]
            })
            .collect()
    }

    /// Items `tids` of stream 5 (`08 04 "chat" 05 0100 aa`), each handed out.
    fn items(p: &mut TestPeripheral, tids: core::ops::Range<u8>) {
        for tid in tids {
            p.handle_input(
                T0,
                &[
                    tid, 0x00, 0x00, 0x0a, 0x00, 0x0a, 0x08, 0x04, b'c', b'h', b'a', b't', 0x05,
                    0x01, 0x00, 0xaa,
                ],
            )
            .unwrap();
            let e = p.poll_event();
            assert!(
                matches!(e, Some(PeripheralEvent::StreamItem { stream: 5, .. })),
                "{e:?}"
            );
        }
    }

    #[test]
    fn half_a_window_consumed_is_credited_at_once() {
        let mut p = chat_open();
        items(&mut p, 6..10);
        p.consumed(T0, 5, 4).unwrap();
        assert_eq!(credits(&mut p), [[0x05, 0x04, 0x00]]);
        assert_eq!(p.poll_timeout(), None, "nothing left to credit");
    }

    #[test]
    fn a_remainder_below_half_the_window_is_credited_after_the_delay() {
        let mut p = chat_open();
        let delay = p.config().credit_delay.unwrap();
        items(&mut p, 6..9);
        p.consumed(T0, 5, 1).unwrap();
        assert_eq!(credits(&mut p), Vec::<[u8; 3]>::new(), "1 of 8 waits");
        assert_eq!(p.poll_timeout(), Some(T0 + delay));
        // More consumed before the instant joins the same CREDIT; the instant does not move.
        let later = T0 + Duration::from_millis(1);
        p.consumed(later, 5, 2).unwrap();
        p.handle_timeout(later);
        assert_eq!(credits(&mut p), Vec::<[u8; 3]>::new());
        p.handle_timeout(T0 + delay);
        assert_eq!(credits(&mut p), [[0x05, 0x03, 0x00]]);
        assert_eq!(p.poll_timeout(), None);
    }

    #[test]
    fn without_a_delay_a_remainder_waits_for_half_the_window() {
        let mut p = chat_open_with(|c| c.credit_delay = None);
        items(&mut p, 6..10);
        p.consumed(T0, 5, 3).unwrap();
        assert_eq!(p.poll_timeout(), None);
        p.handle_timeout(T0 + Duration::from_secs(1));
        assert_eq!(credits(&mut p), Vec::<[u8; 3]>::new());
        p.consumed(T0, 5, 1).unwrap();
        assert_eq!(credits(&mut p), [[0x05, 0x04, 0x00]]);
    }

    #[test]
    fn while_it_sends_items_too_a_remainder_waits_until_the_central_runs_short() {
        let mut p = chat_open();
        let delay = p.config().credit_delay.unwrap();
        // One item in: the central holds 7 of 8. Consumed before this side sent anything,
        // its credit is due after the delay; an echo sent meanwhile makes it wait.
        items(&mut p, 6..7);
        p.consumed(T0, 5, 1).unwrap();
        assert_eq!(p.poll_timeout(), Some(T0 + delay));
        p.send_stream_item(T0, 5, "chat", b"\x0a\x00").unwrap();
        assert_eq!(sent(&mut p).len(), 1, "the echo");
        p.handle_timeout(T0 + delay);
        assert_eq!(
            credits(&mut p),
            Vec::<[u8; 3]>::new(),
            "7 of 8 held: it waits"
        );
        assert_eq!(p.poll_timeout(), None);
        // Two more in: the central holds 5, under three quarters of 8. The next remainder
        // goes after the delay, with the one that waited.
        items(&mut p, 7..9);
        let later = T0 + Duration::from_millis(5);
        p.consumed(later, 5, 1).unwrap();
        assert_eq!(p.poll_timeout(), Some(later + delay));
        p.handle_timeout(later + delay);
        assert_eq!(credits(&mut p), [[0x05, 0x02, 0x00]]);
        // Credited: nothing sent since, so a remainder is due after the delay again.
        p.consumed(later + delay, 5, 1).unwrap();
        assert_eq!(p.poll_timeout(), Some(later + delay + delay));
    }
}
