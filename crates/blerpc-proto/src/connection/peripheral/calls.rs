//! Requests and their answers: a completed request is decrypted in place, checked (encryption
//! required, command type, BUSY beyond the pending limit) and handed out; responses, stream
//! items and upload results are framed and sealed once into the outbox.

use rand_core::CryptoRngCore;

use super::Peripheral;
#[cfg(doc)]
use super::PeripheralEvent;
use super::event::Record;
use super::streams::ItemFate;
use crate::Instant;
use crate::assemble::{AssembleError, AssemblerConfig, Completed};
use crate::buf::Buffer;
use crate::connection::endpoint::MsgRef;
use crate::connection::events::Warning;
use crate::connection::framing::{EnqueueError, Payload, bytes, wire_len};
use crate::connection::{PeripheralConfig, SendError};
use crate::crypto::CryptoProvider;
use crate::split::classic_max_message_len;
use crate::wire::command::{Command, CommandType, MAX_LARGE_DATA_LEN, MAX_NAME_LEN};
use crate::wire::container::{Container, ControlCmd};
use crate::wire::error_code::ErrorCode;

impl<P, R, A, O, const SLOTS: usize> Peripheral<P, R, A, O, SLOTS>
where
    P: CryptoProvider,
    P::Identity: Clone,
    R: CryptoRngCore,
    A: Buffer + Default,
    O: Buffer + Default,
{
    // ----- user operations -------------------------------------------------------------------

    /// Answers request `tid` with a RESPONSE named `name` carrying `data`.
    pub fn respond(
        &mut self,
        now: Instant,
        tid: u8,
        name: &str,
        data: &[u8],
    ) -> Result<(), SendError> {
        let _ = now;
        self.respond_payload(tid, name, bytes(data))
    }

    /// Like [`Peripheral::respond`], but `fill` writes the `data_len` data bytes straight into the
    /// outbox (no intermediate copy of large responses).
    pub fn respond_with(
        &mut self,
        now: Instant,
        tid: u8,
        name: &str,
        data_len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<(), SendError> {
        let _ = now;
        self.respond_payload(
            tid,
            name,
            Payload::Fill {
                len: data_len,
                fill,
            },
        )
    }

    pub(super) fn respond_payload<F: FnOnce(&mut [u8])>(
        &mut self,
        tid: u8,
        name: &str,
        payload: Payload<'_, F>,
    ) -> Result<(), SendError> {
        self.check_open()?;
        if !self.pending.contains(tid) {
            return Err(SendError::UnknownRequest);
        }
        let data_len = match &payload {
            Payload::Bytes(d) => d.len(),
            Payload::Fill { len, .. } => *len,
        };
        if let Err(e) = self.check_response(name, data_len) {
            if let SendError::ResponseTooLarge { .. } | SendError::Split(_) = e {
                self.pending.remove(tid);
                self.send_error(tid, ErrorCode::ResponseTooLarge);
            }
            return Err(e);
        }
        self.enqueue(tid, name, payload)?;
        self.pending.remove(tid);
        self.stream_over(tid);
        Ok(())
    }

    /// Answers request `tid` with an ERROR control.
    pub fn respond_error(
        &mut self,
        now: Instant,
        tid: u8,
        code: ErrorCode,
    ) -> Result<(), SendError> {
        let _ = now;
        self.check_open()?;
        if !self.pending.remove(tid) {
            return Err(SendError::UnknownRequest);
        }
        if self.stream.is_some_and(|(t, _)| t == tid) {
            self.stream = None;
        }
        self.stream_over(tid);
        self.send_error(tid, code);
        Ok(())
    }

    /// Sends an ERROR control for any transaction id, pending or not: for failures that have
    /// no pending request to answer (e.g. the final response of an upload, which the central
    /// binds to the tid of its STREAM_END_C2P).
    pub fn report_error(
        &mut self,
        now: Instant,
        tid: u8,
        code: ErrorCode,
    ) -> Result<(), SendError> {
        let _ = now;
        self.check_open()?;
        self.pending.remove(tid);
        self.stream_over(tid);
        self.send_error(tid, code);
        Ok(())
    }

    /// Marks request `tid` as handled without a response (an item of a central→peripheral
    /// stream).
    pub fn ack(&mut self, tid: u8) -> Result<(), SendError> {
        if self.pending.remove(tid) {
            Ok(())
        } else {
            Err(SendError::UnknownRequest)
        }
    }

    /// Sends one item of the peripheral→central stream opened by request `request_tid`. Each item
    /// travels under a fresh peripheral transaction id, as the reference does.
    pub fn send_stream_item(
        &mut self,
        now: Instant,
        request_tid: u8,
        name: &str,
        data: &[u8],
    ) -> Result<(), SendError> {
        let _ = now;
        self.check_open()?;
        if !self.pending.contains(request_tid) {
            return Err(SendError::UnknownRequest);
        }
        let sent = match self.stream {
            Some((t, n)) if t == request_tid => n,
            Some(_) => return Err(SendError::StreamLimit),
            None => 0,
        };
        if sent >= self.config.max_stream_items {
            return Err(SendError::StreamLimit);
        }
        if self.stream_credits(request_tid) == Some(0) {
            return Err(SendError::NoCredit);
        }
        self.check_response(name, data.len())?;
        let tid = self.ep.next_tid;
        self.enqueue(tid, name, bytes(data))?;
        if let Some((_, n)) = self.credit.as_mut().filter(|(t, _)| *t == request_tid) {
            *n -= 1;
        }
        if let Some(b) = self.bidi.as_mut() {
            b.sent_item(request_tid);
        }
        // A CANCEL drops the items still queued (they travel under fresh tids).
        self.ep.outbox.mark_last_item();
        self.ep.next_tid = self.ep.next_tid.wrapping_add(1);
        self.stream = Some((request_tid, sent + 1));
        Ok(())
    }

    /// Ends the peripheral→central stream opened by request `request_tid` (STREAM_END_P2C, queued
    /// after the last item).
    pub fn end_stream(&mut self, now: Instant, request_tid: u8) -> Result<(), SendError> {
        let _ = now;
        self.check_open()?;
        if !self.pending.contains(request_tid) {
            return Err(SendError::UnknownRequest);
        }
        let tid = self.ep.next_tid;
        self.ep
            .outbox
            .push_control(tid, ControlCmd::StreamEndP2C, &[])
            .map_err(|f| SendError::OutboxFull {
                needed: f.needed,
                free: f.free,
            })?;
        self.ep.next_tid = self.ep.next_tid.wrapping_add(1);
        self.pending.remove(request_tid);
        self.stream = None;
        self.stream_over(request_tid);
        Ok(())
    }

    /// Sends the final response of a central→peripheral stream (after
    /// [`PeripheralEvent::StreamEndC2P`]) under a fresh transaction id, as the reference does.
    pub fn respond_upload(
        &mut self,
        now: Instant,
        name: &str,
        data: &[u8],
    ) -> Result<(), SendError> {
        let _ = now;
        self.check_open()?;
        self.check_response(name, data.len())?;
        let tid = self.ep.next_tid;
        self.enqueue(tid, name, bytes(data))?;
        self.ep.next_tid = self.ep.next_tid.wrapping_add(1);
        Ok(())
    }

    // ----- internals -------------------------------------------------------------------------

    /// Reassembly limits: classic, or the large limit with LARGE FIRST accepted, and LONG
    /// containers accepted with that extension in force.
    pub(super) fn assembler_config(
        config: &PeripheralConfig,
        large: bool,
        long: bool,
    ) -> AssemblerConfig {
        AssemblerConfig {
            max_message_len: config.max_request_len,
            max_in_flight: SLOTS,
            large_messages: large,
            long_containers: long,
        }
    }

    pub(super) fn check_open(&self) -> Result<(), SendError> {
        if self.closed {
            Err(SendError::Closed)
        } else {
            Ok(())
        }
    }

    pub(super) fn check_response(&self, name: &str, data_len: usize) -> Result<(), SendError> {
        if name.is_empty() || name.len() > MAX_NAME_LEN || data_len > MAX_LARGE_DATA_LEN {
            return Err(SendError::Invalid);
        }
        let len = wire_len(name.len(), data_len, self.kx.is_established());
        let max = self.max_response_wire(self.ep.large, self.ep.long);
        if len > max {
            return Err(SendError::ResponseTooLarge { len, max });
        }
        Ok(())
    }

    /// The largest response (wire bytes) this connection can send: the configured limit, what
    /// the outbox can ever hold, and without the extension one classic transaction at this MTU
    /// (data beyond 65,535 bytes always exceeds that).
    pub(super) fn max_response_wire(&self, large: bool, long: bool) -> usize {
        let max = self.config.max_response_len.min(self.ep.outbox.max_body());
        if large {
            max
        } else {
            max.min(classic_max_message_len(self.config.att_mtu, long))
        }
    }

    pub(super) fn enqueue<F: FnOnce(&mut [u8])>(
        &mut self,
        tid: u8,
        name: &str,
        payload: Payload<'_, F>,
    ) -> Result<(), SendError> {
        self.ep
            .enqueue(
                self.kx.session_mut(),
                tid,
                CommandType::Response,
                name,
                payload,
            )
            .map_err(|e| match e {
                EnqueueError::Full(f) => SendError::OutboxFull {
                    needed: f.needed,
                    free: f.free,
                },
                EnqueueError::CounterExhausted => SendError::CounterExhausted,
                EnqueueError::Invalid | EnqueueError::Internal => SendError::Invalid,
            })
    }

    pub(super) fn on_assembly_error(&mut self, e: AssembleError) {
        let reply = match e {
            AssembleError::SequenceGap { tid, .. } => Some((tid, ErrorCode::SequenceGap)),
            AssembleError::TooLarge { tid, .. }
            | AssembleError::Capacity { tid }
            | AssembleError::ContainerTooLong { tid, .. }
            | AssembleError::LargeNotNegotiated { tid, .. } => {
                Some((tid, ErrorCode::RequestTooLarge))
            }
            AssembleError::NoFreeSlot { tid } => Some((tid, ErrorCode::Busy)),
            // A SUBSEQUENT without its FIRST: most likely the tail of a transaction we already
            // refused; replying again would only duplicate that error.
            _ => None,
        };
        if let Some((tid, code)) = reply {
            self.send_error(tid, code);
        }
        self.warn(Warning::Assembly(e));
    }

    /// A data container before the session exists while encryption is required: its FIRST is
    /// answered with ERROR `ENCRYPTION_REQUIRED` (what the request would get once reassembled),
    /// the rest of it is dropped, and nothing is buffered.
    pub(super) fn refuse_before_session(&mut self, container: &Container<'_>) {
        let tid = container.tid;
        self.refused_before_session = self.refused_before_session.saturating_add(1);
        if self.refused_before_session > self.config.max_containers_before_session {
            self.close_for(super::PeripheralCloseReason::DataBeforeSession);
            return;
        }
        if container.kind.total_length().is_some() {
            self.send_error(tid, ErrorCode::EncryptionRequired);
        }
        self.warn(Warning::PlaintextRejected { tid });
    }

    /// Whether a data container may go to the assembler. A FIRST that starts a message which
    /// does not complete in it is refused with ERROR BUSY when the partial requests' announced
    /// lengths would exceed the reassembly budget, or when the requests pending and partial
    /// already reach `max_pending_requests`; an oversized one gets `REQUEST_TOO_LARGE` as
    /// before (from the assembler).
    pub(super) fn admit(&mut self, container: &Container<'_>) -> bool {
        let tid = container.tid;
        let Some(total) = container.kind.total_length() else {
            return true;
        };
        if container.payload.len() >= total || total > self.config.max_request_len {
            // Complete in this container (no partial), or refused as too large by the
            // assembler.
            return true;
        }
        // A FIRST replaces a transaction of the same tid: what that one claimed does not count.
        self.ep.discard_partial(tid);
        let claimed = self.ep.assembler.claimed();
        let partial = self.ep.assembler.receiving();
        let over_budget = claimed.saturating_add(total) > self.reassembly_budget;
        let over_pending = self.pending.len() + partial >= self.config.max_pending_requests;
        if over_budget || over_pending {
            self.send_error(tid, ErrorCode::Busy);
            self.warn(if over_budget {
                Warning::ReassemblyBudget {
                    tid,
                    claimed,
                    requested: total,
                }
            } else {
                Warning::Assembly(AssembleError::NoFreeSlot { tid })
            });
            return false;
        }
        true
    }

    pub(super) fn on_request(&mut self, now: Instant, done: Completed) {
        let tid = done.tid;
        self.mark_set_up();
        // A bidirectional stream's items do not wait for an answer and are credited instead:
        // while one is open the pending limit is checked once the request is read.
        let full = self.pending.len() >= self.config.max_pending_requests;
        if (full && self.bidi.is_none()) || self.ep.events_free() < 2 {
            self.ep.assembler.release(done);
            self.send_error(tid, ErrorCode::Busy);
            if self.ep.events_free() < 2 {
                self.warn(Warning::EventQueueFull);
            }
            return;
        }
        let bytes = self.ep.assembler.message_mut(done);
        let range = match self.kx.session_mut() {
            Some(session) => match session.open_in_place(bytes) {
                Ok(r) => r,
                Err(e) => {
                    self.ep.assembler.release(done);
                    self.send_error(tid, ErrorCode::DecryptFailed);
                    self.warn(Warning::Decrypt(e));
                    return;
                }
            },
            None if self.config.require_encryption => {
                self.ep.assembler.release(done);
                self.send_error(tid, ErrorCode::EncryptionRequired);
                self.warn(Warning::PlaintextRejected { tid });
                return;
            }
            None => 0..bytes.len(),
        };
        let plain = self
            .ep
            .assembler
            .message(done)
            .get(range.clone())
            .unwrap_or(&[]);
        let parsed = Command::parse_extended(plain, self.ep.large, self.request_flags()).map(|e| {
            let c = e.command;
            (c.kind, c.name.len(), c.data.len(), e.header_len, e.fields)
        });
        match parsed {
            Ok((CommandType::Request, name_len, data_len, header_len, fields)) => {
                let msg = MsgRef::new(done, range.start + header_len, data_len);
                let name_start = u32::try_from(range.start + 2).unwrap_or(u32::MAX);
                let name_len = u8::try_from(name_len).unwrap_or(u8::MAX);
                if let Some(stream) = fields.item_of {
                    match self.on_stream_item(tid, stream) {
                        ItemFate::Accepted => {
                            self.push_item(tid, stream, (name_start, name_len), msg);
                        }
                        ItemFate::OverCredit | ItemFate::Unknown => {
                            self.ep.assembler.release(done);
                        }
                    }
                    return;
                }
                if full {
                    self.ep.assembler.release(done);
                    self.send_error(tid, ErrorCode::Busy);
                    return;
                }
                if let Some(open) = fields.open
                    && !self.on_open(tid, open)
                {
                    self.ep.assembler.release(done);
                    return;
                }
                self.pending.insert(tid);
                self.counters.requests = self.counters.requests.saturating_add(1);
                let deadline = fields
                    .deadline_ms
                    .map(|ms| now + core::time::Duration::from_millis(u64::from(ms)));
                self.push(Record::Request {
                    tid,
                    name_start,
                    name_len,
                    msg,
                    deadline,
                });
            }
            Ok(_) => {
                self.ep.assembler.release(done);
                self.send_error(tid, ErrorCode::DecodeFailed);
                self.warn(Warning::WrongCommandType { tid });
            }
            Err(e) => {
                self.ep.assembler.release(done);
                self.send_error(tid, ErrorCode::DecodeFailed);
                self.warn(Warning::MalformedCommand(e));
            }
        }
    }

    /// CANCEL for request `request` (the cancel extension in force): whatever is held for it
    /// goes (a request still arriving, the request handed out, its queued response, which
    /// stops after the containers already sent, its stream and the stream's queued items), and
    /// if anything was, ERROR
    /// CANCELLED under its tid tells the central nothing more comes: queued after what is
    /// already queued, so it follows a stream's last item. A tid nothing is held for (already
    /// answered) is ignored.
    pub(super) fn on_cancel(&mut self, request: u8) {
        let arriving = self.ep.assembler.is_receiving(request);
        self.ep.discard_partial(request);
        let pending = self.pending.remove(request);
        let mut queued = self.ep.outbox.abort(request).entries > 0;
        if self.stream.is_some_and(|(t, _)| t == request) {
            self.stream = None;
            queued |= self.ep.outbox.abort_items() > 0;
        }
        self.stream_over(request);
        if !(arriving || pending || queued) {
            return;
        }
        // Refused only by a full outbox: the central's drain then ends by its idle timeout.
        let _ = self.ep.outbox.push_control(
            request,
            ControlCmd::Error,
            &[ErrorCode::Cancelled.to_byte()],
        );
        if pending {
            self.push(Record::Cancelled { tid: request });
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use core::time::Duration;

    use super::super::PeripheralEvent;
    use super::super::tests::{T0, peripheral, sent};
    use super::*;

    /// `echo` with `0a 02 "hi"` under `tid`, as one FIRST container.
    fn echo_request(tid: u8) -> [u8; 18] {
        [
            tid, 0x00, 0x00, 0x0c, 0x00, 0x0c, //
            0x00, 0x04, b'e', b'c', b'h', b'o', 0x04, 0x00, 0x0a, 0x02, b'h', b'i',
        ]
    }

    #[test]
    fn a_plaintext_request_is_refused_while_encryption_is_required() {
        let mut p = peripheral(true, |_| {});
        p.handle_input(T0, &echo_request(5)).unwrap();
        assert_eq!(
            p.poll_event(),
            Some(PeripheralEvent::Warning(Warning::PlaintextRejected {
                tid: 5
            }))
        );
        // ERROR ENCRYPTION_REQUIRED (0x06) under the request's tid.
        assert_eq!(sent(&mut p), [alloc::vec![0x05, 0x00, 0xd4, 0x01, 0x06]]);
        assert_eq!(p.pending_requests(), 0);
    }

    #[test]
    fn a_request_is_handed_out_and_answered_under_its_tid() {
        let mut p = peripheral(false, |_| {});
        p.handle_input(T0, &echo_request(5)).unwrap();
        assert_eq!(
            p.poll_event(),
            Some(PeripheralEvent::Request {
                tid: 5,
                name: "echo",
                data: b"\x0a\x02hi",
                deadline: None,
            })
        );
        assert_eq!(p.pending_requests(), 1);
        p.respond(T0, 5, "echo", b"\x0a\x02hi").unwrap();
        let mut response = echo_request(5);
        response[6] = 0x80;
        assert_eq!(sent(&mut p), [response.to_vec()]);
        assert_eq!(
            p.respond(T0, 5, "echo", b""),
            Err(SendError::UnknownRequest),
            "answered once"
        );
    }

    #[test]
    fn requests_beyond_the_pending_limit_get_busy() {
        let mut p = peripheral(false, |c| c.max_pending_requests = 1);
        p.handle_input(T0, &echo_request(5)).unwrap();
        p.handle_input(T0, &echo_request(6)).unwrap();
        assert!(matches!(
            p.poll_event(),
            Some(PeripheralEvent::Request { tid: 5, .. })
        ));
        assert_eq!(p.poll_event(), None);
        // ERROR BUSY (0x02) for the second.
        assert_eq!(sent(&mut p), [alloc::vec![0x06, 0x00, 0xd4, 0x01, 0x02]]);
    }

    #[test]
    fn requests_errors_and_the_outbox_high_water_mark_are_counted() {
        let mut p = peripheral(false, |c| c.max_pending_requests = 1);
        p.handle_input(T0, &echo_request(5)).unwrap();
        p.handle_input(T0, &echo_request(6)).unwrap();
        while p.poll_event().is_some() {}
        p.respond(T0, 5, "echo", b"\x0a\x02hi").unwrap();
        p.report_error(T0, 9, ErrorCode::Unknown(0x42)).unwrap();
        // BUSY for 6, the response to 5 (through the outbox), the application's ERROR 0x42.
        assert_eq!(sent(&mut p).len(), 3);
        let c = p.take_counters();
        assert_eq!(c.requests, 1, "the refused one is not a call");
        assert!(c.error_counts().eq([(0x02, 1), (0xff, 1)]));
        assert!(c.outbox_high_water > 0);
        // Taken: counting starts again, the marks from what is held now (nothing).
        assert_eq!(p.take_counters(), crate::connection::Counters::default());
    }

    #[test]
    fn a_stream_is_items_under_fresh_tids_then_its_end() {
        let mut p = peripheral(false, |c| c.max_stream_items = 2);
        p.handle_input(T0, &echo_request(5)).unwrap();
        assert!(p.poll_event().is_some());
        p.send_stream_item(T0, 5, "counter_stream", b"\x08\x00")
            .unwrap();
        p.send_stream_item(T0, 5, "counter_stream", b"\x08\x01")
            .unwrap();
        assert_eq!(
            p.send_stream_item(T0, 5, "counter_stream", b"\x08\x02"),
            Err(SendError::StreamLimit)
        );
        p.end_stream(T0, 5).unwrap();
        let pdus = sent(&mut p);
        assert_eq!(pdus.len(), 3);
        assert_eq!((pdus[0][0], pdus[1][0]), (0x00, 0x01));
        // STREAM_END_P2C under tid 2: CONTROL | 3 << 2 = 0xcc.
        assert_eq!(pdus[2], [0x02, 0x00, 0xcc, 0x00]);
        assert_eq!(p.pending_requests(), 0);
    }

    #[test]
    fn a_response_over_the_limit_becomes_an_error_reply() {
        let mut p = peripheral(false, |c| c.max_response_len = 16);
        p.handle_input(T0, &echo_request(5)).unwrap();
        assert!(p.poll_event().is_some());
        assert!(matches!(
            p.respond(T0, 5, "echo", &[0; 32]),
            Err(SendError::ResponseTooLarge { max: 16, .. })
        ));
        // ERROR RESPONSE_TOO_LARGE (0x01); the request is answered.
        assert_eq!(sent(&mut p), [alloc::vec![0x05, 0x00, 0xd4, 0x01, 0x01]]);
        assert_eq!(p.pending_requests(), 0);
    }

    /// A plaintext peripheral through CAPABILITIES with the extensions `tune` turns on,
    /// announced by the central as flags `flags` (the low byte) and agreed.
    fn agreeing(
        flags: u8,
        tune: impl FnOnce(&mut crate::connection::PeripheralConfig),
    ) -> super::super::tests::TestPeripheral {
        let mut p = peripheral(false, tune);
        p.handle_input(T0, &[0x01, 0x00, 0xd0, 0x06, 0, 0, 0, 0, flags, 0x00])
            .unwrap();
        let reply = sent(&mut p);
        assert_eq!(reply[0][8], flags, "agreed: {reply:02x?}");
        while p.poll_event().is_some() {}
        p
    }

    /// [`agreeing`] to the cancel extension (flags `0x0010`).
    fn with_cancel() -> super::super::tests::TestPeripheral {
        agreeing(0x10, |c| c.cancel = true)
    }

    #[test]
    fn cancel_drops_the_request_where_it_is_and_says_so_once() {
        let mut p = with_cancel();
        // A request handed out, then CANCEL of tid 5 under tid 9: `[09][00][0xe0][01][05]`.
        p.handle_input(T0, &echo_request(5)).unwrap();
        assert!(matches!(
            p.poll_event(),
            Some(PeripheralEvent::Request { tid: 5, .. })
        ));
        p.handle_input(T0, &[0x09, 0x00, 0xe0, 0x01, 0x05]).unwrap();
        assert_eq!(p.poll_event(), Some(PeripheralEvent::Cancelled { tid: 5 }));
        // ERROR CANCELLED (0x0c) under the request's tid; the late answer is refused.
        assert_eq!(sent(&mut p), [[0x05, 0x00, 0xd4, 0x01, 0x0c]]);
        assert_eq!(
            p.respond(T0, 5, "echo", b"\x0a\x02hi"),
            Err(SendError::UnknownRequest)
        );
        // A tid nothing is held for: ignored, no reply.
        p.handle_input(T0, &[0x0a, 0x00, 0xe0, 0x01, 0x05]).unwrap();
        assert_eq!(p.poll_event(), None);
        assert!(sent(&mut p).is_empty());
        // A request still arriving (FIRST of 40 bytes, 12 sent) goes, with its deadline.
        let mut first = alloc::vec![0x06, 0x00, 0x00, 40, 0x00, 12];
        first.extend_from_slice(&echo_request(6)[6..]);
        p.handle_input(T0, &first).unwrap();
        assert!(p.poll_timeout().is_some(), "the partial's deadline");
        p.handle_input(T0, &[0x0b, 0x00, 0xe0, 0x01, 0x06]).unwrap();
        assert_eq!(p.reassembly_claimed(), 0);
        assert_eq!(p.poll_timeout(), None, "no stale reassembly deadline");
        assert_eq!(sent(&mut p), [[0x06, 0x00, 0xd4, 0x01, 0x0c]]);
    }

    #[test]
    fn without_agreement_cancel_is_only_a_warning() {
        let mut p = peripheral(false, |c| c.cancel = true);
        // The 6-byte CAPABILITIES request without the flag: not in force.
        p.handle_input(T0, &[0x01, 0x00, 0xd0, 0x06, 0, 0, 0, 0, 0, 0])
            .unwrap();
        assert_eq!(sent(&mut p)[0][8], 0x00);
        while p.poll_event().is_some() {}
        p.handle_input(T0, &echo_request(5)).unwrap();
        assert!(p.poll_event().is_some());
        p.handle_input(T0, &[0x09, 0x00, 0xe0, 0x01, 0x05]).unwrap();
        assert!(matches!(p.poll_event(), Some(PeripheralEvent::Warning(_))));
        p.respond(T0, 5, "echo", b"\x0a\x02hi").unwrap();
    }

    /// echo "hi" under `tid` carrying 300 ms of deadline:
    /// `[02][04]"echo"[ac 02: 300 as a varint][04 00]0a026869`.
    fn echo_with_deadline_300(tid: u8) -> alloc::vec::Vec<u8> {
        let mut pdu = alloc::vec![tid, 0x00, 0x00, 0x0e, 0x00, 0x0e, 0x02, 0x04];
        pdu.extend_from_slice(b"echo");
        pdu.extend_from_slice(&[0xac, 0x02, 0x04, 0x00, 0x0a, 0x02, b'h', b'i']);
        pdu
    }

    #[test]
    fn a_request_hands_out_its_deadline_on_this_sides_clock() {
        let mut p = agreeing(0x20, |c| c.deadline = true);
        let arrived = T0 + Duration::from_millis(40);
        p.handle_input(arrived, &echo_with_deadline_300(5)).unwrap();
        assert_eq!(
            p.poll_event(),
            Some(PeripheralEvent::Request {
                tid: 5,
                name: "echo",
                data: b"\x0a\x02hi",
                deadline: Some(arrived + Duration::from_millis(300)),
            })
        );
        // A request without the flag has none.
        p.handle_input(arrived, &echo_request(6)).unwrap();
        assert!(matches!(
            p.poll_event(),
            Some(PeripheralEvent::Request {
                tid: 6,
                deadline: None,
                ..
            })
        ));
    }

    #[test]
    fn without_agreement_a_deadline_is_read_as_the_reference_reads_it() {
        // The central announced nothing: bit 1 is ignored and the deadline's first bytes taken
        // for data_len (300), longer than what came: DECODE_FAILED, as from a reference peer.
        let mut p = peripheral(false, |c| c.deadline = true);
        p.handle_input(T0, &echo_with_deadline_300(5)).unwrap();
        assert!(matches!(p.poll_event(), Some(PeripheralEvent::Warning(_))));
        assert_eq!(sent(&mut p), [[0x05, 0x00, 0xd4, 0x01, 0x04]]);
    }
}
