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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv};
use axum::Router;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use http_body_util::BodyExt as _;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;
use tokio::sync::broadcast::error::RecvError;

use crate::Gateway;
use crate::calls::CallFailure;
use crate::http::Problem;
use crate::registry::DeviceView;
use crate::routing::claims::PresenceMessage;
use crate::routing::local::LocalForwarder;
use crate::routing::{
    ClaimTable, Epoch, ForwardError, Forwarder, Holder, ListQuery, MetricSet, NodeId, Page,
    Routing, Snapshot, unix_ms_since,
};

pub mod envelope;
mod forward;
pub mod pipe;
mod serve;
pub mod subjects;

pub use subjects::Subjects;

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

/// The version of presence and liveness records.
pub const RECORD_VERSION: u32 = 1;

/// A device's entry in the presence bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PresenceRecord {
    /// [`RECORD_VERSION`].
    pub v: u32,
    /// The gateway that holds the device, or held it last.
    pub node: NodeId,
    /// The claimed connection's epoch (µs since the Unix epoch when it was made).
    pub epoch: Epoch,
    /// Whether that connection is up.
    pub online: bool,
    /// When it was made (ms since the Unix epoch).
    pub since_ms: u64,
    /// When the device was last seen: now if online, else when it went (ms).
    pub seen_ms: u64,
}

/// A gateway's entry in the liveness bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayRecord {
    /// [`RECORD_VERSION`].
    pub v: u32,
    /// Its name.
    pub node: NodeId,
    /// Devices it holds.
    pub online: usize,
    /// When it joined (ms since the Unix epoch).
    pub joined_ms: u64,
    /// When it wrote this (ms).
    pub at_ms: u64,
}

/// What the exchanges of one gateway share.
#[derive(Clone, Debug)]
pub(crate) struct Ctx {
    client: async_nats::Client,
    limits: NatsLimits,
    /// Requests from other gateways being answered.
    forwarded: Arc<Semaphore>,
}

/// A gateway's membership of a fleet (see the [module docs](self)). Dropping it stops the
/// gateway's part: its subjects go, and the others see it as dead within their node timeout;
/// [`Fleet::leave`] goes at once.
#[derive(Clone, Debug)]
pub struct Fleet {
    inner: Arc<Inner>,
    /// The gateway's tasks in the fleet, stopped when the last clone is dropped.
    tasks: Arc<Mutex<Vec<AbortOnDrop>>>,
}

#[derive(Debug)]
struct Inner {
    ctx: Ctx,
    subjects: Subjects,
    node: NodeId,
    gateway: Gateway,
    table: Arc<ClaimTable>,
    /// Gateways heard from, and when.
    live: RwLock<BTreeMap<NodeId, Instant>>,
    presence: kv::Store,
    gateways: kv::Store,
    /// The devices this gateway serves the subjects of.
    held: Mutex<HashMap<String, Held>>,
    joined_ms: u64,
}

#[derive(Debug)]
struct Held {
    epoch: Epoch,
    _serving: AbortOnDrop,
}

#[derive(Debug)]
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn now_ms() -> u64 {
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
        let client = connect(&config).await?;
        // A frame must fit the server's max_payload with its headers.
        let max_payload = client.server_info().max_payload;
        let mut limits = config.limits.clone();
        if max_payload > 0 {
            limits.chunk = limits.chunk.min(max_payload.saturating_sub(4096).max(1024));
        }
        let js = jetstream::new(client.clone());
        let presence = bucket(&js, &subjects.presence_bucket(), config.replicas, None).await?;
        let gateways = bucket(
            &js,
            &subjects.gateways_bucket(),
            config.replicas,
            Some(limits.node_timeout * 12),
        )
        .await?;
        let inner = Arc::new(Inner {
            ctx: Ctx {
                client,
                forwarded: Arc::new(Semaphore::new(limits.max_forwarded)),
                limits,
            },
            table: Arc::new(ClaimTable::new(Some(config.node.clone()))),
            live: RwLock::new(BTreeMap::new()),
            node: config.node,
            subjects,
            gateway,
            presence,
            gateways,
            held: Mutex::new(HashMap::new()),
            joined_ms: now_ms(),
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
        let tasks = vec![
            spawn(serve_subject(inner.ctx.clone(), node_router, node_sub)),
            spawn(inner.clone().follow_registry()),
            spawn(inner.clone().watch_presence()),
            spawn(inner.clone().watch_gateways()),
            spawn(inner.clone().beat()),
        ];
        Ok(Fleet {
            inner,
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

    /// The routing the HTTP API uses in a fleet.
    pub fn routing(&self) -> Routing {
        Routing {
            directory: self.inner.table.clone(),
            forwarder: Arc::new(FleetForwarder {
                local: LocalForwarder::new(self.inner.gateway.clone()),
                inner: self.inner.clone(),
            }),
        }
    }

    /// Leaves the fleet now: stops serving, records this gateway's devices offline, and removes
    /// its heartbeat.
    pub async fn leave(&self) {
        lock(&self.tasks).clear();
        let held: Vec<(String, Epoch)> = lock(&self.inner.held)
            .drain()
            .map(|(d, h)| (d, h.epoch))
            .collect();
        for (device, epoch) in held {
            self.inner
                .record_release(&device, &self.inner.node, epoch)
                .await;
        }
        let _ = self.inner.gateways.delete(self.inner.node.as_str()).await;
        let _ = self.inner.ctx.client.flush().await;
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

fn spawn(f: impl Future<Output = ()> + Send + 'static) -> AbortOnDrop {
    AbortOnDrop(tokio::spawn(f))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

async fn connect(config: &NatsConfig) -> Result<async_nats::Client, FleetError> {
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
    options = options
        .name(format!("blerpc-gateway {}", config.node))
        .retry_on_initial_connect()
        .connection_timeout(Duration::from_secs(5));
    let client = tokio::time::timeout(
        Duration::from_secs(10),
        options.connect(config.url.as_str()),
    )
    .await
    .map_err(|_| failed("no server answered within 10 s".to_string()))?
    .map_err(|e| failed(e.to_string()))?;
    // retry_on_initial_connect returns before the first connection: wait for it.
    tokio::time::timeout(Duration::from_secs(10), client.flush())
        .await
        .map_err(|_| failed("no server answered within 10 s".to_string()))?
        .map_err(|e| failed(e.to_string()))?;
    Ok(client)
}

async fn bucket(
    js: &jetstream::Context,
    name: &str,
    replicas: usize,
    max_age: Option<Duration>,
) -> Result<kv::Store, FleetError> {
    if let Ok(store) = js.get_key_value(name).await {
        return Ok(store);
    }
    js.create_key_value(kv::Config {
        bucket: name.to_string(),
        history: 1,
        max_age: max_age.unwrap_or_default(),
        num_replicas: replicas.max(1),
        storage: jetstream::stream::StorageType::File,
        ..Default::default()
    })
    .await
    .map_err(|e| FleetError::Bucket {
        bucket: name.to_string(),
        reason: e.to_string(),
    })
}

/// Answers every request on `sub` with `router`, each on a task of its own, at most
/// [`NatsLimits::max_forwarded`] at once (beyond: 429 at once).
async fn serve_subject(ctx: Ctx, router: Router, mut sub: async_nats::Subscriber) {
    while let Some(message) = sub.next().await {
        let ctx = ctx.clone();
        let router = router.clone();
        match ctx.forwarded.clone().try_acquire_owned() {
            Ok(permit) => {
                tokio::spawn(async move {
                    serve::answer(ctx, router, message).await;
                    drop(permit);
                });
            }
            Err(_) => {
                tokio::spawn(serve::refuse(ctx, message));
            }
        }
    }
}

impl Inner {
    fn nodes(&self) -> Vec<NodeId> {
        let mut nodes = vec![self.node.clone()];
        let live = self.live.read().unwrap_or_else(|e| e.into_inner());
        nodes.extend(live.keys().filter(|n| **n != self.node).cloned());
        nodes
    }

    fn record(&self, epoch: Epoch, online: bool, since_ms: u64) -> Bytes {
        let record = PresenceRecord {
            v: RECORD_VERSION,
            node: self.node.clone(),
            epoch,
            online,
            since_ms,
            seen_ms: now_ms(),
        };
        Bytes::from(serde_json::to_vec(&record).unwrap_or_default())
    }

    /// Follows the gateway's own claims and releases: serve each device's subject while it is
    /// held, and record it in the presence bucket.
    async fn follow_registry(self: Arc<Self>) {
        loop {
            let mut changes = self.gateway.registry().presence();
            let claims = self.gateway.registry().claims();
            let holding: HashSet<String> = claims
                .iter()
                .filter_map(|c| match c {
                    PresenceMessage::Claim { device, .. } => Some(device.clone()),
                    _ => None,
                })
                .collect();
            let gone: Vec<(String, Epoch)> = lock(&self.held)
                .iter()
                .filter(|(d, _)| !holding.contains(*d))
                .map(|(d, h)| (d.clone(), h.epoch))
                .collect();
            for (device, epoch) in gone {
                self.released(&device, epoch).await;
            }
            for claim in claims {
                self.apply(claim).await;
            }
            loop {
                match changes.recv().await {
                    Ok(message) => self.apply(message).await,
                    Err(RecvError::Lagged(_)) => break,
                    Err(RecvError::Closed) => return,
                }
            }
        }
    }

    async fn apply(&self, message: PresenceMessage) {
        match message {
            PresenceMessage::Claim {
                device,
                epoch,
                since_ms,
            } => self.claimed(&device, epoch, since_ms).await,
            PresenceMessage::Release { device, epoch } => self.released(&device, epoch).await,
            _ => {}
        }
    }

    async fn claimed(&self, device: &str, epoch: Epoch, since_ms: u64) {
        if lock(&self.held)
            .get(device)
            .is_some_and(|h| h.epoch >= epoch)
        {
            return;
        }
        let Some(subject) = self.subjects.device(device) else {
            tracing::warn!(
                device,
                "a device id that cannot be a NATS subject token: not in the fleet"
            );
            return;
        };
        match self
            .ctx
            .client
            .queue_subscribe(subject.clone(), self.subjects.device_group())
            .await
        {
            Ok(sub) => {
                let router = crate::http::device_router(self.gateway.clone());
                let serving = spawn(serve_subject(self.ctx.clone(), router, sub));
                lock(&self.held).insert(
                    device.to_string(),
                    Held {
                        epoch,
                        _serving: serving,
                    },
                );
            }
            Err(e) => tracing::warn!(device, "cannot subscribe to {subject}: {e}"),
        }
        self.table.claim(&self.node, device, epoch, since_ms);
        self.record_claim(device, epoch, since_ms).await;
    }

    async fn released(&self, device: &str, epoch: Epoch) {
        {
            let mut held = lock(&self.held);
            if held.get(device).is_some_and(|h| h.epoch == epoch) {
                held.remove(device);
            }
        }
        self.table.release(&self.node, device, epoch);
        self.record_release(device, &self.node, epoch).await;
    }

    /// Writes this gateway's claim unless the bucket holds a newer one (compare-and-set, a few
    /// tries under contention).
    async fn record_claim(&self, device: &str, epoch: Epoch, since_ms: u64) {
        for _ in 0..5 {
            let value = self.record(epoch, true, since_ms);
            let written = match self.presence.entry(device).await {
                Ok(Some(e)) if e.operation == kv::Operation::Put => {
                    if let Ok(r) = serde_json::from_slice::<PresenceRecord>(&e.value)
                        && r.epoch > epoch
                    {
                        return; // The device has connected since, somewhere.
                    }
                    self.presence
                        .update(device, value, e.revision)
                        .await
                        .is_ok()
                }
                Ok(_) => self.presence.create(device, value).await.is_ok(),
                Err(e) => {
                    tracing::warn!(device, "reading the presence bucket: {e}");
                    false
                }
            };
            if written {
                return;
            }
        }
        tracing::warn!(
            device,
            "could not record the claim: the presence bucket kept changing"
        );
    }

    /// Records `node`'s connection of `device` at `epoch` as ended, if that is the claim in
    /// force.
    async fn record_release(&self, device: &str, node: &NodeId, epoch: Epoch) {
        for _ in 0..5 {
            let Ok(Some(e)) = self.presence.entry(device).await else {
                return;
            };
            let Ok(mut r) = serde_json::from_slice::<PresenceRecord>(&e.value) else {
                return;
            };
            if r.node != *node || r.epoch != epoch || !r.online {
                return;
            }
            r.online = false;
            r.seen_ms = now_ms();
            let value = Bytes::from(serde_json::to_vec(&r).unwrap_or_default());
            if self
                .presence
                .update(device, value, e.revision)
                .await
                .is_ok()
            {
                return;
            }
        }
    }

    /// Watches the presence bucket into the directory; a device this gateway holds that has
    /// connected elsewhere since is let go (its old connection closed).
    async fn watch_presence(self: Arc<Self>) {
        loop {
            match self.presence.watch_all_from_revision(1).await {
                Ok(mut watch) => {
                    while let Some(entry) = watch.next().await {
                        let Ok(entry) = entry else { break };
                        if entry.operation != kv::Operation::Put {
                            continue;
                        }
                        let Ok(r) = serde_json::from_slice::<PresenceRecord>(&entry.value) else {
                            tracing::debug!(key = entry.key, "an unreadable presence record");
                            continue;
                        };
                        if r.online {
                            self.table.claim(&r.node, &entry.key, r.epoch, r.since_ms);
                            if r.node != self.node {
                                self.moved_away(&entry.key, r.epoch);
                            }
                        } else {
                            self.table.release(&r.node, &entry.key, r.epoch);
                        }
                    }
                }
                Err(e) => tracing::warn!("watching the presence bucket: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    fn moved_away(&self, device: &str, newer: Epoch) {
        let ours = lock(&self.held).get(device).map(|h| h.epoch);
        if let Some(epoch) = ours.filter(|e| *e < newer) {
            lock(&self.held).remove(device);
            if let Some(d) = self.gateway.registry().get(device) {
                tracing::info!(device, "connected to another gateway since: closing ours");
                self.gateway.registry().disconnect(&d, epoch);
            }
        }
    }

    async fn heartbeat(&self) {
        let record = GatewayRecord {
            v: RECORD_VERSION,
            node: self.node.clone(),
            online: self.gateway.registry().online(),
            joined_ms: self.joined_ms,
            at_ms: now_ms(),
        };
        let value = Bytes::from(serde_json::to_vec(&record).unwrap_or_default());
        if let Err(e) = self.gateways.put(self.node.as_str(), value).await {
            tracing::warn!("heartbeat: {e}");
        }
    }

    /// Heartbeats, and takes offline the devices of gateways not heard from in time.
    async fn beat(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.ctx.limits.heartbeat);
        let started = Instant::now();
        loop {
            tick.tick().await;
            self.heartbeat().await;
            let timeout = self.ctx.limits.node_timeout;
            let dead: Vec<NodeId> = {
                let mut live = self.live.write().unwrap_or_else(|e| e.into_inner());
                let dead: Vec<NodeId> = live
                    .iter()
                    .filter(|(n, at)| **n != self.node && at.elapsed() > timeout)
                    .map(|(n, _)| n.clone())
                    .collect();
                for n in &dead {
                    live.remove(n);
                }
                dead
            };
            for n in &dead {
                tracing::warn!(node = %n, "gateway silent for {timeout:?}: its devices are offline");
            }
            // Claims of gateways not heard from at all (dead before we joined) too, once we
            // have listened for a node timeout.
            if started.elapsed() > timeout {
                let mut alive: HashSet<NodeId> = self
                    .live
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .keys()
                    .cloned()
                    .collect();
                alive.insert(self.node.clone());
                for (device, node, epoch) in self.table.release_nodes_but(&alive) {
                    self.record_release(&device, &node, epoch).await;
                }
            }
        }
    }

    async fn watch_gateways(self: Arc<Self>) {
        loop {
            // The last heartbeat of each gateway first, then every new one.
            match self.gateways.watch_with_history(">").await {
                Ok(mut watch) => {
                    while let Some(entry) = watch.next().await {
                        let Ok(entry) = entry else { break };
                        let node = NodeId::new(&entry.key);
                        // When the server stored it (a heartbeat from the history may be old).
                        let stored_ms =
                            u64::try_from(entry.created.unix_timestamp_nanos() / 1_000_000)
                                .unwrap_or(0);
                        let age = Duration::from_millis(now_ms().saturating_sub(stored_ms));
                        let at = Instant::now().checked_sub(age).unwrap_or_else(Instant::now);
                        let mut live = self.live.write().unwrap_or_else(|e| e.into_inner());
                        if entry.operation == kv::Operation::Put
                            && age < self.ctx.limits.node_timeout
                        {
                            live.insert(node, at);
                        } else {
                            live.remove(&node);
                        }
                    }
                }
                Err(e) => tracing::warn!("watching the gateways bucket: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// Forwards over NATS what this gateway does not hold.
#[derive(Debug)]
struct FleetForwarder {
    inner: Arc<Inner>,
    local: LocalForwarder,
}

/// The device id of a `/v1/devices/{id}…` path.
fn device_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/v1/devices/")?;
    let id = rest.split('/').next()?;
    (!id.is_empty()).then_some(id)
}

impl FleetForwarder {
    fn deadline(&self, request: &Request) -> Duration {
        let asked = request
            .headers()
            .get(crate::http::api::DEADLINE_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse::<u64>().ok());
        self.inner
            .gateway
            .deadline(asked)
            .unwrap_or(self.inner.gateway.config().default_deadline)
    }

    async fn get(&self, node: &NodeId, path: String) -> Result<Bytes, ForwardError> {
        let subject = self
            .inner
            .subjects
            .node(node.as_str())
            .ok_or_else(|| ForwardError::UnknownNode(node.clone()))?;
        let unavailable = |reason: String| ForwardError::Unavailable {
            node: node.clone(),
            reason,
        };
        let request = Request::get(path)
            .body(axum::body::Body::empty())
            .map_err(|e| unavailable(e.to_string()))?;
        let who = format!("gateway {node}");
        let target = forward::Target {
            subject,
            who: &who,
            nobody: Problem::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "node_gone",
                "Gateway gone",
                format!("gateway {node} is not in the fleet now"),
            )
            .into_response(),
            deadline: self.inner.ctx.limits.accept_timeout,
        };
        let response = forward::exchange(&self.inner.ctx, target, request).await;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| unavailable(e.to_string()))?
            .to_bytes();
        if status != axum::http::StatusCode::OK {
            return Err(unavailable(format!(
                "{status}: {}",
                String::from_utf8_lossy(&body)
            )));
        }
        Ok(body)
    }
}

impl Forwarder for FleetForwarder {
    fn nodes(&self) -> Vec<NodeId> {
        self.inner.nodes()
    }

    fn forward(&self, to: &Holder, request: Request) -> BoxFuture<'static, Response> {
        let device = device_of(request.uri().path()).map(str::to_string);
        let held_here = device.as_deref().is_some_and(|d| {
            self.inner
                .gateway
                .registry()
                .get(d)
                .is_some_and(|d| d.connection().is_some())
        });
        let remote = match to {
            Holder::Node { node, online } if *node != self.inner.node && !held_here => {
                Some((node.clone(), *online))
            }
            _ => None,
        };
        let Some((node, online)) = remote else {
            return self.local.forward(&Holder::Nobody, request);
        };
        let inner = self.inner.clone();
        let deadline = self.deadline(&request);
        Box::pin(async move {
            let not_connected =
                |id: &str| Problem::from(CallFailure::NotConnected(id.to_string())).into_response();
            let (subject, who, nobody) = match (&device, online) {
                (Some(id), true) => match inner.subjects.device(id) {
                    Some(s) => (
                        s,
                        format!("the gateway holding device {id}"),
                        not_connected(id),
                    ),
                    None => {
                        return Problem::from(CallFailure::UnknownDevice(id.clone()))
                            .into_response();
                    }
                },
                _ => match inner.subjects.node(node.as_str()) {
                    Some(s) => (
                        s,
                        format!("gateway {node}"),
                        device.as_deref().map_or_else(
                            || {
                                Problem::new(
                                    axum::http::StatusCode::SERVICE_UNAVAILABLE,
                                    "node_gone",
                                    "Gateway gone",
                                    format!("gateway {node} is not in the fleet now"),
                                )
                                .into_response()
                            },
                            not_connected,
                        ),
                    ),
                    None => return crate::routing::local::unknown_node(&node),
                },
            };
            let target = forward::Target {
                subject,
                who: &who,
                nobody,
                deadline,
            };
            forward::exchange(&inner.ctx, target, request).await
        })
    }

    fn device_page(
        &self,
        node: &NodeId,
        query: ListQuery,
    ) -> BoxFuture<'static, Result<Page<DeviceView>, ForwardError>> {
        if *node == self.inner.node {
            return self.local.device_page(&crate::routing::local::LOCAL, query);
        }
        let this = FleetForwarder {
            inner: self.inner.clone(),
            local: self.local.clone(),
        };
        let node = node.clone();
        Box::pin(async move {
            let q = serde_urlencoded(&query);
            let body = this.get(&node, format!("/internal/v1/devices?{q}")).await?;
            serde_json::from_slice(&body).map_err(|e| ForwardError::BadAnswer {
                node,
                reason: e.to_string(),
            })
        })
    }

    fn snapshot(&self, node: &NodeId) -> BoxFuture<'static, Result<Snapshot, ForwardError>> {
        if *node == self.inner.node {
            return self.local.snapshot(&crate::routing::local::LOCAL);
        }
        let this = FleetForwarder {
            inner: self.inner.clone(),
            local: self.local.clone(),
        };
        let node = node.clone();
        Box::pin(async move {
            let body = this.get(&node, "/internal/v1/snapshot".into()).await?;
            serde_json::from_slice(&body).map_err(|e| ForwardError::BadAnswer {
                node,
                reason: e.to_string(),
            })
        })
    }

    fn metrics(&self, node: &NodeId) -> BoxFuture<'static, Result<MetricSet, ForwardError>> {
        if *node == self.inner.node {
            return self.local.metrics(&crate::routing::local::LOCAL);
        }
        let this = FleetForwarder {
            inner: self.inner.clone(),
            local: self.local.clone(),
        };
        let node = node.clone();
        Box::pin(async move {
            let body = this.get(&node, "/internal/v1/metrics".into()).await?;
            MetricSet::decode(&body).map_err(|e| ForwardError::BadAnswer {
                node,
                reason: e.to_string(),
            })
        })
    }
}

/// `query` as a URL query string.
fn serde_urlencoded(query: &ListQuery) -> String {
    let mut parts = Vec::new();
    if let Some(on) = query.online {
        parts.push(format!("online={on}"));
    }
    if let Some(after) = &query.after {
        parts.push(format!("after={}", percent(after)));
    }
    if query.limit > 0 {
        parts.push(format!("limit={}", query.limit));
    }
    parts.join("&")
}

fn percent(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_ids_come_from_device_paths_only() {
        assert_eq!(device_of("/v1/devices/ab/calls/echo"), Some("ab"));
        assert_eq!(device_of("/v1/devices/ab"), Some("ab"));
        assert_eq!(device_of("/v1/devices/"), None);
        assert_eq!(device_of("/v1/schema"), None);
    }

    #[test]
    fn list_queries_travel_as_query_strings() {
        let q = ListQuery {
            online: Some(true),
            after: Some("a b&c".into()),
            limit: 5,
        };
        assert_eq!(serde_urlencoded(&q), "online=true&after=a%20b%26c&limit=5");
        assert_eq!(serde_urlencoded(&ListQuery::default()), "");
    }
}
