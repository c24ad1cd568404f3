//! A server stream that left while the peripheral may still be sending it: its items dropped,
//! the next server stream held until it ends.

use core::ops::Range;

use rand_core::CryptoRngCore;

use super::Central;
use super::calls::{Call, name_of};
use super::config::CallKind;
use super::event::Record;
use crate::Instant;
use crate::assemble::Completed;
use crate::buf::Buffer;
use crate::crypto::CryptoProvider;
use crate::wire::container::ControlCmd;

/// A server stream that left the table while the peripheral may still be sending it (cancelled,
/// or past its deadline). Stream items carry no transaction id the central chose: they are
/// matched by the command's name, and STREAM_END_P2C by nothing at all. So until this stream's
/// end arrives, its peripheral reports an ERROR for it, or it has been silent for the stream
/// idle timeout, its items are dropped here and no other server stream is sent (a new one is
/// held), or that stream would receive them.
pub(crate) struct Drain<O: Buffer> {
    /// The stream's request command (for its name).
    pub(super) request: O,
    /// The tid of its request.
    pub(super) tid: u8,
    /// Silent until then: the peripheral is taken to be done.
    pub(super) until: Instant,
}

impl<O: Buffer> Drain<O> {
    fn name_bytes(&self) -> &[u8] {
        name_of(self.request.as_slice())
    }
}

impl<P, R, A, O, const SLOTS: usize> Central<P, R, A, O, SLOTS>
where
    P: CryptoProvider,
    R: CryptoRngCore,
    A: Buffer + Default,
    O: Buffer + Default,
{
    /// `true` while a cancelled or timed-out server stream drains (see [`Central::cancel`]).
    pub fn is_draining(&self) -> bool {
        self.drain.is_some()
    }
    /// Takes a call out of its slot. A server stream the peripheral may still be sending becomes
    /// the [`Drain`], silent until `idle` (its own idle deadline when `None`).
    pub(super) fn retire(&mut self, idx: usize, idle: Option<Instant>) {
        let Some(call) = self.calls.get_mut(idx).and_then(Option::take) else {
            return;
        };
        if call.answering() && call.kind != CallKind::ClientStream && !self.tell_cancel(&call) {
            // Never sent after all: nothing to drain.
            return;
        }
        if call.kind.receives_items()
            && call.answering()
            && let Some(until) = idle.or(call.idle_until)
        {
            // At most one stream drains: a new one is held until the drain ends, and only a
            // sent stream drains.
            self.drain = Some(Drain {
                request: call.request,
                tid: call.tid,
                until,
            });
        }
    }

    /// A call that leaves while the peripheral may be answering it, with the cancel extension in
    /// force: what is still queued of its request goes, and a CANCEL tells the peripheral to
    /// stop (it answers ERROR CANCELLED, which ends a stream's drain). `false` when none of the
    /// request had been sent (nothing to cancel, nothing to drain). Without the extension, or
    /// when another call still in flight has the same tid (tids wrap after 256; the CANCEL
    /// would name both), nothing is sent and the call is only forgotten here.
    fn tell_cancel(&mut self, call: &Call<O>) -> bool {
        if !self.cancel {
            return true;
        }
        let tid = call.tid;
        let shared = self.calls.iter().flatten().any(|c| match c.kind {
            CallKind::ClientStream => c.upload_tids.contains(tid),
            CallKind::BidiStream => c.upload_tids.contains(tid) || c.tid == tid,
            _ => c.tid == tid && c.answering(),
        }) || self.drain.as_ref().is_some_and(|d| d.tid == tid);
        if shared {
            return true;
        }
        let aborted = self.ep.outbox.abort(tid);
        if aborted.entries > 0 && !aborted.cut {
            return false;
        }
        self.ep.discard_partial(tid);
        // What of the answer is already on the air still arrives: dropped without a warning.
        self.cancelled_tid = Some(tid);
        let cancel = self.ep.alloc_tid();
        // The control queue refuses only when full: then the call is only forgotten here.
        let _ = self.ep.send_control(cancel, ControlCmd::Cancel, &[tid]);
        true
    }

    /// The drain is over: a held server stream goes out.
    pub(super) fn end_drain(&mut self, now: Instant) {
        self.drain = None;
        for idx in 0..SLOTS {
            let Some(call) = self.calls.get_mut(idx).and_then(Option::as_mut) else {
                continue;
            };
            if !call.held {
                continue;
            }
            call.held = false;
            let call_timeout = self.config.call_timeout;
            call.deadline = call.capped(now + call_timeout);
            call.idle_until = Some(now + call_timeout);
            self.send_again(idx, now);
        }
    }

    /// The stream that ended with STREAM_END_P2C: the draining one first (its end comes before
    /// anything of a stream sent after it), else the one in flight.
    pub(super) fn on_stream_end(&mut self, now: Instant) -> bool {
        if self.drain.is_some() {
            self.end_drain(now);
            return true;
        }
        let active = self.calls.iter().position(|c| {
            c.as_ref()
                .is_some_and(|c| c.kind.receives_items() && !c.held)
        });
        match active
            .and_then(|i| self.calls.get_mut(i))
            .and_then(Option::take)
        {
            Some(call) => {
                self.push(Record::StreamEnd { call: call.id });
                true
            }
            None => false,
        }
    }

    /// A response nobody's call matched: an item of the draining stream (the name in
    /// `name` of message `done`) is dropped, and the drain's silence restarts.
    pub(super) fn drains(&mut self, now: Instant, done: Completed, name: Range<usize>) -> bool {
        let idle = self.config.stream_idle_timeout;
        let Some(drain) = &mut self.drain else {
            return false;
        };
        if self.ep.assembler.message(done).get(name) != Some(drain.name_bytes()) {
            return false;
        }
        drain.until = now + idle;
        true
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use core::time::Duration;

    use super::super::CentralEvent;
    use super::super::calls::tests::response;
    use alloc::vec::Vec;

    use super::super::tests::{T0, TestCentral, ready, sent};
    use super::*;
    use crate::connection::{CallError, CallId};

    /// `counter_stream` with `08 05`, then `08 01`: the requests of the two streams below.
    fn stream_request(tid: u8, count: u8) -> alloc::vec::Vec<u8> {
        let mut pdu = alloc::vec![tid, 0x00, 0x00, 0x14, 0x00, 0x14, 0x00, 14];
        pdu.extend_from_slice(b"counter_stream");
        pdu.extend_from_slice(&[0x02, 0x00, 0x08, count]);
        pdu
    }

    /// Starts `counter_stream` for `count` items; what it sent at once.
    fn stream(c: &mut TestCentral, count: u8) -> (CallId, Vec<Vec<u8>>) {
        let id = c
            .start_call(T0, "counter_stream", &[0x08, count], CallKind::ServerStream)
            .unwrap();
        (id, sent(c))
    }

    /// STREAM_END_P2C under `tid`: `[tid][seq][CONTROL | 3 << 2 = 0xcc][0]`.
    fn stream_end(tid: u8) -> [u8; 4] {
        [tid, 0x00, 0xcc, 0x00]
    }

    #[test]
    fn a_cancelled_stream_drains_and_the_next_one_waits_for_its_end() {
        let mut c = ready();
        let (first, out) = stream(&mut c, 5);
        assert_eq!(out, [stream_request(2, 5)]);
        c.handle_input(T0, &response(7, b"counter_stream", b"\x08\x00"))
            .unwrap();
        assert_eq!(
            c.poll_event(),
            Some(CentralEvent::StreamItem {
                call: first,
                data: b"\x08\x00"
            })
        );
        c.cancel(first).unwrap();
        assert!(c.is_draining());
        assert_eq!(c.calls_in_flight(), 0);
        // The peripheral goes on: its items are nobody's, and say nothing.
        c.handle_input(T0, &response(8, b"counter_stream", b"\x08\x01"))
            .unwrap();
        assert_eq!(c.poll_event(), None);
        // A second stream of the command is held: sent now, it would get the first one's items.
        let (second, out) = stream(&mut c, 1);
        assert!(out.is_empty());
        assert_eq!(c.calls_in_flight(), 1);
        c.handle_input(T0, &response(9, b"counter_stream", b"\x08\x02"))
            .unwrap();
        c.handle_input(T0, &stream_end(10)).unwrap();
        assert_eq!(
            c.poll_event(),
            None,
            "the first stream's end is nobody's either"
        );
        assert!(!c.is_draining());
        assert_eq!(sent(&mut c), [stream_request(3, 1)]);
        c.handle_input(T0, &response(11, b"counter_stream", b"\x08\x00"))
            .unwrap();
        c.handle_input(T0, &stream_end(12)).unwrap();
        assert_eq!(
            c.poll_event(),
            Some(CentralEvent::StreamItem {
                call: second,
                data: b"\x08\x00"
            })
        );
        assert_eq!(
            c.poll_event(),
            Some(CentralEvent::StreamEnd { call: second })
        );
        assert_eq!(c.calls_in_flight(), 0);
    }

    #[test]
    fn a_drain_ends_when_the_peripheral_falls_silent() {
        let mut c = ready();
        let (first, _) = stream(&mut c, 5);
        c.cancel(first).unwrap();
        // No item yet: the call's own timeout (5 s) is how long the peripheral may take.
        let silent = T0 + Duration::from_secs(5);
        assert_eq!(c.poll_timeout(), Some(silent));
        c.handle_input(
            T0 + Duration::from_secs(1),
            &response(7, b"counter_stream", b"\x08\x00"),
        )
        .unwrap();
        // An item restarts the stream idle timeout (2 s).
        let silent = T0 + Duration::from_secs(3);
        assert_eq!(c.poll_timeout(), Some(silent));
        assert!(stream(&mut c, 1).1.is_empty());
        c.handle_timeout(silent);
        assert_eq!(c.poll_event(), None);
        assert_eq!(sent(&mut c), [stream_request(3, 1)]);
        assert_eq!(c.poll_timeout(), Some(silent + Duration::from_secs(5)));
    }

    #[test]
    fn a_stream_past_the_callers_deadline_drains() {
        let mut c = ready();
        let (id, _) = stream(&mut c, 5);
        let deadline = T0 + Duration::from_millis(100);
        c.set_call_deadline(id, deadline).unwrap();
        c.handle_timeout(deadline);
        assert_eq!(
            c.poll_event(),
            Some(CentralEvent::CallFailed {
                call: id,
                error: CallError::Timeout
            })
        );
        assert!(c.is_draining());
        assert_eq!(c.poll_timeout(), Some(deadline + Duration::from_secs(2)));
        c.handle_input(deadline, &response(7, b"counter_stream", b"\x08\x00"))
            .unwrap();
        assert_eq!(c.poll_event(), None);
    }

    #[test]
    fn an_error_for_the_draining_stream_ends_the_drain() {
        let mut c = ready();
        let (first, _) = stream(&mut c, 5);
        c.cancel(first).unwrap();
        stream(&mut c, 1);
        // ERROR HANDLER_FAILED (0x04) for tid 2: `[tid][seq][0xd4][1][code]`.
        c.handle_input(T0, &[0x02, 0x00, 0xd4, 0x01, 0x04]).unwrap();
        assert_eq!(c.poll_event(), None);
        assert!(!c.is_draining());
        assert_eq!(sent(&mut c), [stream_request(3, 1)]);
    }

    #[test]
    fn only_a_stream_the_peripheral_may_be_sending_drains() {
        let mut c = ready();
        // Refused BUSY, its retry pending: the peripheral is not running it.
        let (busy, _) = stream(&mut c, 5);
        c.handle_input(T0, &[0x02, 0x00, 0xd4, 0x01, 0x02]).unwrap();
        c.cancel(busy).unwrap();
        assert!(!c.is_draining());
        // A held stream never went out: cancelled, it is gone without a trace.
        let (sent_one, _) = stream(&mut c, 5);
        c.cancel(sent_one).unwrap();
        let (held, _) = stream(&mut c, 1);
        c.cancel(held).unwrap();
        c.handle_input(T0, &stream_end(9)).unwrap();
        assert!(!c.is_draining());
        assert!(sent(&mut c).is_empty(), "nothing left to send");
        assert_eq!(c.poll_event(), None);
        // A unary call is never held.
        c.start_call(T0, "echo", b"\x0a\x02hi", CallKind::Unary)
            .unwrap();
        assert_eq!(sent(&mut c).len(), 1);
    }

    /// A plaintext central through setup with the cancel extension announced (CAPABILITIES
    /// flags `0x0010`) and agreed by the peripheral when `agreed`.
    fn ready_with_cancel(agreed: bool) -> TestCentral {
        super::super::tests::ready_announcing(0x10, agreed, |c| c.cancel = true)
    }

    #[test]
    fn with_cancel_agreed_the_peripheral_is_told_and_its_error_ends_the_drain() {
        let mut c = ready_with_cancel(true);
        let (first, _) = stream(&mut c, 5);
        c.cancel(first).unwrap();
        // CANCEL of tid 2 under tid 3: `[03][00][0xc0 | 8 << 2 = 0xe0][01][02]`.
        assert_eq!(sent(&mut c), [[0x03, 0x00, 0xe0, 0x01, 0x02]]);
        assert!(c.is_draining());
        let (second, out) = stream(&mut c, 1);
        assert!(out.is_empty(), "held until the peripheral confirms");
        // ERROR CANCELLED (0x0c) for tid 2, after any item still in flight.
        c.handle_input(T0, &response(9, b"counter_stream", b"\x08\x01"))
            .unwrap();
        c.handle_input(T0, &[0x02, 0x00, 0xd4, 0x01, 0x0c]).unwrap();
        assert_eq!(c.poll_event(), None);
        assert_eq!(sent(&mut c), [stream_request(4, 1)]);
        // A unary call cancelled: told, no drain; the confirmation is silent.
        c.handle_input(T0, &stream_end(10)).unwrap();
        assert_eq!(
            c.poll_event(),
            Some(CentralEvent::StreamEnd { call: second })
        );
        let echo = c
            .start_call(T0, "echo", b"\x0a\x02hi", CallKind::Unary)
            .unwrap();
        assert_eq!(sent(&mut c).len(), 1);
        c.cancel(echo).unwrap();
        assert_eq!(sent(&mut c), [[0x06, 0x00, 0xe0, 0x01, 0x05]]);
        assert!(!c.is_draining());
        c.handle_input(T0, &[0x05, 0x00, 0xd4, 0x01, 0x0c]).unwrap();
        assert_eq!(c.poll_event(), None);
    }

    #[test]
    fn without_agreement_or_before_anything_was_sent_nothing_is_told() {
        // The peripheral did not agree: nothing on the wire, the stream drains as without.
        let mut c = ready_with_cancel(false);
        let (first, _) = stream(&mut c, 5);
        c.cancel(first).unwrap();
        assert!(sent(&mut c).is_empty());
        assert!(c.is_draining());
        // Agreed, but the request never left the outbox: it goes, and nothing drains.
        let mut c = ready_with_cancel(true);
        let call = c
            .start_call(T0, "counter_stream", b"\x08\x05", CallKind::ServerStream)
            .unwrap();
        c.cancel(call).unwrap();
        assert!(sent(&mut c).is_empty());
        assert!(!c.is_draining());
    }
}
