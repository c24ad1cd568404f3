//! The two WebSocket ends of a relay ([`crate::relay`]): the backend's
//! `GET /v1/devices/{id}/link` and the device's `GET /v1/relay/{token}`.

use std::time::Duration;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures_util::{Sink, SinkExt, Stream, StreamExt};

use super::Problem;
use crate::Gateway;
use crate::calls::CallFailure;
use crate::relay::{RELAY_COMMAND, RELAY_PATH};

/// The largest container a relay carries: a long container (16 KiB) and its header.
pub(crate) const MAX_RELAY_MESSAGE: usize = 16 * 1024 + 64;

/// The bytes a relayed WebSocket reads at a time. tungstenite zero-fills its read buffer up to
/// this size before every read: at its default, 128 KiB, that was 30% of a relaying gateway's
/// CPU and most of the relay's latency over a bare splice. 4 KiB holds most containers; a
/// longer message is read in several pieces.
pub(crate) const RELAY_READ_BUFFER: usize = 4 * 1024;

/// `upgrade` with the relay's limits: messages and frames of at most [`MAX_RELAY_MESSAGE`],
/// reads of [`RELAY_READ_BUFFER`].
pub(crate) fn relay_upgrade(upgrade: WebSocketUpgrade) -> WebSocketUpgrade {
    upgrade
        .max_message_size(MAX_RELAY_MESSAGE)
        .max_frame_size(MAX_RELAY_MESSAGE)
        .read_buffer_size(RELAY_READ_BUFFER)
}

fn relay_problem(
    status: StatusCode,
    kind: &'static str,
    title: &'static str,
    detail: String,
) -> Response {
    Problem::new(status, kind, title, detail).into_response()
}

/// A request that is not a WebSocket upgrade: 426 as a problem.
pub(crate) fn not_an_upgrade(e: WebSocketUpgradeRejection) -> Response {
    let mut r = relay_problem(
        StatusCode::UPGRADE_REQUIRED,
        "upgrade_required",
        "WebSocket upgrade required",
        format!("this endpoint is a WebSocket: {e}"),
    );
    r.headers_mut().insert(
        axum::http::header::UPGRADE,
        axum::http::HeaderValue::from_static("websocket"),
    );
    r
}

/// `GET /v1/devices/{id}/link`: has the device open a relayed connection, then upgrades and
/// carries containers both ways.
pub(super) async fn backend_link(
    State(gateway): State<Gateway>,
    Path(id): Path<String>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let upgrade = match upgrade {
        Ok(u) => u,
        Err(e) => return not_an_upgrade(e),
    };
    let prepared = match prepare(&gateway, &id) {
        Ok(p) => p,
        Err(problem) => return problem.into_response(),
    };
    relay_upgrade(upgrade).on_upgrade(move |backend| run(gateway, prepared, backend))
}

/// A relay about to open: the device has been asked to dial back.
#[derive(Debug)]
pub(crate) struct Prepared {
    id: String,
    waiting: crate::relay::Waiting,
    asked: Asked,
    open: crate::relay::OpenRelay,
    timeout: Duration,
}

type Asked =
    tokio::task::JoinHandle<Result<Result<Vec<u8>, blerpc::Error>, tokio::time::error::Elapsed>>;

/// Checks that device `id` can open a relayed link now and asks it to dial back; `Err` is the
/// problem to answer instead.
pub(crate) fn prepare(gateway: &Gateway, id: &str) -> Result<Prepared, Problem> {
    let metrics = gateway.metrics().clone();
    let (device, connection) = match gateway.route(id) {
        Ok(r) => r,
        Err(f) => {
            if matches!(f, CallFailure::NotConnected(_)) {
                metrics.relay("not_connected");
            }
            return Err(Problem::from(f));
        }
    };
    if !connection.relay {
        metrics.relay("unsupported");
        return Err(Problem::new(
            StatusCode::NOT_IMPLEMENTED,
            "relay_unsupported",
            "Device cannot relay",
            format!(
                "device {} did not announce relayed links (a `blerpc serve --dial` device does; \
                 a reference peripheral opens no second connection): call it through \
                 /v1/devices/{{id}}/calls instead",
                device.id
            ),
        ));
    }
    let config = gateway.config();
    let Some(base) = config.relay_base.clone() else {
        return Err(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "relay_unavailable",
            "Relay not configured",
            "this gateway has no relay base URL (GatewayConfig::relay_base)".to_string(),
        ));
    };
    let relays = &gateway.inner.relays;
    let Some(open) = relays.try_open(config.max_relays) else {
        metrics.relay("busy");
        return Err(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "relay_busy",
            "Too many relays",
            format!("{} relayed links are open (max_relays)", config.max_relays),
        ));
    };
    let timeout = config.relay_timeout;
    let waiting = relays.wait_for(&device.id, timeout);
    let url = format!(
        "{}{RELAY_PATH}{}",
        base.trim_end_matches('/'),
        waiting.token
    );
    // The device dials back over its authenticated session; meanwhile the backend's side
    // opens and its first containers (setup and key exchange) wait here for the device.
    let client = connection.client.clone();
    let asked = tokio::spawn(async move {
        tokio::time::timeout(timeout, client.call(RELAY_COMMAND, url.into_bytes())).await
    });
    Ok(Prepared {
        id: device.id.clone(),
        waiting,
        asked,
        open,
        timeout,
    })
}

/// The backend's end of a relay: binary messages both ways, whatever carries them (a WebSocket
/// here, frames over NATS from another gateway of the fleet).
pub(crate) trait BackendEnd:
    Stream<Item = Result<Message, Self::Failure>> + Sink<Message> + Unpin + Send + 'static
{
    /// Why a message could not be read.
    type Failure;
}

impl<T, E> BackendEnd for T
where
    T: Stream<Item = Result<Message, E>> + Sink<Message> + Unpin + Send + 'static,
{
    type Failure = E;
}

/// Waits for the device's relayed connection, then carries containers between it and
/// `backend` until either side closes.
pub(crate) async fn run<B: BackendEnd>(gateway: Gateway, prepared: Prepared, backend: B) {
    let Prepared {
        id,
        waiting,
        asked,
        open,
        timeout,
    } = prepared;
    let metrics = gateway.metrics().clone();
    let Some((backend, device_socket, early)) =
        meet(backend, waiting, asked, timeout, &metrics).await
    else {
        return;
    };
    metrics.relay("opened");
    metrics.relay_open_delta(1);
    tracing::info!(device = %id, "relay open");
    let (to_backend, to_device) = pump(backend, device_socket, early).await;
    metrics.relay_open_delta(-1);
    tracing::info!(
        device = %id,
        "relay closed after {to_device} containers to the device and {to_backend} back"
    );
    drop(open);
}

/// Containers a backend may send before its device's relayed connection is up (its setup and
/// key exchange need 3); more close the relay.
const MAX_EARLY: usize = 64;

/// Waits for the device's relayed connection while keeping what the backend sends meanwhile;
/// on failure closes the backend's WebSocket with a reason (1011) and returns `None`.
async fn meet<B: BackendEnd>(
    mut backend: B,
    mut waiting: crate::relay::Waiting,
    asked: Asked,
    timeout: Duration,
    metrics: &crate::GatewayMetrics,
) -> Option<(B, WebSocket, Vec<Message>)> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut early = Vec::new();
    tokio::pin!(asked);
    let mut answered = false;
    let failure = loop {
        tokio::select! {
            device = waiting.device() => match device {
                Some(d) => return Some((backend, d, early)),
                None => break "the relay was withdrawn".to_string(),
            },
            r = &mut asked, if !answered => {
                answered = true;
                match r {
                    Ok(Ok(Ok(_))) => {} // the device connected; its socket is on its way
                    Ok(Ok(Err(e))) => {
                        metrics.relay("device_refused");
                        break format!("the device refused the relayed connection: {e}");
                    }
                    Ok(Err(_)) | Err(_) => {
                        metrics.relay("device_timeout");
                        break format!("the device did not answer within {timeout:?}");
                    }
                }
            }
            m = backend.next() => match m {
                Some(Ok(Message::Binary(b))) if early.len() < MAX_EARLY => {
                    early.push(Message::Binary(b));
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                _ => return None, // the backend left, or sent too much or text
            },
            () = tokio::time::sleep_until(deadline) => {
                metrics.relay("device_timeout");
                break format!("the device did not open its relayed connection within {timeout:?}");
            }
        }
    };
    let _ = backend
        .send(Message::Close(Some(axum::extract::ws::CloseFrame {
            code: 1011,
            reason: failure.chars().take(120).collect::<String>().into(),
        })))
        .await;
    None
}

/// `GET /v1/relay/{token}`: the device's side of a relay, authenticated by its one-time token.
pub(super) async fn device_link(
    State(gateway): State<Gateway>,
    Path(token): Path<String>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let upgrade = match upgrade {
        Ok(u) => u,
        Err(e) => return not_an_upgrade(e),
    };
    let Some((device, tx)) = gateway.inner.relays.claim(&token) else {
        return relay_problem(
            StatusCode::NOT_FOUND,
            "unknown_relay",
            "Unknown relay",
            "no relay waits for this token (used, expired, or never issued)".to_string(),
        );
    };
    tracing::debug!(%device, "device dialled its relayed connection");
    relay_upgrade(upgrade).on_upgrade(move |socket| async move {
        // The backend's side may have given up meanwhile: the socket then just closes.
        let _ = tx.send(socket);
    })
}

/// Sends `early` (what the backend sent before the device arrived) to the device, then copies
/// binary messages between the two sockets until either closes, fails or sends text; returns how
/// many went each way (to the backend, to the device).
async fn pump<B: BackendEnd>(backend: B, device: WebSocket, early: Vec<Message>) -> (u64, u64) {
    let (mut backend_tx, mut backend_rx) = backend.split();
    let (mut device_tx, mut device_rx) = device.split();
    let (mut to_backend, mut to_device) = (0u64, 0u64);
    for m in early {
        if device_tx.send(m).await.is_err() {
            return (0, to_device);
        }
        to_device += 1;
    }
    loop {
        tokio::select! {
            m = backend_rx.next() => match m {
                Some(Ok(Message::Binary(b))) => {
                    if device_tx.send(Message::Binary(b)).await.is_err() { break; }
                    to_device += 1;
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                _ => break,
            },
            m = device_rx.next() => match m {
                Some(Ok(Message::Binary(b))) => {
                    if backend_tx.send(Message::Binary(b)).await.is_err() { break; }
                    to_backend += 1;
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                _ => break,
            },
        }
    }
    let close = Duration::from_secs(1);
    let _ = tokio::time::timeout(close, backend_tx.send(Message::Close(None))).await;
    let _ = tokio::time::timeout(close, device_tx.send(Message::Close(None))).await;
    (to_backend, to_device)
}
