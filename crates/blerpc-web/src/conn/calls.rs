//! Calls as the page sees them: each a *ticket* (the core's call once it has started, the
//! promise waiting on it, what arrived before anyone asked), the operations that wait for room
//! in the core's outbox, and the core's events turned into settled promises.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Weak;

use blerpc_proto::Instant;
use blerpc_proto::connection::{CallError, CallId, CallKind, CentralEvent, CloseReason};
use js_sys::{Function, Promise, Uint8Array};
use wasm_bindgen::JsValue;

use super::Conn;
use crate::clock::now_ms;
use crate::error::{Code, Error};

/// A promise's two ends.
pub(super) struct Waiter {
    resolve: Function,
    reject: Function,
}

impl Waiter {
    pub(super) fn resolve(self, value: &JsValue) {
        let _ = self.resolve.call1(&JsValue::UNDEFINED, value);
    }
    pub(super) fn reject(self, error: &Error) {
        let _ = self.reject.call1(&JsValue::UNDEFINED, &error.to_js());
    }
}

/// A new promise and its [`Waiter`].
pub(super) fn promise() -> (Promise, Waiter) {
    let mut ends = None;
    let p = Promise::new(&mut |resolve, reject| ends = Some((resolve, reject)));
    // The executor runs synchronously inside `new Promise`.
    let (resolve, reject) =
        ends.unwrap_or_else(|| (Function::new_no_args(""), Function::new_no_args("")));
    (p, Waiter { resolve, reject })
}

pub(super) fn bytes(data: &[u8]) -> JsValue {
    Uint8Array::from(data).into()
}

/// One call as the page sees it.
pub(super) struct Ticket {
    pub(super) id: u32,
    pub(super) kind: CallKind,
    pub(super) call: Option<CallId>,
    /// The page's deadline for the whole call, if it gave one.
    pub(super) deadline: Option<Instant>,
    pub(super) waiter: Option<Waiter>,
    pub(super) items: VecDeque<Vec<u8>>,
    pub(super) response: Option<Vec<u8>>,
    pub(super) ended: bool,
    pub(super) error: Option<Error>,
}

/// An operation that waits for room in the core's outbox.
pub(super) enum Blocked {
    Start {
        ticket: u32,
        name: String,
        data: Vec<u8>,
    },
    Item {
        ticket: u32,
        data: Vec<u8>,
        waiter: Waiter,
    },
    Finish {
        ticket: u32,
        waiter: Waiter,
    },
}

impl Blocked {
    fn ticket(&self) -> u32 {
        match self {
            Blocked::Start { ticket, .. }
            | Blocked::Item { ticket, .. }
            | Blocked::Finish { ticket, .. } => *ticket,
        }
    }
}

impl Conn {
    // ----- operations from the page ----------------------------------------------------------

    /// Starts a call; returns its ticket. `timeout_ms` overrides the configured call deadline
    /// for this call (from now, over the whole call).
    pub fn start_call(
        &mut self,
        weak: &Weak<RefCell<Conn>>,
        name: &str,
        data: &[u8],
        kind: CallKind,
        timeout_ms: Option<f64>,
    ) -> Result<u32, Error> {
        if let Some(e) = &self.closed {
            return Err(e.clone());
        }
        if let Some(ms) = timeout_ms
            && !(ms.is_finite() && ms > 0.0)
        {
            return Err(Error::new(
                Code::InvalidArgument,
                format!("timeoutMs must be a positive number of milliseconds, got {ms}"),
            ));
        }
        let id = self.next_ticket;
        self.next_ticket = self.next_ticket.wrapping_add(1);
        let deadline = timeout_ms.map(|ms| self.clock.at(now_ms() + ms));
        self.tickets.push(Ticket {
            id,
            kind,
            call: None,
            deadline,
            waiter: None,
            items: VecDeque::new(),
            response: None,
            ended: false,
            error: None,
        });
        self.idle_since = None;
        if let Err(e) = self.try_start(id, name, data) {
            self.tickets.retain(|t| t.id != id);
            return Err(e);
        }
        self.drive(weak);
        Ok(id)
    }

    /// The response of a unary call or an upload (after [`Conn::finish`]).
    pub fn response(&mut self, ticket: u32) -> Promise {
        let (p, waiter) = promise();
        self.wait(ticket, waiter);
        p
    }

    /// The next item of a server stream (`undefined` once it ended).
    pub fn next_item(&mut self, ticket: u32) -> Promise {
        self.response(ticket)
    }

    /// Sends one upload item; settles once the item is queued (back-pressure: it waits while
    /// the core's outbox is full).
    pub fn send_item(&mut self, weak: &Weak<RefCell<Conn>>, ticket: u32, data: &[u8]) -> Promise {
        let (p, waiter) = promise();
        if let Some(e) = self.ticket_error(ticket) {
            waiter.reject(&e);
            return p;
        }
        self.blocked.push_back(Blocked::Item {
            ticket,
            data: data.to_vec(),
            waiter,
        });
        self.drive(weak);
        p
    }

    /// Ends an upload; its response follows through [`Conn::response`].
    pub fn finish(&mut self, weak: &Weak<RefCell<Conn>>, ticket: u32) -> Promise {
        let (p, waiter) = promise();
        if let Some(e) = self.ticket_error(ticket) {
            waiter.reject(&e);
            return p;
        }
        self.blocked.push_back(Blocked::Finish { ticket, waiter });
        self.drive(weak);
        p
    }

    /// Cancels a call: its waiting promise rejects with `CANCELLED`, and whatever the
    /// peripheral still sends for it is dropped.
    pub fn cancel(&mut self, weak: &Weak<RefCell<Conn>>, ticket: u32) {
        let cancelled = Error::new(Code::Cancelled, "the call was cancelled");
        for b in self.take_blocked(ticket) {
            match b {
                Blocked::Item { waiter, .. } | Blocked::Finish { waiter, .. } => {
                    waiter.reject(&cancelled);
                }
                Blocked::Start { .. } => {}
            }
        }
        if let Some(pos) = self.tickets.iter().position(|t| t.id == ticket) {
            let t = self.tickets.remove(pos);
            if let Some(call) = t.call {
                let _ = self.central.cancel(call);
            }
            if let Some(w) = t.waiter {
                w.reject(&cancelled);
            }
        }
        self.drive(weak);
    }

    /// Closes the connection: every call still waiting rejects with `CLOSED`.
    pub fn close(&mut self, weak: &Weak<RefCell<Conn>>) {
        if self.closed.is_none() {
            let now = self.clock.now();
            self.central.close(now);
            self.drive(weak);
        }
    }

    /// A promise settled (with the reason, an error object) when the connection closes.
    pub fn closed_promise(&mut self) -> Promise {
        let (p, waiter) = promise();
        match &self.closed {
            Some(e) => waiter.resolve(&e.to_js()),
            None => self.on_close.push(waiter),
        }
        p
    }

    /// Starts a call in the core, or queues it while the outbox is full.
    pub(super) fn try_start(&mut self, ticket: u32, name: &str, data: &[u8]) -> Result<(), Error> {
        let Some(t) = self.tickets.iter().find(|t| t.id == ticket) else {
            return Ok(());
        };
        let (kind, deadline) = (t.kind, t.deadline);
        let now = self.clock.now();
        match self.central.start_call(now, name, data, kind) {
            Ok(call) => {
                if let Some(d) = deadline {
                    let _ = self.central.set_call_deadline(call, d);
                }
                if let Some(t) = self.tickets.iter_mut().find(|t| t.id == ticket) {
                    t.call = Some(call);
                }
                Ok(())
            }
            Err(CallError::OutboxFull { .. }) => {
                self.blocked.push_back(Blocked::Start {
                    ticket,
                    name: name.to_owned(),
                    data: data.to_vec(),
                });
                Ok(())
            }
            Err(e) => Err(self.call_error(e)),
        }
    }

    /// Re-applies waiting operations in order while the outbox takes them.
    pub(super) fn retry_blocked(&mut self) {
        while let Some(op) = self.blocked.pop_front() {
            let ticket = op.ticket();
            let call = self
                .tickets
                .iter()
                .find(|t| t.id == ticket)
                .and_then(|t| t.call);
            let now = self.clock.now();
            match op {
                Blocked::Start { ticket, name, data } => {
                    let before = self.blocked.len();
                    if let Err(e) = self.try_start(ticket, &name, &data) {
                        self.fail_ticket(ticket, e);
                    }
                    if self.blocked.len() > before {
                        // Still no room: back to the front, keep the order.
                        if let Some(op) = self.blocked.pop_back() {
                            self.blocked.push_front(op);
                        }
                        return;
                    }
                }
                Blocked::Item {
                    ticket,
                    data,
                    waiter,
                } => {
                    let Some(call) = self.live_call(ticket, call) else {
                        if self.start_pending(ticket) {
                            // Its start is still waiting: keep the order.
                            self.blocked.push_front(Blocked::Item {
                                ticket,
                                data,
                                waiter,
                            });
                            return;
                        }
                        waiter.reject(&self.ended(ticket));
                        continue;
                    };
                    match self.central.send_stream_item(now, call, &data) {
                        Ok(()) => waiter.resolve(&JsValue::UNDEFINED),
                        Err(CallError::OutboxFull { .. }) => {
                            self.blocked.push_front(Blocked::Item {
                                ticket,
                                data,
                                waiter,
                            });
                            return;
                        }
                        Err(e) => waiter.reject(&self.call_error(e)),
                    }
                }
                Blocked::Finish { ticket, waiter } => {
                    let Some(call) = self.live_call(ticket, call) else {
                        if self.start_pending(ticket) {
                            self.blocked.push_front(Blocked::Finish { ticket, waiter });
                            return;
                        }
                        waiter.reject(&self.ended(ticket));
                        continue;
                    };
                    match self.central.finish_stream(now, call) {
                        Ok(()) => {
                            let deadline = self
                                .tickets
                                .iter()
                                .find(|t| t.id == ticket)
                                .and_then(|t| t.deadline);
                            if let Some(d) = deadline {
                                let _ = self.central.set_call_deadline(call, d);
                            }
                            waiter.resolve(&JsValue::UNDEFINED);
                        }
                        Err(CallError::OutboxFull { .. }) => {
                            self.blocked.push_front(Blocked::Finish { ticket, waiter });
                            return;
                        }
                        Err(e) => waiter.reject(&self.call_error(e)),
                    }
                }
            }
        }
    }

    /// The core's call of a ticket that has neither failed nor ended.
    pub(super) fn live_call(&self, ticket: u32, call: Option<CallId>) -> Option<CallId> {
        match self.ticket_error(ticket) {
            Some(_) => None,
            None => call,
        }
    }

    /// `true` while the ticket's start waits for outbox room.
    pub(super) fn start_pending(&self, ticket: u32) -> bool {
        self.ticket_error(ticket).is_none()
            && self
                .blocked
                .iter()
                .any(|b| matches!(b, Blocked::Start { ticket: t, .. } if *t == ticket))
    }

    /// Why an operation on a ticket that is over cannot go on.
    pub(super) fn ended(&self, ticket: u32) -> Error {
        self.ticket_error(ticket)
            .unwrap_or_else(|| Error::new(Code::InvalidArgument, "the call has ended"))
    }

    /// Calls still waiting to start whose page deadline passed fail with `TIMEOUT`.
    pub(super) fn expire_blocked(&mut self, now: Instant) {
        let expired: Vec<u32> = self
            .tickets
            .iter()
            .filter(|t| t.call.is_none() && t.deadline.is_some_and(|d| d <= now))
            .map(|t| t.id)
            .collect();
        for id in expired {
            self.take_blocked(id);
            self.fail_ticket(id, Error::call(CallError::Timeout));
        }
    }

    pub(super) fn take_blocked(&mut self, ticket: u32) -> Vec<Blocked> {
        let (mine, rest): (Vec<_>, Vec<_>) =
            self.blocked.drain(..).partition(|b| b.ticket() == ticket);
        self.blocked = rest.into();
        mine
    }

    pub(super) fn call_error(&self, e: CallError) -> Error {
        match (&self.closed, self.central.is_closed()) {
            (Some(reason), _) => reason.clone(),
            (None, true) => Error::new(Code::Closed, "the connection is closed"),
            (None, false) => Error::call(e),
        }
    }

    pub(super) fn ticket_error(&self, ticket: u32) -> Option<Error> {
        if let Some(e) = &self.closed {
            return Some(e.clone());
        }
        match self.tickets.iter().find(|t| t.id == ticket) {
            None => Some(Error::new(
                Code::InvalidArgument,
                "no such call (finished or cancelled)",
            )),
            Some(t) => t.error.clone(),
        }
    }

    // ----- events → promises ------------------------------------------------------------------

    pub(super) fn drain_events(&mut self) {
        loop {
            let mut identity = None;
            let Some(event) = self.central.poll_event() else {
                return;
            };
            match event {
                CentralEvent::Connected { .. } => {
                    if let Some(w) = self.setup.take() {
                        w.resolve(&JsValue::UNDEFINED);
                    }
                }
                CentralEvent::IdentityPresented { identity: key } => identity = Some(key),
                CentralEvent::Response { call, data } => {
                    let data = data.to_vec();
                    if let Some(t) = self.ticket_of(call) {
                        t.response = Some(data);
                        t.call = None;
                        let id = t.id;
                        self.settle(id);
                    }
                }
                CentralEvent::StreamItem { call, data } => {
                    let data = data.to_vec();
                    let limit = self.stream_buffer;
                    let mut overflow = None;
                    if let Some(t) = self.ticket_of(call) {
                        if t.items.len() >= limit {
                            overflow = Some(t.id);
                        } else {
                            t.items.push_back(data);
                            let id = t.id;
                            self.settle(id);
                        }
                    }
                    if let Some(id) = overflow {
                        let _ = self.central.cancel(call);
                        self.fail_ticket(
                            id,
                            Error::new(
                                Code::StreamOverflow,
                                format!("more than {limit} stream items arrived before they were read (streamBuffer)"),
                            ),
                        );
                    }
                }
                CentralEvent::StreamEnd { call } => {
                    if let Some(t) = self.ticket_of(call) {
                        t.ended = true;
                        t.call = None;
                        let id = t.id;
                        self.settle(id);
                    }
                }
                CentralEvent::CallFailed { call, error } => {
                    let error = if error == CallError::Closed {
                        Error::new(Code::Closed, "the connection closed during the call")
                    } else {
                        Error::call(error)
                    };
                    if let Some(t) = self.ticket_of(call) {
                        t.call = None;
                        let id = t.id;
                        self.fail_ticket(id, error);
                    }
                }
                CentralEvent::Closed { reason } => {
                    let error = match (reason, self.identity_error.take()) {
                        (CloseReason::IdentityRejected, Some(detail)) => detail,
                        (CloseReason::Local, _) => {
                            Error::new(Code::Closed, "the connection was closed by the page")
                        }
                        (reason, _) => Error::setup(reason),
                    };
                    if let Some(w) = self.setup.take() {
                        w.reject(&error);
                    }
                    self.closed_reason_hint = Some(error);
                }
                CentralEvent::Warning(_) => {}
                _ => {}
            }
            if let Some(key) = identity {
                self.decide_identity(key);
            }
        }
    }

    pub(super) fn ticket_of(&mut self, call: CallId) -> Option<&mut Ticket> {
        self.tickets.iter_mut().find(|t| t.call == Some(call))
    }

    /// Hands what a ticket has to its waiting promise, and forgets the ticket once it has
    /// nothing more to give.
    pub(super) fn settle(&mut self, ticket: u32) {
        let Some(pos) = self.tickets.iter().position(|t| t.id == ticket) else {
            return;
        };
        let done = {
            let Some(t) = self.tickets.get_mut(pos) else {
                return;
            };
            let Some(waiter) = t.waiter.take() else {
                return;
            };
            if let Some(item) = t.items.pop_front() {
                waiter.resolve(&bytes(&item));
                false
            } else if let Some(r) = t.response.take() {
                waiter.resolve(&bytes(&r));
                true
            } else if let Some(e) = t.error.clone() {
                waiter.reject(&e);
                true
            } else if t.ended {
                waiter.resolve(&JsValue::UNDEFINED);
                true
            } else {
                t.waiter = Some(waiter);
                false
            }
        };
        if done {
            self.tickets.remove(pos);
        }
    }

    pub(super) fn wait(&mut self, ticket: u32, waiter: Waiter) {
        let Some(t) = self.tickets.iter_mut().find(|t| t.id == ticket) else {
            waiter.reject(&self.closed.clone().unwrap_or_else(|| {
                Error::new(
                    Code::InvalidArgument,
                    "no such call (finished or cancelled)",
                )
            }));
            return;
        };
        if let Some(old) = t.waiter.replace(waiter) {
            old.reject(&Error::new(
                Code::InvalidArgument,
                "another read of this call replaced this one",
            ));
        }
        self.settle(ticket);
    }

    pub(super) fn fail_ticket(&mut self, ticket: u32, error: Error) {
        if let Some(t) = self.tickets.iter_mut().find(|t| t.id == ticket) {
            if t.error.is_none() {
                t.error = Some(error);
            }
            t.call = None;
        }
        self.settle(ticket);
    }
}
