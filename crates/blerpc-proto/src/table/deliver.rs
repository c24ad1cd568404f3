//! The core's events turned into deliveries: responses, stream items and ends to their calls'
//! sinks, failures with the errors a caller sees, a reader that fell behind, the identity
//! decision of trust on first use, and the connection's own events.

use alloc::format;
use alloc::string::ToString;
use core::fmt;

use rand_core::CryptoRngCore;

use super::{
    CallSink, CallTable, CentralError, Delivery, Entry, IdentityError, Shell, TableEvent, Trust,
};
use crate::Instant;
use crate::connection::{CallError, CallId, CentralEvent, CloseReason};
use crate::crypto::CryptoProvider;
use crate::handshake::{KnownKeys, TofuError, tofu_verify};

impl<P, R, H, const SLOTS: usize> CallTable<P, R, H, SLOTS>
where
    P: CryptoProvider,
    R: CryptoRngCore,
    H: Shell,
{
    /// Delivers every event the core has.
    pub(super) fn drain(&mut self, now: Instant) {
        loop {
            let mut identity = None;
            let Some(event) = self.central.poll_event() else {
                return;
            };
            match event {
                CentralEvent::Connected { encrypted } => {
                    self.connected = true;
                    self.events.push_back(TableEvent::Connected { encrypted });
                }
                CentralEvent::IdentityPresented { identity: key } => identity = Some(key),
                CentralEvent::Response { call, data } => {
                    if let Some(pos) = position_of_call(&self.calls, call) {
                        self.calls.swap_remove(pos).sink.response(data);
                    }
                }
                CentralEvent::StreamItem { call, data } => {
                    let Some(pos) = position_of_call(&self.calls, call) else {
                        continue;
                    };
                    let delivery = match self.calls.get_mut(pos) {
                        Some(entry) => entry.sink.item(data),
                        None => Delivery::Taken,
                    };
                    match delivery {
                        Delivery::Taken => {}
                        Delivery::Full { limit } => {
                            let _ = self.central.cancel(call);
                            let entry = self.calls.swap_remove(pos);
                            entry.sink.fail(CentralError::StreamOverflow { limit });
                        }
                        Delivery::Gone => {
                            let _ = self.central.cancel(call);
                            self.calls.swap_remove(pos);
                        }
                    }
                }
                // The items held for it are retried before the next PDU goes out.
                CentralEvent::Credit { .. } => {}
                CentralEvent::StreamEnd { call } => {
                    if let Some(pos) = position_of_call(&self.calls, call) {
                        self.calls.swap_remove(pos).sink.end();
                    }
                }
                CentralEvent::CallFailed { call, error } => {
                    let error = match error {
                        CallError::Closed => self.closed.clone().unwrap_or(CentralError::Closed),
                        e => CentralError::Call(e),
                    };
                    if let Some(pos) = position_of_call(&self.calls, call) {
                        self.calls.swap_remove(pos).sink.fail(error);
                    }
                }
                CentralEvent::Closed { reason } => self.closed_by_core(reason),
                CentralEvent::Warning(w) => self.events.push_back(TableEvent::Warning(w)),
            }
            if let Some(key) = identity {
                self.decide_identity(now, key);
            }
        }
    }

    /// The core closed the connection: why, for the caller; every call not yet started and
    /// every waiting operation fails with it (the started ones failed with the core's own
    /// events).
    fn closed_by_core(&mut self, reason: CloseReason) {
        let why = match (&self.closed, reason, self.identity_error.take()) {
            (Some(why), _, _) => why.clone(),
            (None, CloseReason::IdentityRejected, Some(detail)) => CentralError::Identity(detail),
            (None, CloseReason::Local, _) => CentralError::Closed,
            (None, reason, _) if !self.connected => CentralError::Setup(reason),
            (None, _, _) => CentralError::Closed,
        };
        self.closed = Some(why.clone());
        self.fail_ops(|_| true, &why);
        self.fail_held(|_| true, &why);
        for entry in core::mem::take(&mut self.calls) {
            entry.sink.fail(why.clone());
        }
        self.events.push_back(if self.connected {
            TableEvent::Closed(why)
        } else {
            TableEvent::SetupFailed(why)
        });
    }

    /// Trust on first use: the peripheral presented `key` with a valid signature.
    fn decide_identity(&mut self, now: Instant, key: [u8; 32]) {
        let Trust::FirstUse { store, device_id } = &mut self.trust else {
            // The core decides under the other policies; nothing else reaches here.
            self.central.reject_identity(now);
            return;
        };
        match tofu_verify(store, device_id, &key) {
            Ok(outcome) => {
                self.pinned = Some(outcome);
                self.events.push_back(TableEvent::IdentityAccepted {
                    identity: key,
                    outcome,
                });
                self.central.accept_identity(now);
            }
            Err(TofuError::Mismatch { pinned, presented }) => {
                self.identity_error = Some(IdentityError::Changed {
                    device: device_id.clone(),
                    presented,
                    pinned,
                    store: format!("{}", Described(&*store)),
                });
                self.central.reject_identity(now);
            }
            Err(TofuError::Store(e)) => {
                self.identity_error = Some(IdentityError::Store(e.to_string()));
                self.central.reject_identity(now);
            }
        }
    }
}

/// The entry of the core's `call`.
fn position_of_call<S>(calls: &[Entry<S>], call: CallId) -> Option<usize> {
    calls.iter().position(|e| e.call == Some(call))
}

/// A store's [`KnownKeys::describe`] as `Display`.
struct Described<'a, K: ?Sized>(&'a K);

impl<K: KnownKeys + ?Sized> fmt::Display for Described<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.describe(f)
    }
}
