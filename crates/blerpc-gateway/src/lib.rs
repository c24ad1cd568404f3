//! # blerpc-gateway: reach any device by its id
//!
//! Devices dial out to the gateway (`blerpc serve --dial tcp://gateway:7000`; behind NAT, over
//! TCP, TLS, WebSocket) or are reached by it over BLE; the gateway is the central on each device
//! link, runs setup and the key exchange, and so learns and verifies the device's Ed25519
//! identity: the device's id is that key in hex. Backends then call any device over HTTP/JSON,
//! or open a **relayed link** and run their own end-to-end encrypted session with the device
//! through the gateway ([`relay`]). A dashboard shows the devices live.
//!
//! ```text
//!  device (blerpc serve --dial)  ──tcp/tls/ws──▶  [ listeners ]                 HTTP API  ◀── backends
//!  BLE peripheral  ◀──ble──  [ keep_connected ]   Gateway: registry, calls  ──▶ /v1/devices/{id}/calls/{command}
//!                                                  relay pairing           ──▶ /v1/devices/{id}/link (WebSocket)
//!                                                  link watch              ──▶ /v1/devices/{id}/report
//!                                                  metrics, dashboard      ──▶ /metrics, /
//! ```
//!
//! The pieces: [`config`] (every limit), [`admission`] (allow-list or enrolment), [`registry`]
//! (devices and their connections), [`devices`] (attaching device links), [`calls`] (queueing,
//! deadlines, failures), [`relay`], [`http`] (the API, the dashboard and the TLS listener),
//! [`metrics`], [`link_watch`] (each device's diagnostics on a schedule, and its link report),
//! [`dial`] (the device's side: dialling a gateway), [`routing`] (where a device is held and how a request reaches it: one process,
//! or [`cluster`], one gateway from several processes, or [`nats`], a fleet of gateways).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use blerpc::link::mem;
//! use blerpc::{Server, ServerConfig};
//! use blerpc_gateway::{Gateway, GatewayConfig};
//!
//! // A device: the demo service with an identity, on one end of an in-memory link.
//! let service = blerpc_demo::pb::BlerpcServer::new(blerpc_demo::DemoService::default());
//! let device = Server::new(
//!     service,
//!     ServerConfig { identity: Some([7; 32]), ..ServerConfig::default() },
//! ).unwrap();
//! let (gateway_end, device_end) = mem::pair(247);
//! tokio::spawn(async move { device.serve_link(device_end).await });
//!
//! // The gateway attaches the link: setup, key exchange, admission.
//! let gateway = Gateway::new(GatewayConfig::default()).unwrap();
//! let dev = gateway.attach(gateway_end).await.unwrap();
//! assert_eq!(dev.id.len(), 64); // the device's key, hex
//!
//! // A call by device id, JSON in and out (what POST /v1/devices/{id}/calls/echo does).
//! let answer = gateway.call_json(&dev.id, "echo", r#"{"message":"hi"}"#, None).await.unwrap();
//! assert_eq!(answer, r#"{"message":"hi"}"#);
//! # }
//! ```

use std::sync::Arc;

use blerpc::link::guard::{AddressGuard, GuardConfig};
use blerpc_schema::Schema;

pub mod admission;
pub mod calls;
pub mod cluster;
pub mod config;
pub mod devices;
pub mod dial;
pub mod http;
pub mod link_watch;
pub mod metrics;
pub mod nats;
pub mod ndjson;
pub mod registry;
pub mod relay;
pub mod routing;
mod stats;

pub use calls::CallFailure;
pub use config::{Admission, GatewayConfig};
pub use devices::AttachError;
pub use metrics::GatewayMetrics;
pub use registry::{DeviceStatus, DeviceView, Registry};
pub use routing::{Directory, Forwarder, Routing};

use admission::KnownDevices;
use relay::Relays;

/// Why a gateway could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// The known-devices file could not be read.
    #[error("{0}")]
    KnownDevices(#[from] blerpc::known_keys::KnownKeysError),
    /// The configuration is invalid.
    #[error("invalid gateway configuration: {0}")]
    Config(String),
}

/// A gateway: cheap to clone (every clone is the same gateway).
#[derive(Clone, Debug)]
pub struct Gateway {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: GatewayConfig,
    schema: Schema,
    registry: Registry,
    known: KnownDevices,
    metrics: GatewayMetrics,
    guard: Arc<AddressGuard>,
    relays: Arc<Relays>,
    /// Device connections in setup.
    setups: Arc<tokio::sync::Semaphore>,
    /// This gateway's name in its fleet, once it has joined one.
    fleet_name: std::sync::OnceLock<String>,
}

impl Gateway {
    /// A gateway for the demo schema (see [`Gateway::with_schema`]). Call inside a tokio
    /// runtime (enrolment records newcomers from a task).
    pub fn new(config: GatewayConfig) -> Result<Gateway, GatewayError> {
        Gateway::with_schema(config, Schema::demo(), GuardConfig::default())
    }

    /// A gateway that converts JSON with `schema` and admits device links under `guard` (the
    /// per-address connection rate and penalties of the device listeners, as a server's).
    pub fn with_schema(
        config: GatewayConfig,
        schema: Schema,
        guard: GuardConfig,
    ) -> Result<Gateway, GatewayError> {
        if config.max_in_flight == 0 || config.max_in_flight > blerpc::client::MAX_CALLS_IN_FLIGHT {
            return Err(GatewayError::Config(format!(
                "max_in_flight must be 1 to {}",
                blerpc::client::MAX_CALLS_IN_FLIGHT
            )));
        }
        if config.default_deadline > config.max_deadline {
            return Err(GatewayError::Config(
                "the default deadline is longer than the maximum deadline".to_string(),
            ));
        }
        if config
            .diagnostics_every
            .is_some_and(|every| every < config::MIN_DIAGNOSTICS_EVERY)
        {
            return Err(GatewayError::Config(format!(
                "diagnostics_every must be at least {:?} (each ask is a call to every device), \
                 or off",
                config::MIN_DIAGNOSTICS_EVERY
            )));
        }
        let known = KnownDevices::load(&config.admission)?;
        // Devices get a record when they connect; the allow-list's others are known through it.
        let registry = Registry::new(config.max_devices);
        let metrics = GatewayMetrics::new();
        let guard = AddressGuard::with_metrics(guard, metrics.server.clone());
        let gateway = Gateway {
            inner: Arc::new(Inner {
                schema,
                registry,
                known,
                metrics,
                setups: Arc::new(tokio::sync::Semaphore::new(
                    config.max_pending_setups.max(1),
                )),
                config,
                guard,
                relays: Arc::new(Relays::default()),
                fleet_name: std::sync::OnceLock::new(),
            }),
        };
        gateway.refresh_gauges();
        Ok(gateway)
    }

    /// This gateway's name in its fleet ([`nats::Fleet::join`] sets it); device views carry it.
    pub fn fleet_name(&self) -> Option<&str> {
        self.inner.fleet_name.get().map(String::as_str)
    }

    /// The configuration.
    pub fn config(&self) -> &GatewayConfig {
        &self.inner.config
    }

    /// The schema calls are converted with.
    pub fn schema(&self) -> &Schema {
        &self.inner.schema
    }

    /// The devices.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// Devices known: on the allow-list (or enrolled) or recorded since the start.
    pub fn known(&self) -> usize {
        self.inner.known.len() + self.inner.registry.unnamed()
    }

    /// The metrics (give `metrics().server` to the device listeners' `TcpOptions::metrics`).
    pub fn metrics(&self) -> &GatewayMetrics {
        &self.inner.metrics
    }

    /// The per-address guard the device listeners share.
    pub fn guard(&self) -> &Arc<AddressGuard> {
        &self.inner.guard
    }

    /// A unary call with JSON in and out (the schema converts it): routed by device id, queued,
    /// run within `deadline_ms` (`None`: the default), counted.
    pub async fn call_json(
        &self,
        id: &str,
        command: &str,
        json: &str,
        deadline_ms: Option<u64>,
    ) -> Result<String, CallFailure> {
        let method = self.method(command, blerpc_schema::CallKind::Unary)?;
        let deadline = self.deadline(deadline_ms)?;
        let request = method
            .encode_request(json)
            .map_err(|e| CallFailure::BadRequest(e.to_string()))?;
        let response = self
            .call_bytes(id, method.name(), request, deadline)
            .await?;
        method
            .decode_response(&response)
            .map_err(|e| CallFailure::Device {
                device: id.to_string(),
                reason: e.to_string(),
            })
    }

    /// The schema's method `command`, which must have the shape `kind`.
    pub fn method(
        &self,
        command: &str,
        kind: blerpc_schema::CallKind,
    ) -> Result<blerpc_schema::Method, CallFailure> {
        let method = self
            .inner
            .schema
            .method(command)
            .map_err(CallFailure::UnknownCommand)?;
        if method.kind() != kind {
            return Err(CallFailure::BadRequest(format!(
                "`{}` is {}, not {}",
                method.name(),
                kind_name(method.kind()),
                kind_name(kind)
            )));
        }
        Ok(method)
    }
}

/// How the API names a call's shape.
pub fn kind_name(kind: blerpc_schema::CallKind) -> &'static str {
    match kind {
        blerpc_schema::CallKind::Unary => "unary",
        blerpc_schema::CallKind::ServerStream => "a device→caller stream",
        blerpc_schema::CallKind::ClientStream => "a caller→device stream (upload)",
        blerpc_schema::CallKind::BidiStream => "a stream both ways",
    }
}
