//! What a server refused, evicted and closed, and why: counters in the Prometheus text format
//! (prometheus-client) and a `warn` line per event, rate-limited per reason.
//!
//! One [`Metrics`] is shared by a [`Server`](crate::Server) and its acceptors (give the same
//! `Arc` to [`TcpOptions::metrics`](crate::link::tcp::TcpOptions::metrics)); render it with
//! [`Metrics::render`] for a `/metrics` endpoint.
//!
//! ```
//! use blerpc::metrics::{Metrics, Reason};
//!
//! let metrics = Metrics::new();
//! metrics.refused(Reason::ConnectionCap, "tcp://127.0.0.1:50000");
//! let text = metrics.render();
//! assert!(text.contains(r#"blerpc_connections_refused_total{reason="connection_cap"} 1"#));
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use blerpc_proto::connection::{Counters, OTHER_ERROR_CODE};
use blerpc_proto::wire::error_code::ErrorCode;

/// Why a connection (or a handshake, or a request) was refused, evicted or closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// At the connection cap with no unproven connection to evict: the newcomer was closed.
    ConnectionCap,
    /// The source address holds as many connections (or unproven ones) as allowed.
    AddressLimit,
    /// The source address opened connections faster than allowed.
    ConnectionRate,
    /// The source address is penalized for a while (it ran its connection-rate bucket dry:
    /// [`AddressGuard`](crate::link::guard::AddressGuard)).
    Penalized,
    /// An unproven connection was closed to make room for a newcomer at the cap.
    EvictedUnproven,
    /// The TLS or WebSocket handshake did not finish in time.
    HandshakeTimeout,
    /// The TLS or WebSocket handshake failed.
    HandshakeFailed,
    /// The oldest handshake in progress was dropped to make room for a newcomer.
    HandshakeEvicted,
    /// The source address holds as many handshakes in progress as allowed.
    HandshakeAddressLimit,
    /// The connection was not established (setup, and the key exchange where encryption is
    /// required) within the setup deadline.
    SetupTimeout,
    /// The central started more key exchanges than allowed.
    KeyExchangeAttempts,
    /// The central kept sending requests before the key exchange (encryption required).
    DataBeforeSession,
    /// A stream link began a container and did not finish it within the container deadline.
    ContainerTimeout,
    /// The peer sent bytes that are not a valid frame (a container longer than allowed, a bad
    /// CRC).
    Framing,
    /// The peer stopped answering keepalives.
    KeepaliveTimeout,
    /// A request was refused with BUSY because the reassembly budget (the connection's or the
    /// server's) was spent.
    ReassemblyBudget,
}

impl Reason {
    /// The label value (`snake_case`).
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::ConnectionCap => "connection_cap",
            Reason::AddressLimit => "address_limit",
            Reason::ConnectionRate => "connection_rate",
            Reason::Penalized => "penalized",
            Reason::EvictedUnproven => "evicted_unproven",
            Reason::HandshakeTimeout => "handshake_timeout",
            Reason::HandshakeFailed => "handshake_failed",
            Reason::HandshakeEvicted => "handshake_evicted",
            Reason::HandshakeAddressLimit => "handshake_address_limit",
            Reason::SetupTimeout => "setup_timeout",
            Reason::KeyExchangeAttempts => "key_exchange_attempts",
            Reason::DataBeforeSession => "data_before_session",
            Reason::ContainerTimeout => "container_timeout",
            Reason::Framing => "framing",
            Reason::KeepaliveTimeout => "keepalive_timeout",
            Reason::ReassemblyBudget => "reassembly_budget",
        }
    }

    /// `true` for the closes a peer causes by misbehaving (the setup deadline, too many key
    /// exchanges, requests before the key exchange, a container deadline, a malformed frame, a
    /// failed or timed-out handshake, and an eviction of its unproven connection or handshake:
    /// an address whose connections are evicted is filling the server): they cost its address
    /// tokens
    /// ([`GuardConfig::offence_cost`](crate::link::guard::GuardConfig::offence_cost)).
    pub fn is_offence(self) -> bool {
        matches!(
            self,
            Reason::SetupTimeout
                | Reason::KeyExchangeAttempts
                | Reason::DataBeforeSession
                | Reason::ContainerTimeout
                | Reason::Framing
                | Reason::HandshakeTimeout
                | Reason::HandshakeFailed
                | Reason::HandshakeEvicted
                | Reason::EvictedUnproven
        )
    }

    /// What it means, for the log line.
    fn describe(self) -> &'static str {
        match self {
            Reason::ConnectionCap => "refused: at the connection cap, nothing unproven to evict",
            Reason::AddressLimit => "refused: the address's connection limit",
            Reason::ConnectionRate => "refused: the address opens connections too fast",
            Reason::Penalized => "refused: the address is penalized for abuse",
            Reason::EvictedUnproven => "evicted: unproven, to make room at the connection cap",
            Reason::HandshakeTimeout => "closed: TLS/WebSocket handshake not finished in time",
            Reason::HandshakeFailed => "closed: TLS/WebSocket handshake failed",
            Reason::HandshakeEvicted => "closed: oldest handshake dropped to make room",
            Reason::HandshakeAddressLimit => "refused: the address's handshake limit",
            Reason::SetupTimeout => "closed: setup (and key exchange) not done in time",
            Reason::KeyExchangeAttempts => "closed: too many key exchanges",
            Reason::DataBeforeSession => "closed: requests before the key exchange",
            Reason::ContainerTimeout => "closed: a container begun and not finished in time",
            Reason::Framing => "closed: malformed frame",
            Reason::KeepaliveTimeout => "closed: keepalive not answered",
            Reason::ReassemblyBudget => "refused a request with BUSY: reassembly budget spent",
        }
    }
}

impl From<blerpc_proto::connection::PeripheralCloseReason> for Reason {
    fn from(why: blerpc_proto::connection::PeripheralCloseReason) -> Reason {
        use blerpc_proto::connection::PeripheralCloseReason as Why;
        match why {
            Why::KeyExchangeAttempts { .. } => Reason::KeyExchangeAttempts,
            Why::DataBeforeSession => Reason::DataBeforeSession,
            // SetupTimeout, and any reason a later core adds.
            _ => Reason::SetupTimeout,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabel {
    code: &'static str,
}

/// The label of ERROR code `code`: its protocol name, or `0x..` for one the protocol does not
/// define ([`OTHER_ERROR_CODE`] stands for all of those together).
fn code_label(code: u8) -> &'static str {
    if code == OTHER_ERROR_CODE {
        return "other";
    }
    match ErrorCode::from_byte(code) {
        ErrorCode::Unknown(_) => "other",
        known => known.as_str(),
    }
}

/// What the server's connections counted together since it started: what its diagnostics
/// answer says (`blerpc.diagnostics`, `docs/protocol.md` "Diagnostics").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Time since the metrics were created (the server's start).
    pub uptime: Duration,
    /// Connections accepted.
    pub connections: u64,
    /// Requests handed to handlers.
    pub calls: u64,
    /// ERROR answers by code (codes with none left out; `0xff` for codes the protocol does not
    /// define, together).
    pub errors: Vec<(u8, u64)>,
    /// Messages dropped while reassembling.
    pub reassembly_drops: u64,
    /// Connections lost to their link (an error, not a close).
    pub link_losses: u64,
    /// The most bytes one connection's outbox held.
    pub outbox_high_water: u64,
    /// The most bytes one connection held reassembling.
    pub reassembly_high_water: u64,
}

/// The counters behind [`Totals`].
struct Counts {
    started: Instant,
    calls: Counter,
    errors: Family<CodeLabel, Counter>,
    reassembly_drops: Counter,
    link_losses: Counter,
    outbox_high_water: Gauge,
    reassembly_high_water: Gauge,
}

impl Counts {
    fn register(registry: &mut Registry) -> Counts {
        let counts = Counts {
            started: Instant::now(),
            calls: Counter::default(),
            errors: Family::default(),
            reassembly_drops: Counter::default(),
            link_losses: Counter::default(),
            outbox_high_water: Gauge::default(),
            reassembly_high_water: Gauge::default(),
        };
        registry.register("calls", "Requests handed to handlers", counts.calls.clone());
        registry.register(
            "errors",
            "ERROR answers sent, by code",
            counts.errors.clone(),
        );
        registry.register(
            "reassembly_drops",
            "Messages dropped while reassembling (out of sequence, timed out, over the budget)",
            counts.reassembly_drops.clone(),
        );
        registry.register(
            "link_losses",
            "Connections lost to their link (an error, not a close)",
            counts.link_losses.clone(),
        );
        registry.register(
            "outbox_high_water_bytes",
            "The most bytes one connection's outbox held",
            counts.outbox_high_water.clone(),
        );
        registry.register(
            "reassembly_high_water_bytes",
            "The most bytes one connection held reassembling",
            counts.reassembly_high_water.clone(),
        );
        counts
    }
}

/// Log lines per reason per second; the rest are counted and reported with the next line.
const LOG_LINES_PER_SECOND: u32 = 5;

/// The server's counters (see the [module docs](self)).
pub struct Metrics {
    registry: Registry,
    accepted: Counter,
    refused: Family<ReasonLabel, Counter>,
    closed: Family<ReasonLabel, Counter>,
    open: Gauge,
    unproven: Gauge,
    reassembly: Gauge,
    penalties: Counter,
    counts: Counts,
    log: Mutex<HashMap<&'static str, Window>>,
}

#[derive(Clone, Copy)]
struct Window {
    start: Instant,
    lines: u32,
    suppressed: u64,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("accepted", &self.accepted.get())
            .field("open", &self.open.get())
            .finish_non_exhaustive()
    }
}

impl Metrics {
    /// Counters at zero, registered under the `blerpc_` prefix.
    pub fn new() -> Arc<Metrics> {
        Metrics::with_extra(|_| {})
    }

    /// [`Metrics::new`], with more metrics registered in the same registry by `register`
    /// (under the same `blerpc_` prefix; use a sub-registry for a prefix of your own), so that
    /// one [`Metrics::render`] gives a process's every series (the device gateway adds its
    /// own this way).
    pub fn with_extra(register: impl FnOnce(&mut Registry)) -> Arc<Metrics> {
        let mut registry = Registry::with_prefix("blerpc");
        register(&mut registry);
        let accepted = Counter::default();
        let refused = Family::<ReasonLabel, Counter>::default();
        let closed = Family::<ReasonLabel, Counter>::default();
        let (open, unproven, reassembly) = (Gauge::default(), Gauge::default(), Gauge::default());
        let penalties = Counter::default();
        registry.register(
            "connections_accepted",
            "Connections accepted (after any TLS/WebSocket handshake)",
            accepted.clone(),
        );
        registry.register(
            "connections_refused",
            "Connections and handshakes refused or dropped before they were served, by reason",
            refused.clone(),
        );
        registry.register(
            "connections_closed",
            "Connections closed for cause, and requests refused for a spent budget, by reason",
            closed.clone(),
        );
        registry.register("connections_open", "Connections served now", open.clone());
        registry.register(
            "address_penalties",
            "Source addresses penalized (refused for the penalty; dropped in the kernel on Linux) \
             for running their connection-rate bucket dry",
            penalties.clone(),
        );
        registry.register(
            "connections_unproven",
            "Connections not yet established (setup, and the key exchange where required)",
            unproven.clone(),
        );
        registry.register(
            "reassembly_claimed_bytes",
            "Bytes the partial requests of all connections announced (the server-wide budget)",
            reassembly.clone(),
        );
        let counts = Counts::register(&mut registry);
        Arc::new(Metrics {
            registry,
            counts,
            accepted,
            refused,
            closed,
            open,
            unproven,
            reassembly,
            penalties,
            log: Mutex::new(HashMap::new()),
        })
    }

    /// The registry, for other encodings than [`Metrics::render`]'s (a gateway's front merges
    /// its workers' metric families as values).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The counters in the Prometheus text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Counts a connection or handshake refused before it was served, and logs it.
    pub fn refused(&self, reason: Reason, peer: &str) {
        self.refused
            .get_or_create(&ReasonLabel {
                reason: reason.as_str(),
            })
            .inc();
        self.warn(reason, peer);
    }

    /// Counts a connection closed (or a request refused) for cause, and logs it.
    pub fn closed(&self, reason: Reason, peer: &str) {
        self.closed
            .get_or_create(&ReasonLabel {
                reason: reason.as_str(),
            })
            .inc();
        self.warn(reason, peer);
    }

    /// How many times `reason` was counted (refused and closed together).
    pub fn count(&self, reason: Reason) -> u64 {
        let label = ReasonLabel {
            reason: reason.as_str(),
        };
        // Reading does not create the series (`get`, not `get_or_create`).
        let get = |f: &Family<ReasonLabel, Counter>| f.get(&label).map_or(0, |c| c.get());
        get(&self.refused) + get(&self.closed)
    }

    pub(crate) fn accepted(&self) {
        self.accepted.inc();
    }

    /// Adds what a connection's core counted ([`Peripheral::take_counters`](blerpc_proto::connection::Peripheral::take_counters)).
    pub fn add_counters(&self, c: &Counters) {
        let counts = &self.counts;
        // Called every turn of a connection's loop: nothing is written for what is zero.
        if c.requests > 0 {
            counts.calls.inc_by(u64::from(c.requests));
        }
        for (code, n) in c.error_counts() {
            counts
                .errors
                .get_or_create(&CodeLabel {
                    code: code_label(code),
                })
                .inc_by(n);
        }
        if c.reassembly_drops > 0 {
            counts
                .reassembly_drops
                .inc_by(u64::from(c.reassembly_drops));
        }
        // Connections on other threads raise the marks too.
        let max = |g: &Gauge, v: u32| {
            g.inner()
                .fetch_max(i64::from(v), std::sync::atomic::Ordering::Relaxed);
        };
        max(&counts.outbox_high_water, c.outbox_high_water);
        max(&counts.reassembly_high_water, c.reassembly_high_water);
    }

    /// Counts a connection lost to its link.
    pub(crate) fn link_lost(&self) {
        self.counts.link_losses.inc();
    }

    /// What the connections counted together since the metrics were created.
    pub fn totals(&self) -> Totals {
        let c = &self.counts;
        // Each named code under its name, every other code together under `other`.
        let count = |label| {
            c.errors
                .get(&CodeLabel { code: label })
                .map_or(0, |n| n.get())
        };
        let errors: Vec<(u8, u64)> = ErrorCode::NAMED
            .iter()
            .map(|code| (code.to_byte(), count(code.as_str())))
            .chain([(OTHER_ERROR_CODE, count("other"))])
            .filter(|(_, n)| *n > 0)
            .collect();
        let mark = |g: &Gauge| u64::try_from(g.get()).unwrap_or(0);
        Totals {
            uptime: c.started.elapsed(),
            connections: self.accepted.get(),
            calls: c.calls.get(),
            errors,
            reassembly_drops: c.reassembly_drops.get(),
            link_losses: c.link_losses.get(),
            outbox_high_water: mark(&c.outbox_high_water),
            reassembly_high_water: mark(&c.reassembly_high_water),
        }
    }
    pub(crate) fn open_delta(&self, by: i64) {
        self.open.inc_by(by);
    }
    pub(crate) fn unproven_delta(&self, by: i64) {
        self.unproven.inc_by(by);
    }
    pub(crate) fn set_reassembly(&self, bytes: usize) {
        self.reassembly
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// A `warn` line for `reason`, at most [`LOG_LINES_PER_SECOND`] per reason per second; the
    /// next line says how many were left out.
    fn warn(&self, reason: Reason, peer: &str) {
        self.warn_line(reason.as_str(), reason.describe(), peer);
    }

    /// An address was penalized for `penalty`: counted, and logged as [`Metrics::warn`] logs.
    pub(crate) fn penalized(&self, ip: std::net::IpAddr, penalty: Duration) {
        self.penalties.inc();
        let what = format!(
            "penalized for {penalty:?}: the address ran its connection-rate bucket dry \
             (connections refused before accept until then)"
        );
        self.warn_line("address_penalty", &what, &ip.to_string());
    }

    /// Addresses penalized so far.
    pub fn penalties(&self) -> u64 {
        self.penalties.get()
    }

    /// A `warn` line `peer: what`, rate-limited per `key` as the server's own lines are (at most
    /// 5 a second; the next line says how many were left out): for other components sharing
    /// these metrics (the gateway's refusals).
    pub fn warn_line(&self, key: &'static str, what: &str, peer: &str) {
        let now = Instant::now();
        let suppressed = {
            let Ok(mut log) = self.log.lock() else { return };
            let w = log.entry(key).or_insert(Window {
                start: now,
                lines: 0,
                suppressed: 0,
            });
            if now.duration_since(w.start) >= Duration::from_secs(1) {
                w.start = now;
                w.lines = 0;
            }
            if w.lines >= LOG_LINES_PER_SECOND {
                w.suppressed += 1;
                return;
            }
            w.lines += 1;
            std::mem::take(&mut w.suppressed)
        };
        if suppressed > 0 {
            tracing::warn!(
                %peer,
                reason = key,
                "{what} ({suppressed} more like it not logged)"
            );
        } else {
            tracing::warn!(%peer, reason = key, "{what}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_render_by_reason() {
        let m = Metrics::new();
        m.accepted();
        m.open_delta(2);
        m.closed(Reason::SetupTimeout, "tcp://127.0.0.1:1");
        m.closed(Reason::SetupTimeout, "tcp://127.0.0.1:2");
        m.refused(Reason::HandshakeEvicted, "ws://127.0.0.1:3");
        let text = m.render();
        assert!(
            text.contains("blerpc_connections_accepted_total 1"),
            "{text}"
        );
        assert!(text.contains("blerpc_connections_open 2"), "{text}");
        assert!(
            text.contains(r#"blerpc_connections_closed_total{reason="setup_timeout"} 2"#),
            "{text}"
        );
        assert_eq!(m.count(Reason::SetupTimeout), 2);
        assert_eq!(m.count(Reason::HandshakeEvicted), 1);
        assert_eq!(m.count(Reason::Framing), 0);
        // Reading a count did not add a series.
        assert!(!m.render().contains("framing"));
        assert_eq!(
            Reason::from(blerpc_proto::connection::PeripheralCloseReason::DataBeforeSession),
            Reason::DataBeforeSession
        );
    }
}
