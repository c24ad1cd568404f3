//! A caller's operations on calls: start one, send an upload item, finish an upload, cancel; the
//! queue of operations waiting for room in the core's outbox, retried in order; per-call
//! deadlines.

use alloc::borrow::ToOwned;
use alloc::vec::Vec;

use rand_core::CryptoRngCore;

use super::{CallSink, CallTable, CentralError, Entry, Op, OpReply, Request, Shell, Ticket};
use crate::Instant;
use crate::connection::{CallError, CallId, CallKind};
use crate::crypto::CryptoProvider;

impl<P, R, H, const SLOTS: usize> CallTable<P, R, H, SLOTS>
where
    P: CryptoProvider,
    R: CryptoRngCore,
    H: Shell,
{
    /// Starts a call: `request` to command `name` (for a [`CallKind::ClientStream`], empty data:
    /// the items follow with [`CallTable::send_item`]). `deadline` bounds the whole call, from
    /// now, in place of the core's call timeout; it also bounds the wait for outbox room.
    ///
    /// The ticket is returned at once; when the outbox is full the call waits (in order behind
    /// earlier waiting operations) and `sink.started` is called once it goes out. A call the
    /// core refuses outright (not ready, closed, too many calls in flight, a request too large)
    /// gives its sink back with the error.
    #[allow(clippy::result_large_err)]
    pub fn start(
        &mut self,
        now: Instant,
        name: &str,
        request: Request,
        kind: CallKind,
        deadline: Option<Instant>,
        sink: H::Sink,
    ) -> Result<Ticket, (CentralError, H::Sink)> {
        if let Some(why) = &self.closed {
            return Err((why.clone(), sink));
        }
        // The number is taken only by a call the table keeps.
        let ticket = Ticket(self.next_ticket);
        let mut entry = Entry {
            ticket,
            kind,
            call: None,
            deadline,
            sink,
        };
        if !self.waiting.is_empty() {
            self.keep(entry);
            self.waiting.push_back(Op::Start {
                ticket,
                name: name.to_owned(),
                request,
            });
            return Ok(ticket);
        }
        let mut request = request;
        match self.try_start(now, name, &mut request, kind, deadline) {
            Ok(Some(call)) => {
                self.begin(&mut entry, call);
                self.keep(entry);
                Ok(ticket)
            }
            Ok(None) => {
                self.keep(entry);
                self.waiting.push_back(Op::Start {
                    ticket,
                    name: name.to_owned(),
                    request,
                });
                Ok(ticket)
            }
            Err(e) => Err((e, entry.sink)),
        }
    }

    /// Sends one item of an upload ([`CallKind::ClientStream`]). `reply` is told once the item
    /// is queued for the link: at once, or after earlier waiting operations and once the outbox
    /// has room (back-pressure).
    pub fn send_item(&mut self, now: Instant, ticket: Ticket, data: Vec<u8>, reply: H::Reply) {
        self.push_op(
            now,
            Op::Item {
                ticket,
                data,
                reply,
            },
        );
    }

    /// Ends an upload (STREAM_END_C2P); its response follows through the call's sink. `reply`
    /// is told once the end is queued for the link.
    pub fn finish(&mut self, now: Instant, ticket: Ticket, reply: H::Reply) {
        self.push_op(now, Op::Finish { ticket, reply });
    }

    /// Cancels a call: its sink fails with [`CentralError::Cancelled`], its waiting operations
    /// with the same, and whatever the peripheral still sends for it is dropped. An unknown or
    /// finished ticket is ignored.
    pub fn cancel(&mut self, ticket: Ticket) {
        self.forget(ticket, CentralError::Cancelled);
    }

    /// Cancels every call whose sink [`is_abandoned`](CallSink::is_abandoned) (its caller went
    /// away).
    pub fn reap(&mut self) {
        let mut i = 0;
        while let Some(entry) = self.calls.get(i) {
            if entry.sink.is_abandoned() {
                let ticket = entry.ticket;
                self.forget(ticket, CentralError::Cancelled);
            } else {
                i += 1;
            }
        }
    }

    // ----- internals -------------------------------------------------------------------------

    /// A new call joins the table under the next ticket.
    fn keep(&mut self, entry: Entry<H::Sink>) {
        self.next_ticket = self.next_ticket.wrapping_add(1);
        self.calls.push(entry);
    }

    /// Removes a call: the core forgets it, its waiting operations and its sink fail with
    /// `error`.
    fn forget(&mut self, ticket: Ticket, error: CentralError) {
        self.fail_ops(|op| op.ticket() == ticket, &error);
        self.fail_held(|t| t == ticket, &error);
        if let Some(pos) = self.position(ticket) {
            let entry = self.calls.swap_remove(pos);
            if let Some(call) = entry.call {
                let _ = self.central.cancel(call);
            }
            entry.sink.fail(error);
        }
    }

    /// Fails the waiting operations `which` selects (a waiting start fails through its call's
    /// sink, which the caller removes).
    pub(super) fn fail_ops(&mut self, which: impl Fn(&Op<H::Reply>) -> bool, error: &CentralError) {
        if !self.waiting.iter().any(&which) {
            return;
        }
        let (gone, kept): (Vec<_>, Vec<_>) = self.waiting.drain(..).partition(which);
        self.waiting = kept.into();
        for op in gone {
            match op {
                Op::Item { reply, .. } | Op::Finish { reply, .. } => reply.done(Err(error.clone())),
                Op::Start { .. } => {}
            }
        }
    }

    /// The call went out (with its deadline, given at start): its sink told.
    fn begin(&mut self, entry: &mut Entry<H::Sink>, call: CallId) {
        entry.call = Some(call);
        entry.sink.started(entry.ticket);
    }

    /// One attempt at starting a call in the core: `Ok(None)` when the outbox is full.
    fn try_start(
        &mut self,
        now: Instant,
        name: &str,
        request: &mut Request,
        kind: CallKind,
        deadline: Option<Instant>,
    ) -> Result<Option<CallId>, CentralError> {
        let result = match request {
            Request::Data(data) => self
                .central
                .start_call_until(now, name, data, kind, deadline),
            Request::Framed(command) => self
                .central
                .start_call_framed_until(now, command, kind, deadline),
        };
        match result {
            Ok(call) => Ok(Some(call)),
            Err(CallError::OutboxFull { needed, .. }) => {
                self.waiting_needs = needed;
                Ok(None)
            }
            Err(e) => Err(self.refused(e)),
        }
    }

    /// Queues an item or a finish behind earlier waiting operations, or tries it now.
    fn push_op(&mut self, now: Instant, op: Op<H::Reply>) {
        if let Some(why) = &self.closed {
            let why = why.clone();
            match op {
                Op::Item { reply, .. } | Op::Finish { reply, .. } => reply.done(Err(why)),
                Op::Start { .. } => {}
            }
            return;
        }
        self.waiting.push_back(op);
        if self.waiting.len() == 1 {
            self.retry_waiting(now);
        }
    }

    /// Hands waiting operations to the core, in order, while the outbox takes them. Until the
    /// outbox has as much room as the front operation found missing, it is not tried again (a
    /// start would copy its request, an item take a transaction id, for nothing).
    pub(super) fn retry_waiting(&mut self, now: Instant) {
        if self.waiting_needs > self.central.outbox_free() {
            return;
        }
        self.retry_held(now);
        while let Some(op) = self.waiting.pop_front() {
            self.waiting_needs = 0;
            if self.held.front().is_some_and(|h| h.ticket() == op.ticket()) {
                // Behind its stream's items that wait for credit.
                self.held.push_back(op);
                continue;
            }
            if let Some(op) = self.attempt(now, op) {
                // Still no room: back to the front, keeping the order.
                self.waiting.push_front(op);
                return;
            }
        }
    }

    /// One attempt at a waiting operation; it comes back when the outbox still has no room.
    fn attempt(&mut self, now: Instant, op: Op<H::Reply>) -> Option<Op<H::Reply>> {
        match op {
            Op::Start {
                ticket,
                name,
                mut request,
            } => {
                let Some(pos) = self.position(ticket) else {
                    // Cancelled meanwhile.
                    return None;
                };
                let (kind, deadline) = self
                    .calls
                    .get(pos)
                    .map_or((CallKind::Unary, None), |e| (e.kind, e.deadline));
                match self.try_start(now, &name, &mut request, kind, deadline) {
                    Ok(Some(call)) => {
                        let mut entry = self.calls.swap_remove(pos);
                        self.begin(&mut entry, call);
                        self.calls.push(entry);
                        None
                    }
                    Ok(None) => Some(Op::Start {
                        ticket,
                        name,
                        request,
                    }),
                    Err(e) => {
                        let entry = self.calls.swap_remove(pos);
                        entry.sink.fail(e);
                        None
                    }
                }
            }
            Op::Item {
                ticket,
                data,
                reply,
            } => {
                let call = match self.live_call(ticket) {
                    Ok(call) => call,
                    Err(e) => {
                        reply.done(Err(e));
                        return None;
                    }
                };
                match self.central.send_stream_item(now, call, &data) {
                    Ok(()) => reply.done(Ok(())),
                    Err(CallError::NoCredit) => self.held.push_back(Op::Item {
                        ticket,
                        data,
                        reply,
                    }),
                    Err(CallError::OutboxFull { needed, .. }) => {
                        self.waiting_needs = needed;
                        return Some(Op::Item {
                            ticket,
                            data,
                            reply,
                        });
                    }
                    Err(e) => reply.done(Err(self.refused(e))),
                }
                None
            }
            Op::Finish { ticket, reply } => {
                let call = match self.live_call(ticket) {
                    Ok(call) => call,
                    Err(e) => {
                        reply.done(Err(e));
                        return None;
                    }
                };
                match self.central.finish_stream(now, call) {
                    // The core keeps the caller's deadline as the bound of what finishing
                    // restarts.
                    Ok(()) => reply.done(Ok(())),
                    Err(CallError::NoCredit) => self.held.push_back(Op::Finish { ticket, reply }),
                    Err(CallError::OutboxFull { needed, .. }) => {
                        self.waiting_needs = needed;
                        return Some(Op::Finish { ticket, reply });
                    }
                    Err(e) => reply.done(Err(self.refused(e))),
                }
                None
            }
        }
    }

    /// Items held for credit go out, in order, while the peripheral's credits and the outbox
    /// take them.
    fn retry_held(&mut self, now: Instant) {
        while let Some(op) = self.held.pop_front() {
            let before = self.held.len();
            let back = self.attempt(now, op);
            if let Some(op) = back {
                // The outbox is full: it stays first.
                self.held.push_front(op);
                return;
            }
            if self.held.len() > before {
                // No credit yet: attempt queued it at the back; it goes back to the front.
                if let Some(op) = self.held.pop_back() {
                    self.held.push_front(op);
                }
                return;
            }
        }
    }

    /// Fails the held operations whose ticket `which` selects.
    pub(super) fn fail_held(&mut self, which: impl Fn(Ticket) -> bool, error: &CentralError) {
        let (gone, kept): (Vec<_>, Vec<_>) = self.held.drain(..).partition(|op| which(op.ticket()));
        self.held = kept.into();
        for op in gone {
            match op {
                Op::Item { reply, .. } | Op::Finish { reply, .. } => reply.done(Err(error.clone())),
                Op::Start { .. } => {}
            }
        }
    }

    /// Grants each credited stream's peripheral what its reader has room for (the streams
    /// extension; the core sends a CREDIT once that is worth one).
    pub(super) fn grant_room(&mut self, now: Instant) {
        for entry in &self.calls {
            if let Some(call) = entry.call
                && entry.kind.receives_items()
            {
                let room = entry.sink.room().unwrap_or(usize::MAX);
                // Refused only by a full outbox: tried again before the next PDU.
                let _ = self.central.grant(now, call, room);
            }
        }
    }

    /// The core's call behind a ticket that is still in the table and has started.
    fn live_call(&self, ticket: Ticket) -> Result<CallId, CentralError> {
        if let Some(why) = &self.closed {
            return Err(why.clone());
        }
        self.position(ticket)
            .and_then(|p| self.calls.get(p))
            .and_then(|e| e.call)
            .ok_or(CentralError::Call(CallError::UnknownCall))
    }

    /// Calls still waiting to start whose deadline passed fail with
    /// [`CallError::Timeout`].
    pub(super) fn expire_waiting(&mut self, now: Instant) {
        let expired: Vec<Ticket> = self
            .calls
            .iter()
            .filter(|e| e.call.is_none() && e.deadline.is_some_and(|d| d <= now))
            .map(|e| e.ticket)
            .collect();
        for ticket in expired {
            self.forget(ticket, CentralError::Call(CallError::Timeout));
        }
    }
}
