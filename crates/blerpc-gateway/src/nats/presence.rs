//! A gateway's part in the fleet's shared state: its claims in the presence bucket, the
//! watches that make the fleet's directory, and the heartbeats that say which gateways live.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use async_nats::jetstream::kv;
use bytes::Bytes;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;

use super::{Ctx, Subjects, lock, now_ms, serve_until};
use crate::Gateway;
use crate::routing::claims::PresenceMessage;
use crate::routing::{ClaimTable, Epoch, NodeId};

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

/// Why bytes read from a fleet bucket are not a record a gateway acts on (the record is then
/// skipped, as if absent).
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordError {
    /// Not the JSON of a record.
    #[error("not a record: {0}")]
    Json(String),
    /// Another version of the record format.
    #[error("record version {0}, not one this gateway reads")]
    Version(u32),
    /// A field out of its range, or a key that does not name the record.
    #[error("the record's {field} is not valid: {why}")]
    Bad {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        why: String,
    },
}

/// `bytes` as the JSON of a `T` of format version `expected` (its `v`).
pub(super) fn decode_json<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    expected: u32,
    version: impl Fn(&T) -> u32,
) -> Result<T, RecordError> {
    let record: T = serde_json::from_slice(bytes).map_err(|e| RecordError::Json(e.to_string()))?;
    match version(&record) {
        v if v == expected => Ok(record),
        v => Err(RecordError::Version(v)),
    }
}

/// `node` must be a gateway name (one NATS subject token).
fn check_node(node: &NodeId) -> Result<(), RecordError> {
    if super::subjects::is_token(node.as_str()) {
        Ok(())
    } else {
        Err(RecordError::Bad {
            field: "node",
            why: format!("{:?} is not a gateway name", node.as_str()),
        })
    }
}

impl PresenceRecord {
    /// The record in `bytes` (a value of the presence bucket, written by any gateway).
    pub fn decode(bytes: &[u8]) -> Result<PresenceRecord, RecordError> {
        let r: PresenceRecord = decode_json(bytes, RECORD_VERSION, |r: &PresenceRecord| r.v)?;
        check_node(&r.node)?;
        Ok(r)
    }
}

impl GatewayRecord {
    /// The record in `bytes` (a value of the liveness bucket, written by any gateway).
    pub fn decode(bytes: &[u8]) -> Result<GatewayRecord, RecordError> {
        let r: GatewayRecord = decode_json(bytes, RECORD_VERSION, |r: &GatewayRecord| r.v)?;
        check_node(&r.node)?;
        Ok(r)
    }
}

/// How many times a compare-and-set write to the presence bucket is tried.
pub(super) const CAS_TRIES: u32 = 12;

/// How many times a pending write is tried each heartbeat.
const RETRY_TRIES: u32 = 2;

/// The pause before try `attempt` (1, 2, …): 25 ms doubling, at most 500 ms.
fn cas_pause(attempt: u32) -> Duration {
    Duration::from_millis((25u64 << attempt.min(5)).min(500))
}

/// A gateway's membership, shared by its tasks and its forwarder.
#[derive(Debug)]
pub(super) struct Inner {
    pub(super) ctx: Ctx,
    pub(super) subjects: Subjects,
    pub(super) node: NodeId,
    pub(super) gateway: Gateway,
    /// What a held device's subject answers: one router for every device (a router per
    /// device cost 5 KiB each).
    pub(super) device_router: axum::Router,
    pub(super) table: Arc<ClaimTable>,
    /// Gateways heard from: when, and when each joined (a restarted gateway joins anew).
    pub(super) live: RwLock<BTreeMap<NodeId, (Instant, u64)>>,
    pub(super) presence: kv::Store,
    pub(super) gateways: kv::Store,
    /// The devices this gateway serves the subjects of.
    pub(super) held: Mutex<HashMap<String, Held>>,
    pub(super) joined_ms: u64,
    /// Changes on every (re)connection to NATS: watches restart, claims are written again.
    pub(super) reconnects: tokio::sync::watch::Receiver<u64>,
    /// Writes to the presence bucket still to be made, by device (ones that failed, and the
    /// releases of a dead gateway's devices), made by [`Inner::retry_pending`].
    pub(super) pending: Mutex<HashMap<String, Pending>>,
    /// The presence writers' queues ([`WRITERS`]; a device's writes always go to the same
    /// one, so they are made in order).
    pub(super) writers: Vec<tokio::sync::mpsc::Sender<Write>>,
}

/// Presence writers of a gateway: a device's claim and release are written in order by one of
/// them, the devices of a gateway by all of them at once (each write is two JetStream round
/// trips; one writer for a gateway holding 15,000 devices took tens of seconds to record them).
pub(super) const WRITERS: usize = 32;

/// Heartbeats between two scans of the fleet's table for claims of gateways not alive, while
/// the gateways alive stay the same (a change scans at once).
const RESCAN_BEATS: u32 = 10;

/// Writes each writer may have queued before the gateway's follower of its registry waits.
const WRITER_QUEUE: usize = 1024;

/// A write for a device, queued for its writer.
pub(super) type Write = (String, Pending);

/// The writers' queues and what they read from, for [`Inner::writer`] tasks.
pub(super) fn writer_queues() -> (
    Vec<tokio::sync::mpsc::Sender<Write>>,
    Vec<tokio::sync::mpsc::Receiver<Write>>,
) {
    (0..WRITERS)
        .map(|_| tokio::sync::mpsc::channel(WRITER_QUEUE))
        .unzip()
}

/// A write to the presence bucket still to be made.
#[derive(Debug)]
pub(super) enum Pending {
    /// This gateway's claim.
    Claim {
        /// The connection's epoch.
        epoch: Epoch,
        /// When it was made.
        since_ms: u64,
    },
    /// The end of `node`'s connection made at `epoch`.
    Release {
        /// The node.
        node: NodeId,
        /// The connection's epoch.
        epoch: Epoch,
    },
}

/// A device whose subject this gateway serves.
#[derive(Debug)]
pub(super) struct Held {
    pub(super) epoch: Epoch,
    /// Dropped, it stops the subject's server (which answers what had already arrived).
    pub(super) _serving: tokio::sync::oneshot::Sender<()>,
}

impl Inner {
    /// Whether gateway `node` is alive and still the one that joined at `joined_ms`.
    pub(super) fn alive_since(&self, node: &str, joined_ms: u64) -> bool {
        if node == self.node.as_str() {
            return joined_ms == self.joined_ms;
        }
        let live = self.live.read().unwrap_or_else(|e| e.into_inner());
        live.get(&NodeId::new(node))
            .is_some_and(|(_, joined)| *joined == joined_ms)
    }

    pub(super) fn nodes(&self) -> Vec<NodeId> {
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
    pub(super) async fn follow_registry(self: Arc<Self>) {
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
                let router = self.device_router.clone();
                let (serving, stop) = tokio::sync::oneshot::channel::<()>();
                tokio::spawn(serve_until(
                    self.ctx.clone(),
                    self.gateway.clone(),
                    router,
                    sub,
                    async move {
                        let _ = stop.await;
                    },
                ));
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
        self.queue_write(device, Pending::Claim { epoch, since_ms })
            .await;
    }

    async fn released(&self, device: &str, epoch: Epoch) {
        {
            let mut held = lock(&self.held);
            if held.get(device).is_some_and(|h| h.epoch == epoch) {
                held.remove(device);
            }
        }
        self.table.release(&self.node, device, epoch);
        let node = self.node.clone();
        self.queue_write(device, Pending::Release { node, epoch })
            .await;
    }

    /// Hands a write for `device` to its writer.
    async fn queue_write(&self, device: &str, op: Pending) {
        use std::hash::{Hash as _, Hasher as _};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        device.hash(&mut hasher);
        let Some(writer) = self
            .writers
            .get(hasher.finish() as usize % self.writers.len().max(1))
        else {
            return;
        };
        if let Err(e) = writer.send((device.to_string(), op)).await {
            // The writers have ended (the fleet is leaving): kept for the retries.
            let (device, op) = e.0;
            lock(&self.pending).insert(device, op);
        }
    }

    /// One writer: makes the writes queued for it, one after another.
    pub(super) async fn writer(self: Arc<Self>, mut queue: tokio::sync::mpsc::Receiver<Write>) {
        while let Some((device, op)) = queue.recv().await {
            match op {
                Pending::Claim { epoch, since_ms } => {
                    self.record_claim(&device, epoch, since_ms).await;
                }
                Pending::Release { node, epoch } => {
                    self.record_release(&device, &node, epoch).await;
                }
            }
        }
    }

    /// Writes this gateway's claim unless the bucket holds a newer one, compare-and-set. A
    /// failed write is tried again after a pause (up to [`CAS_TRIES`] times, about 4 s in all):
    /// another writer won the race, a replica answered the read behind the leader, or NATS is
    /// away for a moment (a cluster electing a new leader). What still fails waits in
    /// [`Inner::pending`] and is tried again every heartbeat.
    async fn record_claim(&self, device: &str, epoch: Epoch, since_ms: u64) {
        if !self.try_claim(device, epoch, since_ms, CAS_TRIES).await {
            lock(&self.pending).insert(device.to_string(), Pending::Claim { epoch, since_ms });
        }
    }

    /// Records `node`'s connection of `device` at `epoch` as ended, if that is the claim in
    /// force (compare-and-set, tried and kept as [`Inner::record_claim`] is).
    pub(super) async fn record_release(&self, device: &str, node: &NodeId, epoch: Epoch) {
        if !self.try_release(device, node, epoch, CAS_TRIES).await {
            let op = Pending::Release {
                node: node.clone(),
                epoch,
            };
            lock(&self.pending).insert(device.to_string(), op);
        }
    }

    /// Every heartbeat, tries the writes that failed before (a short round each); a newer write
    /// for the same device replaces an older one.
    pub(super) async fn retry_pending(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.ctx.limits.heartbeat);
        loop {
            tick.tick().await;
            self.retry_pending_once().await;
        }
    }

    async fn retry_pending_once(&self) {
        let pending: Vec<(String, Pending)> = lock(&self.pending).drain().collect();
        for (device, op) in pending {
            let done = match &op {
                Pending::Claim { epoch, since_ms } => {
                    self.try_claim(&device, *epoch, *since_ms, RETRY_TRIES)
                        .await
                }
                Pending::Release { node, epoch } => {
                    self.try_release(&device, node, *epoch, RETRY_TRIES).await
                }
            };
            if !done {
                lock(&self.pending).entry(device).or_insert(op);
            }
        }
    }

    /// Compare-and-set tries of a claim; `true` once written, or once a newer claim is found.
    async fn try_claim(&self, device: &str, epoch: Epoch, since_ms: u64, tries: u32) -> bool {
        let mut last = String::new();
        for attempt in 0..tries {
            if attempt > 0 {
                tokio::time::sleep(cas_pause(attempt)).await;
            }
            let value = self.record(epoch, true, since_ms);
            let result = match self.presence.entry(device).await {
                Ok(Some(e)) if e.operation == kv::Operation::Put => {
                    if let Ok(r) = PresenceRecord::decode(&e.value)
                        && r.epoch > epoch
                    {
                        return true; // The device has connected since, somewhere.
                    }
                    self.presence
                        .update(device, value, e.revision)
                        .await
                        .map(drop)
                        .map_err(|e| e.to_string())
                }
                Ok(_) => self
                    .presence
                    .create(device, value)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string()),
                Err(e) => Err(format!("reading the record: {e}")),
            };
            match result {
                Ok(()) => return true,
                Err(e) => last = e,
            }
        }
        tracing::warn!(
            device,
            "the claim is not recorded yet ({tries} tries): {last}"
        );
        false
    }

    /// Compare-and-set tries of a release; `true` once written, or once it no longer applies.
    async fn try_release(&self, device: &str, node: &NodeId, epoch: Epoch, tries: u32) -> bool {
        let mut last = String::new();
        for attempt in 0..tries {
            if attempt > 0 {
                tokio::time::sleep(cas_pause(attempt)).await;
            }
            let e = match self.presence.entry(device).await {
                Ok(Some(e)) => e,
                Ok(None) => return true,
                Err(e) => {
                    last = format!("reading the record: {e}");
                    continue;
                }
            };
            let Ok(mut r) = PresenceRecord::decode(&e.value) else {
                return true;
            };
            if r.node != *node || r.epoch != epoch || !r.online {
                return true;
            }
            r.online = false;
            r.seen_ms = now_ms();
            let value = Bytes::from(serde_json::to_vec(&r).unwrap_or_default());
            match self.presence.update(device, value, e.revision).await {
                Ok(_) => return true,
                Err(e) => last = e.to_string(),
            }
        }
        tracing::warn!(
            device,
            "the release is not recorded yet ({tries} tries): {last}"
        );
        false
    }

    /// Watches the presence bucket into the directory; a device this gateway holds that has
    /// connected elsewhere since is let go (its old connection closed).
    pub(super) async fn watch_presence(self: Arc<Self>) {
        loop {
            let mut reconnects = self.reconnects.clone();
            reconnects.mark_unchanged();
            match self.presence.watch_all_from_revision(1).await {
                Ok(mut watch) => {
                    loop {
                        // After a reconnect, the whole bucket again: what changed while this
                        // gateway was away is in it.
                        let entry = tokio::select! {
                            e = watch.next() => e,
                            _ = reconnects.changed() => break,
                        };
                        let Some(Ok(entry)) = entry else { break };
                        if entry.operation != kv::Operation::Put {
                            continue;
                        }
                        let Ok(r) = PresenceRecord::decode(&entry.value) else {
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

    /// After every reconnection to NATS, writes this gateway's claims again (one written while
    /// it was away failed; compare-and-set keeps any newer claim).
    pub(super) async fn reassert(self: Arc<Self>) {
        let mut reconnects = self.reconnects.clone();
        reconnects.mark_unchanged();
        while reconnects.changed().await.is_ok() {
            let claims = self.gateway.registry().claims();
            tracing::info!(
                "reconnected to NATS: recording {} claims again",
                claims.len()
            );
            for claim in claims {
                if let PresenceMessage::Claim {
                    device,
                    epoch,
                    since_ms,
                } = claim
                {
                    self.record_claim(&device, epoch, since_ms).await;
                }
            }
        }
    }

    pub(super) async fn heartbeat(&self) {
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
    pub(super) async fn beat(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.ctx.limits.heartbeat);
        let started = Instant::now();
        // The gateways alive at the last scan of the table, and the heartbeats since.
        let mut scanned: Option<(HashSet<NodeId>, u32)> = None;
        loop {
            tick.tick().await;
            self.heartbeat().await;
            let timeout = self.ctx.limits.node_timeout;
            let dead: Vec<NodeId> = {
                let mut live = self.live.write().unwrap_or_else(|e| e.into_inner());
                let dead: Vec<NodeId> = live
                    .iter()
                    .filter(|(n, (at, _))| **n != self.node && at.elapsed() > timeout)
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
                // The table is scanned (every device of the fleet) when the gateways alive
                // change, and at least every RESCAN_BEATS heartbeats for claims of gateways
                // never heard from: not at every heartbeat of every gateway process.
                let due = match &mut scanned {
                    Some((seen, beats)) if *seen == alive && *beats < RESCAN_BEATS => {
                        *beats += 1;
                        false
                    }
                    _ => true,
                };
                if due {
                    let released = self.table.release_nodes_but(&alive);
                    // The bucket is corrected off the heartbeat's path (a dead gateway may have
                    // held many devices), by the task that retries pending writes, and by one
                    // gateway only (the first alive by name), not by each of them again: a
                    // record left online at a dead gateway is released by every gateway's
                    // table anyway.
                    if alive.iter().min() == Some(&self.node) {
                        let mut pending = lock(&self.pending);
                        for (device, node, epoch) in released {
                            pending
                                .entry(device)
                                .or_insert(Pending::Release { node, epoch });
                        }
                    }
                    scanned = Some((alive, 0));
                }
            }
        }
    }

    pub(super) async fn watch_gateways(self: Arc<Self>) {
        loop {
            // The last heartbeat of each gateway first, then every new one.
            let mut reconnects = self.reconnects.clone();
            reconnects.mark_unchanged();
            match self.gateways.watch_with_history(">").await {
                Ok(mut watch) => {
                    loop {
                        let entry = tokio::select! {
                            e = watch.next() => e,
                            _ = reconnects.changed() => break,
                        };
                        let Some(Ok(entry)) = entry else { break };
                        let node = NodeId::new(&entry.key);
                        // When the server stored it (a heartbeat from the history may be old).
                        let stored_ms =
                            u64::try_from(entry.created.unix_timestamp_nanos() / 1_000_000)
                                .unwrap_or(0);
                        let age = Duration::from_millis(now_ms().saturating_sub(stored_ms));
                        let at = Instant::now().checked_sub(age).unwrap_or_else(Instant::now);
                        let joined = GatewayRecord::decode(&entry.value).map_or(0, |r| r.joined_ms);
                        let mut live = self.live.write().unwrap_or_else(|e| e.into_inner());
                        if entry.operation == kv::Operation::Put
                            && age < self.ctx.limits.node_timeout
                        {
                            live.insert(node, (at, joined));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presence_records_of_this_version_with_a_gateway_name_decode() {
        let r = PresenceRecord::decode(
            br#"{"v":1,"node":"gw-b","epoch":7,"online":true,"since_ms":5,"seen_ms":6}"#,
        )
        .unwrap();
        assert_eq!(
            (r.node.as_str(), r.epoch, r.online),
            ("gw-b", Epoch(7), true)
        );
        assert_eq!(
            PresenceRecord::decode(
                br#"{"v":2,"node":"gw-b","epoch":7,"online":true,"since_ms":5,"seen_ms":6}"#
            ),
            Err(RecordError::Version(2))
        );
        assert!(matches!(
            PresenceRecord::decode(
                br#"{"v":1,"node":"gw b","epoch":7,"online":true,"since_ms":5,"seen_ms":6}"#
            ),
            Err(RecordError::Bad { field: "node", .. })
        ));
        assert!(matches!(
            PresenceRecord::decode(b"\xff{"),
            Err(RecordError::Json(_))
        ));
    }

    #[test]
    fn gateway_records_decode_the_same_way() {
        let r =
            GatewayRecord::decode(br#"{"v":1,"node":"gw-a","online":3,"joined_ms":10,"at_ms":11}"#)
                .unwrap();
        assert_eq!((r.online, r.joined_ms), (3, 10));
        assert!(matches!(
            GatewayRecord::decode(br#"{"v":1,"node":"","online":3,"joined_ms":10,"at_ms":11}"#),
            Err(RecordError::Bad { field: "node", .. })
        ));
        assert!(matches!(
            GatewayRecord::decode(br#"{"v":1,"node":"a","online":-1,"joined_ms":1,"at_ms":1}"#),
            Err(RecordError::Json(_))
        ));
    }
}
