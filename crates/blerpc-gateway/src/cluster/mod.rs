//! One gateway from several processes: a front that routes to worker gateways.
//!
//! The open-file limit (20,000 descriptors per process here) caps what one process can hold, so
//! a box that holds 100,000 devices runs several **workers**, each a whole [`Gateway`](crate::Gateway)
//! with its own device listeners on the same port (`SO_REUSEPORT`: the kernel spreads the
//! devices) and an HTTP API on a loopback port of its own. The **front** serves the public HTTP
//! API and routes:
//!
//! ```text
//!  backend ──HTTP──▶ front ──┬── /v1/devices/{id}/…  ──▶ the worker that holds {id} (HTTP/1.1, streamed; WebSocket upgrades spliced)
//!                            ├── /v1/devices, /metrics ──▶ every worker, merged
//!                            ├── /v1/events            ──   the workers' snapshots, merged
//!                            └── /w{k}/v1/relay/{token} ──▶ worker k (a device's relayed connection)
//!  worker k ──stdout──▶ front:  `+ <id>` / `- <id>` as its devices connect and disconnect
//! ```
//!
//! The front learns which worker holds which device from the workers' events ([`Front::device_event`]);
//! a device nobody holds is asked of worker 0, whose answer (404 unknown, 503 known but not
//! connected) is the same as any worker's: they share the allow-list. Across machines the same
//! directory and forwarding become subjects on a message bus (the next step: NATS); the workers
//! do not change.
//!
//! Workers trust the front with an internal bearer token of their own; the front checks the
//! backends' tokens.

pub mod merge;

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use futures_util::StreamExt;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::watch;

use crate::http::{OPENAPI, Problem, token_matches};

/// The front of a gateway of several worker processes (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct Front {
    inner: Arc<FrontInner>,
}

#[derive(Debug)]
struct FrontInner {
    /// Each worker's internal HTTP address.
    workers: Vec<SocketAddr>,
    /// The bearer token the workers accept from the front.
    internal: String,
    /// The backends' tokens (empty: open).
    tokens: Vec<String>,
    /// Device id → (worker, online).
    routes: RwLock<HashMap<String, (usize, bool)>>,
    client: HttpClient<HttpConnector, Body>,
    /// Each worker's latest dashboard snapshot.
    snapshots: Mutex<Vec<serde_json::Value>>,
    /// Bumped when a snapshot arrives.
    changes: watch::Sender<u64>,
}

/// Why a request could not be forwarded.
fn unavailable(worker: usize, e: impl std::fmt::Display) -> Response {
    Problem::new(
        StatusCode::BAD_GATEWAY,
        "worker_unavailable",
        "Gateway worker unavailable",
        format!("gateway worker {worker} did not answer: {e}"),
    )
    .into_response()
}

impl Front {
    /// A front over `workers` (their internal HTTP addresses), which accept `internal` as a
    /// bearer token; backends must present one of `tokens` (none: open).
    pub fn new(workers: Vec<SocketAddr>, internal: String, tokens: Vec<String>) -> Front {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = HttpClient::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        let n = workers.len();
        Front {
            inner: Arc::new(FrontInner {
                workers,
                internal,
                tokens,
                routes: RwLock::new(HashMap::new()),
                client,
                snapshots: Mutex::new(vec![serde_json::Value::Null; n]),
                changes: watch::Sender::new(0),
            }),
        }
    }

    /// Worker `worker` reported device `id` online (`true`) or offline.
    pub fn device_event(&self, worker: usize, id: &str, online: bool) {
        let mut routes = self.inner.routes.write().unwrap_or_else(|e| e.into_inner());
        match routes.get(id) {
            // A late "offline" from a worker the device already left for another.
            Some(&(w, true)) if !online && w != worker => {}
            _ => {
                routes.insert(id.to_string(), (worker, online));
            }
        }
    }

    /// Devices online, by the workers' events.
    pub fn online(&self) -> usize {
        let routes = self.inner.routes.read().unwrap_or_else(|e| e.into_inner());
        routes.values().filter(|(_, on)| *on).count()
    }

    fn route(&self, id: &str) -> usize {
        let routes = self.inner.routes.read().unwrap_or_else(|e| e.into_inner());
        routes.get(id).map_or(0, |(w, _)| *w)
    }

    /// The router of the public API.
    pub fn router(&self) -> Router {
        let api = Router::new()
            .route("/v1/devices", get(list))
            .route("/v1/devices/{id}", any(to_device))
            .route("/v1/devices/{id}/{*rest}", any(to_device))
            .route("/v1/schema", any(to_first))
            .route("/v1/events", get(events))
            .route("/metrics", get(metrics))
            .route_layer(axum::middleware::from_fn_with_state(
                self.clone(),
                authenticate,
            ));
        Router::new()
            .route("/", any(to_first))
            .route("/healthz", get(|| async { "ok\n" }))
            .route("/v1/openapi.yaml", get(|| async { OPENAPI }))
            .route("/w{worker}/v1/relay/{token}", any(to_worker_relay))
            .merge(api)
            .with_state(self.clone())
    }

    /// Serves the public API on `listener` until `shutdown`; follows every worker's dashboard
    /// snapshots meanwhile.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        for k in 0..self.inner.workers.len() {
            tokio::spawn(self.clone().follow_snapshots(k));
        }
        let app = self
            .router()
            .into_make_service_with_connect_info::<SocketAddr>();
        // Small answers go out at once (a relayed container must not wait for a delayed ACK).
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
    }

    /// A request to worker `k` for `path_and_query`, with the internal token.
    fn to_worker(&self, k: usize, mut request: Request) -> Result<Request, String> {
        let addr = self
            .inner
            .workers
            .get(k)
            .copied()
            .ok_or_else(|| "no such worker".to_string())?;
        let pq = request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let pq = match pq.strip_prefix(&format!("/w{k}")) {
            Some(rest) => rest.to_string(),
            None => pq,
        };
        *request.uri_mut() = format!("http://{addr}{pq}")
            .parse::<Uri>()
            .map_err(|e| e.to_string())?;
        let headers = request.headers_mut();
        headers.remove(header::HOST);
        if let Ok(v) = HeaderValue::from_str(&format!("Bearer {}", self.inner.internal)) {
            headers.insert(header::AUTHORIZATION, v);
        }
        Ok(request)
    }

    /// Forwards `request` to worker `k` and streams its answer back; a WebSocket upgrade is
    /// spliced through (both upgraded connections copied into each other).
    async fn forward(&self, k: usize, mut request: Request) -> Response {
        let upgrading = request.headers().contains_key(header::UPGRADE);
        let client_side = upgrading.then(|| hyper::upgrade::on(&mut request));
        let request = match self.to_worker(k, request) {
            Ok(r) => r,
            Err(e) => return unavailable(k, e),
        };
        let mut response = match self.inner.client.request(request).await {
            Ok(r) => r,
            Err(e) => return unavailable(k, e),
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

    /// `GET path` on every worker, as JSON (a worker that fails is left out).
    async fn gather(&self, path: &str) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        for k in 0..self.inner.workers.len() {
            if let Ok(text) = self.get_text(k, path).await
                && let Ok(v) = serde_json::from_str(&text)
            {
                out.push(v);
            }
        }
        out
    }

    async fn get_text(&self, k: usize, path: &str) -> Result<String, String> {
        use http_body_util::BodyExt as _;
        let request = Request::get(path)
            .body(Body::empty())
            .map_err(|e| e.to_string())?;
        let request = self
            .to_worker(k, request)
            .map_err(|_| "no such worker".to_string())?;
        let response = self
            .inner
            .client
            .request(request)
            .await
            .map_err(|e| e.to_string())?;
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        String::from_utf8(body.to_vec()).map_err(|e| e.to_string())
    }

    /// Keeps the snapshot in one server-sent event `block` of worker `k`.
    fn take_snapshot(&self, k: usize, block: &str) {
        let data: String = block
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim_start)
            .collect();
        if let Ok(v) = serde_json::from_str(&data) {
            if let Some(slot) = self
                .inner
                .snapshots
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_mut(k)
            {
                *slot = v;
            }
            self.inner.changes.send_modify(|g| *g += 1);
        }
    }

    /// Follows worker `k`'s `/v1/events`, keeping its latest snapshot (reconnecting if it
    /// ends).
    async fn follow_snapshots(self, k: usize) {
        loop {
            let request = Request::get("/v1/events")
                .body(Body::empty())
                .map_err(|e| e.to_string())
                .and_then(|r| self.to_worker(k, r));
            if let Ok(request) = request
                && let Ok(response) = self.inner.client.request(request).await
            {
                let mut body = http_body_util::BodyExt::into_data_stream(response.into_body());
                let mut pending = String::new();
                while let Some(Ok(chunk)) = body.next().await {
                    pending.push_str(&String::from_utf8_lossy(&chunk));
                    while let Some(cut) = pending.find("\n\n") {
                        let block: String = pending.drain(..cut + 2).collect();
                        self.take_snapshot(k, &block);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

async fn authenticate(
    State(front): State<Front>,
    request: Request,
    next: axum::middleware::Next,
) -> Response {
    let tokens = &front.inner.tokens;
    if tokens.is_empty() {
        return next.run(request).await;
    }
    let ok = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
        .is_some_and(|p| token_matches(tokens, p));
    if ok {
        next.run(request).await
    } else {
        Problem::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "Unauthorized",
            "this gateway needs `Authorization: Bearer <token>` with a token it accepts"
                .to_string(),
        )
        .into_response()
    }
}

async fn to_device(
    State(front): State<Front>,
    Path(params): Path<HashMap<String, String>>,
    request: Request,
) -> Response {
    let k = params.get("id").map_or(0, |id| front.route(id));
    front.forward(k, request).await
}

async fn to_first(State(front): State<Front>, request: Request) -> Response {
    front.forward(0, request).await
}

async fn to_worker_relay(
    State(front): State<Front>,
    Path((worker, _token)): Path<(usize, String)>,
    request: Request,
) -> Response {
    front.forward(worker, request).await
}

async fn list(State(front): State<Front>) -> Response {
    let merged = merge::device_lists(&front.gather("/v1/devices").await);
    let mut r = merged.to_string().into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

async fn metrics(State(front): State<Front>) -> Response {
    let mut texts = Vec::new();
    for k in 0..front.inner.workers.len() {
        if let Ok(t) = front.get_text(k, "/metrics").await {
            texts.push(t);
        }
    }
    let mut r = merge::metrics(&texts).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    r
}

async fn events(
    State(front): State<Front>,
) -> Sse<impl futures_util::Stream<Item = Result<Event, Infallible>>> {
    let changes = front.inner.changes.subscribe();
    let stream = futures_util::stream::unfold(
        (front, changes, true),
        |(front, mut changes, first)| async move {
            if !first && changes.changed().await.is_err() {
                return None;
            }
            changes.borrow_and_update();
            // Let the other workers' snapshots of the same tick arrive.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let snaps = front
                .inner
                .snapshots
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let merged = merge::snapshots(
                &snaps
                    .into_iter()
                    .filter(|s| !s.is_null())
                    .collect::<Vec<_>>(),
                crate::http::MAX_DEVICES_PER_SNAPSHOT,
            );
            let event = Event::default().event("snapshot").data(merged.to_string());
            Some((Ok(event), (front, changes, false)))
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::default())
}
