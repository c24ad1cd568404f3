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
//! | `blerpc_connections_*` | the device listeners' own counters (refusals, closes for cause) |

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
}

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
