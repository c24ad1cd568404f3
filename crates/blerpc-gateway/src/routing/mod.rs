//! Where a device is held and how a request reaches it: the seam between the HTTP API and the
//! way a gateway is spread over processes (and, next, machines).
//!
//! Every request goes the same way, whatever the deployment. A request for one device asks the
//! [`Directory`] who holds it and has the [`Forwarder`] deliver it there; a view of the whole
//! fleet (`GET /v1/devices`, the dashboard's snapshots, `/metrics`) gathers each node's typed
//! part through the forwarder and merges them ([`fleet`]):
//!
//! ```text
//!  /v1/devices/{id}/…  ──▶ Directory::locate(id) ──▶ Holder ──▶ Forwarder::forward(holder, request)
//!  /v1/devices          ──▶ for each node: Forwarder::device_page … ──▶ fleet::merge_device_lists
//!  /v1/events, /metrics ──▶ for each node: Forwarder::snapshot / metrics ──▶ merged, encoded once
//! ```
//!
//! | deployment | [`Directory`] | [`Forwarder`] |
//! |---|---|---|
//! | one process | the gateway's registry ([`local`]) | in process: a call to its handler, the rest through the device API's router ([`local::LocalForwarder`]) |
//! | one box, worker processes | a [`ClaimTable`] fed by each worker's presence stream ([`crate::cluster`]) | HTTP/1.1 to the worker, upgrades spliced ([`crate::cluster`]) |
//! | a fleet on NATS (next) | a [`ClaimTable`] fed by a watch of the presence bucket (JetStream KV) | a request on the device's subject; "no responders" is 503 |
//!
//! A node that holds a device **claims** it with an [`Epoch`] taken when the connection was
//! made; the table keeps, per device, the claim with the largest epoch, so a late message about
//! an older connection (a release from the node the device left, a claim that crossed a newer
//! one on the way) never wins. The claims travel as [`claims::PresenceMessage`]s, serde-typed
//! and versioned: one per line of a worker's presence stream today, a KV entry tomorrow.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use axum::extract::Request;
use axum::response::Response;
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::registry::DeviceView;

pub mod claims;
pub mod fleet;
pub mod local;
pub mod metric_sets;

pub use claims::ClaimTable;
pub use fleet::{DeviceList, Snapshot};
pub use metric_sets::MetricSet;

/// A node: one process that holds device connections (a worker of a box, a gateway of a
/// fleet), named in the directory.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub struct NodeId(Arc<str>);

impl From<String> for NodeId {
    fn from(name: String) -> NodeId {
        NodeId(Arc::from(name))
    }
}

impl From<NodeId> for String {
    fn from(node: NodeId) -> String {
        node.0.to_string()
    }
}

impl NodeId {
    /// A node named `name`.
    pub fn new(name: &str) -> NodeId {
        NodeId(Arc::from(name))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Orders the claims of one device: a claim with a larger epoch is about a newer connection.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Epoch(pub u64);

impl Epoch {
    /// The epoch of a connection made now: microseconds since the Unix epoch, strictly
    /// increasing within the process. The processes of one box read the same clock, so claims
    /// from different workers order by when their connections were made; a fleet's directory
    /// orders by its store's revision instead.
    pub fn next() -> Epoch {
        static LAST: AtomicU64 = AtomicU64::new(0);
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        let mut last = LAST.load(Ordering::Relaxed);
        loop {
            let next = now.max(last + 1);
            match LAST.compare_exchange_weak(last, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Epoch(next),
                Err(actual) => last = actual,
            }
        }
    }
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms_since(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Who answers for a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holder {
    /// `node` holds the device's connection (`online`), or held it last: either way it
    /// answers for the device (an offline device's record and statistics are there).
    Node {
        /// The node.
        node: NodeId,
        /// Whether the connection is up.
        online: bool,
    },
    /// No node holds or has held the device: any node answers (404 for a stranger, 503 for a
    /// device on the shared allow-list that has not connected).
    Nobody,
}

/// A directory entry: which node holds (or held last) a device, under which claim.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Presence {
    /// The device id.
    pub device: String,
    /// The node that holds it, or held it last.
    pub node: NodeId,
    /// The claim's epoch.
    pub epoch: Epoch,
    /// Whether the claimed connection is up.
    pub online: bool,
    /// When the claimed connection was made (ms since the Unix epoch).
    pub since_ms: u64,
}

/// The most entries a [`ListQuery`] returns at once.
pub const MAX_PAGE: usize = 1000;

/// Which devices a listing wants: a filter and a cursor.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListQuery {
    /// Only devices online (`Some(true)`) or offline (`Some(false)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub online: Option<bool>,
    /// Only devices whose id sorts after this one: the previous page's [`Page::next`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// At most this many (0 or above [`MAX_PAGE`]: [`MAX_PAGE`]).
    #[serde(default)]
    pub limit: usize,
}

impl ListQuery {
    /// The page size this query asks for, within [`MAX_PAGE`].
    pub fn page_size(&self) -> usize {
        match self.limit {
            0 => MAX_PAGE,
            n => n.min(MAX_PAGE),
        }
    }

    /// The page of `entries` (by device id) this query selects; `online` tells whether an
    /// entry's device is online.
    pub fn select<T: Clone>(
        &self,
        entries: &BTreeMap<String, T>,
        online: impl Fn(&T) -> bool,
    ) -> Page<T> {
        let size = self.page_size();
        let from = self
            .after
            .as_deref()
            .map_or(Bound::Unbounded, Bound::Excluded);
        let mut picked: Vec<(&String, &T)> = entries
            .range::<str, _>((from, Bound::Unbounded))
            .filter(|(_, e)| self.online.is_none_or(|on| online(e) == on))
            .take(size + 1)
            .collect();
        let more = picked.len() > size;
        picked.truncate(size);
        Page {
            next: picked.last().filter(|_| more).map(|(id, _)| (*id).clone()),
            items: picked.into_iter().map(|(_, e)| e.clone()).collect(),
        }
    }
}

/// One page of a listing, sorted by device id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    /// The entries.
    pub items: Vec<T>,
    /// The cursor of the next page (`ListQuery::after`), if there may be more.
    pub next: Option<String>,
}

/// Who holds which device.
pub trait Directory: Send + Sync + fmt::Debug + 'static {
    /// Who answers for `device`.
    fn locate(&self, device: &str) -> Holder;
    /// A page of the entries `query` selects, by device id.
    fn page(&self, query: &ListQuery) -> Page<Presence>;
    /// A receiver that changes whenever a device comes or goes.
    fn changes(&self) -> watch::Receiver<u64>;
}

/// Why a node's part could not be fetched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForwardError {
    /// No node has this name.
    #[error("no gateway node {0}")]
    UnknownNode(NodeId),
    /// The node did not answer.
    #[error("gateway node {node} did not answer: {reason}")]
    Unavailable {
        /// The node.
        node: NodeId,
        /// Why.
        reason: String,
    },
    /// The node answered something this gateway cannot read.
    #[error("gateway node {node} answered what this gateway cannot read: {reason}")]
    BadAnswer {
        /// The node.
        node: NodeId,
        /// Why.
        reason: String,
    },
}

/// The body of `node`'s answer if it is a 200; else the status and body as a
/// [`ForwardError::BadAnswer`] (or [`ForwardError::Unavailable`] if the body broke off).
pub async fn ok_body<B>(
    node: &NodeId,
    response: axum::http::Response<B>,
) -> Result<bytes::Bytes, ForwardError>
where
    B: axum::body::HttpBody,
    B::Error: fmt::Display,
{
    use http_body_util::BodyExt as _;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| ForwardError::Unavailable {
            node: node.clone(),
            reason: e.to_string(),
        })?
        .to_bytes();
    if status != axum::http::StatusCode::OK {
        return Err(ForwardError::BadAnswer {
            node: node.clone(),
            reason: format!("{status}: {}", String::from_utf8_lossy(&body)),
        });
    }
    Ok(body)
}

/// How requests and queries reach the nodes.
pub trait Forwarder: Send + Sync + fmt::Debug + 'static {
    /// Every node, in a stable order (the first answers for devices nobody holds).
    fn nodes(&self) -> Vec<NodeId>;
    /// Delivers `request` (for a device of `to`, or for any node) and brings back the node's
    /// response as it gave it: status, headers, a streamed body both ways, and a WebSocket
    /// upgrade carried through.
    fn forward(&self, to: &Holder, request: Request) -> BoxFuture<'static, Response>;
    /// A page of what `node` knows of its devices (held, held before, or on its allow-list).
    fn device_page(
        &self,
        node: &NodeId,
        query: ListQuery,
    ) -> BoxFuture<'static, Result<Page<DeviceView>, ForwardError>>;
    /// `node`'s dashboard snapshot.
    fn snapshot(&self, node: &NodeId) -> BoxFuture<'static, Result<Snapshot, ForwardError>>;
    /// `node`'s metric families.
    fn metrics(&self, node: &NodeId) -> BoxFuture<'static, Result<MetricSet, ForwardError>>;
}

/// A directory and a forwarder: what the HTTP API routes with.
#[derive(Clone, Debug)]
pub struct Routing {
    /// Who holds which device.
    pub directory: Arc<dyn Directory>,
    /// How requests reach them.
    pub forwarder: Arc<dyn Forwarder>,
    /// Durable calls, where a fleet stores them ([`crate::nats::durable`]); `None` elsewhere.
    pub durable: Option<crate::nats::durable::Durable>,
}

impl Routing {
    /// Delivers `request` for `device` to whoever answers for it.
    pub async fn to_device(&self, device: &str, request: Request) -> Response {
        let holder = self.directory.locate(device);
        self.forwarder.forward(&holder, request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_strictly_increase_and_follow_the_clock() {
        let a = Epoch::next();
        let b = Epoch::next();
        assert!(b > a);
        let now_us = unix_ms_since(SystemTime::now()) * 1000;
        assert!(
            a.0 + 60_000_000 > now_us && a.0 <= now_us + 1000,
            "{a:?} {now_us}"
        );
    }

    #[test]
    fn a_query_asks_for_at_most_a_page() {
        assert_eq!(ListQuery::default().page_size(), MAX_PAGE);
        let q = ListQuery {
            limit: 5,
            ..ListQuery::default()
        };
        assert_eq!(q.page_size(), 5);
        let q = ListQuery {
            limit: MAX_PAGE * 10,
            ..ListQuery::default()
        };
        assert_eq!(q.page_size(), MAX_PAGE);
    }
}
