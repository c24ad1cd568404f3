//! The HTTP side: the JSON API, the relay WebSockets, the dashboard and `/metrics`, served over
//! plain HTTP or TLS. The API is described in `crates/blerpc-gateway/openapi.yaml`, served at
//! `/v1/openapi.yaml`.
//!
//! Every error is `application/problem+json` (RFC 9457) with a status of its own: 400 bad
//! request or unknown command, 401 missing or wrong token, 404 unknown device, 408 the request
//! body did not arrive within `http_body_timeout`, 413 too large,
//! 429 too many calls queued for the device, 502 the device failed the call, 503 the device is
//! not connected (or went away, or is busy), 504 deadline.
//!
//! Authentication: `Authorization: Bearer <token>` against the configured tokens, compared in
//! constant time, on everything but the dashboard page itself, `/healthz`, the OpenAPI file and
//! the device side of a relay (whose one-time token is its credential).
//!
//! One API serves every deployment ([`api_router`], a [`HotPath`]): a request for a device goes where the
//! [`routing`](crate::routing) says its holder is (in process for a single gateway), and the
//! fleet's views are merged from every node's part. A gateway that holds devices also answers
//! the node requests of its front under `/internal/v1/` ([`internal`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, RawPathParams, Request, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use tokio::net::TcpListener;

pub use self::hot::HotPath;
use crate::Gateway;
use crate::calls::CallFailure;
use crate::routing::local::LocalForwarder;
use crate::routing::{Holder, NodeId, Routing};

pub(crate) mod api;
mod auth;
pub mod body;
mod dashboard;
pub mod durable;
mod hot;
pub mod internal;
pub mod listener;
pub(crate) mod relay;
mod self_wake;
pub mod trim;

use auth::RequireToken;
pub use auth::token_matches;
pub use dashboard::MAX_DEVICES_PER_SNAPSHOT;

/// The OpenAPI description of the API.
pub const OPENAPI: &str = include_str!("../../openapi.yaml");

/// An RFC 9457 problem.
#[derive(Debug, Clone)]
pub struct Problem {
    /// HTTP status.
    pub status: StatusCode,
    /// Short kind (`not_connected`): the `type` is `urn:blerpc:problem:<kind>`.
    pub kind: &'static str,
    /// Title.
    pub title: &'static str,
    /// What happened, for people.
    pub detail: String,
}

impl Problem {
    /// A problem from its parts.
    pub fn new(
        status: StatusCode,
        kind: &'static str,
        title: &'static str,
        detail: String,
    ) -> Self {
        Problem {
            status,
            kind,
            title,
            detail,
        }
    }

    /// The JSON body.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "type": format!("urn:blerpc:problem:{}", self.kind),
            "title": self.title,
            "status": self.status.as_u16(),
            "detail": self.detail,
        })
    }
}

impl From<CallFailure> for Problem {
    fn from(f: CallFailure) -> Problem {
        Problem {
            status: StatusCode::from_u16(f.status()).unwrap_or(StatusCode::BAD_GATEWAY),
            kind: f.kind(),
            title: f.title(),
            detail: f.to_string(),
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut r = (self.status, self.json().to_string()).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        // A body too large or too slow may still be on its way: the connection ends with this
        // answer, so none of the rest is read.
        if matches!(
            self.status,
            StatusCode::PAYLOAD_TOO_LARGE | StatusCode::REQUEST_TIMEOUT
        ) {
            r.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if matches!(
            self.status,
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS
        ) {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        r
    }
}

/// A response with `body` as `application/json`.
pub(crate) fn json_response(status: StatusCode, body: String) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// The API's state: how it routes, and whom it serves. A clone (one per request) is one
/// reference count.
#[derive(Clone, Debug)]
pub struct Api {
    state: Arc<ApiState>,
}

#[derive(Clone, Debug)]
struct ApiState {
    routing: Routing,
    tokens: Arc<[String]>,
    dashboard_interval: Duration,
    /// Event streams that may still open (`GatewayConfig::max_event_streams`).
    event_streams: Arc<tokio::sync::Semaphore>,
    /// Where refused event streams (and slow bodies) are counted.
    metrics: crate::GatewayMetrics,
    /// How long a request body read whole may take (`GatewayConfig::http_body_timeout`).
    body_timeout: Duration,
}

impl Api {
    /// The API over `routing`, for backends presenting one of `tokens` (none: open), with a
    /// dashboard snapshot every `dashboard_interval`.
    pub fn new(routing: Routing, tokens: Vec<String>, dashboard_interval: Duration) -> Api {
        let state = ApiState {
            routing,
            tokens: tokens.into(),
            dashboard_interval,
            event_streams: Arc::new(tokio::sync::Semaphore::new(
                crate::GatewayConfig::default().max_event_streams,
            )),
            metrics: crate::GatewayMetrics::new(),
            body_timeout: crate::GatewayConfig::default().http_body_timeout,
        };
        Api {
            state: Arc::new(state),
        }
    }

    /// The API with `gateway`'s limit on event streams (`GET /v1/events`; more are answered
    /// 503) and its body timeout, counting refusals in its metrics.
    pub fn for_gateway(mut self, gateway: &Gateway) -> Api {
        let state = Arc::make_mut(&mut self.state);
        state.body_timeout = gateway.config().http_body_timeout;
        state.event_streams = Arc::new(tokio::sync::Semaphore::new(
            gateway.config().max_event_streams,
        ));
        state.metrics = gateway.metrics().clone();
        self
    }

    /// The API of a single gateway: its registry is the directory, and requests reach its
    /// devices in process.
    pub fn local(gateway: &Gateway) -> Api {
        Api::new(
            Routing {
                durable: None,
                directory: Arc::new(gateway.clone()),
                forwarder: Arc::new(LocalForwarder::new(gateway.clone())),
            },
            gateway.config().tokens.clone(),
            gateway.config().dashboard_interval,
        )
        .for_gateway(gateway)
    }

    /// The routing.
    pub fn routing(&self) -> &Routing {
        &self.state.routing
    }
}

/// The router of a single gateway (and of a worker, for its front): the API with the
/// gateway's own routing, and the node requests under `/internal/v1/`.
pub fn router(gateway: Gateway) -> HotPath {
    let routing = Api::local(&gateway).state.routing.clone();
    router_with(gateway, routing)
}

/// The router of a gateway that routes with `routing` (a fleet's, [`crate::nats::Fleet::routing`]):
/// the API, and the node requests under `/internal/v1/`.
pub fn router_with(gateway: Gateway, routing: Routing) -> HotPath {
    let api = Api::new(
        routing,
        gateway.config().tokens.clone(),
        gateway.config().dashboard_interval,
    )
    .for_gateway(&gateway);
    let internal =
        internal::router(gateway).route_layer(RequireToken::new(api.state.tokens.clone()));
    let routes = api_routes(&api).merge(internal);
    HotPath::new(api, routes)
}

/// The public API over any routing: requests for a device go to its holder, the fleet's views
/// are merged from every node's part.
pub fn api_router(api: Api) -> HotPath {
    let routes = api_routes(&api);
    HotPath::new(api, routes)
}

/// The API's routes, behind its [`HotPath`].
fn api_routes(api: &Api) -> Router {
    let authenticated = Router::new()
        .route("/v1/devices", get(api::list_devices))
        .route("/v1/devices/{id}/durable", get(durable::list))
        .route("/v1/devices/{id}/durable/events", get(durable::events))
        .route(
            "/v1/devices/{id}/durable/{call}",
            get(durable::get).delete(durable::cancel),
        )
        .route("/v1/devices/{id}", any(to_device))
        .route("/v1/devices/{id}/{*rest}", any(to_device))
        .route("/v1/schema", any(to_any))
        .route("/v1/events", get(dashboard::events))
        .route("/metrics", get(api::metrics))
        .route_layer(RequireToken::new(api.state.tokens.clone()));
    Router::new()
        .route("/", get(dashboard::page))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/v1/openapi.yaml", get(openapi))
        .route("/v1/relay/{token}", any(to_any))
        .route("/{node}/v1/relay/{token}", any(to_node))
        .merge(authenticated)
        .fallback(not_found)
        .with_state(api.clone())
}

/// What a device's holder serves: the requests for one device, and those any node answers.
/// Behind [`api_router`] (which authenticates), reached through a [`LocalForwarder`].
pub(crate) fn device_router(gateway: Gateway) -> Router {
    Router::new()
        .route("/v1/devices/{id}", get(api::get_device))
        .route("/v1/devices/{id}/calls/{command}", post(api::call))
        .route("/v1/devices/{id}/diagnostics", get(api::diagnostics))
        .route("/v1/devices/{id}/report", get(api::report))
        .route("/v1/devices/{id}/link", get(relay::backend_link))
        .route("/v1/schema", get(api::schema))
        .route("/v1/relay/{token}", get(relay::device_link))
        .fallback(not_found)
        .with_state(gateway)
}

/// What a device's holder answers `request` with. A call (`POST
/// /v1/devices/{id}/calls/{command}`) goes straight to its handler: it is the hot path, and
/// the API in front has already recognised it once. Anything else goes through `devices`
/// ([`device_router`] or [`node_router`]) as it came off the connection: what a router in front
/// added to it (its path parameters, which `devices` adds its own to) is left behind; only a
/// pending upgrade goes along.
pub(crate) async fn on_holder(gateway: &Gateway, devices: Router, request: Request) -> Response {
    let (mut parts, body) = request.into_parts();
    if parts.method == axum::http::Method::POST
        && let Some((id, command)) = api::call_path(parts.uri.path())
    {
        return api::call_parts(gateway, id, command, &parts.headers, body).await;
    }
    let upgrade = parts.extensions.remove::<hyper::upgrade::OnUpgrade>();
    parts.extensions = axum::http::Extensions::new();
    if let Some(u) = upgrade {
        parts.extensions.insert(u);
    }
    match tower::ServiceExt::oneshot(devices, Request::from_parts(parts, body)).await {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

/// What a gateway answers other gateways of its fleet on its node subject: the device requests
/// and the node requests (`/internal/v1/…`); NATS is trusted, so no token.
pub(crate) fn node_router(gateway: Gateway) -> Router {
    device_router(gateway.clone()).merge(internal::router(gateway))
}

/// `/v1/devices/{id}` and below: to the device's holder.
async fn to_device(State(api): State<Api>, params: RawPathParams, request: Request) -> Response {
    let id = params.iter().find_map(|(k, v)| (k == "id").then_some(v));
    for_device(&api, id.unwrap_or_default(), request).await
}

/// A request for device `id` (its path under `/v1/devices/{id}`) that passed the token, from
/// its route or from the hot path: a durable call (`POST …/calls/{command}` with the durable
/// header) is submitted, anything else goes to the device's holder.
pub(super) async fn for_device(api: &Api, id: &str, request: Request) -> Response {
    if request.method() != axum::http::Method::POST
        || !request.headers().contains_key(durable::DURABLE_HEADER)
    {
        return api.state.routing.to_device(id, request).await;
    }
    let (parts, body) = request.into_parts();
    let command = parts
        .uri
        .path()
        .strip_prefix("/v1/devices/")
        .and_then(|rest| rest.strip_prefix(id))
        .and_then(|rest| rest.strip_prefix("/calls/"))
        .filter(|c| !c.contains('/'));
    match command {
        // Boxed: a call's future (held while its body arrives) does not carry room for it.
        Some(command) => Box::pin(durable::submit(api, id, command, &parts.headers, body)).await,
        None => {
            let request = Request::from_parts(parts, body);
            api.state.routing.to_device(id, request).await
        }
    }
}

/// A request any node answers (the first, on a box).
async fn to_any(State(api): State<Api>, request: Request) -> Response {
    api.state
        .routing
        .forwarder
        .forward(&Holder::Nobody, request)
        .await
}

/// `/{node}/v1/relay/{token}`: a device's relayed connection, to the node that asked for it
/// (the relay URL a worker hands its devices names it).
async fn to_node(
    State(api): State<Api>,
    Path((node, token)): Path<(String, String)>,
    mut request: Request,
) -> Response {
    let Ok(uri) = format!("{}{token}", crate::relay::RELAY_PATH).parse::<Uri>() else {
        return not_found(request).await.into_response();
    };
    *request.uri_mut() = uri;
    let to = Holder::Node {
        node: NodeId::new(&node),
        online: true,
    };
    api.state.routing.forwarder.forward(&to, request).await
}

async fn openapi() -> Response {
    let mut r = OPENAPI.into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/yaml"),
    );
    r
}

pub(crate) async fn not_found(request: Request) -> Problem {
    Problem::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "Not found",
        format!("no route {} {}", request.method(), request.uri().path()),
    )
}

/// Serves the API on `listener` (plain HTTP) until `shutdown` completes, within the gateway's
/// HTTP limits ([`listener`]).
pub async fn serve(
    gateway: Gateway,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_router(router(gateway.clone()), &gateway, listener, None, shutdown).await
}

/// Serves the API on `listener` over TLS (`config`: the certificate and key) until `shutdown`
/// completes. A handshake that fails or takes over 10 s only drops its own connection.
pub async fn serve_tls(
    gateway: Gateway,
    listener: TcpListener,
    config: Arc<tokio_rustls::rustls::ServerConfig>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_router(
        router(gateway.clone()),
        &gateway,
        listener,
        Some(config),
        shutdown,
    )
    .await
}

/// Serves `router` (the API's, [`router`], or any axum router) on `listener` (HTTPS with
/// `tls`) within `gateway`'s HTTP limits, counting in its metrics, until `shutdown` completes.
pub async fn serve_router(
    router: impl listener::HttpService,
    gateway: &Gateway,
    listener: TcpListener,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    listener::serve(
        router,
        listener,
        tls,
        listener::HttpLimits::of(gateway.config()),
        gateway.metrics().clone(),
        shutdown,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_become_problems_with_their_status() {
        let p = Problem::from(CallFailure::NotConnected("ab".into()));
        assert_eq!(p.status, StatusCode::SERVICE_UNAVAILABLE);
        let body = p.json();
        assert_eq!(body["type"], "urn:blerpc:problem:not_connected");
        assert_eq!(body["status"], 503);
        assert_eq!(body["detail"], "device ab is not connected");
        let r = p.into_response();
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            "application/problem+json"
        );
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
    }
}
