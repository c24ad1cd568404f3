//! The gateway's watch on its devices' links, and each device's link report.
//!
//! Each connected device that announces the diagnostics extension (`docs/protocol.md`
//! "Diagnostics") is asked for its diagnostics at a random moment within
//! [`diagnostics_spread`](crate::GatewayConfig::diagnostics_spread) of connecting, then every
//! [`diagnostics_every`](crate::GatewayConfig::diagnostics_every); an ask is one call to the
//! device under the default deadline, made only when the device is idle (nothing queued, a
//! call free: an ask never takes a place a caller waits for); a busy device is asked again
//! [`BUSY_RETRY`] later. Every answer, asked here or through
//! `GET /v1/devices/{id}/diagnostics`, becomes the device's last one and feeds the fleet's link
//! figures in `/metrics` ([`crate::metrics`]).
//!
//! [`DeviceReport`] (`GET /v1/devices/{id}/report`) is what the gateway knows of a device's link
//! without asking it: its last diagnostics and their age, its latest connections (reconnects
//! and how long each lasted) and its calls through the gateway. A part it cannot give is
//! `{"unavailable": "why"}`, never left out.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use blerpc::blerpc_proto::wire::capabilities::CapabilityFlags;
use blerpc::diagnostics::{DeviceDiagnostics, NOT_ANNOUNCED, Reading};
use rand_core::{OsRng, RngCore};
use serde::{Deserialize, Serialize};

use crate::Gateway;
use crate::registry::{Connection, Device, DeviceView, Session, rfc3339};

/// The `schema` of a [`DeviceReport`]; a change that breaks a reader bumps the number.
pub const REPORT_SCHEMA: &str = "blerpc-gateway-device-report/1";

/// The reason a report has no diagnostics when the gateway does not ask.
pub const NOT_ASKING: &str = "the gateway does not ask devices for diagnostics \
                              (diagnostics_every is off: --diagnostics-every 0)";

/// What the gateway knows of one device's link (see the [module docs](self)).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DeviceReport {
    /// [`REPORT_SCHEMA`].
    pub schema: String,
    /// When the report was made (RFC 3339, UTC).
    pub generated: String,
    /// The device as the device list shows it.
    pub device: DeviceView,
    /// Connections after its first, since the gateway started.
    pub reconnects: u64,
    /// Its latest connections, newest first (at most
    /// [`SESSIONS_KEPT`](crate::registry::SESSIONS_KEPT)).
    pub sessions: Vec<Session>,
    /// Its last diagnostics, or why there are none.
    pub diagnostics: Reading<LastDiagnostics>,
    /// Its calls through the gateway.
    pub calls: CallSummary,
}

/// A device's last diagnostics and their age.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LastDiagnostics {
    /// When the device answered (RFC 3339, UTC).
    pub taken: String,
    /// How long ago, seconds.
    pub age_s: f64,
    /// The answer.
    pub fields: DeviceDiagnostics,
}

/// A device's calls through the gateway.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CallSummary {
    /// Calls answered (successfully or with an error).
    pub calls: u64,
    /// Calls that failed.
    pub errors: u64,
    /// Latency quantiles, ms (the upper edge of their histogram bucket: at most 25 % above).
    pub latency_p50_ms: Option<f64>,
    /// 95th percentile.
    pub latency_p95_ms: Option<f64>,
    /// 99th percentile.
    pub latency_p99_ms: Option<f64>,
}

/// Whether the device on `connection` answers `blerpc.diagnostics`.
pub(crate) fn announces(connection: &Connection) -> bool {
    connection
        .client
        .info()
        .capabilities
        .is_some_and(|c| c.flags.contains(CapabilityFlags::DIAGNOSTICS))
}

/// How long the link watch waits to ask a busy device again (or `diagnostics_every`, if
/// shorter).
pub const BUSY_RETRY: Duration = Duration::from_secs(1);

/// A random wait in `0..spread`.
fn spread_wait(spread: Duration) -> Duration {
    let ms = u64::try_from(spread.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 {
        return Duration::ZERO;
    }
    Duration::from_millis(OsRng.next_u64() % ms)
}

impl Gateway {
    /// Asks the device on `connection` for its diagnostics on the gateway's schedule, for as
    /// long as the caller polls this (the task that watches the connection, until it closes);
    /// never returns when the gateway does not ask or the device does not announce the
    /// extension.
    pub(crate) async fn watch_link(&self, device: Arc<Device>, connection: Arc<Connection>) {
        let config = self.config();
        let Some(every) = config.diagnostics_every.filter(|_| announces(&connection)) else {
            return std::future::pending().await;
        };
        tokio::time::sleep(spread_wait(config.diagnostics_spread)).await;
        loop {
            let Some(slot) = self.idle_slot(device.clone(), connection.clone()) else {
                tokio::time::sleep(BUSY_RETRY.min(every)).await;
                continue;
            };
            if let Err(e) = self.ask_diagnostics(slot, config.default_deadline).await {
                tracing::debug!(device = %device.id, "diagnostics not given: {e}");
            }
            tokio::time::sleep(every).await;
        }
    }

    /// Keeps an answer (or counts a failed ask) of `device`.
    pub(crate) fn took_diagnostics(&self, device: &Device, answer: Option<&DeviceDiagnostics>) {
        self.metrics().diagnostics(answer);
        if let Some(d) = answer {
            device.took_diagnostics(SystemTime::now(), d.clone());
        }
    }

    /// Device `id`'s link report: what the gateway knows without asking it. `None` for a
    /// device it does not know.
    pub fn device_report(&self, id: &str) -> Option<DeviceReport> {
        let view = self.device_view(id)?;
        let now = SystemTime::now();
        let record = self.registry().get(id);
        let diagnostics = match record.as_deref().and_then(Device::last_diagnostics) {
            Some(t) => Reading::Value(LastDiagnostics {
                taken: rfc3339(t.at),
                age_s: now.duration_since(t.at).map_or(0.0, |d| d.as_secs_f64()),
                fields: t.diagnostics,
            }),
            None => Reading::Unavailable {
                unavailable: self.why_no_diagnostics(record.as_deref()),
            },
        };
        let q = |q| record.as_deref().and_then(|d| d.latency_ms(q));
        Some(DeviceReport {
            schema: REPORT_SCHEMA.to_string(),
            generated: rfc3339(now),
            reconnects: view.connections.saturating_sub(1),
            sessions: record.as_deref().map(Device::sessions).unwrap_or_default(),
            diagnostics,
            calls: CallSummary {
                calls: view.calls,
                errors: view.errors,
                latency_p50_ms: q(0.5),
                latency_p95_ms: q(0.95),
                latency_p99_ms: q(0.99),
            },
            device: view,
        })
    }

    /// Why a device has no diagnostics on record.
    fn why_no_diagnostics(&self, device: Option<&Device>) -> String {
        let config = self.config();
        let connection = device.and_then(Device::connection);
        match (&connection, config.diagnostics_every) {
            (None, _) => "not connected since the gateway started, or it gave none while it \
                          was"
            .to_string(),
            (Some(c), _) if !announces(c) => NOT_ANNOUNCED.to_string(),
            (Some(_), None) => NOT_ASKING.to_string(),
            (Some(_), Some(_)) => format!(
                "not given yet: the gateway asks within {:?} of a device connecting (the \
                 first ask may have failed; see blerpc_gateway_diagnostics_total)",
                config.diagnostics_spread
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spread_wait_stays_within_its_spread() {
        assert_eq!(spread_wait(Duration::ZERO), Duration::ZERO);
        for _ in 0..100 {
            assert!(spread_wait(Duration::from_millis(30)) < Duration::from_millis(30));
        }
    }

    #[test]
    fn a_kept_answer_costs_about_a_kilobyte() {
        // 19 fields inline (a value or a reason's String each), then the strings: a build id,
        // a version and a few reasons of tens of bytes.
        let inline = std::mem::size_of::<crate::registry::Taken>();
        assert!(inline <= 700, "{inline} bytes inline");
    }

    #[tokio::test]
    async fn asking_more_often_than_once_a_second_is_refused() {
        let config = |every| crate::GatewayConfig {
            diagnostics_every: every,
            ..crate::GatewayConfig::default()
        };
        let refused = Gateway::new(config(Some(Duration::from_millis(999)))).err();
        assert!(
            refused
                .as_ref()
                .is_some_and(|e| e.to_string().contains("at least 1s")),
            "{refused:?}"
        );
        for fine in [None, Some(Duration::from_secs(1))] {
            assert!(Gateway::new(config(fine)).is_ok());
        }
    }

    #[tokio::test]
    async fn a_device_never_seen_has_a_report_saying_why_it_has_no_diagnostics() {
        let g = Gateway::new(crate::GatewayConfig::default()).unwrap_or_else(|e| panic!("{e}"));
        assert!(g.device_report("nobody").is_none());
        let device = g
            .registry()
            .know("ab", None)
            .unwrap_or_else(|_| panic!("registry full"));
        let r = g
            .device_report(&device.id)
            .unwrap_or_else(|| panic!("known"));
        assert_eq!(r.schema, REPORT_SCHEMA);
        assert_eq!(r.reconnects, 0);
        assert!(r.sessions.is_empty());
        assert!(
            r.diagnostics
                .reason()
                .is_some_and(|w| w.starts_with("not connected")),
            "{:?}",
            r.diagnostics
        );
        let json = serde_json::to_value(&r).unwrap_or_default();
        assert!(json["diagnostics"]["unavailable"].is_string(), "{json}");
        assert_eq!(json["calls"]["calls"], 0);
    }
}
