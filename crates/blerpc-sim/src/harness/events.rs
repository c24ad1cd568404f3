//! What the harness records and checks: every central event, owned ([`CEv`]), and the
//! invariants each one must keep (see the [module docs](super)).

use blerpc_proto::connection::{
    CallError, CallId, CallKind, CentralEvent, CloseReason, PeripheralEvent, Warning,
};

use super::{MAX_ROUNDS, Pair, Request, Wire};

/// An owned copy of a central event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CEv {
    /// [`CentralEvent::Connected`].
    Connected {
        /// An E2E session is established.
        encrypted: bool,
    },
    /// [`CentralEvent::IdentityPresented`].
    Identity([u8; 32]),
    /// [`CentralEvent::Response`].
    Response {
        /// The call.
        call: CallId,
        /// Its response.
        data: Vec<u8>,
    },
    /// [`CentralEvent::StreamItem`].
    StreamItem {
        /// The call.
        call: CallId,
        /// The item.
        data: Vec<u8>,
    },
    /// [`CentralEvent::StreamEnd`].
    StreamEnd {
        /// The call.
        call: CallId,
    },
    /// [`CentralEvent::CallFailed`].
    Failed {
        /// The call.
        call: CallId,
        /// Why.
        error: CallError,
    },
    /// [`CentralEvent::Closed`].
    Closed(CloseReason),
    /// [`CentralEvent::Warning`].
    Warning(Warning),
}

/// A call the harness has seen start, for the invariants.
#[derive(Clone, Debug)]
pub(super) struct CallRec {
    pub(super) id: CallId,
    /// `None` for a call first seen in an event (started on `central` directly).
    pub(super) kind: Option<CallKind>,
    /// The unary request's data (the echo check).
    pub(super) request: Vec<u8>,
    pub(super) name: String,
    pub(super) done: bool,
}

impl<W: Wire> Pair<W> {
    pub(super) fn call_rec(&mut self, id: CallId, what: &str) -> &mut CallRec {
        let i = match self.calls.iter().position(|c| c.id == id) {
            Some(i) => i,
            None if self.strict_calls => {
                panic!("{what} for call {id:?} that was never started")
            }
            None => {
                // Started on `central` directly: known from now on, kind unknown.
                self.calls.push(CallRec {
                    id,
                    kind: None,
                    request: Vec::new(),
                    name: String::new(),
                    done: false,
                });
                self.calls.len() - 1
            }
        };
        &mut self.calls[i]
    }

    pub(super) fn finish(&mut self, id: CallId, what: &str) {
        let r = self.call_rec(id, what);
        assert!(!r.done, "{what} for call {id:?} that already ended");
        r.done = true;
    }

    /// Drains the central's events into the log, checking each.
    pub fn drain_central(&mut self) {
        for _ in 0..MAX_ROUNDS {
            let owned = match self.central.poll_event() {
                None => return,
                Some(CentralEvent::Connected { encrypted }) => CEv::Connected { encrypted },
                Some(CentralEvent::IdentityPresented { identity }) => CEv::Identity(identity),
                Some(CentralEvent::Response { call, data }) => CEv::Response {
                    call,
                    data: data.to_vec(),
                },
                Some(CentralEvent::StreamItem { call, data }) => CEv::StreamItem {
                    call,
                    data: data.to_vec(),
                },
                Some(CentralEvent::StreamEnd { call }) => CEv::StreamEnd { call },
                Some(CentralEvent::CallFailed { call, error }) => CEv::Failed { call, error },
                Some(CentralEvent::Closed { reason }) => CEv::Closed(reason),
                Some(CentralEvent::Warning(w)) => CEv::Warning(w),
                Some(_) => continue,
            };
            self.check(&owned);
            self.central_events.push(owned);
        }
        panic!("the central's event queue never empties");
    }

    fn check(&mut self, ev: &CEv) {
        assert!(!self.central_closed, "event after Closed: {ev:?}");
        match ev {
            CEv::Connected { encrypted } => {
                assert!(!self.connected, "connected twice");
                self.connected = true;
                // A close drops the session's keys, so only an open central still has them.
                assert!(
                    self.central.is_closed() || *encrypted == self.central.is_encrypted(),
                    "Connected {{ encrypted: {encrypted} }} but is_encrypted() disagrees"
                );
            }
            CEv::Response { call, data } => {
                let max = self.central.config().max_response_len;
                let check_echo = self.check_echo;
                let r = self.call_rec(*call, "Response");
                assert!(
                    !matches!(r.kind, Some(CallKind::ServerStream | CallKind::BidiStream)),
                    "Response on a stream"
                );
                if check_echo
                    && r.kind == Some(CallKind::Unary)
                    && (r.name == "echo" || r.name == "loop")
                {
                    assert_eq!(*data, r.request, "call {call:?} got another call's data");
                    self.responses_checked += 1;
                }
                assert!(data.len() <= max, "a response above max_response_len");
                self.finish(*call, "Response");
            }
            CEv::StreamItem { call, .. } => {
                let r = self.call_rec(*call, "StreamItem");
                assert!(
                    matches!(
                        r.kind,
                        None | Some(CallKind::ServerStream | CallKind::BidiStream)
                    ),
                    "stream item for {call:?}"
                );
                assert!(!r.done, "stream item after the end of {call:?}");
            }
            CEv::StreamEnd { call } => {
                let kind = self.call_rec(*call, "StreamEnd").kind;
                assert!(
                    matches!(
                        kind,
                        None | Some(CallKind::ServerStream | CallKind::BidiStream)
                    ),
                    "{kind:?}"
                );
                self.finish(*call, "StreamEnd");
            }
            CEv::Failed { call, .. } => self.finish(*call, "CallFailed"),
            CEv::Closed(_) => {
                assert!(self.central.is_closed(), "Closed while open");
                self.central_closed = true;
            }
            CEv::Identity(_) | CEv::Warning(_) => {}
        }
    }

    pub(super) fn drain_peripheral(&mut self) {
        let mut requests = Vec::new();
        let max = self.peripheral.config().max_request_len;
        for _ in 0..MAX_ROUNDS {
            match self.peripheral.poll_event() {
                None => break,
                Some(PeripheralEvent::Request {
                    tid, name, data, ..
                }) => {
                    assert!(data.len() <= max, "request larger than max_request_len");
                    let request = Request {
                        tid,
                        name: name.to_string(),
                        data: data.to_vec(),
                    };
                    if self.app.take_requests {
                        let taken = self.peripheral.take_request();
                        let Some((buf, range)) = taken else {
                            panic!("the request just returned cannot be taken");
                        };
                        assert_eq!(
                            buf.get(range),
                            Some(&request.data[..]),
                            "taken = the event's data"
                        );
                        assert!(self.peripheral.take_request().is_none(), "taken twice");
                        self.requests_taken += 1;
                    }
                    requests.push(request);
                }
                Some(PeripheralEvent::StreamEndC2P { .. }) => requests.push(Request {
                    tid: 0,
                    name: String::new(),
                    data: Vec::new(),
                }),
                Some(PeripheralEvent::StreamItem { stream, data, .. }) => {
                    if let Some(code) = self.chat.item(stream, data) {
                        let ended = self.peripheral.respond_error(self.now, stream, code);
                        self.app.check(ended, "end a chat that overflowed");
                    }
                }
                Some(PeripheralEvent::ItemsEnd { stream }) => self.chat.items_end(stream),
                Some(PeripheralEvent::Warning(w)) => self.peripheral_warnings.push(w),
                Some(PeripheralEvent::Cancelled { tid }) => {
                    self.chat.cancelled(tid);
                    // The application stops: a held request is dropped, not answered.
                    self.svc.held.retain(|r| r.tid != tid);
                    self.peripheral_cancels += 1;
                }
                Some(PeripheralEvent::Closed(reason)) => self.peripheral_closed = Some(reason),
                Some(_) => {}
            }
        }
        for request in requests {
            if request.name == super::chat::NAME && !self.app.hold {
                let opened = self.chat.open(self.now, &mut self.peripheral, request.tid);
                self.app.check(opened, "open a chat");
                continue;
            }
            self.peripheral_requests.push((
                request.tid,
                request.name.clone(),
                request.data.clone(),
            ));
            self.svc
                .on_request(&self.app, &mut self.peripheral, self.now, request);
        }
        assert!(self.svc.held.len() <= 4 * 256, "unbounded held requests");
    }
}
