//! A fleet of gateways on NATS: the [`routing`](crate::routing) seam's implementation for many
//! machines.
//!
//! Each gateway **joins** a fleet ([`Fleet::join`]) on a NATS server or cluster (JetStream on):
//!
//! - it serves the subject of every device it holds, `{prefix}.v1.device.{id}` (queue group
//!   `{prefix}.device`), from the moment the device connects until it leaves, and its own node
//!   subject `{prefix}.v1.node.{name}` ([`subjects`]);
//! - it records each claim in the presence bucket (JetStream KV `{prefix}_presence`, one key per
//!   device: node, connection epoch, since, last seen), written compare-and-set so a stale claim
//!   never replaces a newer one, and watches the bucket into a [`ClaimTable`]: its directory of
//!   the whole fleet;
//! - it heartbeats into the liveness bucket (`{prefix}_gateways`) and watches it: a gateway
//!   silent for [`NatsLimits::node_timeout`] is dead, and its devices are offline.
//!
//! A request for a device another gateway holds goes out as a NATS request in the
//! [`envelope`] format and comes back as the holder's own HTTP answer: same statuses, same
//! bodies, streamed both ways with flow control. Nobody on the device's subject is NATS's
//! immediate "no responders": `503 not_connected` at once, never after a timeout.
//!
//! ```text
//!  backend ──HTTP──▶ gateway A ── Directory: ClaimTable (watch of {prefix}_presence)
//!                         │ device held here? ──▶ the local router
//!                         └─ else NATS request {prefix}.v1.device.{id} ──▶ gateway B ──▶ its router ──▶ device
//!                              (no responders ──▶ 503 at once)
//! ```
//!
//! NATS sees what HTTP calls carry (requests, responses, device ids): run it where you would run
//! the gateways, with TLS and credentials ([`NatsConfig`]). A relayed link stays end to end:
//! the gateways never hold its keys.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use axum::Router;
use futures_util::StreamExt;
use tokio::sync::Semaphore;

use crate::Gateway;
use crate::routing::local::LocalForwarder;
use crate::routing::{ClaimTable, Epoch, NodeId, Routing, unix_ms_since};

mod client;
pub mod durable;
pub mod envelope;
mod forward;
mod forwarder;
mod link;
pub mod pipe;
mod presence;
mod replies;
mod serve;
pub mod subjects;

pub use client::{Answer, FleetCallError, FleetClient};
pub use presence::{GatewayRecord, PresenceRecord, RECORD_VERSION, RecordError};
pub use subjects::Subjects;

use forwarder::FleetForwarder;
use presence::Inner;

/// Every limit of a gateway's part in a fleet.
#[derive(Clone, Debug)]
pub struct NatsLimits {
    /// The `data` frames of a body a receiver takes before granting credit. Default 16.
    pub window: u32,
    /// The largest `data` frame payload, and the largest body sent whole. Default 64 KiB
    /// (kept below the server's `max_payload`).
    pub chunk: usize,
    /// A holder streaming a body sends `idle` after this long without data. Default 5 s.
    pub keepalive: Duration,
    /// The longest wait for a frame or for credit mid-body. Default 15 s (3 × keepalive).
    pub stall: Duration,
    /// The longest wait for the holder to acknowledge a request. Default 2 s.
    pub accept_timeout: Duration,
    /// The head may take the call's deadline plus this. Default 2 s.
    pub head_margin: Duration,
    /// Requests from other gateways answered at once; beyond, 429. Default 10,000.
    pub max_forwarded: usize,
    /// How often a gateway heartbeats. Default 1 s.
    pub heartbeat: Duration,
    /// A gateway silent this long is dead. Default 5 s.
    pub node_timeout: Duration,
    /// How long joining waits for NATS and JetStream (a cluster electing its leader). Default
    /// 30 s.
    pub join_timeout: Duration,
    /// Durable calls not yet ended (queued or sent) one device may have; beyond, a new one is
    /// refused with 429. Default 1,000.
    pub max_open_durable_per_device: usize,
    /// How long leaving the fleet (on shutdown) may take to record this gateway's devices
    /// offline; past it (NATS unreachable), the gateway stops anyway and the others see its
    /// devices offline once its heartbeat is older than `node_timeout`. Default 5 s.
    pub leave_timeout: Duration,
}

impl Default for NatsLimits {
    fn default() -> NatsLimits {
        NatsLimits {
            window: 16,
            chunk: 64 * 1024,
            keepalive: Duration::from_secs(5),
            stall: Duration::from_secs(15),
            accept_timeout: Duration::from_secs(2),
            head_margin: Duration::from_secs(2),
            max_forwarded: 10_000,
            heartbeat: Duration::from_secs(1),
            node_timeout: Duration::from_secs(5),
            join_timeout: Duration::from_secs(30),
            leave_timeout: Duration::from_secs(5),
            max_open_durable_per_device: 1000,
        }
    }
}

/// How a gateway joins a fleet.
#[derive(Clone, Debug)]
pub struct NatsConfig {
    /// The NATS servers: `nats://host:4222`, several comma-separated.
    pub url: String,
    /// This gateway's name in the fleet: unique, one subject token ([`subjects::is_token`]).
    pub node: NodeId,
    /// The subjects' and buckets' prefix. Default `blerpc`.
    pub prefix: String,
    /// A NATS credentials file (JWT and nkey seed).
    pub credentials: Option<PathBuf>,
    /// An nkey seed (`SU…`).
    pub nkey: Option<String>,
    /// The CA that signed the NATS servers' certificates; with it, TLS is required.
    pub tls_ca: Option<PathBuf>,
    /// Replicas of the KV buckets (1 for one server, 3 for a three-node cluster).
    pub replicas: usize,
    /// The limits.
    pub limits: NatsLimits,
}

impl NatsConfig {
    /// A configuration for `url`, this gateway named `node`, with the defaults.
    pub fn new(url: &str, node: &str) -> NatsConfig {
        NatsConfig {
            url: url.to_string(),
            node: NodeId::new(node),
            prefix: "blerpc".to_string(),
            credentials: None,
            nkey: None,
            tls_ca: None,
            replicas: 1,
            limits: NatsLimits::default(),
        }
    }
}

/// Why a gateway could not join a fleet.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FleetError {
    /// The configuration cannot work.
    #[error("{0}")]
    Config(String),
    /// No NATS server could be reached, or it refused the credentials.
    #[error("cannot connect to NATS at {url}: {reason}")]
    Connect {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// JetStream is off, or a bucket could not be opened.
    #[error(
        "cannot open the fleet's KV bucket {bucket} (is JetStream on? nats-server -js): {reason}"
    )]
    Bucket {
        /// The bucket.
        bucket: String,
        /// Why.
        reason: String,
    },
    /// A subscription failed.
    #[error("cannot subscribe to {subject}: {reason}")]
    Subscribe {
        /// The subject.
        subject: String,
        /// Why.
        reason: String,
    },
}

/// What the exchanges of one gateway share.
#[derive(Clone, Debug)]
pub(crate) struct Ctx {
    client: async_nats::Client,
    limits: NatsLimits,
    /// Requests from other gateways being answered.
    forwarded: Arc<Semaphore>,
    /// The inboxes of this connection's exchanges.
    replies: replies::Replies,
}

impl Ctx {
    /// What exchanges on `client` share, answering at most `forwarded` requests from other
    /// gateways at once, within `limits`.
    pub(crate) fn new(client: async_nats::Client, forwarded: usize, limits: NatsLimits) -> Ctx {
        Ctx {
            replies: replies::Replies::new(client.clone()),
            client,
            forwarded: Arc::new(Semaphore::new(forwarded)),
            limits,
        }
    }
}

/// A gateway's membership of a fleet (see the [module docs](self)). Dropping it stops the
/// gateway's part: its subjects go, and the others see it as dead within their node timeout;
/// [`Fleet::leave`] goes at once.
#[derive(Clone, Debug)]
pub struct Fleet {
    inner: Arc<Inner>,
    durable: durable::Durable,
    /// The gateway's tasks in the fleet, stopped when the last clone is dropped.
    tasks: Arc<Mutex<Vec<AbortOnDrop>>>,
}

/// Aborts a task when dropped.
#[derive(Debug)]
pub(super) struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub(super) fn now_ms() -> u64 {
    unix_ms_since(std::time::SystemTime::now())
}

impl Fleet {
    /// Connects `gateway` to the fleet of `config` and starts its part: its devices' subjects,
    /// its presence records, its heartbeat, and the watches that make the fleet's directory.
    pub async fn join(gateway: Gateway, config: NatsConfig) -> Result<Fleet, FleetError> {
        let subjects =
            Subjects::new(&config.prefix).map_err(|e| FleetError::Config(e.to_string()))?;
        if !subjects::is_token(config.node.as_str()) {
            return Err(FleetError::Config(format!(
                "the gateway name {:?} must be one NATS subject token: letters, digits, `-`, `_`",
                config.node.as_str()
            )));
        }
        let (client, reconnects) = connect(&config).await?;
        if gateway
            .inner
            .fleet_name
            .set(config.node.as_str().to_string())
            .is_err()
        {
            return Err(FleetError::Config(
                "this gateway has joined a fleet already".to_string(),
            ));
        }
        // A frame must fit the server's max_payload with its headers.
        let max_payload = client.server_info().max_payload;
        let mut limits = config.limits.clone();
        if max_payload > 0 {
            limits.chunk = limits.chunk.min(max_payload.saturating_sub(4096).max(1024));
        }
        let js = jetstream::new(client.clone());
        let within = limits.join_timeout;
        let presence = bucket(
            &js,
            &subjects.presence_bucket(),
            config.replicas,
            None,
            within,
        )
        .await?;
        let gateways = bucket(
            &js,
            &subjects.gateways_bucket(),
            config.replicas,
            Some(limits.node_timeout * 12),
            within,
        )
        .await?;
        // Records outlive their longest TTL by a day, then go.
        let calls = bucket(
            &js,
            &subjects.calls_bucket(),
            config.replicas,
            Some(durable::MAX_TTL + Duration::from_secs(24 * 3600)),
            within,
        )
        .await?;
        let (writers, writer_queues) = presence::writer_queues();
        let inner = Arc::new(Inner {
            ctx: Ctx::new(client, limits.max_forwarded, limits),
            table: Arc::new(ClaimTable::new(Some(config.node.clone()))),
            live: RwLock::new(BTreeMap::new()),
            node: config.node,
            subjects,
            device_router: crate::http::device_router(gateway.clone()),
            gateway,
            presence,
            gateways,
            held: Mutex::new(HashMap::new()),
            joined_ms: now_ms(),
            reconnects,
            pending: Mutex::new(HashMap::new()),
            writers,
        });
        inner.heartbeat().await;
        let node_subject = inner.subjects.node(inner.node.as_str()).unwrap_or_default();
        let node_sub = inner
            .ctx
            .client
            .subscribe(node_subject.clone())
            .await
            .map_err(|e| FleetError::Subscribe {
                subject: node_subject,
                reason: e.to_string(),
            })?;
        let node_router = crate::http::node_router(inner.gateway.clone());
        let durable = durable::Durable::new(inner.clone(), calls);
        let tasks = vec![
            spawn(durable.clone().watch()),
            spawn(durable.clone().sweep()),
            spawn(durable.clone().follow_connects()),
            spawn(serve_subject(
                inner.ctx.clone(),
                inner.gateway.clone(),
                node_router,
                node_sub,
            )),
            spawn(inner.clone().follow_registry()),
            spawn(inner.clone().watch_presence()),
            spawn(inner.clone().watch_gateways()),
            spawn(inner.clone().beat()),
            spawn(inner.clone().reassert()),
            spawn(inner.clone().retry_pending()),
        ];
        let mut tasks = tasks;
        for queue in writer_queues {
            tasks.push(spawn(inner.clone().writer(queue)));
        }
        Ok(Fleet {
            inner,
            durable,
            tasks: Arc::new(Mutex::new(tasks)),
        })
    }

    /// This gateway's name.
    pub fn node(&self) -> &NodeId {
        &self.inner.node
    }

    /// The fleet's directory (every device's claim, from the presence bucket).
    pub fn directory(&self) -> Arc<ClaimTable> {
        self.inner.table.clone()
    }

    /// Gateways alive now, this one first.
    pub fn nodes(&self) -> Vec<NodeId> {
        self.inner.nodes()
    }

    /// The fleet's durable calls.
    pub fn durable(&self) -> &durable::Durable {
        &self.durable
    }

    /// The routing the HTTP API uses in a fleet.
    pub fn routing(&self) -> Routing {
        Routing {
            durable: Some(self.durable.clone()),
            directory: self.inner.table.clone(),
            forwarder: Arc::new(FleetForwarder {
                local: LocalForwarder::new(self.inner.gateway.clone()),
                inner: self.inner.clone(),
            }),
        }
    }

    /// Leaves the fleet now: stops serving, records this gateway's devices offline, and removes
    /// its heartbeat.
    /// Takes at most [`NatsLimits::leave_timeout`]: a gateway cut off from NATS still stops.
    pub async fn leave(&self) {
        lock(&self.tasks).clear();
        let held: Vec<(String, Epoch)> = lock(&self.inner.held)
            .drain()
            .map(|(d, h)| (d, h.epoch))
            .collect();
        let inner = &self.inner;
        let records = async {
            futures_util::stream::iter(held)
                .for_each_concurrent(presence::WRITERS, |(device, epoch)| async move {
                    inner.record_release(&device, &inner.node, epoch).await;
                })
                .await;
            let _ = inner.gateways.delete(inner.node.as_str()).await;
            let _ = inner.ctx.client.flush().await;
        };
        let limit = inner.ctx.limits.leave_timeout;
        if tokio::time::timeout(limit, records).await.is_err() {
            tracing::warn!(
                "leaving the fleet: NATS did not take this gateway's releases within {limit:?}; \
                 the other gateways see its devices offline once its heartbeat is stale"
            );
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        // The last clone: the device subjects go with the tasks.
        if Arc::strong_count(&self.tasks) == 1 {
            lock(&self.tasks).clear();
            lock(&self.inner.held).clear();
        }
    }
}

pub(super) fn spawn(f: impl Future<Output = ()> + Send + 'static) -> AbortOnDrop {
    AbortOnDrop(tokio::spawn(f))
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Connects to NATS; the receiver counts the connections made (it changes on every reconnect).
async fn connect(
    config: &NatsConfig,
) -> Result<(async_nats::Client, tokio::sync::watch::Receiver<u64>), FleetError> {
    let failed = |reason: String| FleetError::Connect {
        url: config.url.clone(),
        reason,
    };
    let mut options = match &config.credentials {
        Some(path) => async_nats::ConnectOptions::with_credentials_file(path)
            .await
            .map_err(|e| failed(format!("credentials {}: {e}", path.display())))?,
        None => async_nats::ConnectOptions::new(),
    };
    if let Some(seed) = &config.nkey {
        options = options.nkey(seed.clone());
    }
    if let Some(ca) = &config.tls_ca {
        options = options.add_root_certificates(ca.clone()).require_tls(true);
    }
    let (connected_tx, connected) = tokio::sync::watch::channel(0u64);
    let connected_tx = Arc::new(connected_tx);
    options = options
        .event_callback(move |event| {
            let connected_tx = connected_tx.clone();
            async move {
                match event {
                    async_nats::Event::Connected => connected_tx.send_modify(|n| *n += 1),
                    async_nats::Event::Disconnected => {
                        tracing::warn!("disconnected from NATS: reconnecting");
                    }
                    other => tracing::info!("NATS: {other}"),
                }
            }
        })
        // Pings every heartbeat: a connection cut without a reset is found dead in seconds.
        .ping_interval(config.limits.heartbeat)
        .name(format!("blerpc-gateway {}", config.node))
        // A gateway cut off and back reconnects within a second, not after the client's
        // default backoff of up to several seconds: its devices' subjects depend on it.
        .reconnect_delay_callback(|attempts| {
            Duration::from_millis(100 * u64::try_from(attempts).unwrap_or(u64::MAX).min(10))
        })
        .retry_on_initial_connect()
        .connection_timeout(Duration::from_secs(5));
    let servers = config
        .url
        .split(',')
        .map(|u| u.trim().parse::<async_nats::ServerAddr>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed(format!("not a NATS server URL: {e}")))?;
    let client = tokio::time::timeout(Duration::from_secs(10), options.connect(servers))
        .await
        .map_err(|_| failed("no server answered within 10 s".to_string()))?
        .map_err(|e| failed(e.to_string()))?;
    // retry_on_initial_connect returns before the first connection: wait for it.
    tokio::time::timeout(Duration::from_secs(10), client.flush())
        .await
        .map_err(|_| failed("no server answered within 10 s".to_string()))?
        .map_err(|e| failed(e.to_string()))?;
    Ok((client, connected))
}

/// Opens bucket `name`, creating it if needed; retries until `within` has passed (JetStream
/// answers "temporarily unavailable" while a cluster elects its leader).
async fn bucket(
    js: &jetstream::Context,
    name: &str,
    replicas: usize,
    max_age: Option<Duration>,
    within: Duration,
) -> Result<kv::Store, FleetError> {
    let until = tokio::time::Instant::now() + within;
    loop {
        if let Ok(store) = js.get_key_value(name).await {
            return Ok(store);
        }
        let created = js
            .create_key_value(kv::Config {
                bucket: name.to_string(),
                history: 1,
                max_age: max_age.unwrap_or_default(),
                num_replicas: replicas.max(1),
                storage: jetstream::stream::StorageType::File,
                ..Default::default()
            })
            .await;
        match created {
            Ok(store) => return Ok(store),
            Err(e) if tokio::time::Instant::now() >= until => {
                return Err(FleetError::Bucket {
                    bucket: name.to_string(),
                    reason: format!("{e} (still, after {within:?})"),
                });
            }
            Err(e) => {
                tracing::info!("the KV bucket {name} is not ready yet: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// Answers every request on `sub` with `router`, each on a task of its own, at most
/// [`NatsLimits::max_forwarded`] at once (beyond: 429 at once).
pub(super) async fn serve_subject(
    ctx: Ctx,
    gateway: Gateway,
    router: Router,
    sub: async_nats::Subscriber,
) {
    serve_until(ctx, gateway, router, sub, std::future::pending()).await;
}

/// [`serve_subject`] until `stop` completes; then unsubscribes and answers what had already
/// been delivered (for a device that has left: `503` from its router at once, not a
/// requester's accept timeout).
pub(super) async fn serve_until(
    ctx: Ctx,
    gateway: Gateway,
    router: Router,
    mut sub: async_nats::Subscriber,
    stop: impl Future<Output = ()>,
) {
    let answer = |message: async_nats::Message| {
        let ctx = ctx.clone();
        let router = router.clone();
        let gateway = gateway.clone();
        match ctx.forwarded.clone().try_acquire_owned() {
            Ok(permit) => {
                tokio::spawn(async move {
                    serve::answer(ctx, gateway, router, message).await;
                    drop(permit);
                });
            }
            Err(_) => {
                tokio::spawn(serve::refuse(ctx, message));
            }
        }
    };
    tokio::pin!(stop);
    loop {
        tokio::select! {
            m = sub.next() => match m {
                Some(message) => answer(message),
                None => return,
            },
            () = &mut stop => break,
        }
    }
    // Unsubscribes, and ends the stream once the server has confirmed: what it delivered
    // before is answered (for at most 5 s, should NATS be gone).
    if let Err(e) = sub.drain().await {
        // What was delivered before is answered all the same: its requesters wait for it.
        tracing::debug!("unsubscribing: {e}");
    }
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    while let Ok(Some(message)) = tokio::time::timeout_at(until, sub.next()).await {
        answer(message);
    }
}
