//! What a gateway that holds devices answers its front, under `/internal/v1/` (authenticated
//! as the rest of the API; not part of the public API):
//!
//! | request | answer |
//! |---|---|
//! | `GET /internal/v1/presence` | its claims: NDJSON [`PresenceMessage`]s, a first sync and then every change, never ending |
//! | `GET /internal/v1/devices?online=&after=&limit=` | a [`Page`](crate::routing::Page) of its device views (JSON) |
//! | `GET /internal/v1/snapshot` | its dashboard [`Snapshot`](crate::routing::Snapshot) (JSON) |
//! | `GET /internal/v1/metrics` | its metric families ([`MetricSet`](crate::routing::MetricSet): Prometheus protobuf) |
//!
//! A presence follower that falls [more than a backlog](crate::registry::Registry::presence)
//! behind has its stream ended, and follows again from a fresh sync.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::StreamExt;
use tokio::sync::broadcast::error::RecvError;

use super::{MAX_DEVICES_PER_SNAPSHOT, json_response};
use crate::Gateway;
use crate::routing::ListQuery;
use crate::routing::claims::{PRESENCE_VERSION, PresenceMessage};
use crate::routing::metric_sets::PROTOBUF_TYPE;

/// The routes (the caller adds authentication).
pub(super) fn router(gateway: Gateway) -> Router {
    Router::new()
        .route("/internal/v1/presence", get(presence))
        .route("/internal/v1/devices", get(devices))
        .route("/internal/v1/snapshot", get(snapshot))
        .route("/internal/v1/metrics", get(metrics))
        .with_state(gateway)
}

fn with_type(mut r: Response, content_type: &'static str) -> Response {
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn line(message: &PresenceMessage) -> Bytes {
    let mut text = serde_json::to_string(message).unwrap_or_default();
    text.push('\n');
    Bytes::from(text)
}

async fn presence(State(gateway): State<Gateway>) -> Response {
    // Subscribed before the sync is taken: a change meanwhile comes twice, never not at all
    // (claims are idempotent, and ordered by epoch).
    let changes = gateway.registry().presence();
    let mut sync = vec![PresenceMessage::Hello {
        version: PRESENCE_VERSION,
    }];
    sync.extend(gateway.registry().claims());
    sync.push(PresenceMessage::Synced);
    let head = futures_util::stream::iter(sync);
    let tail = futures_util::stream::unfold(changes, |mut changes| async move {
        match changes.recv().await {
            Ok(m) => Some((m, changes)),
            // Too far behind (the follower syncs again), or the gateway is gone.
            Err(RecvError::Lagged(_) | RecvError::Closed) => None,
        }
    });
    let body = head
        .chain(tail)
        .map(|m| Ok::<_, std::convert::Infallible>(line(&m)));
    with_type(
        (StatusCode::OK, Body::from_stream(body)).into_response(),
        "application/x-ndjson",
    )
}

async fn devices(State(gateway): State<Gateway>, Query(query): Query<ListQuery>) -> Response {
    let page = gateway.device_page(&query);
    json_response(
        StatusCode::OK,
        serde_json::to_string(&page).unwrap_or_default(),
    )
}

async fn snapshot(State(gateway): State<Gateway>) -> Response {
    let snap = gateway.snapshot(MAX_DEVICES_PER_SNAPSHOT);
    json_response(
        StatusCode::OK,
        serde_json::to_string(&snap).unwrap_or_default(),
    )
}

async fn metrics(State(gateway): State<Gateway>) -> Response {
    with_type(
        (StatusCode::OK, gateway.metric_set().encode()).into_response(),
        PROTOBUF_TYPE,
    )
}
