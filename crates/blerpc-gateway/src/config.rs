//! Every limit and policy of a gateway, with its default.

use std::path::PathBuf;
use std::time::Duration;

use blerpc::link::guard::{GuardConfig, Rate};

/// Who may connect as a device.
#[derive(Clone, Debug)]
pub enum Admission {
    /// Only the devices whose identity key is in the known-devices file (a JSON object of
    /// name → Ed25519 public key hex, the format of `known_keys.json`); read at start.
    AllowList(PathBuf),
    /// Every device that completes the key exchange is admitted and recorded in the file (as
    /// `"device-<first 8 hex digits>": "<key>"`, batched) so that a later start with
    /// [`Admission::AllowList`] on the same file admits exactly them.
    Enroll(PathBuf),
    /// Every device that completes the key exchange is admitted, and nothing is recorded
    /// (tests and benchmarks).
    Open,
}

/// Configuration of a [`Gateway`](crate::Gateway).
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// Who may connect as a device. Default: [`Admission::Open`] (the CLI requires a choice).
    pub admission: Admission,
    /// Admit devices that connect without encryption (their id is then `plain-` and the link's
    /// peer id, which is stable only for BLE addresses). Default `false`: such a device is
    /// refused.
    pub allow_plaintext: bool,
    /// A device connection must finish setup and the key exchange within this time, or it is
    /// closed. Default 10 s.
    pub setup_timeout: Duration,
    /// Device connections in setup (before the key exchange completes) at once; a newcomer
    /// beyond it is closed at once. Default 4,096.
    pub max_pending_setups: usize,
    /// Calls in flight to one device at once; beyond it calls wait in a first-come first-served
    /// queue. At most the runtime's [`MAX_CALLS_IN_FLIGHT`](blerpc::client::MAX_CALLS_IN_FLIGHT)
    /// (8); above [`DEFAULT_CALLS_IN_FLIGHT`](blerpc::client::DEFAULT_CALLS_IN_FLIGHT) (4) each
    /// device connection keeps the central's larger call table (more memory per device).
    /// Default 4.
    pub max_in_flight: usize,
    /// Calls waiting for one device beyond `max_in_flight`; more are refused with 429. Default 64.
    pub max_queued: usize,
    /// A call's deadline when the request names none (`Blerpc-Deadline-Ms` header). Default 10 s.
    pub default_deadline: Duration,
    /// The longest deadline a request may ask for. Default 300 s.
    pub max_deadline: Duration,
    /// Bytes of a JSON request body (unary calls), and of one NDJSON line of an upload.
    /// Default 1 MiB.
    pub max_json_bytes: usize,
    /// Items of one upload (central→peripheral stream) request body. Default 100,000.
    pub max_upload_items: usize,
    /// Device ids the gateway keeps records of (connected or not, with their statistics);
    /// devices beyond it are refused. Default 1,000,000.
    pub max_devices: usize,
    /// How long a backend waits for the device to open the relayed connection
    /// (`GET /v1/devices/{id}/link`). Default 10 s.
    pub relay_timeout: Duration,
    /// Relayed links open at once (each holds a backend WebSocket and a device one).
    /// Default 1,024.
    pub max_relays: usize,
    /// The base URL a device dials for a relayed connection (`ws://HOST:PORT` or `wss://...`):
    /// the gateway's HTTP address as devices reach it. Default: the `--http` address it bound.
    pub relay_base: Option<String>,
    /// Bearer tokens accepted by the HTTP API (compared in constant time). Empty: no
    /// authentication (the CLI warns when it listens beyond loopback).
    pub tokens: Vec<String>,
    /// How often the dashboard's event stream sends a snapshot. Default 1 s.
    pub dashboard_interval: Duration,
    /// A connection to the HTTP API must send a complete request head within this: from when
    /// it connects, and from the end of each answer while it is kept alive (idle). Default 10 s.
    pub http_header_timeout: Duration,
    /// A request body read whole (a unary or device→caller call's JSON, a durable call's) must
    /// arrive within this from when the handler starts reading it; then the call is answered
    /// 408 and the connection closed. Uploads (caller→device streams) are read at the device's
    /// pace and bounded by the call's deadline instead. Default 10 s.
    pub http_body_timeout: Duration,
    /// HTTP connections open at once; more are closed at accept. Default 10,000.
    pub max_http_connections: usize,
    /// HTTP connections one IP address may hold open; more are closed at accept. Default 1,000.
    pub max_http_connections_per_address: usize,
    /// Event streams (`GET /v1/events`) open at once; more are answered 503. Default 256.
    pub max_event_streams: usize,
    /// The HTTP face's per-address connection rate and penalties (its own, not the device
    /// listeners'): a connection beyond its address's rate, or from a penalized address, is
    /// closed at accept (and on Linux a penalized address's connection attempts are dropped in
    /// the kernel). Besides the token each connection takes, a request head too large (431)
    /// or malformed (400), a connection that sends no complete head within
    /// `http_header_timeout`, a body too large (413) or too slow (408) and a failed TLS
    /// handshake each cost [`GuardConfig::offence_cost`] tokens. Default
    /// [`default_http_guard`]: 1,000 new connections a second from one address in bursts of
    /// 2,000, a protocol error costing 100 (ten a second), a 10 s penalty.
    pub http_guard: GuardConfig,
    /// How often the gateway asks each connected device that announces the diagnostics
    /// extension for its diagnostics (`docs/protocol.md` "Diagnostics"): the answer is the
    /// device's last link report (`GET /v1/devices/{id}/report`) and feeds the fleet's link
    /// figures in `/metrics`. Each ask is one call, made only while the device is idle (a busy
    /// device is asked again [`BUSY_RETRY`](crate::link_watch::BUSY_RETRY) later). `None`:
    /// never (the report then has only what the gateway saw itself). At least
    /// [`MIN_DIAGNOSTICS_EVERY`]. Default 5 minutes.
    pub diagnostics_every: Option<Duration>,
    /// The first ask comes at a random moment within this after a device connects, so that
    /// devices reconnecting together (a gateway of the fleet lost) are not all asked at once.
    /// Default 30 s.
    pub diagnostics_spread: Duration,
}

/// The shortest [`GatewayConfig::diagnostics_every`]: one second (each ask is a call to every
/// device the gateway holds).
pub const MIN_DIAGNOSTICS_EVERY: Duration = Duration::from_secs(1);

/// The HTTP face's default guard ([`GatewayConfig::http_guard`]): generous to a backend that
/// opens a connection per call from one address (hundreds a second), ten protocol errors a
/// second from one address at most.
pub fn default_http_guard() -> GuardConfig {
    GuardConfig {
        rate: Some(DEFAULT_HTTP_RATE),
        offence_cost: DEFAULT_HTTP_OFFENCE_COST,
        ..GuardConfig::default()
    }
}

/// The HTTP face's default per-address connection rate: 1,000 a second, bursts of 2,000.
pub const DEFAULT_HTTP_RATE: Rate = Rate {
    per_second: 1000.0,
    burst: 2000.0,
};

/// What an HTTP protocol error costs its address by default, in connections: with
/// [`DEFAULT_HTTP_RATE`], ten a second.
pub const DEFAULT_HTTP_OFFENCE_COST: f64 = 100.0;

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            admission: Admission::Open,
            allow_plaintext: false,
            setup_timeout: Duration::from_secs(10),
            max_pending_setups: 4096,
            max_in_flight: blerpc::client::DEFAULT_CALLS_IN_FLIGHT,
            max_queued: 64,
            default_deadline: Duration::from_secs(10),
            max_deadline: Duration::from_secs(300),
            max_json_bytes: 1 << 20,
            max_upload_items: 100_000,
            max_devices: 1_000_000,
            relay_timeout: Duration::from_secs(10),
            max_relays: 1024,
            relay_base: None,
            tokens: Vec::new(),
            dashboard_interval: Duration::from_secs(1),
            http_header_timeout: Duration::from_secs(10),
            http_body_timeout: Duration::from_secs(10),
            max_http_connections: 10_000,
            max_http_connections_per_address: 1_000,
            max_event_streams: 256,
            http_guard: default_http_guard(),
            diagnostics_every: Some(Duration::from_secs(300)),
            diagnostics_spread: Duration::from_secs(30),
        }
    }
}
