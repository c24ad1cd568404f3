//! The relayed link between gateways: a backend's WebSocket (`GET /v1/devices/{id}/link`) at
//! one gateway, the device's relayed connection at the gateway that holds it, and the binary
//! messages between them carried as frames over NATS, one message a `data` frame, with credit
//! both ways and an `idle` frame every keepalive so a gateway that vanishes is noticed within
//! the stall time. The gateways still see only ciphertext: the backend's central and the device
//! run their own session through it.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::extract::FromRequestParts as _;
use axum::extract::Request;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use tokio::sync::mpsc;

use super::Ctx;
use super::envelope::{BodyMode, Frame, RequestHead};
use super::forward::{self, Next, Target};
use super::pipe::{self, Demuxed, Outflow, PipeError};
use crate::Gateway;
use crate::http::relay;

/// Whether `head` opens a relayed link: `GET /v1/devices/{id}/link`; the device id if so.
pub(super) fn link_device(method: &str, path: &str) -> Option<String> {
    let rest = path.strip_prefix("/v1/devices/")?;
    let id = rest.strip_suffix("/link")?;
    (method == "GET" && !id.is_empty() && !id.contains('/')).then(|| id.to_string())
}

/// The holder's side: relay device `id` to the requester at `reply`.
pub(super) async fn serve(
    ctx: &Ctx,
    gateway: &Gateway,
    reply: &str,
    head: &RequestHead,
    id: &str,
) -> Result<(), PipeError> {
    let prepared = match relay::prepare(gateway, id) {
        Ok(p) => p,
        Err(problem) => {
            let accepted = Frame::Accepted {
                peer: None,
                window: 0,
            };
            pipe::publish(&ctx.client, reply, &accepted, Bytes::new()).await?;
            return super::serve::send_response(ctx, reply, problem.into_response(), None, 0).await;
        }
    };
    let (peer, mut demuxed) = super::serve::open_inbox(ctx).await?;
    let limits = &ctx.limits;
    let accepted = Frame::Accepted {
        peer: Some(peer.clone()),
        window: limits.window,
    };
    pipe::publish(&ctx.client, reply, &accepted, Bytes::new()).await?;
    let switching = Frame::Head {
        status: StatusCode::SWITCHING_PROTOCOLS.as_u16(),
        carried: Vec::new(),
        body: BodyMode::Stream,
        peer: Some(peer),
    };
    pipe::publish(&ctx.client, reply, &switching, Bytes::new()).await?;
    pipe::grant(&demuxed.credits, head.window);
    // From the requester: its backend's messages.
    let frames = std::mem::replace(&mut demuxed.frames, mpsc::channel(1).1);
    let incoming = pipe::receive_body(
        ctx.client.clone(),
        reply.to_string(),
        frames,
        limits.window,
        limits.stall,
        (),
    )
    .into_data_stream()
    .map(|r| r.map(Message::Binary).map_err(|e| e.to_string()));
    // To the requester: the device's messages, sent by a task of their own with keepalives.
    let (tx, rx) = mpsc::channel::<Message>(1);
    let sender = {
        let ctx = ctx.clone();
        let reply = reply.to_string();
        tokio::spawn(async move {
            if let Err(e) = send_messages(&ctx, &reply, &demuxed, rx).await {
                tracing::debug!("relaying over NATS: {e}");
            }
        })
    };
    let outgoing = futures_util::sink::unfold(tx, |tx, message: Message| async move {
        tx.send(message)
            .await
            .map_err(|_| PipeError::Failed("the relay's sender has stopped".into()))?;
        Ok::<_, PipeError>(tx)
    });
    let backend = Duplex {
        stream: Box::pin(incoming),
        sink: Box::pin(outgoing),
    };
    relay::run(gateway.clone(), prepared, backend).await;
    sender.abort();
    Ok(())
}

/// Sends what `rx` gives as `data` frames to `to` (a close ends the body), and `idle` every
/// keepalive.
async fn send_messages(
    ctx: &Ctx,
    to: &str,
    demuxed: &Demuxed,
    mut rx: mpsc::Receiver<Message>,
) -> Result<(), PipeError> {
    let mut out = Outflow::new(&ctx.client, to, &demuxed.credits, ctx.limits.stall);
    let mut tick = tokio::time::interval(ctx.limits.keepalive);
    loop {
        tokio::select! {
            m = rx.recv() => match m {
                Some(Message::Binary(b)) => out.data(b).await?,
                Some(Message::Close(_)) | None => {
                    out.end(None).await?;
                    return Ok(());
                }
                Some(_) => {}
            },
            _ = tick.tick() => out.idle().await?,
        }
    }
}

/// A stream and a sink as one value: the backend's end of a relay, for [`relay::run`].
struct Duplex {
    stream: Pin<Box<dyn Stream<Item = Result<Message, String>> + Send>>,
    sink: Pin<Box<dyn Sink<Message, Error = PipeError> + Send>>,
}

impl Stream for Duplex {
    type Item = Result<Message, String>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.stream.as_mut().poll_next(cx)
    }
}

impl Sink<Message> for Duplex {
    type Error = PipeError;
    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), PipeError>> {
        self.sink.as_mut().poll_ready(cx)
    }
    fn start_send(mut self: Pin<&mut Self>, item: Message) -> Result<(), PipeError> {
        self.sink.as_mut().start_send(item)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), PipeError>> {
        self.sink.as_mut().poll_flush(cx)
    }
    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), PipeError>> {
        self.sink.as_mut().poll_close(cx)
    }
}

/// The requester's side: the holder prepares the relay first (its refusal is answered as it
/// gave it), then this gateway takes the backend's WebSocket upgrade and carries its messages.
pub(super) async fn open(ctx: &Ctx, target: Target<'_>, request: Request) -> Response {
    let (mut parts, _) = request.into_parts();
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(u) => u,
        Err(e) => return relay::not_an_upgrade(e),
    };
    let head = RequestHead {
        method: "GET".to_string(),
        path: parts.uri.path().to_string(),
        body: BodyMode::Stream,
        carried: Vec::new(),
        window: ctx.limits.window,
    };
    let (mut demuxed, accepted) = match forward::start(ctx, &target, &head, Bytes::new()).await {
        Ok(started) => started,
        Err(response) => return response,
    };
    let wait = ctx.limits.accept_timeout + ctx.limits.head_margin;
    let (status, peer) = match forward::next(&mut demuxed, wait).await {
        Next::Frame(Frame::Head { status, peer, .. }, payload) if status != 101 => {
            // The holder's refusal (404, 503, 501…), whole.
            let _ = peer;
            return forward::whole(status, payload, "application/problem+json");
        }
        Next::Frame(Frame::Head { status, peer, .. }, _) => (status, peer),
        other => return forward::unexpected(&target, other, wait),
    };
    let (Some(peer), (_, window)) = (peer, accepted) else {
        return forward::whole(502, Bytes::new(), "text/plain");
    };
    debug_assert_eq!(status, 101);
    pipe::grant(&demuxed.credits, window);
    let ctx = ctx.clone();
    relay::relay_upgrade(upgrade).on_upgrade(move |ws| async move {
        if let Err(e) = carry(&ctx, ws, &peer, demuxed).await {
            tracing::debug!("relaying over NATS: {e}");
        }
    })
}

/// Carries the backend's WebSocket `ws` to the holder at `peer` and back until either ends.
async fn carry(
    ctx: &Ctx,
    ws: WebSocket,
    peer: &str,
    mut demuxed: Demuxed,
) -> Result<(), PipeError> {
    let limits = &ctx.limits;
    let (mut ws_tx, mut ws_rx) = ws.split();
    let frames = std::mem::replace(&mut demuxed.frames, mpsc::channel(1).1);
    let mut incoming = pipe::receive_body(
        ctx.client.clone(),
        peer.to_string(),
        frames,
        limits.window,
        limits.stall,
        (),
    )
    .into_data_stream();
    let mut out = Outflow::new(&ctx.client, peer, &demuxed.credits, limits.stall);
    let mut tick = tokio::time::interval(limits.keepalive);
    let result = loop {
        tokio::select! {
            m = ws_rx.next() => match m {
                Some(Ok(Message::Binary(b))) => {
                    if let Err(e) = out.data(b).await {
                        break Err(e);
                    }
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                _ => break out.end(None).await.map(|_| ()),
            },
            m = incoming.next() => match m {
                Some(Ok(b)) => {
                    if ws_tx.send(Message::Binary(b)).await.is_err() {
                        break Ok(());
                    }
                }
                Some(Err(e)) => break Err(PipeError::Failed(e.to_string())),
                None => break Ok(()),
            },
            _ = tick.tick() => {
                if let Err(e) = out.idle().await {
                    break Err(e);
                }
            }
        }
    };
    let close = std::time::Duration::from_secs(1);
    let _ = tokio::time::timeout(close, ws_tx.send(Message::Close(None))).await;
    let _ = pipe::publish(&ctx.client, peer, &Frame::Cancel, Bytes::new()).await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_get_of_a_device_s_link_opens_one() {
        assert_eq!(link_device("GET", "/v1/devices/ab/link"), Some("ab".into()));
        assert_eq!(link_device("POST", "/v1/devices/ab/link"), None);
        assert_eq!(link_device("GET", "/v1/devices/ab/calls/link"), None);
        assert_eq!(link_device("GET", "/v1/devices//link"), None);
        assert_eq!(link_device("GET", "/v1/relay/x"), None);
    }
}
