//! The gateway's series, in the same Prometheus registry as the device listeners' counters
//! ([`blerpc::metrics::Metrics`]): one `GET /metrics` gives both.
//!
//! | series | what |
//! |---|---|
//! | `blerpc_gateway_devices_connected` | devices connected now |
//! | `blerpc_gateway_devices_known` | devices known (allow-list, enrolled, or seen) |
//! | `blerpc_gateway_device_connections_total` | device connections admitted |
//! | `blerpc_gateway_devices_refused_total{reason}` | device connections refused: `not_allowed`, `plaintext`, `setup_failed`, `registry_full` |
//! | `blerpc_gateway_calls_total{status}` | HTTP calls by outcome: `ok`, `bad_request`, `unknown_command`, `unknown_device`, `not_connected`, `queue_full`, `deadline`, `device_error` |
//! | `blerpc_gateway_call_duration_seconds` | latency of calls that reached a device (histogram) |
//! | `blerpc_gateway_relays_open` | relayed links open now |
//! | `blerpc_gateway_relays_total{outcome}` | relay requests: `opened`, `device_timeout`, `device_refused`, `not_connected`, `unsupported`, `busy` |
//! | `blerpc_gateway_http_connections` | HTTP connections open now |
//! | `blerpc_gateway_http_refused_total{reason}` | HTTP connections and event streams refused: `connections`, `per_address`, `event_streams`; by the address guard at accept: `rate` (beyond the address's rate: it is penalized), `penalized` (from a penalized address, past the kernel's filter) |
//! | `blerpc_gateway_http_penalties_total{reason}` | addresses penalized by the HTTP face's guard: `rate` (their connections ran the bucket dry), `offences` (their protocol errors did) |
//! | `blerpc_gateway_http_timeouts_total{reason}` | HTTP requests and connections cut off for being slow: `head` (a request head, or the next one on a kept connection, not sent in time: the connection is closed), `body` (a request body not sent in time: answered 408, closed), `tls_handshake` |
//! | `blerpc_gateway_device_reconnects_total` | connections of a device that had connected before (since the gateway started) |
//! | `blerpc_gateway_diagnostics_total{outcome}` | the gateway's asks for a device's diagnostics: `ok`, `failed` |
//! | `blerpc_gateway_link_rssi_dbm` | the RSSI each diagnostics answer gave (histogram, dBm; answers without one are not counted) |
//! | `blerpc_gateway_link_conn_interval_seconds` | the connection interval each answer gave (histogram) |
//! | `blerpc_gateway_link_att_mtu` | the ATT MTU each answer gave (histogram) |
//! | `blerpc_connections_*` | the device listeners' own counters (refusals, closes for cause) |
//!
//! The link figures come from the devices' own diagnostics, asked every
//! [`diagnostics_every`](crate::GatewayConfig::diagnostics_every): every device is asked as often,
//! so each counts once per interval, and the fleet's distribution over the last ten minutes is
//! `histogram_quantile(0.5, sum by (le) (rate(blerpc_gateway_link_rssi_dbm_bucket[10m])))`. There
//! is no series per device: a fleet of a million devices would be a million series. A device's
//! own figures are in its report (`GET /v1/devices/{id}/report`).

use std::sync::Arc;
use std::time::Duration;

use blerpc::metrics::Metrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Label {
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

/// The gateway's counters and the listeners' (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct GatewayMetrics {
    /// The registry's owner, shared with the device listeners and their acceptors.
    pub server: Arc<Metrics>,
    connected: Gauge,
    known: Gauge,
    connections: Counter,
    refused: Family<ReasonLabel, Counter>,
    calls: Family<Label, Counter>,
    duration: Histogram,
    relays_open: Gauge,
    relays: Family<OutcomeLabel, Counter>,
    http_connections: Gauge,
    http_refused: Family<ReasonLabel, Counter>,
    http_penalties: Family<ReasonLabel, Counter>,
    http_timeouts: Family<ReasonLabel, Counter>,
    reconnects: Counter,
    diagnostics: Family<OutcomeLabel, Counter>,
    rssi: Histogram,
    conn_interval: Histogram,
    att_mtu: Histogram,
}

/// RSSI buckets, dBm: from no signal to next to the antenna.
const RSSI_BUCKETS: [f64; 9] = [
    -100.0, -90.0, -80.0, -70.0, -65.0, -60.0, -50.0, -40.0, -30.0,
];

/// Connection interval buckets, seconds: BLE's 7.5 ms floor, the common phone intervals (15,
/// 30, 45-50 ms), the slow ones of a device saving power, and the 4 s ceiling.
const CONN_INTERVAL_BUCKETS: [f64; 10] =
    [0.0075, 0.015, 0.0225, 0.03, 0.05, 0.1, 0.25, 0.5, 1.0, 4.0];

/// ATT MTU buckets: the 23-octet default, the usual negotiated ones, the 517 maximum.
const ATT_MTU_BUCKETS: [f64; 7] = [23.0, 64.0, 128.0, 185.0, 247.0, 512.0, 517.0];

impl GatewayMetrics {
    /// Every series at zero.
    pub fn new() -> GatewayMetrics {
        let connected = Gauge::default();
        let known = Gauge::default();
        let connections = Counter::default();
        let refused = Family::<ReasonLabel, Counter>::default();
        let calls = Family::<Label, Counter>::default();
        // 100 µs to ~105 s.
        let duration = Histogram::new(exponential_buckets(1e-4, 2.0, 21));
        let relays_open = Gauge::default();
        let relays = Family::<OutcomeLabel, Counter>::default();
        let http_connections = Gauge::default();
        let http_refused = Family::<ReasonLabel, Counter>::default();
        let http_penalties = Family::<ReasonLabel, Counter>::default();
        let http_timeouts = Family::<ReasonLabel, Counter>::default();
        let reconnects = Counter::default();
        let diagnostics = Family::<OutcomeLabel, Counter>::default();
        let rssi = Histogram::new(RSSI_BUCKETS);
        let conn_interval = Histogram::new(CONN_INTERVAL_BUCKETS);
        let att_mtu = Histogram::new(ATT_MTU_BUCKETS);
        let server = Metrics::with_extra(|registry| {
            let r = registry.sub_registry_with_prefix("gateway");
            r.register(
                "devices_connected",
                "Devices connected now",
                connected.clone(),
            );
            r.register(
                "devices_known",
                "Devices known (allow-list, enrolled, or seen)",
                known.clone(),
            );
            r.register(
                "device_connections",
                "Device connections admitted",
                connections.clone(),
            );
            r.register(
                "devices_refused",
                "Device connections refused, by reason",
                refused.clone(),
            );
            r.register("calls", "HTTP calls by outcome", calls.clone());
            r.register(
                "call_duration_seconds",
                "Latency of calls that reached a device",
                duration.clone(),
            );
            r.register("relays_open", "Relayed links open now", relays_open.clone());
            r.register("relays", "Relay requests by outcome", relays.clone());
            r.register(
                "http_connections",
                "HTTP connections open now",
                http_connections.clone(),
            );
            r.register(
                "http_refused",
                "HTTP connections and event streams refused, by limit",
                http_refused.clone(),
            );
            r.register(
                "http_penalties",
                "Addresses penalized by the HTTP face's guard, by cause",
                http_penalties.clone(),
            );
            r.register(
                "http_timeouts",
                "HTTP requests and connections cut off for being slow, by what was slow",
                http_timeouts.clone(),
            );
            r.register(
                "device_reconnects",
                "Connections of a device that had connected before",
                reconnects.clone(),
            );
            r.register(
                "diagnostics",
                "Asks for a device's diagnostics, by outcome",
                diagnostics.clone(),
            );
            r.register(
                "link_rssi_dbm",
                "RSSI the devices' diagnostics gave, dBm",
                rssi.clone(),
            );
            r.register(
                "link_conn_interval_seconds",
                "Connection interval the devices' diagnostics gave",
                conn_interval.clone(),
            );
            r.register(
                "link_att_mtu",
                "ATT MTU the devices' diagnostics gave",
                att_mtu.clone(),
            );
        });
        GatewayMetrics {
            server,
            connected,
            known,
            connections,
            refused,
            calls,
            duration,
            relays_open,
            relays,
            http_connections,
            http_refused,
            http_penalties,
            http_timeouts,
            reconnects,
            diagnostics,
            rssi,
            conn_interval,
            att_mtu,
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        self.server.render()
    }

    pub(crate) fn set_devices(&self, connected: usize, known: usize) {
        self.connected
            .set(i64::try_from(connected).unwrap_or(i64::MAX));
        self.known.set(i64::try_from(known).unwrap_or(i64::MAX));
    }

    pub(crate) fn device_connected(&self) {
        self.connections.inc();
    }

    pub(crate) fn device_refused(&self, reason: &'static str, peer: &str, what: &str) {
        self.refused.get_or_create(&ReasonLabel { reason }).inc();
        self.server.warn_line(reason, what, peer);
    }

    pub(crate) fn call(&self, status: &'static str, latency: Option<Duration>) {
        self.calls.get_or_create(&Label { status }).inc();
        if let Some(l) = latency {
            self.duration.observe(l.as_secs_f64());
        }
    }

    pub(crate) fn relay(&self, outcome: &'static str) {
        self.relays.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    pub(crate) fn relay_open_delta(&self, by: i64) {
        self.relays_open.inc_by(by);
    }

    pub(crate) fn http_connection_delta(&self, by: i64) {
        self.http_connections.inc_by(by);
    }

    pub(crate) fn http_refused(&self, reason: &'static str) {
        self.http_refused
            .get_or_create(&ReasonLabel { reason })
            .inc();
    }

    /// An address penalized by the HTTP face's guard for `reason`: counted and logged (at most
    /// a few lines a second).
    pub(crate) fn http_penalty(&self, reason: &'static str, ip: std::net::IpAddr) {
        self.http_penalties
            .get_or_create(&ReasonLabel { reason })
            .inc();
        let what = match reason {
            "rate" => "penalized: its HTTP connections ran its connection-rate bucket dry",
            _ => "penalized: its HTTP protocol errors ran its connection-rate bucket dry",
        };
        self.server
            .warn_line("http_address_penalty", what, &ip.to_string());
    }

    pub(crate) fn http_timeout(&self, reason: &'static str) {
        self.http_timeouts
            .get_or_create(&ReasonLabel { reason })
            .inc();
    }

    pub(crate) fn device_reconnected(&self) {
        self.reconnects.inc();
    }

    /// A diagnostics answer (its link figures observed) or a failed ask.
    pub(crate) fn diagnostics(&self, answer: Option<&blerpc::diagnostics::DeviceDiagnostics>) {
        let outcome = if answer.is_some() { "ok" } else { "failed" };
        self.diagnostics
            .get_or_create(&OutcomeLabel { outcome })
            .inc();
        let Some(d) = answer else { return };
        if let Some(&rssi) = d.rssi_dbm.value() {
            self.rssi.observe(f64::from(rssi));
        }
        if let Some(&us) = d.conn_interval_us.value() {
            self.conn_interval.observe(f64::from(us) / 1e6);
        }
        if let Some(&mtu) = d.att_mtu.value() {
            self.att_mtu.observe(f64::from(mtu));
        }
    }

    /// How many calls ended with `status` so far.
    pub fn calls(&self, status: &'static str) -> u64 {
        self.calls.get(&Label { status }).map_or(0, |c| c.get())
    }
}

impl Default for GatewayMetrics {
    fn default() -> Self {
        GatewayMetrics::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gateway_and_listener_series_render_together() {
        let m = GatewayMetrics::new();
        m.set_devices(2, 3);
        m.call("ok", Some(Duration::from_millis(3)));
        m.call("not_connected", None);
        m.device_refused(
            "not_allowed",
            "tcp://127.0.0.1:5",
            "device key not on the allow-list",
        );
        m.server
            .refused(blerpc::metrics::Reason::ConnectionRate, "tcp://127.0.0.1:6");
        let text = m.render();
        for line in [
            "blerpc_gateway_devices_connected 2",
            "blerpc_gateway_devices_known 3",
            r#"blerpc_gateway_calls_total{status="ok"} 1"#,
            r#"blerpc_gateway_calls_total{status="not_connected"} 1"#,
            r#"blerpc_gateway_devices_refused_total{reason="not_allowed"} 1"#,
            "blerpc_gateway_call_duration_seconds_count 1",
            r#"blerpc_connections_refused_total{reason="connection_rate"} 1"#,
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
        assert_eq!(m.calls("ok"), 1);
    }
}
