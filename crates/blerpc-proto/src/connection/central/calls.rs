//! Calls and streams: requests framed once and kept for BUSY retries, responses matched to
//! their call by transaction id and command name, deadlines, and ERROR replies.

use rand_core::CryptoRngCore;

use super::Central;
#[cfg(doc)]
use super::CentralEvent;
use super::config::{CallId, CallKind};
use super::event::Record;
use super::setup::{EarlyStep1, State};
use crate::Instant;
use crate::assemble::{AssembleError, Assembler, Completed};
use crate::buf::Buffer;
use crate::connection::endpoint::{MsgRef, ReassemblyDeadline, TidSet};
use crate::connection::events::Warning;
use crate::connection::framing::{EnqueueError, bytes, wire_len};
use crate::connection::{CallError, CloseReason};
use crate::crypto::CryptoProvider;
use crate::split::classic_max_message_len;
use crate::wire::command::{
    Command, CommandType, MAX_DATA_LEN, MAX_FIELDS_LEN, MAX_LARGE_DATA_LEN, MAX_NAME_LEN,
    RequestFields, with_fields,
};
use crate::wire::container::{Container, ControlCmd};
use crate::wire::error_code::ErrorCode;

/// Races for a freed place a call waiting to retry after BUSY may lose to calls sent after it
/// before the next response sends it at once ([`Central::retry_first_waiting`]).
const PASSED_OVER: u8 = 2;

/// A call in flight.
pub(super) struct Call<O: Buffer> {
    pub(super) id: CallId,
    pub(super) kind: CallKind,
    /// Transaction id of the (latest attempt of the) request.
    pub(super) tid: u8,
    /// The plaintext request command (unary / server stream, kept for BUSY retries) or, for a
    /// client stream, a command header carrying just the name.
    pub(super) request: O,
    pub(super) deadline: Option<Instant>,
    /// The caller's deadline ([`Central::set_call_deadline`]): no timer the call restarts
    /// (a stream item, a finish) goes beyond it.
    cap: Option<Instant>,
    pub(super) attempts: u8,
    /// BUSY answers in a row with no call answered since this one's previous BUSY (or its
    /// start): what `busy_retries` counts. A BUSY after the peripheral answered others is this
    /// side's own concurrency meeting a full peripheral, not a stuck one: it starts the count
    /// again.
    pub(super) strikes: u8,
    /// BUSY answers this call met after the peripheral had answered others since its previous
    /// one: races for a freed place it lost to calls sent after it.
    pub(super) passed_over: u8,
    /// [`Central`]'s count of answers when this call started or last met BUSY.
    pub(super) answered_at: u32,
    pub(super) retry_at: Option<Instant>,
    /// Client stream: tids of the items and of STREAM_END_C2P.
    pub(super) upload_tids: TidSet,
    pub(super) finished: bool,
    /// Server stream: not sent yet, because an earlier stream is still draining ([`Drain`]).
    pub(super) held: bool,
    /// The deadline without the caller's cap: how long the peripheral may still be sending if
    /// the call leaves early (the start of a [`Drain`]).
    pub(super) idle_until: Option<Instant>,
    /// The streams extension: a stream's flow control (see `streams.rs`).
    pub(super) flow: super::streams::Flow,
}

/// The name in a stored request command's header, as bytes, without validating it again (it
/// was valid UTF-8 when the call started): for comparisons on every response.
pub(super) fn name_of(request: &[u8]) -> &[u8] {
    let len = request.get(1).map_or(0, |l| usize::from(*l));
    request.get(2..2 + len).unwrap_or(&[])
}

impl<O: Buffer> Call<O> {
    /// `deadline`, but never after the caller's.
    pub(super) fn capped(&self, deadline: Instant) -> Option<Instant> {
        Some(self.cap.map_or(deadline, |cap| cap.min(deadline)))
    }

    /// The caller's deadline, if it gave one.
    pub(super) fn cap(&self) -> Option<Instant> {
        self.cap
    }
}

impl<O: Buffer> Call<O> {
    /// The stored command's name as bytes (see [`name_of`]).
    pub(super) fn name_bytes(&self) -> &[u8] {
        name_of(self.request.as_slice())
    }

    /// `true` once the request went out and no BUSY retry is pending: the peripheral may be
    /// answering it.
    pub(super) fn answering(&self) -> bool {
        !self.held && self.retry_at.is_none() && self.attempts > 0
    }
}

impl<P, R, A, O, const SLOTS: usize> Central<P, R, A, O, SLOTS>
where
    P: CryptoProvider,
    R: CryptoRngCore,
    A: Buffer + Default,
    O: Buffer + Default,
{
    /// Largest request data (bytes) a call can carry right now for a command name of
    /// `name_len` bytes, from the peripheral's `max_request` (wire length) and the MTU.
    pub fn max_request_data(&self, name_len: usize) -> usize {
        let overhead = wire_len(name_len, 0, self.state.is_encrypted());
        let data = self.max_request_wire().saturating_sub(overhead);
        if self.large.is_none() {
            return data.min(MAX_DATA_LEN);
        }
        // Beyond 65,535 bytes the command header grows by two bytes (u32 data_len).
        let data = if data > MAX_DATA_LEN {
            data.saturating_sub(2).max(MAX_DATA_LEN)
        } else {
            data
        };
        data.min(MAX_LARGE_DATA_LEN)
    }

    // ----- user operations -------------------------------------------------------------------

    /// Starts a call. For [`CallKind::ClientStream`], `request` must be empty: the items are sent
    /// with [`Central::send_stream_item`]. The call keeps its own copy of the request command
    /// (for BUSY retries); [`Central::start_call_framed`] takes one already framed instead.
    pub fn start_call(
        &mut self,
        now: Instant,
        name: &str,
        request: &[u8],
        kind: CallKind,
    ) -> Result<CallId, CallError> {
        self.start_call_until(now, name, request, kind, None)
    }

    /// [`Central::start_call`] with the caller's deadline, which bounds the whole call (as
    /// [`Central::set_call_deadline`] sets it) and, with the deadline extension in force,
    /// travels with the request so the peripheral's handler can give up in time.
    pub fn start_call_until(
        &mut self,
        now: Instant,
        name: &str,
        request: &[u8],
        kind: CallKind,
        deadline: Option<Instant>,
    ) -> Result<CallId, CallError> {
        self.check_call(name, request.len(), kind)?;
        // Keep the plaintext command (the name alone for client streams).
        // (In our own encoding: the extended header only for data beyond 65,535 bytes, which
        // check_request_len allows only with the extension in force.)
        // Header and data appended (not a zero-filled buffer written over: for a long request
        // that would be one more pass over every byte).
        let mut stored = O::default();
        let header_len = Command::header_len_large(name.len(), request.len());
        let needed = header_len + request.len();
        let mut header = [0u8; Command::header_len_large(MAX_NAME_LEN, usize::MAX)];
        let header = header.get_mut(..header_len).ok_or(CallError::InvalidName)?;
        Command::emit_header_large(CommandType::Request, name, request.len(), header)
            .map_err(|_| CallError::InvalidName)?;
        let full = |_| CallError::OutboxFull { needed, free: 0 };
        stored.try_reserve(needed).map_err(full)?;
        stored.try_extend(header).map_err(full)?;
        stored.try_extend(request).map_err(full)?;
        self.insert_call(now, stored, kind, deadline)
            .map_err(|(e, _)| e)
    }

    /// Starts a call whose request command is already framed in `command`: a REQUEST command
    /// header as [`Command::emit_header_large`] writes it (the extended form only for data above
    /// 65,535 bytes), followed by exactly its protobuf data. On success the call takes the buffer
    /// (leaving `command` empty) instead of copying the request, so a runtime can encode the
    /// protobuf message straight behind the header; on failure `command` is left as it was, to
    /// retry after [`CallError::OutboxFull`]. A buffer that is not exactly one REQUEST command
    /// is [`CallError::MalformedCommand`]; every other check is [`Central::start_call`]'s.
    pub fn start_call_framed(
        &mut self,
        now: Instant,
        command: &mut O,
        kind: CallKind,
    ) -> Result<CallId, CallError> {
        self.start_call_framed_until(now, command, kind, None)
    }

    /// [`Central::start_call_framed`] with the caller's deadline (see
    /// [`Central::start_call_until`]).
    pub fn start_call_framed_until(
        &mut self,
        now: Instant,
        command: &mut O,
        kind: CallKind,
        deadline: Option<Instant>,
    ) -> Result<CallId, CallError> {
        let cmd =
            Command::parse_large(command.as_slice()).map_err(|_| CallError::MalformedCommand)?;
        let framed_len = Command::header_len_large(cmd.name.len(), cmd.data.len()) + cmd.data.len();
        if cmd.kind != CommandType::Request || framed_len != command.len() {
            return Err(CallError::MalformedCommand);
        }
        self.check_call(cmd.name, cmd.data.len(), kind)?;
        let stored = core::mem::take(command);
        self.insert_call(now, stored, kind, deadline)
            .map_err(|(e, stored)| {
                *command = stored;
                e
            })
    }

    /// The checks [`Central::start_call`] makes before it stores anything.
    pub(super) fn check_call(
        &self,
        name: &str,
        data_len: usize,
        kind: CallKind,
    ) -> Result<(), CallError> {
        self.check_ready()?;
        if name.is_empty() || name.len() > MAX_NAME_LEN {
            return Err(CallError::InvalidName);
        }
        if data_len > MAX_LARGE_DATA_LEN {
            return Err(CallError::DataTooLong { len: data_len });
        }
        if kind.sends_items() && data_len != 0 {
            return Err(CallError::WrongCallKind);
        }
        if kind == CallKind::BidiStream && !self.streams {
            return Err(CallError::NotNegotiated);
        }
        let in_flight = self.calls_in_flight();
        if in_flight >= self.config.max_calls_in_flight {
            return Err(CallError::TooManyCalls {
                limit: self.config.max_calls_in_flight,
            });
        }
        if kind != CallKind::Unary
            && self
                .calls
                .iter()
                .flatten()
                .any(|c| c.kind != CallKind::Unary)
        {
            return Err(CallError::StreamActive);
        }
        if kind != CallKind::ClientStream {
            self.check_request_len(name.len(), data_len)?;
        }
        Ok(())
    }

    /// Sends a checked call's stored request command (not for client streams) and records the
    /// call; on failure the stored command comes back with the error.
    pub(super) fn insert_call(
        &mut self,
        now: Instant,
        stored: O,
        kind: CallKind,
        cap: Option<Instant>,
    ) -> Result<CallId, (CallError, O)> {
        let id = CallId(self.next_call);
        let mut call = Call {
            id,
            kind,
            tid: 0,
            request: stored,
            deadline: None,
            cap,
            attempts: 0,
            strikes: 0,
            passed_over: 0,
            answered_at: self.answered,
            retry_at: None,
            upload_tids: TidSet::default(),
            finished: false,
            held: false,
            idle_until: None,
            flow: super::streams::Flow::default(),
        };
        let Some(slot) = self.calls.iter().position(Option::is_none) else {
            let limit = self.config.max_calls_in_flight;
            return Err((CallError::TooManyCalls { limit }, call.request));
        };
        // The caller's deadline bounds the call from its start (a held stream and an upload
        // too), and replaces the call timeout (as `set_call_deadline` does).
        call.deadline = cap;
        if kind.receives_items() && self.drain.is_some() {
            // Sent when the drain ends; until then only the caller's deadline runs.
            call.held = true;
        } else if kind != CallKind::ClientStream {
            call.deadline = Some(cap.unwrap_or(now + self.config.call_timeout));
            call.idle_until = Some(now + self.config.call_timeout);
            let fields = self.request_fields(&call, now);
            match self.send_request(&mut call.request, &fields) {
                Ok(tid) => call.tid = tid,
                Err(e) => return Err((e, call.request)),
            }
            call.flow = super::streams::Flow::opened(&fields);
            call.attempts = 1;
        }
        if let Some(s) = self.calls.get_mut(slot) {
            *s = Some(call);
        }
        self.next_call = self.next_call.wrapping_add(1);
        Ok(id)
    }

    /// Sends one item of a central→peripheral stream.
    pub fn send_stream_item(
        &mut self,
        now: Instant,
        call: CallId,
        item: &[u8],
    ) -> Result<(), CallError> {
        let _ = now;
        self.check_ready()?;
        if item.len() > MAX_LARGE_DATA_LEN {
            return Err(CallError::DataTooLong { len: item.len() });
        }
        let idx = self.call_index(call).ok_or(CallError::UnknownCall)?;
        let (name_len, finished, kind) = match self.calls.get(idx).and_then(Option::as_ref) {
            Some(c) => (c.name_bytes().len(), c.finished, c.kind),
            None => return Err(CallError::UnknownCall),
        };
        if kind == CallKind::BidiStream && !finished {
            return self.send_bidi_item(idx, item);
        }
        if kind != CallKind::ClientStream || finished {
            return Err(CallError::WrongCallKind);
        }
        self.check_request_len(name_len, item.len())?;
        let tid = self.ep.alloc_tid();
        let Some(c) = self.calls.get_mut(idx).and_then(Option::as_mut) else {
            return Err(CallError::UnknownCall);
        };
        let name = Command::parse_large(c.request.as_slice())
            .map(|c| c.name)
            .unwrap_or("");
        self.ep
            .enqueue(
                self.state.session_mut(),
                tid,
                CommandType::Request,
                name,
                bytes(item),
            )
            .map_err(enqueue_to_call_error)?;
        c.upload_tids.insert(tid);
        Ok(())
    }

    /// Ends a central→peripheral stream (STREAM_END_C2P); the final response arrives as
    /// [`CentralEvent::Response`].
    pub fn finish_stream(&mut self, now: Instant, call: CallId) -> Result<(), CallError> {
        self.check_ready()?;
        let idx = self.call_index(call).ok_or(CallError::UnknownCall)?;
        let tid = self.ep.next_tid;
        let call_timeout = self.config.call_timeout;
        let Some(c) = self.calls.get_mut(idx).and_then(Option::as_mut) else {
            return Err(CallError::UnknownCall);
        };
        if c.kind == CallKind::BidiStream && !c.finished {
            return self.finish_bidi(idx);
        }
        if c.kind != CallKind::ClientStream || c.finished {
            return Err(CallError::WrongCallKind);
        }
        self.ep
            .outbox
            .push_control(tid, ControlCmd::StreamEndC2P, &[])
            .map_err(|f| CallError::OutboxFull {
                needed: f.needed,
                free: f.free,
            })?;
        c.upload_tids.insert(tid);
        c.finished = true;
        c.deadline = c.capped(now + call_timeout);
        self.ep.next_tid = self.ep.next_tid.wrapping_add(1);
        Ok(())
    }

    /// Overrides the deadline of a call: the caller's, which bounds the whole call (a stream's
    /// items and an upload's finish restart its idle timer, never beyond it).
    pub fn set_call_deadline(&mut self, call: CallId, deadline: Instant) -> Result<(), CallError> {
        let idx = self.call_index(call).ok_or(CallError::UnknownCall)?;
        if let Some(c) = self.calls.get_mut(idx).and_then(Option::as_mut) {
            c.deadline = Some(deadline);
            c.cap = Some(deadline);
        }
        Ok(())
    }

    /// Forgets a call. Anything the peripheral still sends for it is dropped as stale. A server
    /// stream the peripheral may still be sending drains first: its items are dropped, and the
    /// next server stream is sent once its end arrives (or the peripheral has been silent for
    /// [`CentralConfig::stream_idle_timeout`](super::CentralConfig::stream_idle_timeout)), so
    /// that stream never receives this one's items.
    pub fn cancel(&mut self, call: CallId) -> Result<(), CallError> {
        let idx = self.call_index(call).ok_or(CallError::UnknownCall)?;
        self.retire(idx, None);
        Ok(())
    }

    // ----- internals: calls ------------------------------------------------------------------

    pub(super) fn check_ready(&self) -> Result<(), CallError> {
        match self.state {
            State::Ready(_) => Ok(()),
            State::Closed => Err(CallError::Closed),
            _ => Err(CallError::NotReady),
        }
    }

    pub(super) fn max_request_wire(&self) -> usize {
        if let Some(large) = self.large {
            return (large.max_request as usize).min(self.ep.outbox.max_body());
        }
        let by_peer = self
            .capabilities
            .map_or(usize::MAX, |c| usize::from(c.max_request));
        by_peer.min(classic_max_message_len(self.config.att_mtu, self.ep.long))
    }

    pub(super) fn check_request_len(
        &self,
        name_len: usize,
        data_len: usize,
    ) -> Result<(), CallError> {
        let len = wire_len(name_len, data_len, self.state.is_encrypted());
        let max = self.max_request_wire();
        if len > max {
            return Err(CallError::RequestTooLarge { len, max });
        }
        Ok(())
    }

    /// Encrypts and queues a stored request command under a fresh tid. The stored command was
    /// checked when the call started (one REQUEST, a large header only where the extension is in
    /// force), so its bytes go to the outbox as they are.
    ///
    /// With extension `fields` (its deadline, a stream's window), the request carries them
    /// after its name, inserted as the command is queued: the stored command stays classic,
    /// so a BUSY retry carries the time left then. A deadline that alone would make a
    /// one-container request two is left out ([`Central::fitted`]).
    pub(super) fn send_request(
        &mut self,
        request: &mut O,
        fields: &RequestFields,
    ) -> Result<u8, CallError> {
        let tid = self.ep.next_tid;
        let command = request.as_slice();
        let fields = &self.fitted(command.len(), *fields);
        let (mut type_byte, mut scratch) = ([0u8], [0u8; MAX_FIELDS_LEN]);
        let with = (fields.flags() != 0)
            .then(|| with_fields(command, fields, &mut type_byte, &mut scratch))
            .flatten();
        let parts = match &with {
            Some(parts) => &parts[..],
            None => core::slice::from_ref(&command),
        };
        self.ep
            .enqueue_framed(self.state.session_mut(), tid, parts)
            .map_err(enqueue_to_call_error)?;
        self.ep.next_tid = tid.wrapping_add(1);
        Ok(tid)
    }

    pub(super) fn call_index(&self, id: CallId) -> Option<usize> {
        self.calls
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.id == id))
    }

    pub(super) fn fail_call(&mut self, idx: usize, id: CallId, error: CallError) {
        if let Some(slot) = self.calls.get_mut(idx) {
            *slot = None;
        }
        self.push(Record::CallFailed { call: id, error });
    }

    pub(super) fn on_error(&mut self, now: Instant, tid: u8, code: ErrorCode) {
        if self.pending_timeout == Some(tid) {
            // A pipelined TIMEOUT refused: the default 100 ms stays, as in the sequential order.
            self.pending_timeout = None;
            return;
        }
        if let State::AwaitCapabilities {
            early: early @ EarlyStep1::Sent { .. },
            ..
        } = &mut self.state
            && matches!(early, EarlyStep1::Sent { tid: t, .. } if *t == tid)
        {
            // The early step 1 refused: it matters only if CAPABILITIES announces encryption.
            *early = EarlyStep1::Refused(code);
            return;
        }
        let setup_tid = match self.state {
            State::AwaitTimeout { tid, .. } | State::AwaitCapabilities { tid, .. } => Some(tid),
            State::AwaitStep2 { tid, .. } | State::AwaitStep4 { tid, .. } => Some(tid),
            _ => None,
        };
        if setup_tid == Some(tid) {
            match core::mem::replace(&mut self.state, State::Closed) {
                State::AwaitTimeout { .. } => self.request_capabilities(now),
                State::AwaitCapabilities { early, .. } => self.on_capabilities(now, None, early),
                _ => self.close_with(CloseReason::HandshakeRefused(code)),
            }
            return;
        }
        let found = self.calls.iter().position(|c| {
            c.as_ref().is_some_and(|c| match c.kind {
                CallKind::ClientStream => c.upload_tids.contains(tid),
                CallKind::BidiStream => {
                    c.upload_tids.contains(tid) || (c.tid == tid && c.answering())
                }
                _ => c.tid == tid && c.answering(),
            })
        });
        if found.is_none() && self.drain.as_ref().is_some_and(|d| d.tid == tid) {
            // The draining stream refused, failed or was cancelled: nothing more comes for it.
            self.end_drain(now);
            return;
        }
        if found.is_none() && matches!(code, ErrorCode::Cancelled | ErrorCode::DeadlineExceeded) {
            // The peripheral confirms a CANCEL, or a deadline passed there, for a call already
            // forgotten here.
            return;
        }
        let Some(idx) = found else {
            self.warn(Warning::StaleError { tid, code });
            return;
        };
        let retries = self.config.busy_retries;
        let backoff = self.config.busy_backoff;
        let answered = self.answered;
        let Some(call) = self.calls.get_mut(idx).and_then(Option::as_mut) else {
            return;
        };
        let id = call.id;
        // An open refused is sent again; an upload's or a bidirectional stream's item cannot be.
        let retried = match call.kind {
            CallKind::ClientStream => false,
            CallKind::BidiStream => call.tid == tid && call.flow.stream.is_none(),
            _ => true,
        };
        if code == ErrorCode::Busy && retried {
            // A strike only when the peripheral answered nothing since this call's last BUSY:
            // one that keeps answering others is full, not stuck, and the call waits its turn
            // (its deadline still bounds it). Strikes count in a row: an answer in between
            // starts them again, or a long wait would gather them one by one and fail.
            if call.answered_at == answered {
                call.strikes = call.strikes.saturating_add(1);
            } else {
                call.strikes = 0;
                call.passed_over = call.passed_over.saturating_add(1);
            }
            call.answered_at = answered;
            if call.strikes <= retries {
                let shift = u32::from(call.strikes.saturating_sub(1)).min(16);
                let delay = backoff.saturating_mul(1u32 << shift);
                call.retry_at = Some(now + delay);
                // The deadline still bounds the call as a whole.
                if call.deadline.is_some_and(|d| d <= now + delay) {
                    let attempts = call.attempts;
                    self.fail_call(idx, id, CallError::Busy { attempts });
                }
            } else {
                let attempts = call.attempts;
                self.fail_call(idx, id, CallError::Busy { attempts });
            }
        } else if code == ErrorCode::DeadlineExceeded {
            // The deadline this side gave passed there first (the call's own timer is about
            // to fire): the call timed out, wherever that was seen.
            self.fail_call(idx, id, CallError::Timeout);
        } else {
            self.fail_call(idx, id, CallError::Peer(code));
        }
    }

    pub(super) fn handle_data(&mut self, now: Instant, container: &Container<'_>) {
        let deadline = ReassemblyDeadline {
            timeout: self.config.reassembly_timeout,
            min_rate: self.config.reassembly_min_rate,
        };
        match self.ep.feed(now, container, deadline) {
            Ok(None) => {}
            Ok(Some(done)) => self.on_message(now, done),
            Err(e) => {
                let too_large = match e {
                    AssembleError::TooLarge {
                        tid,
                        total_length,
                        limit,
                    } => Some((tid, total_length, limit)),
                    // Not negotiated: the classic limit (a u16 total) is the one in force.
                    AssembleError::LargeNotNegotiated { tid, total_length } => {
                        let classic = self.ep.assembler.config().max_message_len.min(65_535);
                        Some((tid, total_length, classic))
                    }
                    // A container longer than this side accepts: the response cannot arrive.
                    AssembleError::ContainerTooLong {
                        tid,
                        payload_len,
                        max,
                    } => Some((tid, payload_len, max)),
                    _ => None,
                };
                if let Some((tid, len, max)) = too_large
                    && let Some(idx) = self.unary_index(tid)
                    && let Some(id) = self.calls.get(idx).and_then(|c| c.as_ref()).map(|c| c.id)
                {
                    // A stream's later items may still come: it drains.
                    self.retire(idx, Some(now + self.config.stream_idle_timeout));
                    self.push(Record::CallFailed {
                        call: id,
                        error: CallError::ResponseTooLarge { len, max },
                    });
                }
                // The rest of a response whose start was dropped with a CANCEL is expected.
                if matches!(e, AssembleError::UnknownTransaction { tid, .. } if self.cancelled_tid == Some(tid))
                {
                    return;
                }
                self.warn(Warning::Assembly(e));
            }
        }
    }

    pub(super) fn unary_index(&self, tid: u8) -> Option<usize> {
        self.calls.iter().position(|c| {
            c.as_ref()
                .is_some_and(|c| c.kind != CallKind::ClientStream && c.tid == tid && !c.held)
        })
    }

    pub(super) fn on_message(&mut self, now: Instant, done: Completed) {
        let tid = done.tid;
        let bytes = self.ep.assembler.message_mut(done);
        let range = match self.state.session_mut() {
            Some(session) => match session.open_in_place(bytes) {
                Ok(r) => r,
                Err(e) => {
                    self.ep.assembler.release(done);
                    self.warn(Warning::Decrypt(e));
                    return;
                }
            },
            None => 0..bytes.len(),
        };
        let plain = self
            .ep
            .assembler
            .message(done)
            .get(range.clone())
            .unwrap_or(&[]);
        let parsed = if self.large.is_some() {
            Command::parse_large(plain)
        } else {
            Command::parse(plain)
        };
        let (kind, name_len, data_len) = match parsed {
            Ok(c) => (c.kind, c.name.len(), c.data.len()),
            Err(e) => {
                self.ep.assembler.release(done);
                self.warn(Warning::MalformedCommand(e));
                return;
            }
        };
        if kind != CommandType::Response {
            self.ep.assembler.release(done);
            self.warn(Warning::WrongCommandType { tid });
            return;
        }
        let name_start = range.start + 2;
        let header_len = Command::header_len_large(name_len, data_len);
        let msg = MsgRef::new(done, range.start + header_len, data_len);
        let name_matches = |call: &Call<O>, assembler: &Assembler<A, SLOTS>| {
            let name = assembler
                .message(done)
                .get(name_start..name_start + name_len);
            name == Some(call.name_bytes())
        };
        let stream_idle = self.config.stream_idle_timeout;
        let mut matched = None;
        for (idx, slot) in self.calls.iter().enumerate() {
            let Some(call) = slot else { continue };
            if !name_matches(call, &self.ep.assembler) {
                continue;
            }
            let hit = match call.kind {
                CallKind::Unary => call.tid == tid && call.retry_at.is_none(),
                CallKind::ServerStream | CallKind::BidiStream => !call.held,
                CallKind::ClientStream => call.finished,
            };
            if hit {
                matched = Some((idx, call.id, call.kind));
                break;
            }
        }
        if matched.is_none() && self.drains(now, done, name_start..name_start + name_len) {
            self.ep.assembler.release(done);
            return;
        }
        if matched.is_some() {
            self.answered = self.answered.wrapping_add(1);
        }
        match matched {
            Some((idx, id, kind)) if kind.receives_items() => {
                if !self.take_item_credit(idx) {
                    // Beyond the window this side granted: the stream ends here.
                    self.ep.assembler.release(done);
                    self.retire(idx, Some(now + stream_idle));
                    self.push(Record::CallFailed {
                        call: id,
                        error: CallError::Peer(ErrorCode::StreamLimit),
                    });
                    return;
                }
                if let Some(c) = self.calls.get_mut(idx).and_then(Option::as_mut) {
                    c.deadline = c.capped(now + stream_idle);
                    c.idle_until = Some(now + stream_idle);
                }
                self.push(Record::StreamItem { call: id, msg });
            }
            Some((idx, id, _)) => {
                if let Some(slot) = self.calls.get_mut(idx) {
                    *slot = None;
                }
                self.push(Record::Response { call: id, msg });
                self.retry_first_waiting(now);
            }
            None => {
                self.ep.assembler.release(done);
                // What was already on the air when a CANCEL left is expected, not stale.
                if self.cancelled_tid != Some(tid) {
                    self.warn(Warning::StaleResponse { tid });
                }
            }
        }
    }

    /// A response freed a place at the peripheral: of the calls waiting to retry that already
    /// lost [`PASSED_OVER`] races for a freed place to calls sent after them, the one due
    /// first goes now, before its backoff ends and ahead of any call the application starts
    /// on hearing the response. Without it, against a peripheral that holds few requests, a
    /// call could lose every race until its deadline. (Calls that lost fewer wait out their
    /// backoff, which spreads the requests over connection events: sending every retry with
    /// the next response keeps them in one burst that the peripheral answers BUSY.)
    fn retry_first_waiting(&mut self, now: Instant) {
        if self.ep.events_free() < 2 {
            return;
        }
        let first = self
            .calls
            .iter()
            .enumerate()
            .filter_map(|(idx, c)| {
                let c = c.as_ref().filter(|c| c.passed_over >= PASSED_OVER)?;
                Some((c.retry_at?, idx))
            })
            .min();
        let Some((_, idx)) = first else { return };
        if let Some(call) = self.calls.get_mut(idx).and_then(Option::as_mut) {
            call.retry_at = None;
        }
        self.send_again(idx, now);
    }

    /// BUSY retries that are due go out again; calls past their deadline fail; a drain that
    /// has been silent long enough ends.
    pub(super) fn handle_call_timeouts(&mut self, now: Instant) {
        if self.drain.as_ref().is_some_and(|d| d.until <= now) {
            self.end_drain(now);
        }
        for idx in 0..SLOTS {
            if self.ep.events_free() < 2 {
                break;
            }
            let Some(call) = self.calls.get_mut(idx).and_then(Option::as_mut) else {
                continue;
            };
            if call.retry_at.is_some_and(|t| t <= now) {
                call.retry_at = None;
                if !self.send_again(idx, now) {
                    continue;
                }
            }
            let Some(call) = self.calls.get(idx).and_then(Option::as_ref) else {
                continue;
            };
            if call.retry_at.is_none() && call.deadline.is_some_and(|d| d <= now) {
                let id = call.id;
                // A stream past the caller's deadline may still be sending.
                let idle = now + self.config.stream_idle_timeout;
                self.retire(idx, Some(idle));
                self.push(Record::CallFailed {
                    call: id,
                    error: CallError::Timeout,
                });
            }
        }
    }

    /// Sends call `idx`'s stored request (again) under a fresh tid and counts the attempt; a
    /// request the outbox refuses fails the call. `true` if it went out.
    pub(super) fn send_again(&mut self, idx: usize, now: Instant) -> bool {
        let Some(call) = self.calls.get(idx).and_then(Option::as_ref) else {
            return false;
        };
        let fields = self.request_fields(call, now);
        let Some(call) = self.calls.get_mut(idx).and_then(Option::as_mut) else {
            return false;
        };
        let mut request = core::mem::take(&mut call.request);
        let result = self.send_request(&mut request, &fields);
        let Some(call) = self.calls.get_mut(idx).and_then(Option::as_mut) else {
            return false;
        };
        call.request = request;
        match result {
            Ok(tid) => {
                call.tid = tid;
                call.attempts = call.attempts.saturating_add(1);
                call.flow = super::streams::Flow::opened(&fields);
                true
            }
            Err(error) => {
                let id = call.id;
                self.fail_call(idx, id, error);
                false
            }
        }
    }

    /// The earliest retry or deadline of a call, or the end of a drain.
    pub(super) fn next_call_deadline(&self) -> Option<Instant> {
        self.calls
            .iter()
            .flatten()
            .filter_map(|c| match c.retry_at {
                Some(r) => Some(r),
                None => c.deadline,
            })
            .chain(self.drain.as_ref().map(|d| d.until))
            .min()
    }
}

pub(super) fn enqueue_to_call_error(e: EnqueueError) -> CallError {
    match e {
        EnqueueError::Full(f) => CallError::OutboxFull {
            needed: f.needed,
            free: f.free,
        },
        EnqueueError::CounterExhausted => CallError::CounterExhausted,
        EnqueueError::Invalid | EnqueueError::Internal => CallError::InvalidName,
    }
}

#[cfg(test)]
pub(super) mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use core::time::Duration;

    use super::super::CentralEvent;
    use super::super::tests::{T0, TestCentral, ready, sent};
    use super::*;

    /// `echo` with `0a 02 "hi"` under tid 2: FIRST `[tid][seq 0][0x00][total 12 LE][len 12]`,
    /// then the command `[REQUEST 0x00][name_len 4]["echo"][data_len 4 LE][data]`.
    const ECHO_REQUEST: [u8; 18] = [
        0x02, 0x00, 0x00, 0x0c, 0x00, 0x0c, //
        0x00, 0x04, b'e', b'c', b'h', b'o', 0x04, 0x00, 0x0a, 0x02, b'h', b'i',
    ];

    /// The response to it, a RESPONSE (`0x80`) under the same tid.
    pub(in super::super) fn response(tid: u8, name: &[u8], data: &[u8]) -> alloc::vec::Vec<u8> {
        let len = (2 + name.len() + 2 + data.len()) as u8;
        let mut pdu = alloc::vec![tid, 0x00, 0x00, len, 0x00, len, 0x80, name.len() as u8];
        pdu.extend_from_slice(name);
        pdu.extend_from_slice(&[data.len() as u8, 0x00]);
        pdu.extend_from_slice(data);
        pdu
    }

    #[test]
    fn a_call_is_one_request_and_its_response() {
        let mut c = ready();
        let id = c
            .start_call(T0, "echo", b"\x0a\x02hi", CallKind::Unary)
            .unwrap();
        assert_eq!(sent(&mut c), [ECHO_REQUEST.to_vec()]);
        assert_eq!(c.calls_in_flight(), 1);
        assert_eq!(c.poll_timeout(), Some(T0 + Duration::from_secs(5)));
        c.handle_input(T0, &response(2, b"echo", b"\x0a\x02hi"))
            .unwrap();
        assert_eq!(
            c.poll_event(),
            Some(CentralEvent::Response {
                call: id,
                data: b"\x0a\x02hi"
            })
        );
        assert_eq!(c.calls_in_flight(), 0);
    }

    #[test]
    fn a_response_for_another_command_is_stale() {
        let mut c = ready();
        let id = c
            .start_call(T0, "echo", b"\x0a\x02hi", CallKind::Unary)
            .unwrap();
        sent(&mut c);
        c.handle_input(T0, &response(2, b"flash_read", b""))
            .unwrap();
        assert_eq!(
            c.poll_event(),
            Some(CentralEvent::Warning(Warning::StaleResponse { tid: 2 }))
        );
        // The call still waits, and times out at its deadline.
        c.handle_timeout(T0 + Duration::from_secs(5));
        assert_eq!(
            c.poll_event(),
            Some(CentralEvent::CallFailed {
                call: id,
                error: CallError::Timeout
            })
        );
    }

    #[test]
    fn busy_is_retried_with_backoff_under_a_new_tid() {
        let mut c = ready();
        let id = c
            .start_call(T0, "echo", b"\x0a\x02hi", CallKind::Unary)
            .unwrap();
        sent(&mut c);
        // ERROR BUSY for tid 2: [tid][seq][CONTROL | ERROR = 0xd4][1][0x02].
        c.handle_input(T0, &[0x02, 0x00, 0xd4, 0x01, 0x02]).unwrap();
        assert_eq!(c.poll_timeout(), Some(T0 + Duration::from_millis(20)));
        assert!(sent(&mut c).is_empty());
        c.handle_timeout(T0 + Duration::from_millis(20));
        let mut retry = ECHO_REQUEST.to_vec();
        retry[0] = 0x03;
        assert_eq!(sent(&mut c), [retry]);
        // An ERROR that is not BUSY fails the call with the peer's code.
        c.handle_input(T0, &[0x03, 0x00, 0xd4, 0x01, 0x03]).unwrap();
        assert_eq!(
            c.poll_event(),
            Some(CentralEvent::CallFailed {
                call: id,
                error: CallError::Peer(ErrorCode::UnknownCommand)
            })
        );
    }

    /// ERROR BUSY for `tid`: [tid][seq][CONTROL | ERROR = 0xd4][1][0x02].
    fn busy(tid: u8) -> [u8; 5] {
        [tid, 0x00, 0xd4, 0x01, 0x02]
    }

    #[test]
    fn a_call_passed_over_twice_retries_with_the_next_response() {
        let ms = |n: u64| Duration::from_millis(n);
        let mut c = ready();
        let echo = |c: &mut TestCentral, now, data: &'static [u8]| {
            let id = c.start_call(now, "echo", data, CallKind::Unary).unwrap();
            (id, sent(c)[0][0])
        };
        let answer = |c: &mut TestCentral, now, tid: u8, data: &[u8]| {
            c.handle_input(now, &response(tid, b"echo", data)).unwrap();
            assert!(matches!(
                c.poll_event(),
                Some(CentralEvent::Response { .. })
            ));
        };
        let (_, a) = echo(&mut c, T0, b"a");
        let (b, mut b_tid) = echo(&mut c, T0, b"b");
        // B meets BUSY; A is answered: B still waits out its 20 ms (it lost no race yet).
        c.handle_input(T0, &busy(b_tid)).unwrap();
        answer(&mut c, T0, a, b"a");
        assert!(sent(&mut c).is_empty());
        // Twice B is retried, a call started after it is answered, and B meets BUSY again:
        // passed over twice.
        let mut now = T0;
        for round in 0..2 {
            now = now + ms(20);
            assert_eq!(c.poll_timeout(), Some(now), "round {round}");
            c.handle_timeout(now);
            b_tid = sent(&mut c)[0][0];
            let (_, other) = echo(&mut c, now, b"c");
            answer(&mut c, now, other, b"c");
            c.handle_input(now, &busy(b_tid)).unwrap();
        }
        // Its backoff runs to now + 20 ms; but the next response sends it at once, ahead of
        // any call started on hearing that response.
        let (_, d) = echo(&mut c, now, b"d");
        let later = now + ms(5);
        answer(&mut c, later, d, b"d");
        let out = sent(&mut c);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0][0], out[0].last()), (d + 1, Some(&b'b')));
        let (_, e) = echo(&mut c, later, b"e");
        assert_eq!(e, d + 2);
        c.handle_input(later, &response(d + 1, b"echo", b"b"))
            .unwrap();
        assert_eq!(
            c.poll_event(),
            Some(CentralEvent::Response {
                call: b,
                data: b"b"
            })
        );
    }

    #[test]
    fn busy_while_the_peripheral_answers_others_is_not_a_strike() {
        let ms = |n: u64| Duration::from_millis(n);
        let mut c = ready();
        let a = c.start_call(T0, "echo", b"a", CallKind::Unary).unwrap();
        let b = c.start_call(T0, "echo", b"b", CallKind::Unary).unwrap();
        assert_eq!(sent(&mut c).len(), 2); // tids 2 and 3
        // B meets BUSY with nothing answered yet: a strike, retried after 20 ms.
        c.handle_input(T0, &busy(3)).unwrap();
        c.handle_input(T0, &response(2, b"echo", b"a")).unwrap();
        assert_eq!(
            c.poll_event(),
            Some(CentralEvent::Response {
                call: a,
                data: b"a"
            })
        );
        // Ten more BUSY answers, each after the peripheral answered another call: it is
        // full, not stuck, so none counts; the backoff stays at its first step.
        let mut tid = 4u8;
        let mut now = T0;
        for round in 0..10u8 {
            now = now + ms(20);
            assert_eq!(c.poll_timeout(), Some(now), "round {round}");
            c.handle_timeout(now);
            let retry = sent(&mut c);
            assert_eq!(retry.len(), 1, "round {round}");
            assert_eq!(retry[0][0], tid);
            let other = c.start_call(now, "echo", b"c", CallKind::Unary).unwrap();
            assert_eq!(sent(&mut c)[0][0], tid + 1);
            c.handle_input(now, &response(tid + 1, b"echo", b"c"))
                .unwrap();
            assert_eq!(
                c.poll_event(),
                Some(CentralEvent::Response {
                    call: other,
                    data: b"c"
                })
            );
            c.handle_input(now, &busy(tid)).unwrap();
            assert_eq!(c.poll_event(), None, "round {round}: B failed");
            tid += 2;
        }
        // Now nothing else is answered: strikes 1, 2 and 3 in a row back off 20, 40 and 80 ms,
        // the 4th fails.
        for backoff in [20, 20, 40, 80] {
            now = now + ms(backoff);
            assert_eq!(c.poll_timeout(), Some(now));
            c.handle_timeout(now);
            assert_eq!(sent(&mut c)[0][0], tid);
            c.handle_input(now, &busy(tid)).unwrap();
            tid += 1;
        }
        assert_eq!(
            c.poll_event(),
            Some(CentralEvent::CallFailed {
                call: b,
                error: CallError::Busy { attempts: 15 }
            })
        );
    }

    #[test]
    fn limits_are_checked_before_anything_is_sent() {
        let mut c = ready();
        assert_eq!(
            c.start_call(T0, "", b"", CallKind::Unary),
            Err(CallError::InvalidName)
        );
        // The peripheral's max_request (12,288 on the wire) binds.
        let big = alloc::vec![0u8; 12_288];
        assert!(matches!(
            c.start_call(T0, "echo", &big, CallKind::Unary),
            Err(CallError::RequestTooLarge { max: 12_288, .. })
        ));
        assert_eq!(
            c.start_call(T0, "echo", b"x", CallKind::ClientStream),
            Err(CallError::WrongCallKind)
        );
        for _ in 0..4 {
            c.start_call(T0, "echo", b"", CallKind::Unary).unwrap();
        }
        assert_eq!(
            c.start_call(T0, "echo", b"", CallKind::Unary),
            Err(CallError::TooManyCalls { limit: 4 })
        );
    }

    #[test]
    fn an_upload_is_items_then_stream_end() {
        let mut c = ready();
        let id = c
            .start_call(T0, "counter_upload", b"", CallKind::ClientStream)
            .unwrap();
        assert!(sent(&mut c).is_empty(), "nothing until the first item");
        c.send_stream_item(T0, id, b"\x08\x01").unwrap();
        c.finish_stream(T0, id).unwrap();
        let pdus = sent(&mut c);
        assert_eq!(pdus.len(), 2);
        assert_eq!(&pdus[0][..3], &[0x02, 0x00, 0x00]);
        // STREAM_END_C2P under tid 3: [tid][seq][CONTROL | 2 << 2 = 0xc8][0].
        assert_eq!(pdus[1], [0x03, 0x00, 0xc8, 0x00]);
        assert_eq!(
            c.send_stream_item(T0, id, b"\x08\x02"),
            Err(CallError::WrongCallKind)
        );
    }
}
