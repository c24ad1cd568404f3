//! `/v1/devices` and `/metrics` (the fleet's, merged from every node), and what a device's
//! holder answers: `/v1/devices/{id}`, `/v1/devices/{id}/calls/{command}`,
//! `/v1/devices/{id}/diagnostics`, `/v1/devices/{id}/report`, `/v1/schema`.
//!
//! A call's request body is its JSON request (unary and device→caller streams) or one JSON item
//! per line (NDJSON, uploads). A unary call answers with the JSON response; a device→caller
//! stream answers `application/x-ndjson`, one item per line (or `text/event-stream` when the
//! request accepts it), ending with a line `{"error": <problem>}` if it failed midway. The
//! `Blerpc-Deadline-Ms` header sets the call's deadline.

use std::time::Duration;

use tokio::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use blerpc_schema::{CallKind, Method};
use futures_util::{Stream, StreamExt};

use super::body::BodyError;
use super::{Api, Problem, json_response};
use crate::Gateway;
use crate::calls::{CallFailure, Slot};
use crate::routing::{ListQuery, MAX_PAGE};

/// The request header that sets a call's deadline, in milliseconds.
pub const DEADLINE_HEADER: &str = "blerpc-deadline-ms";

/// `GET /v1/devices`: every device with totals; with `online`, `after` or `limit`, one page of
/// them and the cursor of the next (`next`).
pub(super) async fn list_devices(
    State(api): State<Api>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Response {
    let query = match query {
        Ok(Query(q)) => q,
        Err(e) => {
            return Problem::from(CallFailure::BadRequest(format!(
                "the query of GET /v1/devices: {e} (online=true|false, after=ID, limit=1..{MAX_PAGE})"
            )))
            .into_response();
        }
    };
    if query == ListQuery::default() {
        let list = api.routing().device_list().await;
        return json_response(
            StatusCode::OK,
            serde_json::to_string(&list).unwrap_or_default(),
        );
    }
    let page = api.routing().device_page(&query).await;
    json_response(
        StatusCode::OK,
        serde_json::json!({"devices": page.items, "next": page.next}).to_string(),
    )
}

pub(super) async fn get_device(State(gateway): State<Gateway>, Path(id): Path<String>) -> Response {
    known(gateway.device_view(&id), id)
}

/// What the gateway holds of device `id` as JSON, or 404 for a device it does not know.
fn known(found: Option<impl serde::Serialize>, id: String) -> Response {
    match found {
        Some(v) => json_response(
            StatusCode::OK,
            serde_json::to_string(&v).unwrap_or_default(),
        ),
        None => Problem::from(CallFailure::UnknownDevice(id)).into_response(),
    }
}

/// `GET /v1/devices/{id}/diagnostics`: the device's diagnostics, each field its value or
/// `{"unavailable": why}`.
pub(super) async fn diagnostics(
    State(gateway): State<Gateway>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let asked = async {
        let deadline = deadline_ms(&headers).and_then(|ms| gateway.deadline(ms))?;
        gateway.diagnostics(&id, deadline).await
    };
    match asked.await {
        Ok(d) => json_response(
            StatusCode::OK,
            serde_json::to_string(&d).unwrap_or_default(),
        ),
        Err(f) => Problem::from(f).into_response(),
    }
}

/// `GET /v1/devices/{id}/report`: the device's link report (its last diagnostics, its latest
/// connections, its calls), from what the gateway holds: the device is not asked.
pub(super) async fn report(State(gateway): State<Gateway>, Path(id): Path<String>) -> Response {
    known(gateway.device_report(&id), id)
}

pub(super) async fn schema(State(gateway): State<Gateway>) -> Response {
    let schema = gateway.schema();
    let commands: Vec<serde_json::Value> = schema
        .methods()
        .iter()
        .map(|m| {
            serde_json::json!({
                "name": m.name(),
                "kind": match m.kind() {
                    CallKind::Unary => "unary",
                    CallKind::ServerStream => "server_stream",
                    CallKind::ClientStream => "client_stream",
                    CallKind::BidiStream => "bidi_stream",
                },
                "request": m.input().full_name(),
                "response": m.output().full_name(),
                "example": serde_json::from_str::<serde_json::Value>(&m.request_template())
                    .unwrap_or_default(),
            })
        })
        .collect();
    json_response(
        StatusCode::OK,
        serde_json::json!({"service": schema.service_name(), "commands": commands}).to_string(),
    )
}

pub(super) async fn metrics(State(api): State<Api>) -> Response {
    let mut r = api.routing().metrics_text().await.into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    r
}

fn deadline_ms(headers: &HeaderMap) -> Result<Option<u64>, CallFailure> {
    match headers.get(DEADLINE_HEADER) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(Some)
            .ok_or_else(|| {
                CallFailure::BadRequest(format!(
                    "{DEADLINE_HEADER} must be a whole number of milliseconds"
                ))
            }),
    }
}

/// `POST /v1/devices/{id}/calls/{command}`.
pub(super) async fn call(
    State(gateway): State<Gateway>,
    Path((id, command)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    call_parts(&gateway, &id, &command, &headers, body).await
}

/// A call's answer, from its parts.
pub(super) async fn call_parts(
    gateway: &Gateway,
    id: &str,
    command: &str,
    headers: &HeaderMap,
    body: Body,
) -> Response {
    match call_inner(gateway, id, command, headers, body).await {
        Ok(r) => r,
        Err(f) => Problem::from(f).into_response(),
    }
}

/// The device and command of a call's path, `/v1/devices/{id}/calls/{command}`, when neither
/// needs decoding (no `%`): those that do are left to the router's `Path`.
pub(super) fn call_path(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/v1/devices/")?;
    let (id, rest) = rest.split_once('/')?;
    let command = rest.strip_prefix("calls/")?;
    let plain = |s: &str| !s.is_empty() && !s.bytes().any(|b| b == b'/' || b == b'%');
    (plain(id) && plain(command)).then_some((id, command))
}

async fn call_inner(
    gateway: &Gateway,
    id: &str,
    command: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, CallFailure> {
    let count = |f: CallFailure| {
        gateway.metrics().call(f.kind(), None);
        f
    };
    let method = gateway
        .schema()
        .method(command)
        .map_err(|e| count(CallFailure::UnknownCommand(e)))?;
    let deadline = deadline_ms(headers)
        .and_then(|ms| gateway.deadline(ms))
        .map_err(count)?;
    match method.kind() {
        CallKind::ClientStream => {
            // Boxed, as streams are: a unary call's future does not carry room for them.
            Box::pin(upload(gateway, id, &method, body, Instant::now(), deadline)).await
        }
        kind => {
            let json = read_json(gateway, headers, body).await.map_err(count)?;
            let request = method
                .encode_request(&json)
                .map_err(|e| count(CallFailure::BadRequest(e.to_string())))?;
            if kind == CallKind::ServerStream {
                let sse = headers
                    .get(header::ACCEPT)
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|a| a.contains("text/event-stream"));
                Box::pin(stream(
                    gateway,
                    id,
                    method,
                    request,
                    Instant::now(),
                    deadline,
                    sse,
                ))
                .await
            } else {
                let response = gateway
                    .call_bytes(id, method.name(), request, deadline)
                    .await?;
                let json = method
                    .decode_response(&response)
                    .map_err(|e| CallFailure::Device {
                        device: id.to_string(),
                        reason: e.to_string(),
                    })?;
                Ok(json_response(StatusCode::OK, json))
            }
        }
    }
}

/// A call's JSON request: the body whole, within `max_json_bytes` and `http_body_timeout`.
async fn read_json(
    gateway: &Gateway,
    headers: &HeaderMap,
    body: Body,
) -> Result<String, CallFailure> {
    let config = gateway.config();
    let bytes = super::body::read(
        headers,
        body,
        config.max_json_bytes,
        config.http_body_timeout,
    )
    .await
    .map_err(|e| match e {
        BodyError::TooLarge { .. } => CallFailure::TooLarge(format!("{e} (max_json_bytes)")),
        BodyError::Timeout(_) => {
            gateway.metrics().http_timeout("body");
            CallFailure::RequestTimeout(e.to_string())
        }
        BodyError::Failed(_) => CallFailure::BadRequest(e.to_string()),
    })?;
    String::from_utf8(Vec::from(bytes))
        .map_err(|_| CallFailure::BadRequest("the request body is not UTF-8".to_string()))
}

/// Routes and takes a stream slot, counting a failure.
async fn stream_slot(
    gateway: &Gateway,
    id: &str,
    started: Instant,
    deadline: Duration,
) -> Result<Slot, CallFailure> {
    let (device, connection) = gateway.route(id).inspect_err(|f| {
        gateway.metrics().call(f.kind(), None);
    })?;
    match gateway
        .slot(device.clone(), connection, true, started, deadline)
        .await
    {
        Ok(slot) => Ok(slot),
        Err(f) => {
            gateway.record(&device, started, Err(&f));
            Err(f)
        }
    }
}

/// A device→caller stream as NDJSON or SSE.
async fn stream(
    gateway: &Gateway,
    id: &str,
    method: Method,
    request: Vec<u8>,
    started: Instant,
    deadline: Duration,
    sse: bool,
) -> Result<Response, CallFailure> {
    let slot = stream_slot(gateway, id, started, deadline).await?;
    let items = match slot
        .connection
        .client
        .server_stream(method.name(), request)
        .await
    {
        Ok(items) => items,
        Err(e) => {
            let f = CallFailure::from_client(id, deadline, e);
            gateway.record(&slot.device, started, Err(&f));
            return Err(f);
        }
    };
    let end = crate::calls::until(started, deadline);
    struct State {
        gateway: Gateway,
        slot: Slot,
        items: blerpc::ResponseStream,
        method: Method,
        end: tokio::time::Instant,
        deadline: Duration,
        done: bool,
    }
    let state = State {
        gateway: gateway.clone(),
        slot,
        items,
        method,
        end,
        deadline,
        done: false,
    };
    // Each item: Ok(json line) or, last, Err(problem).
    let lines = futures_util::stream::unfold(state, |mut s| async move {
        if s.done {
            return None;
        }
        let id = s.slot.device.id.clone();
        let next = tokio::time::timeout_at(s.end, s.items.next()).await;
        let failure = match next {
            Ok(Some(Ok(bytes))) => match s.method.decode_response(&bytes) {
                Ok(json) => return Some((Ok(json), s)),
                Err(e) => CallFailure::Device {
                    device: id,
                    reason: e.to_string(),
                },
            },
            Ok(None) => {
                s.gateway.record(&s.slot.device, s.slot.started, Ok(()));
                return None;
            }
            Ok(Some(Err(e))) => CallFailure::from_client(&id, s.deadline, e),
            Err(_) => CallFailure::Deadline {
                device: id,
                deadline: s.deadline,
                where_: "in flight",
            },
        };
        s.gateway
            .record(&s.slot.device, s.slot.started, Err(&failure));
        s.done = true;
        Some((Err(Problem::from(failure)), s))
    });
    Ok(if sse {
        let events = lines.map(|item| {
            Ok::<_, std::convert::Infallible>(match item {
                Ok(json) => Event::default().data(json),
                Err(p) => Event::default().event("error").data(p.json().to_string()),
            })
        });
        Sse::new(events)
            .keep_alive(KeepAlive::default())
            .into_response()
    } else {
        let body = Body::from_stream(ndjson(lines));
        let mut r = (StatusCode::OK, body).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-ndjson"),
        );
        r
    })
}

fn ndjson(
    lines: impl Stream<Item = Result<String, Problem>> + Send + 'static,
) -> impl Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static {
    lines.map(|item| {
        let mut line = match item {
            Ok(json) => json,
            Err(p) => serde_json::json!({ "error": p.json() }).to_string(),
        };
        line.push('\n');
        Ok(Bytes::from(line))
    })
}

/// A caller→device stream: one JSON item per line of the request body.
async fn upload(
    gateway: &Gateway,
    id: &str,
    method: &Method,
    body: Body,
    started: Instant,
    deadline: Duration,
) -> Result<Response, CallFailure> {
    let slot = stream_slot(gateway, id, started, deadline).await?;
    let result = tokio::time::timeout_at(
        crate::calls::until(started, deadline),
        upload_items(gateway, &slot, method, body, deadline),
    )
    .await
    .unwrap_or_else(|_| {
        Err(CallFailure::Deadline {
            device: id.to_string(),
            deadline,
            where_: "in flight",
        })
    });
    let reached = !matches!(
        result,
        Err(CallFailure::BadRequest(_) | CallFailure::TooLarge(_))
    );
    if reached {
        gateway.record(&slot.device, started, result.as_ref().map(|_| ()));
    } else if let Err(f) = &result {
        gateway.metrics().call(f.kind(), None);
    }
    let json = result?;
    Ok(json_response(StatusCode::OK, json))
}

async fn upload_items(
    gateway: &Gateway,
    slot: &Slot,
    method: &Method,
    body: Body,
    deadline: Duration,
) -> Result<String, CallFailure> {
    let id = &slot.device.id;
    let client_error = |e| CallFailure::from_client(id, deadline, e);
    let max_line = gateway.config().max_json_bytes;
    let max_items = gateway.config().max_upload_items;
    let mut upload = slot
        .connection
        .client
        .client_stream(method.name())
        .await
        .map_err(client_error)?;
    let mut chunks = body.into_data_stream();
    let mut lines = crate::ndjson::Lines::new(max_line);
    let (mut items, mut body_done) = (0usize, false);
    loop {
        // Every complete line so far.
        while let Some((line, text)) = lines.next_line().map_err(|e| match e {
            crate::ndjson::LineError::TooLong { .. } => {
                CallFailure::TooLarge(format!("{e} (max_json_bytes)"))
            }
            crate::ndjson::LineError::NotUtf8 { .. } => CallFailure::BadRequest(e.to_string()),
        })? {
            items += 1;
            if items > max_items {
                return Err(CallFailure::TooLarge(format!(
                    "the upload has more than {max_items} items (max_upload_items)"
                )));
            }
            let item = method
                .encode_request(&text)
                .map_err(|e| CallFailure::BadRequest(format!("line {line}: {e}")))?;
            upload.send(item).await.map_err(client_error)?;
        }
        if body_done {
            break;
        }
        match chunks.next().await {
            Some(Ok(chunk)) => lines.push(&chunk),
            Some(Err(e)) => {
                return Err(CallFailure::BadRequest(format!(
                    "the request body failed: {e}"
                )));
            }
            None => {
                lines.finish();
                body_done = true;
            }
        }
    }
    let response = upload.finish().await.map_err(client_error)?;
    method
        .decode_response(&response)
        .map_err(|e| CallFailure::Device {
            device: id.clone(),
            reason: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_path_names_its_device_and_command_when_plain() {
        assert_eq!(
            call_path("/v1/devices/ab12/calls/echo"),
            Some(("ab12", "echo"))
        );
        for path in [
            "/v1/devices/ab12/calls/",
            "/v1/devices//calls/echo",
            "/v1/devices/ab12/calls/echo/more",
            "/v1/devices/ab12/calls/ech%6F",
            "/v1/devices/a%62/calls/echo",
            "/v1/devices/ab12/link",
            "/v1/devices/ab12",
            "/v2/devices/ab12/calls/echo",
        ] {
            assert_eq!(call_path(path), None, "{path}");
        }
    }
}
