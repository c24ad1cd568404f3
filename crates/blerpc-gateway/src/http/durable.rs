//! Durable calls over HTTP ([`crate::nats::durable`]; a fleet's gateways only):
//!
//! | request | answer |
//! |---|---|
//! | `POST /v1/devices/{id}/calls/{command}` with `Blerpc-Durable: ttl=SECS[, idempotent]` | `202` and the call's record (`state: queued`), `Location` its URL |
//! | `GET /v1/devices/{id}/durable` | the device's calls, oldest first |
//! | `GET /v1/devices/{id}/durable/{call}` | one call's record: state, history, response |
//! | `DELETE /v1/devices/{id}/durable/{call}` | cancels it while queued (`409` after) |
//! | `GET /v1/devices/{id}/durable/events` | server-sent events: `event: call`, the record, at each change of the device's calls (counted with the dashboard's streams) |

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{Api, Problem, json_response};
use crate::nats::durable::{CallRecord, Durable, DurableError};

/// The request header that makes a call durable.
pub const DURABLE_HEADER: &str = "blerpc-durable";

/// A gateway outside a fleet has no durable calls: 404 for their records, 400 for a
/// submission (the request cannot be met here).
fn unavailable() -> Response {
    unavailable_as(StatusCode::NOT_FOUND)
}

fn unavailable_as(status: StatusCode) -> Response {
    Problem::new(
        status,
        "durable_unavailable",
        "Durable calls unavailable",
        "durable calls are stored in a fleet's JetStream: this gateway has none (run it with \
         --nats)"
            .to_string(),
    )
    .into_response()
}

fn store(api: &Api) -> Option<&Durable> {
    api.routing().durable.as_ref()
}

fn record(status: StatusCode, r: &CallRecord) -> Response {
    json_response(status, serde_json::to_string(r).unwrap_or_default())
}

/// `ttl=SECS[, idempotent]`.
fn parse(header: &str) -> Result<(Duration, bool), DurableError> {
    let (mut ttl, mut idempotent) = (None, false);
    for part in header.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some(("ttl", secs)) => {
                ttl = Some(
                    secs.trim()
                        .parse::<u64>()
                        .map(Duration::from_secs)
                        .map_err(|_| bad(header))?,
                );
            }
            None if part == "idempotent" => idempotent = true,
            _ => return Err(bad(header)),
        }
    }
    Ok((ttl.ok_or_else(|| bad(header))?, idempotent))
}

fn bad(header: &str) -> DurableError {
    DurableError::Bad(format!(
        "Blerpc-Durable {header:?}: give `ttl=SECONDS`, and `idempotent` if the call may be \
         sent again after an unknown outcome"
    ))
}

/// A durable call's submission (a call request that carries [`DURABLE_HEADER`]).
pub(super) async fn submit(
    api: &Api,
    id: &str,
    command: &str,
    headers: &HeaderMap,
    body: Body,
) -> Response {
    let Some(durable) = store(api) else {
        return unavailable_as(StatusCode::BAD_REQUEST);
    };
    let header = headers
        .get(DURABLE_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let (ttl, idempotent) = match parse(header) {
        Ok(p) => p,
        Err(e) => return e.problem().into_response(),
    };
    let json = match super::body::read(headers, body, 64 * 1024, api.state.body_timeout).await {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e @ super::body::BodyError::Timeout(_)) => {
            api.state.metrics.http_timeout("body");
            return Problem::from(crate::calls::CallFailure::RequestTimeout(e.to_string()))
                .into_response();
        }
        Err(_) => {
            return DurableError::Bad("a durable call's request is at most 64 KiB".into())
                .problem()
                .into_response();
        }
    };
    match durable.submit(id, command, &json, ttl, idempotent).await {
        Ok(r) => {
            let mut response = record(StatusCode::ACCEPTED, &r);
            if let Ok(v) = HeaderValue::from_str(&format!("/v1/devices/{id}/durable/{}", r.id)) {
                response.headers_mut().insert(header::LOCATION, v);
            }
            response
        }
        Err(e) => e.problem().into_response(),
    }
}

/// `GET /v1/devices/{id}/durable`.
pub(super) async fn list(State(api): State<Api>, Path(id): Path<String>) -> Response {
    let Some(durable) = store(&api) else {
        return unavailable();
    };
    match durable.list(&id).await {
        Ok(calls) => json_response(
            StatusCode::OK,
            serde_json::json!({ "calls": calls }).to_string(),
        ),
        Err(e) => e.problem().into_response(),
    }
}

/// `GET /v1/devices/{id}/durable/events`.
pub(super) async fn events(State(api): State<Api>, Path(id): Path<String>) -> Response {
    use axum::response::sse::{Event, KeepAlive, Sse};
    use futures_util::StreamExt as _;
    let Some(durable) = store(&api) else {
        return unavailable();
    };
    let Ok(permit) = api.state.event_streams.clone().try_acquire_owned() else {
        api.state.metrics.http_refused("event_streams");
        return super::dashboard::too_many_streams();
    };
    let subscriber = match durable.follow(&id).await {
        Ok(s) => s,
        Err(e) => return e.problem().into_response(),
    };
    let stream = subscriber.map(move |message| {
        let _held = &permit;
        Ok::<_, std::convert::Infallible>(
            Event::default()
                .event("call")
                .data(String::from_utf8_lossy(&message.payload)),
        )
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// `GET /v1/devices/{id}/durable/{call}`.
pub(super) async fn get(
    State(api): State<Api>,
    Path((id, call)): Path<(String, String)>,
) -> Response {
    let Some(durable) = store(&api) else {
        return unavailable();
    };
    match durable.get(&id, &call).await {
        Ok(r) => record(StatusCode::OK, &r),
        Err(e) => e.problem().into_response(),
    }
}

/// `DELETE /v1/devices/{id}/durable/{call}`.
pub(super) async fn cancel(
    State(api): State<Api>,
    Path((id, call)): Path<(String, String)>,
) -> Response {
    let Some(durable) = store(&api) else {
        return unavailable();
    };
    match durable.cancel(&id, &call).await {
        Ok(r) => record(StatusCode::OK, &r),
        Err(e) => e.problem().into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_durable_header_names_a_ttl_and_maybe_idempotence() {
        assert_eq!(parse("ttl=60").unwrap(), (Duration::from_secs(60), false));
        assert_eq!(
            parse(" ttl=5 , idempotent ").unwrap(),
            (Duration::from_secs(5), true)
        );
        for bad in ["", "idempotent", "ttl=x", "ttl=5, retry", "ttl"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
