//! Calls as the page sees them: each a ticket of the core's call table with an *inbox* (what
//! arrived before the page asked, and the promise waiting for it), the page's operations on
//! calls, and the promises they return.
//!
//! What happens to a call (waiting for outbox room, deadlines, cancellation, a reader falling
//! behind, the errors) is the core's call table's; an inbox only holds results until the page
//! reads them.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::{Rc, Weak};

use blerpc_proto::connection::{CallError, CallKind};
use blerpc_proto::table::{CallSink, CentralError, Delivery, OpReply, Request, Ticket};
use js_sys::{Function, Promise, Uint8Array};
use wasm_bindgen::JsValue;

use super::Conn;
use crate::clock::now_ms;
use crate::error::{Error, code};

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

fn bytes(data: &[u8]) -> JsValue {
    Uint8Array::from(data).into()
}

/// What arrived for one call and the page has not read yet, and the read waiting for it.
pub(crate) struct Inbox {
    items: VecDeque<Vec<u8>>,
    response: Option<Vec<u8>>,
    ended: bool,
    error: Option<Error>,
    waiter: Option<Waiter>,
    /// Server-stream items held before the page reads them.
    limit: usize,
    /// The outcome (the response, the end, the error) was handed to the page.
    done: bool,
}

/// An inbox shared by the call table's entry (which fills it) and the connection (which the
/// page reads it through).
pub(crate) type SharedInbox = Rc<RefCell<Inbox>>;

impl Inbox {
    /// Hands what the inbox has to the waiting read; `true` once the call's outcome was
    /// handed out (nothing more to read).
    fn settle(&mut self) -> bool {
        let Some(waiter) = self.waiter.take() else {
            return self.done;
        };
        if let Some(item) = self.items.pop_front() {
            waiter.resolve(&bytes(&item));
        } else if let Some(r) = self.response.take() {
            waiter.resolve(&bytes(&r));
            self.done = true;
        } else if let Some(e) = &self.error {
            waiter.reject(e);
            self.done = true;
        } else if self.ended {
            waiter.resolve(&JsValue::UNDEFINED);
            self.done = true;
        } else {
            self.waiter = Some(waiter);
        }
        self.done
    }

    /// Data the page has not read yet (items or a response).
    fn has_unread_data(&self) -> bool {
        !self.items.is_empty() || self.response.is_some()
    }
}

/// The call table's sink of one call: its inbox.
pub struct Sink(SharedInbox);

impl CallSink for Sink {
    fn response(self, data: &[u8]) {
        let mut inbox = self.0.borrow_mut();
        inbox.response = Some(data.to_vec());
        inbox.settle();
    }
    fn item(&mut self, data: &[u8]) -> Delivery {
        let mut inbox = self.0.borrow_mut();
        if inbox.items.len() >= inbox.limit {
            return Delivery::Full { limit: inbox.limit };
        }
        inbox.items.push_back(data.to_vec());
        inbox.settle();
        Delivery::Taken
    }
    fn end(self) {
        let mut inbox = self.0.borrow_mut();
        inbox.ended = true;
        inbox.settle();
    }
    fn room(&self) -> Option<usize> {
        // What the page has not read yet counts against the stream's window.
        let inbox = self.0.borrow();
        Some(inbox.limit.saturating_sub(inbox.items.len()))
    }
    fn fail(self, error: CentralError) {
        let mut inbox = self.0.borrow_mut();
        if inbox.error.is_none() {
            inbox.error = Some(Error::from(error));
        }
        inbox.settle();
    }
}

/// Where an upload item's or finish's outcome goes: its promise. An operation on a call that
/// already failed reports why the call failed.
pub struct Reply {
    waiter: Waiter,
    inbox: Option<SharedInbox>,
}

impl OpReply for Reply {
    fn done(self, result: Result<(), CentralError>) {
        match result {
            Ok(()) => self.waiter.resolve(&JsValue::UNDEFINED),
            Err(CentralError::Call(CallError::UnknownCall)) => {
                let why = self.inbox.and_then(|i| i.borrow().error.clone());
                self.waiter.reject(
                    &why.unwrap_or_else(|| {
                        Error::new(code::INVALID_ARGUMENT, "the call has ended")
                    }),
                );
            }
            Err(e) => self.waiter.reject(&Error::from(e)),
        }
    }
}

impl Conn {
    // ----- operations from the page ----------------------------------------------------------

    /// Starts a call; returns its ticket. `timeout_ms` bounds the whole call, from now, in
    /// place of the configured call timeout.
    pub fn start_call(
        &mut self,
        weak: &Weak<RefCell<Conn>>,
        name: &str,
        data: &[u8],
        kind: CallKind,
        timeout_ms: Option<f64>,
    ) -> Result<f64, Error> {
        if let Some(e) = &self.closed {
            return Err(e.clone());
        }
        if let Some(ms) = timeout_ms
            && !(ms.is_finite() && ms > 0.0)
        {
            return Err(Error::new(
                code::INVALID_ARGUMENT,
                format!("timeoutMs must be a positive number of milliseconds, got {ms}"),
            ));
        }
        let deadline = timeout_ms.map(|ms| self.clock.at(now_ms() + ms));
        let inbox = Rc::new(RefCell::new(Inbox {
            items: VecDeque::new(),
            response: None,
            ended: false,
            error: None,
            waiter: None,
            limit: self.stream_buffer,
            done: false,
        }));
        let now = self.clock.now();
        let request = Request::Data(data.to_vec());
        let sink = Sink(inbox.clone());
        let ticket = self
            .table
            .start(now, name, request, kind, deadline, sink)
            .map_err(|(e, _)| Error::from(e))?;
        self.inboxes.push((ticket, inbox));
        self.idle_since = None;
        self.drive(weak);
        // Tickets count from 0 and stay far below 2^53: exact as a JavaScript number.
        Ok(ticket.0 as f64)
    }

    /// The response of a unary call or an upload (after [`Conn::finish`]); for a server
    /// stream, its next item (`undefined` at its end).
    pub fn read(&mut self, ticket: f64) -> Promise {
        let (p, waiter) = promise();
        let Some(pos) = self.inbox_of(ticket) else {
            waiter.reject(&self.closed.clone().unwrap_or_else(no_such_call));
            return p;
        };
        let over = {
            let Some((_, inbox)) = self.inboxes.get(pos) else {
                return p;
            };
            let mut inbox = inbox.borrow_mut();
            if let Some(old) = inbox.waiter.replace(waiter) {
                old.reject(&Error::new(
                    code::INVALID_ARGUMENT,
                    "another read of this call replaced this one",
                ));
            }
            inbox.settle()
        };
        if over {
            self.inboxes.swap_remove(pos);
        }
        p
    }

    /// Sends one upload item; settles once the item is queued (back-pressure: it waits while
    /// the core's outbox is full).
    pub fn send_item(&mut self, weak: &Weak<RefCell<Conn>>, ticket: f64, data: &[u8]) -> Promise {
        let (p, reply) = self.reply(ticket);
        if let Some(reply) = reply {
            let now = self.clock.now();
            self.table
                .send_item(now, Ticket(ticket as u64), data.to_vec(), reply);
            self.drive(weak);
        }
        p
    }

    /// Ends an upload; its response follows through [`Conn::read`].
    pub fn finish(&mut self, weak: &Weak<RefCell<Conn>>, ticket: f64) -> Promise {
        let (p, reply) = self.reply(ticket);
        if let Some(reply) = reply {
            let now = self.clock.now();
            self.table.finish(now, Ticket(ticket as u64), reply);
            self.drive(weak);
        }
        p
    }

    /// Cancels a call: its waiting promise rejects with `CANCELLED`, and whatever the
    /// peripheral still sends for it is dropped.
    pub fn cancel(&mut self, weak: &Weak<RefCell<Conn>>, ticket: f64) {
        self.table.cancel(Ticket(ticket as u64));
        if let Some(pos) = self.inbox_of(ticket) {
            self.inboxes.swap_remove(pos);
        }
        self.drive(weak);
    }

    /// Closes the connection: every call still waiting rejects with `CLOSED`.
    pub fn close(&mut self, weak: &Weak<RefCell<Conn>>) {
        if self.closed.is_none() {
            let now = self.clock.now();
            self.table.close(now);
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

    // ----- internals -------------------------------------------------------------------------

    fn inbox_of(&self, ticket: f64) -> Option<usize> {
        self.inboxes.iter().position(|(t, _)| t.0 as f64 == ticket)
    }

    /// An operation's promise, and its reply unless the call is already over (then the promise
    /// is rejected with why).
    fn reply(&mut self, ticket: f64) -> (Promise, Option<Reply>) {
        let (p, waiter) = promise();
        if let Some(e) = &self.closed {
            waiter.reject(e);
            return (p, None);
        }
        let Some(pos) = self.inbox_of(ticket) else {
            waiter.reject(&no_such_call());
            return (p, None);
        };
        let inbox = self.inboxes.get(pos).map(|(_, i)| i.clone());
        if let Some(e) = inbox.as_ref().and_then(|i| i.borrow().error.clone()) {
            waiter.reject(&e);
            return (p, None);
        }
        (p, Some(Reply { waiter, inbox }))
    }

    /// The connection closed: reads still waiting were rejected by the table's failures;
    /// inboxes without data left to read go (a later read gets why the connection closed).
    pub(super) fn drop_finished_inboxes(&mut self) {
        self.inboxes
            .retain(|(_, inbox)| inbox.borrow().has_unread_data());
    }
}

fn no_such_call() -> Error {
    Error::new(
        code::INVALID_ARGUMENT,
        "no such call (finished or cancelled)",
    )
}
