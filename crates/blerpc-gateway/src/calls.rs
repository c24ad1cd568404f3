//! Calls through the gateway: find the device, wait for a place in its queue, run the call on
//! its connection within the deadline, and say precisely what failed.
//!
//! Calls to one device are pipelined up to [`GatewayConfig::max_in_flight`] and beyond it wait
//! first come, first served (tokio's semaphore is fair), at most
//! [`GatewayConfig::max_queued`] of them; streams run one at a time per device, as bleRPC
//! requires. Every failure is a [`CallFailure`] with its HTTP status.
//!
//! [`GatewayConfig::max_in_flight`]: crate::GatewayConfig::max_in_flight
//! [`GatewayConfig::max_queued`]: crate::GatewayConfig::max_queued

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use blerpc::blerpc_proto::connection::CallError;
use blerpc_schema::SchemaError;
use tokio::sync::OwnedSemaphorePermit;

use crate::Gateway;
use crate::registry::{Connection, Device};

/// Why a call through the gateway failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallFailure {
    /// The schema has no such command (400).
    #[error("{0}")]
    UnknownCommand(SchemaError),
    /// The request is not valid for the command (400).
    #[error("{0}")]
    BadRequest(String),
    /// The request is larger than allowed (413).
    #[error("{0}")]
    TooLarge(String),
    /// The request body did not arrive in time (408).
    #[error("{0}")]
    RequestTimeout(String),
    /// No device with this id is known (404).
    #[error("no device {0} is known to this gateway")]
    UnknownDevice(String),
    /// The device is known but not connected now (503).
    #[error("device {0} is not connected")]
    NotConnected(String),
    /// The device disconnected during the call (503; the call may or may not have run).
    #[error("device {0} disconnected during the call; it may or may not have run")]
    Disconnected(String),
    /// As many calls wait for the device as allowed (429).
    #[error("{queued} calls already wait for device {device} (max_queued)")]
    QueueFull {
        /// The device.
        device: String,
        /// Calls waiting.
        queued: usize,
    },
    /// The deadline passed (504): in the queue, or waiting for the device.
    #[error("no answer from device {device} within {deadline:?} ({where_})")]
    Deadline {
        /// The device.
        device: String,
        /// The deadline.
        deadline: Duration,
        /// `queued` or `in flight`.
        where_: &'static str,
    },
    /// The device answered with an error, or an answer that does not decode (502).
    #[error("device {device} failed the call: {reason}")]
    Device {
        /// The device.
        device: String,
        /// What it said.
        reason: String,
    },
    /// The device is busy (BUSY through every retry) (503).
    #[error("device {0} stayed busy through every retry")]
    Busy(String),
}

impl CallFailure {
    /// The HTTP status.
    pub fn status(&self) -> u16 {
        match self {
            CallFailure::UnknownCommand(_) | CallFailure::BadRequest(_) => 400,
            CallFailure::TooLarge(_) => 413,
            CallFailure::RequestTimeout(_) => 408,
            CallFailure::UnknownDevice(_) => 404,
            CallFailure::NotConnected(_) | CallFailure::Disconnected(_) | CallFailure::Busy(_) => {
                503
            }
            CallFailure::QueueFull { .. } => 429,
            CallFailure::Deadline { .. } => 504,
            CallFailure::Device { .. } => 502,
        }
    }

    /// A short name: the problem's `type` suffix and the metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            CallFailure::UnknownCommand(_) => "unknown_command",
            CallFailure::BadRequest(_) => "bad_request",
            CallFailure::TooLarge(_) => "too_large",
            CallFailure::RequestTimeout(_) => "request_timeout",
            CallFailure::UnknownDevice(_) => "unknown_device",
            CallFailure::NotConnected(_) => "not_connected",
            CallFailure::Disconnected(_) => "disconnected",
            CallFailure::QueueFull { .. } => "queue_full",
            CallFailure::Deadline { .. } => "deadline",
            CallFailure::Device { .. } => "device_error",
            CallFailure::Busy(_) => "busy",
        }
    }

    /// The problem's title.
    pub fn title(&self) -> &'static str {
        match self {
            CallFailure::UnknownCommand(_) => "Unknown command",
            CallFailure::BadRequest(_) => "Bad request",
            CallFailure::TooLarge(_) => "Request too large",
            CallFailure::RequestTimeout(_) => "Request timeout",
            CallFailure::UnknownDevice(_) => "Unknown device",
            CallFailure::NotConnected(_) => "Device not connected",
            CallFailure::Disconnected(_) => "Device disconnected",
            CallFailure::QueueFull { .. } => "Too many calls waiting for the device",
            CallFailure::Deadline { .. } => "Deadline exceeded",
            CallFailure::Device { .. } => "Device error",
            CallFailure::Busy(_) => "Device busy",
        }
    }

    /// The failure of a call that reached the device's connection.
    pub fn from_client(device: &str, deadline: Duration, e: blerpc::Error) -> CallFailure {
        let device = device.to_string();
        if e.is_disconnected() {
            return CallFailure::Disconnected(device);
        }
        match e.call_error() {
            Some(CallError::Timeout) => CallFailure::Deadline {
                device,
                deadline,
                where_: "in flight",
            },
            Some(CallError::Busy { .. }) => CallFailure::Busy(device),
            Some(e @ (CallError::RequestTooLarge { .. } | CallError::DataTooLong { .. })) => {
                CallFailure::TooLarge(format!("the request is too large for the device: {e}"))
            }
            _ => CallFailure::Device {
                device,
                reason: e.to_string(),
            },
        }
    }
}

/// A place in a device's pipeline: held for the whole call (and stream); dropping it lets the
/// next queued call go.
#[derive(Debug)]
pub struct Slot {
    /// The device.
    pub device: Arc<Device>,
    /// Its connection.
    pub connection: Arc<Connection>,
    _call: OwnedSemaphorePermit,
    _stream: Option<OwnedSemaphorePermit>,
    /// When the caller asked.
    pub started: Instant,
}

impl Slot {
    /// The place `call` (and, for a stream, `stream`) holds, counted in flight until dropped.
    fn new(
        device: Arc<Device>,
        connection: Arc<Connection>,
        call: OwnedSemaphorePermit,
        stream: Option<OwnedSemaphorePermit>,
        started: Instant,
    ) -> Slot {
        connection.in_flight.fetch_add(1, Ordering::Relaxed);
        Slot {
            device,
            connection,
            _call: call,
            _stream: stream,
            started,
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.connection.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Gateway {
    /// The device `id` and its live connection, or why a call cannot go to it.
    pub fn route(&self, id: &str) -> Result<(Arc<Device>, Arc<Connection>), CallFailure> {
        let Some(device) = self.inner.registry.get(id) else {
            // Known from the allow-list but never connected: 503, not 404.
            return Err(if self.inner.known.name_of(id).is_some() {
                CallFailure::NotConnected(id.to_string())
            } else {
                CallFailure::UnknownDevice(id.to_string())
            });
        };
        let connection = device
            .connection()
            .ok_or_else(|| CallFailure::NotConnected(id.to_string()))?;
        Ok((device, connection))
    }

    /// The deadline a request asked for (milliseconds; `None`: the default), within the
    /// configured maximum.
    pub fn deadline(&self, asked_ms: Option<u64>) -> Result<Duration, CallFailure> {
        let c = &self.inner.config;
        match asked_ms {
            None => Ok(c.default_deadline),
            Some(0) => Err(CallFailure::BadRequest(
                "the deadline must be at least 1 ms".to_string(),
            )),
            Some(ms) if Duration::from_millis(ms) > c.max_deadline => {
                Err(CallFailure::BadRequest(format!(
                    "a deadline of {ms} ms is longer than this gateway allows ({} ms)",
                    c.max_deadline.as_millis()
                )))
            }
            Some(ms) => Ok(Duration::from_millis(ms)),
        }
    }

    /// Waits for a place in `connection`'s pipeline (a stream also waits for the device's
    /// stream slot) until `deadline` from `started`.
    pub async fn slot(
        &self,
        device: Arc<Device>,
        connection: Arc<Connection>,
        stream: bool,
        started: Instant,
        deadline: Duration,
    ) -> Result<Slot, CallFailure> {
        let max_queued = self.inner.config.max_queued;
        let queued = connection.queued.fetch_add(1, Ordering::Relaxed);
        if queued >= max_queued && connection.calls.available_permits() == 0 {
            connection.queued.fetch_sub(1, Ordering::Relaxed);
            return Err(CallFailure::QueueFull {
                device: device.id.clone(),
                queued,
            });
        }
        let wait = async {
            let stream_permit = if stream {
                Some(connection.streams.clone().acquire_owned().await)
            } else {
                None
            };
            let call = connection.calls.clone().acquire_owned().await;
            (call, stream_permit)
        };
        let got = tokio::time::timeout_at(until(started, deadline), wait).await;
        connection.queued.fetch_sub(1, Ordering::Relaxed);
        let disconnected = || CallFailure::Disconnected(device.id.clone());
        match got {
            Ok((Ok(call), stream_permit)) => {
                let stream_permit = match stream_permit {
                    Some(Ok(p)) => Some(p),
                    Some(Err(_)) => return Err(disconnected()),
                    None => None,
                };
                Ok(Slot::new(device, connection, call, stream_permit, started))
            }
            Ok((Err(_), _)) => Err(disconnected()),
            Err(_) => Err(CallFailure::Deadline {
                device: device.id.clone(),
                deadline,
                where_: "queued",
            }),
        }
    }

    /// Counts a finished call in the device's statistics and the metrics.
    pub fn record(&self, device: &Device, started: Instant, outcome: Result<(), &CallFailure>) {
        let latency = started.elapsed();
        match outcome {
            Ok(()) => {
                device.record_call(latency, true);
                self.inner.metrics.call("ok", Some(latency));
            }
            Err(f) => {
                let reached = matches!(
                    f,
                    CallFailure::Device { .. }
                        | CallFailure::Deadline { .. }
                        | CallFailure::Busy(_)
                        | CallFailure::Disconnected(_)
                );
                if reached {
                    device.record_call(latency, false);
                }
                self.inner
                    .metrics
                    .call(f.kind(), reached.then_some(latency));
            }
        }
    }

    /// A unary call with protobuf bytes: routed, queued, run within `deadline`, counted.
    pub async fn call_bytes(
        &self,
        id: &str,
        command: &str,
        request: Vec<u8>,
        deadline: Duration,
    ) -> Result<Vec<u8>, CallFailure> {
        let started = Instant::now();
        let (device, connection) = match self.route(id) {
            Ok(r) => r,
            Err(f) => {
                self.inner.metrics.call(f.kind(), None);
                return Err(f);
            }
        };
        let result = async {
            let slot = self
                .slot(device.clone(), connection.clone(), false, started, deadline)
                .await?;
            // The connection's timer keeps the deadline: its timeout is `Deadline`, in flight.
            let answer = connection
                .client
                .call_until(command, request, until(started, deadline))
                .await
                .map_err(|e| CallFailure::from_client(&device.id, deadline, e));
            drop(slot);
            answer
        }
        .await;
        self.record(&device, started, result.as_ref().map(|_| ()));
        result
    }

    /// Device `id`'s diagnostics (`blerpc.diagnostics`, `docs/protocol.md` "Diagnostics"), asked
    /// as one of its calls: in its queue, within `deadline`. A device that does not announce
    /// the extension is not asked: every field says so. An answer becomes the device's last
    /// (its link report's) and is counted in the fleet's link figures.
    pub async fn diagnostics(
        &self,
        id: &str,
        deadline: Duration,
    ) -> Result<blerpc::diagnostics::DeviceDiagnostics, CallFailure> {
        let started = Instant::now();
        let (device, connection) = self.route(id)?;
        if !crate::link_watch::announces(&connection) {
            return Ok(blerpc::diagnostics::DeviceDiagnostics::unavailable(
                blerpc::diagnostics::NOT_ANNOUNCED,
            ));
        }
        match self
            .slot(device.clone(), connection, false, started, deadline)
            .await
        {
            Ok(slot) => self.ask_diagnostics(slot, deadline).await,
            Err(f) => {
                self.took_diagnostics(&device, None);
                Err(f)
            }
        }
    }

    /// A place in `connection`'s pipeline only if it is idle now: nothing queued and a call
    /// free. The link watch asks with it, so its asks never take a place a caller waits for.
    pub(crate) fn idle_slot(
        &self,
        device: Arc<Device>,
        connection: Arc<Connection>,
    ) -> Option<Slot> {
        if connection.queued.load(Ordering::Relaxed) > 0 {
            return None;
        }
        let call = connection.calls.clone().try_acquire_owned().ok()?;
        Some(Slot::new(device, connection, call, None, Instant::now()))
    }

    /// Asks the device holding `slot` for its diagnostics within `deadline` of the slot's
    /// start, and keeps (or counts) the answer.
    pub(crate) async fn ask_diagnostics(
        &self,
        slot: Slot,
        deadline: Duration,
    ) -> Result<blerpc::diagnostics::DeviceDiagnostics, CallFailure> {
        let device = slot.device.clone();
        let asked = tokio::time::timeout_at(
            until(slot.started, deadline),
            slot.connection.client.diagnostics(),
        )
        .await;
        drop(slot);
        let answer = match asked {
            Ok(answer) => answer.map_err(|e| CallFailure::from_client(&device.id, deadline, e)),
            Err(_) => Err(CallFailure::Deadline {
                device: device.id.clone(),
                deadline,
                where_: "in flight",
            }),
        };
        self.took_diagnostics(&device, answer.as_ref().ok());
        answer
    }
}

/// When a call that started at `started` with `deadline` ends, on tokio's clock (its timers', so
/// the deadline and the timer that ends it read one clock): no clock is read (a call reads
/// it once, when it starts, and once, when it ends).
pub(crate) fn until(started: Instant, deadline: Duration) -> Instant {
    started + deadline
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_allow_listed_device_that_never_connected_is_503_and_a_stranger_404() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("devices.json");
        let key = "ab".repeat(32);
        std::fs::write(&path, format!("{{\"kitchen\": \"{key}\"}}")).unwrap_or_default();
        let config = crate::GatewayConfig {
            admission: crate::Admission::AllowList(path),
            ..crate::GatewayConfig::default()
        };
        let g = Gateway::new(config).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(g.route(&key).unwrap_err().status(), 503);
        assert_eq!(g.route(&"cd".repeat(32)).unwrap_err().status(), 404);
        assert_eq!(g.known(), 1);
        let views = g.device_page(&crate::routing::ListQuery::default()).items;
        assert_eq!(views.len(), 1);
        assert_eq!(views[0].name.as_deref(), Some("kitchen"));
        assert_eq!(views[0].status, crate::DeviceStatus::Offline);
        assert_eq!(
            g.device_view(&key).map(|v| v.status),
            Some(crate::DeviceStatus::Offline)
        );
        assert!(g.registry().is_empty());
    }

    #[test]
    fn every_failure_has_its_own_status_and_kind() {
        let d = "ab".to_string();
        let cases = [
            (CallFailure::UnknownDevice(d.clone()), 404, "unknown_device"),
            (CallFailure::NotConnected(d.clone()), 503, "not_connected"),
            (
                CallFailure::Deadline {
                    device: d.clone(),
                    deadline: Duration::from_secs(1),
                    where_: "queued",
                },
                504,
                "deadline",
            ),
            (
                CallFailure::Device {
                    device: d.clone(),
                    reason: "x".into(),
                },
                502,
                "device_error",
            ),
            (
                CallFailure::QueueFull {
                    device: d.clone(),
                    queued: 64,
                },
                429,
                "queue_full",
            ),
            (CallFailure::BadRequest("x".into()), 400, "bad_request"),
        ];
        for (f, status, kind) in cases {
            assert_eq!((f.status(), f.kind()), (status, kind), "{f}");
        }
        let f = CallFailure::from_client(&d, Duration::from_secs(1), blerpc::Error::CLOSED);
        assert_eq!(f.status(), 503);
        let f = CallFailure::from_client(
            &d,
            Duration::from_secs(1),
            blerpc::Error::Central(blerpc::client::CentralError::Call(CallError::Timeout)),
        );
        assert_eq!(f.status(), 504);
        let f = CallFailure::from_client(
            &d,
            Duration::from_secs(1),
            blerpc::Error::Central(blerpc::client::CentralError::Call(CallError::Peer(
                blerpc::blerpc_proto::wire::error_code::ErrorCode::ResponseTooLarge,
            ))),
        );
        assert_eq!(f.status(), 502);
    }
}
