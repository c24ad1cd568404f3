//! Durable calls: a call for a device that may be offline now, stored in JetStream and run when
//! the device is next connected to any gateway of the fleet, with honest states.
//!
//! ```text
//!  queued ──▶ sent ──▶ succeeded          (the device's answer arrived)
//!    │          ├────▶ failed             (the device, or the gateway's checks, refused it)
//!    │          └────▶ outcome_unknown    (the device or its gateway was lost after `sent`;
//!    │                                     back to `queued` only if the caller said idempotent)
//!    ├──▶ expired                         (its TTL passed while queued)
//!    └──▶ cancelled                       (DELETE while queued)
//! ```
//!
//! Each call is one record in the KV bucket `{prefix}_calls` under `{device}.{call}`; every
//! change is a compare-and-set on the record's revision, so two gateways never both send a call,
//! and each state comes with its time, its reason and the gateway that made it. `sent` is
//! written before the call goes to the device and `succeeded` only after its answer, so a
//! response never precedes its delivery record. Every gateway watches the bucket: the one that
//! holds a device runs its queued calls in the order they were made, one at a time; any gateway
//! expires queued calls past their TTL and settles calls `sent` by a gateway that has since died
//! or restarted (a call is never stuck in `sent`). Each change is also published on
//! `{prefix}.v1.durable.{device}.{call}` (the record, JSON) for backends that follow them.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::kv;
use bytes::Bytes;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use super::presence::{Inner, RecordError, decode_json};
use super::{lock, now_ms};
use crate::calls::CallFailure;
use crate::http::Problem;

/// The version of call records.
pub const CALL_VERSION: u32 = 1;

/// The longest TTL a durable call may ask for.
pub const MAX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// How many times an idempotent call is sent at most.
pub const MAX_ATTEMPTS: u32 = 5;

/// A durable call's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallState {
    /// Stored, waiting for the device.
    Queued,
    /// Sent to the device; no answer yet.
    Sent,
    /// The device answered.
    Succeeded,
    /// The device or the gateway's checks refused it.
    Failed,
    /// Its TTL passed while it was queued.
    Expired,
    /// Cancelled while queued.
    Cancelled,
    /// The device or its gateway was lost after it was sent: it may or may not have run.
    OutcomeUnknown,
}

impl CallState {
    /// Whether the call has ended.
    pub fn is_final(self) -> bool {
        !matches!(self, CallState::Queued | CallState::Sent)
    }
}

/// One change of state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// The state entered.
    pub state: CallState,
    /// When (ms since the Unix epoch).
    pub at_ms: u64,
    /// Why, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The gateway that made the change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// A durable call's record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// [`CALL_VERSION`].
    pub v: u32,
    /// The call's id.
    pub id: String,
    /// The device.
    pub device: String,
    /// The command.
    pub command: String,
    /// The request (JSON).
    pub request: serde_json::Value,
    /// Whether the caller allows sending it again after an unknown outcome.
    pub idempotent: bool,
    /// When it was made (ms).
    pub created_ms: u64,
    /// When it expires if still queued (ms).
    pub expires_ms: u64,
    /// Its state.
    pub state: CallState,
    /// Every change, oldest first.
    pub history: Vec<Transition>,
    /// Times it was sent.
    pub attempts: u32,
    /// The device's answer (JSON), once `succeeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<serde_json::Value>,
    /// The problem, once `failed` or `outcome_unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<serde_json::Value>,
    /// While `sent`: the gateway that sent it and when that gateway joined (a restarted
    /// gateway has another).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_by: Option<(String, u64)>,
}

impl CallRecord {
    /// The record in `bytes`, the value of `key` in the calls bucket (written by any gateway,
    /// or by anyone who can write to the bucket): it must name itself (`{device}.{id}` is
    /// `key`), and a queued call has sends left, so sending it never counts past
    /// [`MAX_ATTEMPTS`].
    pub fn decode(key: &str, bytes: &[u8]) -> Result<CallRecord, RecordError> {
        let r: CallRecord = decode_json(bytes, CALL_VERSION, |r: &CallRecord| r.v)?;
        let bad = |field, why: String| Err(RecordError::Bad { field, why });
        if !is_id(&r.device) {
            return bad("device", format!("{:?} is not a device id", r.device));
        }
        if !is_id(&r.id) {
            return bad("id", format!("{:?} is not a call id", r.id));
        }
        if r.key() != key {
            return bad(
                "id",
                format!("the record of {} is stored under {key}", r.key()),
            );
        }
        let most = if r.state == CallState::Queued {
            MAX_ATTEMPTS - 1
        } else {
            MAX_ATTEMPTS
        };
        if r.attempts > most {
            return bad(
                "attempts",
                format!("{} sends, more than a {:?} call has", r.attempts, r.state),
            );
        }
        Ok(r)
    }

    /// Its key in the calls bucket: `{device}.{id}`.
    pub fn key(&self) -> String {
        format!("{}.{}", self.device, self.id)
    }

    fn enter(&mut self, state: CallState, reason: Option<String>, by: &str) {
        self.state = state;
        self.history.push(Transition {
            state,
            at_ms: now_ms(),
            reason,
            by: Some(by.to_string()),
        });
    }
}

/// Why a durable call could not be made, read or changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DurableError {
    /// The request is not valid (400).
    #[error("{0}")]
    Bad(String),
    /// No such call (404).
    #[error("no durable call {0}")]
    NotFound(String),
    /// The call is past the state the change needs (409).
    #[error("durable call {id} is {state:?}: only a queued call can be cancelled")]
    Conflict {
        /// The call.
        id: String,
        /// Its state.
        state: CallState,
    },
    /// The store failed (503).
    #[error("the durable call store: {0}")]
    Store(String),
    /// The device has as many calls queued or sent as it may (429).
    #[error(
        "device {device} has {limit} durable calls not yet ended, the most a device may have: \
         wait for some to end or cancel some"
    )]
    Full {
        /// The device.
        device: String,
        /// The limit (`NatsLimits::max_open_durable_per_device`).
        limit: usize,
    },
}

impl DurableError {
    /// The problem to answer.
    pub fn problem(&self) -> Problem {
        use axum::http::StatusCode;
        let (status, kind, title) = match self {
            DurableError::Bad(_) => (StatusCode::BAD_REQUEST, "bad_request", "Bad request"),
            DurableError::NotFound(_) => (StatusCode::NOT_FOUND, "unknown_call", "Unknown call"),
            DurableError::Conflict { .. } => {
                (StatusCode::CONFLICT, "call_not_queued", "Call not queued")
            }
            DurableError::Store(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                "Durable call store unavailable",
            ),
            DurableError::Full { .. } => (
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_durable_calls",
                "Too many durable calls",
            ),
        };
        Problem::new(status, kind, title, self.to_string())
    }
}

/// The durable calls of a fleet member (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct Durable {
    inner: Arc<Inner>,
    store: kv::Store,
    /// The calls not yet ended, by key, as the watch of the bucket has them.
    open: Arc<Mutex<BTreeMap<String, CallRecord>>>,
    /// Devices whose calls this gateway is running now.
    running: Arc<Mutex<HashSet<String>>>,
}

fn is_id(text: &str) -> bool {
    super::subjects::is_token(text)
}

impl Durable {
    pub(super) fn new(inner: Arc<Inner>, store: kv::Store) -> Durable {
        Durable {
            inner,
            store,
            open: Arc::new(Mutex::new(BTreeMap::new())),
            running: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    /// Stores a call of `command` with `request` (JSON) for `device`, queued for `ttl`.
    pub async fn submit(
        &self,
        device: &str,
        command: &str,
        request: &str,
        ttl: Duration,
        idempotent: bool,
    ) -> Result<CallRecord, DurableError> {
        if !is_id(device) {
            return Err(DurableError::Bad(format!("{device:?} is not a device id")));
        }
        if ttl.is_zero() || ttl > MAX_TTL {
            return Err(DurableError::Bad(format!(
                "a durable call's ttl must be 1 s to {} s",
                MAX_TTL.as_secs()
            )));
        }
        let gateway = &self.inner.gateway;
        let method = gateway
            .method(command, blerpc_schema::CallKind::Unary)
            .map_err(|f| DurableError::Bad(f.to_string()))?;
        method
            .encode_request(request)
            .map_err(|e| DurableError::Bad(e.to_string()))?;
        let json: serde_json::Value =
            serde_json::from_str(request).map_err(|e| DurableError::Bad(e.to_string()))?;
        let limit = self.inner.ctx.limits.max_open_durable_per_device;
        let open = lock(&self.open)
            .values()
            .filter(|r| r.device == device)
            .count();
        if open >= limit {
            return Err(DurableError::Full {
                device: device.to_string(),
                limit,
            });
        }
        let id = {
            let mut b = [0u8; 12];
            rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut b);
            hex::encode(b)
        };
        let now = now_ms();
        let mut record = CallRecord {
            v: CALL_VERSION,
            id,
            device: device.to_string(),
            command: method.name().to_string(),
            request: json,
            idempotent,
            created_ms: now,
            expires_ms: now.saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)),
            state: CallState::Queued,
            history: Vec::new(),
            attempts: 0,
            response: None,
            error: None,
            sent_by: None,
        };
        record.enter(CallState::Queued, None, self.inner.node.as_str());
        self.store
            .create(record.key(), encode(&record))
            .await
            .map_err(|e| DurableError::Store(e.to_string()))?;
        self.publish(&record).await;
        Ok(record)
    }

    /// The record of call `id` of `device`.
    pub async fn get(&self, device: &str, id: &str) -> Result<CallRecord, DurableError> {
        self.read(device, id).await.map(|(r, _)| r)
    }

    async fn read(&self, device: &str, id: &str) -> Result<(CallRecord, u64), DurableError> {
        if !is_id(device) || !is_id(id) {
            return Err(DurableError::NotFound(id.to_string()));
        }
        let key = format!("{device}.{id}");
        match self.store.entry(key.as_str()).await {
            Ok(Some(e)) if e.operation == kv::Operation::Put => CallRecord::decode(&key, &e.value)
                .map(|r| (r, e.revision))
                .map_err(|e| DurableError::Store(format!("an unreadable record: {e}"))),
            Ok(_) => Err(DurableError::NotFound(id.to_string())),
            Err(e) => Err(DurableError::Store(e.to_string())),
        }
    }

    /// The records of `device`'s calls, oldest first (at most 1,000).
    pub async fn list(&self, device: &str) -> Result<Vec<CallRecord>, DurableError> {
        if !is_id(device) {
            return Err(DurableError::Bad(format!("{device:?} is not a device id")));
        }
        // The stream names the device's keys (one subject each); each record is then read by
        // its key (a direct get). No consumer is made: listing often must not pile them up.
        let mut subjects = self
            .store
            .stream
            .info_with_subjects(format!("{}{device}.*", self.store.prefix))
            .await
            .map_err(|e| DurableError::Store(e.to_string()))?;
        let mut keys = Vec::new();
        while let Some(subject) = subjects.next().await {
            let (subject, _) = subject.map_err(|e| DurableError::Store(e.to_string()))?;
            if let Some(key) = subject.strip_prefix(self.store.prefix.as_str()) {
                keys.push(key.to_string());
            }
            if keys.len() >= 1000 {
                break;
            }
        }
        let mut records = Vec::with_capacity(keys.len());
        for key in keys {
            let entry = self
                .store
                .entry(&key)
                .await
                .map_err(|e| DurableError::Store(e.to_string()))?;
            if let Some(entry) = entry
                && entry.operation == kv::Operation::Put
                && let Ok(r) = CallRecord::decode(&entry.key, &entry.value)
            {
                records.push(r);
            }
        }
        records.sort_by_key(|r| r.created_ms);
        Ok(records)
    }

    /// Cancels call `id` of `device` if it is still queued.
    pub async fn cancel(&self, device: &str, id: &str) -> Result<CallRecord, DurableError> {
        for _ in 0..super::presence::CAS_TRIES {
            let (mut record, revision) = self.read(device, id).await?;
            if record.state != CallState::Queued {
                return Err(DurableError::Conflict {
                    id: id.to_string(),
                    state: record.state,
                });
            }
            record.enter(
                CallState::Cancelled,
                Some("cancelled by the caller".into()),
                self.inner.node.as_str(),
            );
            if self.write(&record, revision).await.is_some() {
                return Ok(record);
            }
        }
        Err(DurableError::Store("the record kept changing".to_string()))
    }

    /// Writes `record` over `revision`; publishes it if written. The new revision, or `None`
    /// if another write came first.
    async fn write(&self, record: &CallRecord, revision: u64) -> Option<u64> {
        match self
            .store
            .update(record.key(), encode(record), revision)
            .await
        {
            Ok(written) => {
                self.publish(record).await;
                Some(written)
            }
            Err(e) => {
                tracing::debug!(call = record.id, "durable call write lost a race: {e}");
                None
            }
        }
    }

    /// Every change of `device`'s calls from now on, as the records published on NATS.
    pub async fn follow(&self, device: &str) -> Result<async_nats::Subscriber, DurableError> {
        if !is_id(device) {
            return Err(DurableError::Bad(format!("{device:?} is not a device id")));
        }
        let subject = format!("{}.{device}.*", self.inner.subjects.durable_events());
        self.inner
            .ctx
            .client
            .subscribe(subject)
            .await
            .map_err(|e| DurableError::Store(e.to_string()))
    }

    async fn publish(&self, record: &CallRecord) {
        let subject = format!(
            "{}.{}.{}",
            self.inner.subjects.durable_events(),
            record.device,
            record.id
        );
        let _ = self.inner.ctx.client.publish(subject, encode(record)).await;
    }

    /// Watches the bucket: keeps the open calls, and runs the queued ones of devices held here.
    pub(super) async fn watch(self) {
        loop {
            match self.store.watch_all_from_revision(1).await {
                Ok(mut watch) => {
                    while let Some(Ok(entry)) = watch.next().await {
                        if entry.operation != kv::Operation::Put {
                            lock(&self.open).remove(&entry.key);
                            continue;
                        }
                        let Ok(record) = CallRecord::decode(&entry.key, &entry.value) else {
                            continue;
                        };
                        let device = record.device.clone();
                        {
                            let mut open = lock(&self.open);
                            if record.state.is_final() {
                                open.remove(&entry.key);
                            } else {
                                open.insert(entry.key.clone(), record);
                            }
                        }
                        self.kick(&device);
                    }
                }
                Err(e) => tracing::warn!("watching the durable calls: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Runs `device`'s queued calls here if this gateway holds it and is not running them
    /// already.
    pub(super) fn kick(&self, device: &str) {
        let held = self
            .inner
            .gateway
            .registry()
            .get(device)
            .is_some_and(|d| d.connection().is_some());
        if !held {
            return;
        }
        if !lock(&self.running).insert(device.to_string()) {
            return;
        }
        let this = self.clone();
        let device = device.to_string();
        tokio::spawn(async move {
            this.run_device(&device).await;
            lock(&this.running).remove(&device);
            // A call queued while the last one ran.
            if this.next_queued(&device).is_some() {
                this.kick(&device);
            }
        });
    }

    fn next_queued(&self, device: &str) -> Option<CallRecord> {
        let now = now_ms();
        lock(&self.open)
            .range(format!("{device}.")..)
            .take_while(|(k, _)| k.starts_with(&format!("{device}.")))
            .map(|(_, r)| r)
            .filter(|r| r.state == CallState::Queued && r.expires_ms > now)
            .min_by_key(|r| r.created_ms)
            .cloned()
    }

    /// Runs `device`'s queued calls, oldest first, while the device is held here.
    async fn run_device(&self, device: &str) {
        while let Some(queued) = self.next_queued(device) {
            if !self.run_one(&queued).await {
                return;
            }
        }
    }

    /// Sends one queued call: `sent` first, then the device's answer. `false` if the device
    /// is gone (stop running its calls here).
    async fn run_one(&self, queued: &CallRecord) -> bool {
        let node = self.inner.node.as_str();
        // Never `sent` to a device not connected here (a call its loss just queued again
        // waits for the device's next claim, here or elsewhere).
        if self.inner.gateway.route(&queued.device).is_err() {
            return false;
        }
        let Ok((mut record, revision)) = self.read(&queued.device, &queued.id).await else {
            lock(&self.open).remove(&queued.key());
            return true;
        };
        if record.state != CallState::Queued {
            lock(&self.open).remove(&queued.key());
            return true;
        }
        record.attempts += 1;
        record.sent_by = Some((node.to_string(), self.inner.joined_ms));
        record.enter(CallState::Sent, None, node);
        let Some(sent_revision) = self.write(&record, revision).await else {
            return true; // Another gateway took it, or it changed: the watch has it.
        };
        lock(&self.open).insert(record.key(), record.clone());
        let request = record.request.to_string();
        let answer = self
            .inner
            .gateway
            .call_json(&record.device, &record.command, &request, None)
            .await;
        let gone = matches!(
            answer,
            Err(CallFailure::NotConnected(_) | CallFailure::Disconnected(_))
        );
        record.sent_by = None;
        match answer {
            Ok(json) => {
                record.response = serde_json::from_str(&json).ok();
                record.enter(CallState::Succeeded, None, node);
            }
            Err(f) => {
                let may_have_run = matches!(
                    f,
                    CallFailure::Disconnected(_)
                        | CallFailure::Deadline {
                            where_: "in flight",
                            ..
                        }
                );
                record.error = Some(Problem::from(f).json());
                if may_have_run {
                    self.unknown(&mut record, "the device was lost after the call was sent");
                } else {
                    let reason = record
                        .error
                        .as_ref()
                        .and_then(|e| e["detail"].as_str())
                        .map(str::to_string);
                    if gone {
                        // Not sent after all (the device left before): queued again.
                        record.attempts -= 1;
                        record.enter(CallState::Queued, reason, node);
                    } else {
                        record.enter(CallState::Failed, reason, node);
                    }
                }
            }
        }
        if self.write(&record, sent_revision).await.is_none() {
            tracing::warn!(
                call = record.id,
                "the durable call's outcome could not be recorded"
            );
        }
        !gone
    }

    /// `outcome_unknown`, or queued again if the call is idempotent and has attempts left.
    fn unknown(&self, record: &mut CallRecord, why: &str) {
        let node = self.inner.node.as_str().to_string();
        record.enter(CallState::OutcomeUnknown, Some(why.to_string()), &node);
        if record.idempotent && record.attempts < MAX_ATTEMPTS {
            record.enter(
                CallState::Queued,
                Some(format!(
                    "idempotent: sending again (attempt {} of {MAX_ATTEMPTS})",
                    record.attempts + 1
                )),
                &node,
            );
        }
    }

    /// Runs the queued calls of each device as it connects here.
    pub(super) async fn follow_connects(self) {
        use tokio::sync::broadcast::error::RecvError;
        let mut changes = self.inner.gateway.registry().presence();
        loop {
            match changes.recv().await {
                Ok(crate::routing::claims::PresenceMessage::Claim { device, .. }) => {
                    self.kick(&device);
                }
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => {
                    let devices: Vec<String> = lock(&self.open)
                        .values()
                        .map(|r| r.device.clone())
                        .collect();
                    for d in devices {
                        self.kick(&d);
                    }
                }
                Err(RecvError::Closed) => return,
            }
        }
    }

    /// Every heartbeat: expires queued calls past their TTL, and settles calls sent by a
    /// gateway that has died or restarted since.
    pub(super) async fn sweep(self) {
        let mut tick = tokio::time::interval(self.inner.ctx.limits.heartbeat);
        // Until the other gateways' heartbeats have been heard, none looks alive.
        tokio::time::sleep(self.inner.ctx.limits.node_timeout).await;
        loop {
            tick.tick().await;
            let now = now_ms();
            let open: Vec<CallRecord> = lock(&self.open).values().cloned().collect();
            for r in open {
                let lost = match &r.sent_by {
                    Some((node, joined)) if r.state == CallState::Sent => {
                        !self.inner.alive_since(node, *joined)
                    }
                    _ => false,
                };
                let expired = r.state == CallState::Queued && r.expires_ms <= now;
                if expired || lost {
                    self.settle(&r, expired).await;
                }
            }
        }
    }

    async fn settle(&self, seen: &CallRecord, expire: bool) {
        let Ok((mut record, revision)) = self.read(&seen.device, &seen.id).await else {
            return;
        };
        if record.state != seen.state {
            return;
        }
        let node = self.inner.node.as_str();
        if expire {
            record.enter(
                CallState::Expired,
                Some("its ttl passed while it was queued".into()),
                node,
            );
        } else {
            let gone = record.sent_by.take().map(|(n, _)| n).unwrap_or_default();
            self.unknown(
                &mut record,
                &format!("gateway {gone} was lost (or restarted) after it sent the call"),
            );
        }
        self.write(&record, revision).await;
    }
}

fn encode(record: &CallRecord) -> Bytes {
    Bytes::from(serde_json::to_vec(record).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, state: &str, attempts: u32) -> Vec<u8> {
        format!(
            r#"{{"v":1,"id":"{id}","device":"ab","command":"echo","request":{{"message":"hi"}},"idempotent":true,"created_ms":1,"expires_ms":2,"state":"{state}","history":[{{"state":"queued","at_ms":1,"by":"gw-a"}}],"attempts":{attempts}}}"#
        )
        .into_bytes()
    }

    #[test]
    fn a_call_record_decodes_under_its_own_key() {
        let r = CallRecord::decode("ab.c1", &record("c1", "queued", 0)).unwrap();
        assert_eq!(
            (r.state, r.attempts, r.key()),
            (CallState::Queued, 0, "ab.c1".into())
        );
        // Stored under another key, it would be run and never found again.
        assert!(matches!(
            CallRecord::decode("ab.c2", &record("c1", "queued", 0)),
            Err(RecordError::Bad { field: "id", .. })
        ));
        assert!(matches!(
            CallRecord::decode("ab.c 1", &record("c 1", "queued", 0)),
            Err(RecordError::Bad { field: "id", .. })
        ));
        assert!(matches!(
            CallRecord::decode("ab.c1", b"{\"v\":1}"),
            Err(RecordError::Json(_))
        ));
    }

    #[test]
    fn a_record_never_has_more_sends_than_allowed() {
        // A queued call is sent once more: 4 is the most it may have had.
        assert!(CallRecord::decode("ab.c1", &record("c1", "queued", 4)).is_ok());
        for (state, attempts) in [("queued", 5), ("queued", u32::MAX), ("sent", 6)] {
            assert!(
                matches!(
                    CallRecord::decode("ab.c1", &record("c1", state, attempts)),
                    Err(RecordError::Bad {
                        field: "attempts",
                        ..
                    })
                ),
                "{state} {attempts}"
            );
        }
        assert!(CallRecord::decode("ab.c1", &record("c1", "outcome_unknown", 5)).is_ok());
    }
}
