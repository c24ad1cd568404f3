//! One gateway from several processes on one box: a front that routes to worker gateways, as
//! the [`routing`](crate::routing) seam's second implementation.
//!
//! The open-file limit (20,000 descriptors per process here) caps what one process can hold, so
//! a box that holds 100,000 devices runs several **workers**, each a whole [`Gateway`](crate::Gateway)
//! with its own device listeners on the same port (`SO_REUSEPORT`: the kernel spreads the
//! devices) and an HTTP API on a loopback port of its own. The **front** serves the public HTTP
//! API with the same router as a single gateway; its directory is a [`ClaimTable`] and its
//! forwarder the workers' HTTP APIs ([`Workers`]):
//!
//! ```text
//!  backend ──HTTP──▶ front ──┬── /v1/devices/{id}/…   ──▶ the worker that holds {id} (HTTP/1.1, streamed; WebSocket upgrades spliced)
//!                            ├── /v1/devices, /v1/events, /metrics ──▶ every worker's typed part (/internal/v1/…), merged
//!                            └── /w{k}/v1/relay/{token} ──▶ worker k (a device's relayed connection)
//!  worker k ──GET /internal/v1/presence──▶ front: typed, versioned claims as its devices connect and disconnect
//! ```
//!
//! The front follows each worker's presence stream (reconnecting, and resyncing, if it ends); a
//! device nobody has claimed is asked of worker 0, whose answer (404 unknown, 503 known but not
//! connected) is the same as any worker's: they share the allow-list. Workers trust the front
//! with an internal bearer token of their own; the front checks the backends' tokens.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use futures_util::future::{BoxFuture, ready};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde::de::DeserializeOwned;

use crate::http::{Api, Problem};
use crate::registry::DeviceView;
use crate::routing::local::unknown_node;
use crate::routing::{
    ClaimTable, ForwardError, Forwarder, Holder, ListQuery, MetricSet, NodeId, Page, Routing,
    Snapshot,
};

/// The longest presence message a front reads.
const MAX_PRESENCE_LINE: usize = 64 * 1024;

/// The front of a gateway of several worker processes (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct Front {
    workers: Workers,
    table: Arc<ClaimTable>,
    tokens: Vec<String>,
}

/// The workers of a box, reached over their loopback HTTP APIs: the one-box [`Forwarder`].
/// Cheap to clone (every clone shares the connection pool).
#[derive(Clone, Debug)]
pub struct Workers {
    /// Each worker's name (`w0`, `w1`, …) and internal HTTP address.
    nodes: Arc<[(NodeId, SocketAddr)]>,
    /// The bearer token the workers accept from the front.
    internal: Arc<str>,
    client: HttpClient<HttpConnector, Body>,
}

/// Why a request could not be forwarded.
fn unavailable(node: &NodeId, e: impl std::fmt::Display) -> Response {
    Problem::new(
        StatusCode::BAD_GATEWAY,
        "worker_unavailable",
        "Gateway worker unavailable",
        format!("gateway worker {node} did not answer: {e}"),
    )
    .into_response()
}

impl Workers {
    /// Workers at `addrs` (worker `k` is named `w{k}`), which accept `internal` as a bearer
    /// token.
    pub fn new(addrs: Vec<SocketAddr>, internal: String) -> Workers {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = HttpClient::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Workers {
            nodes: addrs
                .into_iter()
                .enumerate()
                .map(|(k, a)| (NodeId::new(&format!("w{k}")), a))
                .collect(),
            internal: internal.into(),
            client,
        }
    }

    fn addr(&self, node: &NodeId) -> Option<SocketAddr> {
        self.nodes.iter().find(|(n, _)| n == node).map(|(_, a)| *a)
    }

    /// `request` aimed at `addr`, with the internal token.
    fn to_worker(&self, addr: SocketAddr, mut request: Request) -> Result<Request, String> {
        let pq = request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        *request.uri_mut() = format!("http://{addr}{pq}")
            .parse::<Uri>()
            .map_err(|e| e.to_string())?;
        let headers = request.headers_mut();
        headers.remove(header::HOST);
        if let Ok(v) = HeaderValue::from_str(&format!("Bearer {}", self.internal)) {
            headers.insert(header::AUTHORIZATION, v);
        }
        Ok(request)
    }

    /// Forwards `request` to `node` and streams its answer back; a WebSocket upgrade is spliced
    /// through (both upgraded connections copied into each other).
    async fn send(self, node: NodeId, mut request: Request) -> Response {
        let Some(addr) = self.addr(&node) else {
            return unknown_node(&node);
        };
        let upgrading = request.headers().contains_key(header::UPGRADE);
        let client_side = upgrading.then(|| hyper::upgrade::on(&mut request));
        let request = match self.to_worker(addr, request) {
            Ok(r) => r,
            Err(e) => return unavailable(&node, e),
        };
        let mut response = match self.client.request(request).await {
            Ok(r) => r,
            Err(e) => return unavailable(&node, e),
        };
        if response.status() == StatusCode::SWITCHING_PROTOCOLS
            && let Some(client_side) = client_side
        {
            let worker_side = hyper::upgrade::on(&mut response);
            tokio::spawn(async move {
                if let (Ok(c), Ok(w)) = (client_side.await, worker_side.await) {
                    let (mut c, mut w) = (TokioIo::new(c), TokioIo::new(w));
                    let _ = tokio::io::copy_bidirectional(&mut c, &mut w).await;
                }
            });
        }
        response.map(Body::new)
    }

    /// `GET path` on `node`: the body of a 200 answer.
    async fn get(self, node: NodeId, path: String) -> Result<Bytes, ForwardError> {
        let addr = self
            .addr(&node)
            .ok_or_else(|| ForwardError::UnknownNode(node.clone()))?;
        let unavailable = |reason: String| ForwardError::Unavailable {
            node: node.clone(),
            reason,
        };
        let request = Request::get(path)
            .body(Body::empty())
            .map_err(|e| unavailable(e.to_string()))?;
        let request = self.to_worker(addr, request).map_err(unavailable)?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        crate::routing::ok_body(&node, response).await
    }

    async fn get_json<T: DeserializeOwned>(
        self,
        node: NodeId,
        path: String,
    ) -> Result<T, ForwardError> {
        let body = self.get(node.clone(), path).await?;
        serde_json::from_slice(&body).map_err(|e| ForwardError::BadAnswer {
            node,
            reason: e.to_string(),
        })
    }

    /// Follows `node`'s presence stream into `table` until the stream ends, then takes the
    /// node's devices offline (its claims are unknown until it is followed again).
    async fn follow(&self, node: &NodeId, table: &ClaimTable) {
        let Some(addr) = self.addr(node) else {
            return;
        };
        let request = Request::get("/internal/v1/presence")
            .body(Body::empty())
            .map_err(|e| e.to_string())
            .and_then(|r| self.to_worker(addr, r));
        if let Ok(request) = request
            && let Ok(response) = self.client.request(request).await
            && response.status() == StatusCode::OK
        {
            let mut body = http_body_util::BodyExt::into_data_stream(response.into_body());
            let mut lines = crate::ndjson::Lines::new(MAX_PRESENCE_LINE);
            let mut synced = None;
            'stream: while let Some(Ok(chunk)) = body.next().await {
                lines.push(&chunk);
                loop {
                    match lines.next_line() {
                        Ok(Some((_, line))) => match serde_json::from_str(&line) {
                            Ok(message) => table.apply(node, message, &mut synced),
                            Err(e) => {
                                tracing::warn!(%node, "unreadable presence message: {e}");
                                break 'stream;
                            }
                        },
                        Ok(None) => break,
                        Err(e) => {
                            tracing::warn!(%node, "presence stream: {e}");
                            break 'stream;
                        }
                    }
                }
            }
        }
        table.release_all_but(node, &Default::default());
    }
}

impl Forwarder for Workers {
    fn nodes(&self) -> Vec<NodeId> {
        self.nodes.iter().map(|(n, _)| n.clone()).collect()
    }

    fn forward(&self, to: &Holder, request: Request) -> BoxFuture<'static, Response> {
        let node = match to {
            Holder::Node { node, .. } => node,
            // The first worker answers for the devices nobody has claimed.
            Holder::Nobody => match self.nodes.first() {
                Some((first, _)) => first,
                None => return Box::pin(ready(unavailable(&NodeId::new("w0"), "no workers"))),
            },
        };
        Box::pin(self.clone().send(node.clone(), request))
    }

    fn device_page(
        &self,
        node: &NodeId,
        query: ListQuery,
    ) -> BoxFuture<'static, Result<Page<DeviceView>, ForwardError>> {
        let mut path = format!("/internal/v1/devices?limit={}", query.page_size());
        if let Some(online) = query.online {
            path.push_str(&format!("&online={online}"));
        }
        if let Some(after) = &query.after {
            path.push_str("&after=");
            path.push_str(&url_escape(after));
        }
        Box::pin(self.clone().get_json(node.clone(), path))
    }

    fn snapshot(&self, node: &NodeId) -> BoxFuture<'static, Result<Snapshot, ForwardError>> {
        Box::pin(
            self.clone()
                .get_json(node.clone(), "/internal/v1/snapshot".to_string()),
        )
    }

    fn metrics(&self, node: &NodeId) -> BoxFuture<'static, Result<MetricSet, ForwardError>> {
        let workers = self.clone();
        let node = node.clone();
        Box::pin(async move {
            let body = workers
                .get(node.clone(), "/internal/v1/metrics".to_string())
                .await?;
            MetricSet::decode(&body).map_err(|e| ForwardError::BadAnswer {
                node,
                reason: e.to_string(),
            })
        })
    }
}

/// `s` with every byte but letters, digits and `-._~` percent-escaped (a query value).
fn url_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Front {
    /// A front over `workers` (their internal HTTP addresses), which accept `internal` as a
    /// bearer token; backends must present one of `tokens` (none: open).
    pub fn new(workers: Vec<SocketAddr>, internal: String, tokens: Vec<String>) -> Front {
        let workers = Workers::new(workers, internal);
        let first = workers.nodes.first().map(|(n, _)| n.clone());
        Front {
            workers,
            table: Arc::new(ClaimTable::new(first)),
            tokens,
        }
    }

    /// Devices online, by the workers' claims.
    pub fn online(&self) -> usize {
        self.table.online()
    }

    /// The routing: the claim table and the workers.
    pub fn routing(&self) -> Routing {
        Routing {
            durable: None,
            directory: self.table.clone(),
            forwarder: Arc::new(self.workers.clone()),
        }
    }

    /// The router of the public API (the same as a single gateway's).
    pub fn router(&self) -> crate::http::HotPath {
        crate::http::api_router(Api::new(
            self.routing(),
            self.tokens.clone(),
            crate::GatewayConfig::default().dashboard_interval,
        ))
    }

    /// Follows every worker's presence stream until dropped.
    fn follow_workers(&self) -> FollowGuard {
        let tasks = self
            .workers
            .nodes
            .iter()
            .map(|(node, _)| {
                let (workers, table, node) =
                    (self.workers.clone(), self.table.clone(), node.clone());
                tokio::spawn(async move {
                    loop {
                        workers.follow(&node, &table).await;
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                })
            })
            .collect();
        FollowGuard(tasks)
    }

    /// Serves the public API on `listener` within `limits` until `shutdown`; follows every
    /// worker's presence meanwhile.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        limits: crate::http::listener::HttpLimits,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let _following = self.follow_workers();
        crate::http::listener::serve(
            self.router(),
            listener,
            None,
            limits,
            crate::GatewayMetrics::new(),
            shutdown,
        )
        .await
    }
}

/// Stops following the workers when dropped.
#[derive(Debug)]
struct FollowGuard(Vec<tokio::task::JoinHandle<()>>);

impl Drop for FollowGuard {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_escaped() {
        assert_eq!(url_escape("plain-tcp-127.0.0.1-5"), "plain-tcp-127.0.0.1-5");
        assert_eq!(url_escape("a b&c=d"), "a%20b%26c%3Dd");
    }
}
