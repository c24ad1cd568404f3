//! The streams extension on the central: a stream's open request carries this side's window,
//! its items are counted against it and credited back as the application makes room; a
//! bidirectional stream's own items go out against the peripheral's credits.
//!
//! ```text
//! central                                      peripheral
//!   REQUEST [OPEN(|BIDI), window W] tid t ──►
//!                                         ◄── CREDIT [t][w]        (bidirectional: its window)
//!   REQUEST [ITEM, stream t] ×≤w ─────────►
//!                                         ◄── RESPONSE items ×≤W under fresh tids
//!   CREDIT [t][n] ─────────────────────────►  (room made: n more items)
//!   STREAM_END_C2P [t] ────────────────────►
//!                                         ◄── STREAM_END_P2C       (the call is over)
//! ```

use rand_core::CryptoRngCore;

use super::Central;
use super::calls::Call;
use super::config::{CallId, CallKind};
use super::event::Record;
use crate::Instant;
use crate::buf::Buffer;
use crate::connection::CallError;
use crate::connection::framing::wire_len;
use crate::crypto::CryptoProvider;
use crate::wire::command::{
    Command, CommandType, ITEM_FLAG, LARGE_DATA_FLAG, MAX_DATA_LEN, MAX_NAME_LEN, RequestFields,
    StreamOpen,
};
use crate::wire::container::ControlCmd;

/// A call's flow control (the streams extension).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Flow {
    /// The open request carried a window: the peripheral's items are counted.
    credited: bool,
    /// Items the peripheral may still send before this side grants more.
    granted: u32,
    /// Bidirectional: the stream's id once the peripheral's first CREDIT named it.
    pub(super) stream: Option<u8>,
    /// Bidirectional: items this side may still send.
    credits: u32,
    /// Room made for fewer than half the window: the credits granted at the instant.
    due: Option<(Instant, u32)>,
    /// Bidirectional: this side sent an item since its last CREDIT (data flows both ways).
    sending: bool,
}

impl Flow {
    /// The flow of a request sent with `fields`: credited from its window, if it opened a
    /// stream.
    pub(super) fn opened(fields: &RequestFields) -> Self {
        match fields.open {
            Some(open) => Flow {
                credited: true,
                granted: u32::from(open.window),
                ..Flow::default()
            },
            None => Flow::default(),
        }
    }
}

/// The longest header of a bidirectional stream's item: type, name_len, the name, the stream
/// id and a `u32` data_len.
const ITEM_HEADER_MAX: usize = 2 + MAX_NAME_LEN + 1 + 4;

impl<P, R, A, O, const SLOTS: usize> Central<P, R, A, O, SLOTS>
where
    P: CryptoProvider,
    R: CryptoRngCore,
    A: Buffer + Default,
    O: Buffer + Default,
{
    /// Items of bidirectional stream `call` this side may send now (the peripheral's credits):
    /// `None` for any other call or before the peripheral's first CREDIT.
    pub fn stream_credits(&self, call: CallId) -> Option<u32> {
        let c = self.calls.iter().flatten().find(|c| c.id == call)?;
        c.flow.stream.map(|_| c.flow.credits)
    }

    /// The application has room for `room` more items of stream `call` (the streams extension)
    /// at `now`: the peripheral is granted what that adds to its credits in a CREDIT control
    /// queued behind this side's data, at once when it is at least half the window (or the
    /// peripheral's credits ran out), otherwise
    /// [`CentralConfig::credit_delay`](super::CentralConfig::credit_delay) later
    /// ([`Central::poll_timeout`] names the instant), so the items of one connection event
    /// are credited together and a remainder never waits for more items (with no delay
    /// configured, it waits; it waits too while this side sends items of the stream and the
    /// peripheral still holds three quarters of the window, where a CREDIT would take a data
    /// packet's place). Nothing for a call without flow control, or one not answering yet.
    pub fn grant(&mut self, now: Instant, call: CallId, room: usize) -> Result<(), CallError> {
        let window = u32::from(self.config.stream_window.max(1));
        let delay = self.config.credit_delay;
        let Some(idx) = self
            .calls
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.id == call))
        else {
            return Err(CallError::UnknownCall);
        };
        let Some(c) = self.calls.get_mut(idx).and_then(Option::as_mut) else {
            return Err(CallError::UnknownCall);
        };
        if !c.flow.credited || !c.answering() {
            return Ok(());
        }
        let target = u32::try_from(room).unwrap_or(u32::MAX).min(window);
        let add = target.saturating_sub(c.flow.granted);
        if add == 0 {
            return Ok(());
        }
        if add < (window / 2).max(1) && c.flow.granted > 0 {
            // Items that arrive meanwhile use room and credits alike: `add` stays within room.
            if crate::connection::remainder_waits(c.flow.sending, c.flow.granted, window) {
                c.flow.due = None;
                return Ok(());
            }
            if let Some(delay) = delay {
                let at = c.flow.due.map_or(now.saturating_add(delay), |(at, _)| at);
                c.flow.due = Some((at, add));
            }
            return Ok(());
        }
        self.send_grant(idx, add)
    }

    // ----- internals -------------------------------------------------------------------------

    /// When the earliest remainder of room is due to the peripheral.
    pub(super) fn next_grant_deadline(&self) -> Option<Instant> {
        self.calls
            .iter()
            .flatten()
            .filter_map(|c| c.flow.due.map(|(at, _)| at))
            .min()
    }

    /// Grants each remainder of room whose instant passed; a full outbox tries again a delay
    /// later.
    pub(super) fn grant_due(&mut self, now: Instant) {
        let retry = self
            .config
            .credit_delay
            .unwrap_or_default()
            .max(crate::connection::MIN_CREDIT_RETRY);
        let window = u32::from(self.config.stream_window.max(1));
        for idx in 0..self.calls.len() {
            let Some(c) = self.calls.get_mut(idx).and_then(Option::as_mut) else {
                continue;
            };
            let Some((_, add)) = c.flow.due.filter(|(at, _)| *at <= now) else {
                continue;
            };
            if crate::connection::remainder_waits(c.flow.sending, c.flow.granted, window) {
                // Items went out since it was due, and the peripheral holds plenty: it waits.
                c.flow.due = None;
                continue;
            }
            if self.send_grant(idx, add).is_err()
                && let Some(c) = self.calls.get_mut(idx).and_then(Option::as_mut)
            {
                c.flow.due = Some((now.saturating_add(retry), add));
            }
        }
    }

    /// Queues a CREDIT of `add` items for call `idx`'s stream.
    fn send_grant(&mut self, idx: usize, add: u32) -> Result<(), CallError> {
        let Some(c) = self.calls.get_mut(idx).and_then(Option::as_mut) else {
            return Ok(());
        };
        c.flow.due = None;
        c.flow.sending = false;
        if !c.answering() {
            return Ok(());
        }
        let add = u16::try_from(add).unwrap_or(u16::MAX);
        let [lo, hi] = add.to_le_bytes();
        let stream = c.tid;
        let tid = self.ep.next_tid;
        self.ep
            .outbox
            .push_control(tid, ControlCmd::Credit, &[stream, lo, hi])
            .map_err(|f| CallError::OutboxFull {
                needed: f.needed,
                free: f.free,
            })?;
        self.ep.next_tid = tid.wrapping_add(1);
        if let Some(c) = self.calls.get_mut(idx).and_then(Option::as_mut) {
            c.flow.granted += u32::from(add);
        }
        Ok(())
    }

    /// The extension fields call `call`'s request carries when sent at `now`: its deadline
    /// (the deadline extension) and, for a stream with the streams extension in force, this
    /// side's window.
    pub(super) fn request_fields(&self, call: &Call<O>, now: Instant) -> RequestFields {
        let open = (self.streams && call.kind.receives_items()).then(|| StreamOpen {
            window: self.config.stream_window.max(1),
            bidi: call.kind == CallKind::BidiStream,
        });
        RequestFields {
            deadline_ms: self.wire_deadline(call, now),
            open,
            item_of: None,
        }
    }

    /// One of call `idx`'s credits for an arriving item: `false` when it had none left (the
    /// peripheral went beyond the window).
    pub(super) fn take_item_credit(&mut self, idx: usize) -> bool {
        let Some(c) = self.calls.get_mut(idx).and_then(Option::as_mut) else {
            return true;
        };
        if !c.flow.credited {
            return true;
        }
        match c.flow.granted.checked_sub(1) {
            Some(left) => {
                c.flow.granted = left;
                true
            }
            None => false,
        }
    }

    /// CREDIT from the peripheral: `credits` more items of bidirectional stream `stream`.
    pub(super) fn on_credit(&mut self, tid: u8, stream: u8, credits: u16) {
        let found = self.calls.iter_mut().flatten().find(|c| {
            c.kind == CallKind::BidiStream && c.tid == stream && c.answering() && !c.finished
        });
        match found {
            Some(c) => {
                c.flow.stream = Some(stream);
                c.flow.credits = c.flow.credits.saturating_add(u32::from(credits));
                let call = c.id;
                self.push(Record::Credit { call });
            }
            // A grant racing the stream's end, or for a stream given up: nothing to do.
            None => self.warn(crate::connection::Warning::UnknownStream { tid, stream }),
        }
    }

    /// Sends `item` on bidirectional stream `idx` against one of the peripheral's credits.
    pub(super) fn send_bidi_item(&mut self, idx: usize, item: &[u8]) -> Result<(), CallError> {
        let encrypted = self.state.is_encrypted();
        let max = self.max_request_wire();
        let Some(c) = self.calls.get(idx).and_then(Option::as_ref) else {
            return Err(CallError::UnknownCall);
        };
        let Some(stream) = c.flow.stream.filter(|_| c.flow.credits > 0) else {
            return Err(CallError::NoCredit);
        };
        let name = c.name_bytes();
        let len = wire_len(name.len(), item.len(), encrypted) + 1;
        if len > max {
            return Err(CallError::RequestTooLarge { len, max });
        }
        // [REQUEST | ITEM (| LARGE)][name_len][name][stream][data_len u16 or u32]
        let mut header = [0u8; ITEM_HEADER_MAX];
        let large = item.len() > MAX_DATA_LEN;
        let type_byte =
            CommandType::Request.to_byte() | ITEM_FLAG | if large { LARGE_DATA_FLAG } else { 0 };
        let name_len = name.len();
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            if let Some(dst) = header.get_mut(at..at + bytes.len()) {
                dst.copy_from_slice(bytes);
                at += bytes.len();
            }
        };
        put(&[type_byte, u8::try_from(name_len).unwrap_or(u8::MAX)]);
        put(name);
        put(&[stream]);
        if large {
            put(&u32::try_from(item.len()).unwrap_or(u32::MAX).to_le_bytes());
        } else {
            put(&u16::try_from(item.len()).unwrap_or(u16::MAX).to_le_bytes());
        }
        debug_assert_eq!(at, Command::header_len_large(name_len, item.len()) + 1);
        let tid = self.ep.next_tid;
        let parts: [&[u8]; 2] = [header.get(..at).unwrap_or(&[]), item];
        self.ep
            .enqueue_framed(self.state.session_mut(), tid, &parts)
            .map_err(super::calls::enqueue_to_call_error)?;
        self.ep.next_tid = tid.wrapping_add(1);
        if let Some(c) = self.calls.get_mut(idx).and_then(Option::as_mut) {
            c.flow.credits -= 1;
            c.flow.sending = true;
            c.upload_tids.insert(tid);
        }
        Ok(())
    }

    /// Ends this side's half of bidirectional stream `idx` (STREAM_END_C2P naming it, queued
    /// behind its items); the peripheral's items keep coming until its own end.
    pub(super) fn finish_bidi(&mut self, idx: usize) -> Result<(), CallError> {
        let Some(c) = self.calls.get(idx).and_then(Option::as_ref) else {
            return Err(CallError::UnknownCall);
        };
        // Before the peripheral's first CREDIT the stream has no id it knows yet.
        let stream = c.flow.stream.ok_or(CallError::NoCredit)?;
        let tid = self.ep.next_tid;
        self.ep
            .outbox
            .push_control(tid, ControlCmd::StreamEndC2P, &[stream])
            .map_err(|f| CallError::OutboxFull {
                needed: f.needed,
                free: f.free,
            })?;
        self.ep.next_tid = tid.wrapping_add(1);
        if let Some(c) = self.calls.get_mut(idx).and_then(Option::as_mut) {
            c.upload_tids.insert(tid);
            c.finished = true;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)] // a failed unwrap is a failed test
mod tests {
    use alloc::vec::Vec;
    use core::time::Duration;

    use super::super::calls::tests::response;
    use super::super::config::CallKind;
    use super::super::tests::{T0, TestCentral, ready_announcing, sent};

    /// The CREDIT controls sent now: each one's `[stream][credits u16]`.
    fn credits(c: &mut TestCentral) -> Vec<[u8; 3]> {
        sent(c)
            .into_iter()
            .map(|p| {
                assert_eq!(&p[1..4], &[0x00, 0xe4, 0x03], "a CREDIT: {p:02x?}");
                [p[4], p[5], p[6]]
            })
            .collect()
    }

    #[test]
    fn while_it_sends_items_too_a_remainder_waits_until_the_peripheral_runs_short() {
        let mut c = ready_announcing(0x40, true, |c| {
            c.streams = true;
            c.stream_window = 8;
        });
        let delay = c.config().credit_delay.unwrap();
        let id = c.start_call(T0, "chat", b"", CallKind::BidiStream).unwrap();
        // 14 04 "chat" 0800 0000 under tid 2: open both ways, window 8.
        assert_eq!(&sent(&mut c)[0][6..], b"\x14\x04chat\x08\x00\x00\x00");
        // The peripheral's CREDIT for stream 2: [tid 9][0][CONTROL | CREDIT][3][2][8 0].
        c.handle_input(T0, &[0x09, 0x00, 0xe4, 0x03, 0x02, 0x08, 0x00])
            .unwrap();
        while c.poll_event().is_some() {}
        // One item in: the peripheral holds 7 of 8. Room made before this side sent anything
        // is granted after the delay; an item sent meanwhile makes it wait.
        c.handle_input(T0, &response(10, b"chat", b"\x0a\x00"))
            .unwrap();
        while c.poll_event().is_some() {}
        c.grant(T0, id, 8).unwrap();
        c.send_stream_item(T0, id, b"\x0a\x01").unwrap();
        assert_eq!(sent(&mut c).len(), 1, "the item");
        c.handle_timeout(T0 + delay);
        assert_eq!(
            credits(&mut c),
            Vec::<[u8; 3]>::new(),
            "7 of 8 held: it waits"
        );
        // Two more in: the peripheral holds 5, under three quarters of 8. The room goes
        // after the delay, with the room that waited.
        for tid in 11..13 {
            c.handle_input(T0, &response(tid, b"chat", b"\x0a\x00"))
                .unwrap();
        }
        while c.poll_event().is_some() {}
        let later = T0 + Duration::from_millis(5);
        c.grant(later, id, 8).unwrap();
        assert!(credits(&mut c).is_empty(), "3 of 8: not half the window");
        c.handle_timeout(later + delay);
        assert_eq!(credits(&mut c), [[0x02, 0x03, 0x00]]);
    }
}
