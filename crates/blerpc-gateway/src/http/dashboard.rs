//! The dashboard: one page (`/`, `dashboard.html`, no build step) that lists the devices with
//! their live status, call rate and latency, draws the call rate over time, and calls a command
//! from a form; fed by `GET /v1/events`, a server-sent event stream of snapshots pushed every
//! [`GatewayConfig::dashboard_interval`](crate::GatewayConfig::dashboard_interval) and at once
//! when a device connects or disconnects.

use std::convert::Infallible;

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use futures_util::Stream;

use super::Api;

/// The page.
const PAGE: &str = include_str!("dashboard.html");

/// Devices one snapshot lists at most (online first): the page is for people, not for a
/// fleet of 100,000; the totals count them all.
pub const MAX_DEVICES_PER_SNAPSHOT: usize = 500;

pub(super) async fn page() -> Response {
    let mut r = Html(PAGE).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// The answer when every event stream is taken.
pub(super) fn too_many_streams() -> Response {
    super::Problem::new(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        "too_many_event_streams",
        "Too many event streams",
        "as many event streams are open as this gateway allows (max_event_streams): close one, \
         or retry later"
            .to_string(),
    )
    .into_response()
}

/// `GET /v1/events`: at most `GatewayConfig::max_event_streams` at once; more are answered 503.
pub(super) async fn events(State(api): State<Api>) -> Response {
    let Ok(permit) = api.state.event_streams.clone().try_acquire_owned() else {
        api.state.metrics.http_refused("event_streams");
        return too_many_streams();
    };
    stream(api, permit).into_response()
}

fn stream(
    api: Api,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let interval = api.state.dashboard_interval;
    let changes = api.routing().directory.changes();
    let stream = futures_util::stream::unfold(
        (api, changes, true, permit),
        move |(api, mut changes, first, permit)| async move {
            if !first {
                // The next tick, or at once when a device connects or disconnects.
                tokio::select! {
                    () = tokio::time::sleep(interval) => {}
                    r = changes.changed() => {
                        if r.is_err() {
                            return None;
                        }
                    }
                }
            }
            changes.borrow_and_update();
            let snapshot = api.routing().snapshot(MAX_DEVICES_PER_SNAPSHOT).await;
            let data = serde_json::to_string(&snapshot).unwrap_or_default();
            let event = Event::default().event("snapshot").data(data);
            Some((Ok(event), (api, changes, false, permit)))
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::default())
}
