//! The requester's side: send an HTTP request for a device or node over NATS and turn the
//! frames that come back into the HTTP response (see [`envelope`](super::envelope)).

use std::time::Duration;

use axum::body::Body;
use axum::body::HttpBody as _;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::BodyExt as _;

use super::Ctx;
use super::envelope::{BodyMode, Frame, RequestHead, header as h};
use super::pipe::{self, Demuxed, SendLimits};
use crate::http::Problem;

/// Where a request goes, and what to say about it.
pub(super) struct Target<'a> {
    /// The subject the request goes to.
    pub subject: String,
    /// What answers there, for messages: `the gateway holding device ab…`.
    pub who: &'a str,
    /// The answer when nobody listens on the subject.
    pub nobody: Problem,
    /// The deadline the holder applies (the head may take this long, plus a margin).
    pub deadline: Duration,
}

fn problem(
    status: StatusCode,
    kind: &'static str,
    title: &'static str,
    detail: String,
) -> Response {
    Problem::new(status, kind, title, detail).into_response()
}

fn unavailable(target: &Target<'_>, e: &dyn std::fmt::Display) -> Response {
    problem(
        StatusCode::BAD_GATEWAY,
        "fleet_unavailable",
        "Fleet unavailable",
        format!("cannot reach {} through NATS: {e}", target.who),
    )
}

/// A response with a whole body.
pub(super) fn whole(status: u16, payload: Bytes, content_type: &str) -> Response {
    let mut response = Response::new(Body::from(payload));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    if let Ok(v) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    response
}

/// What a wait for a frame brought.
#[derive(Debug)]
pub(super) enum Next {
    /// A frame and its payload.
    Frame(Frame, Bytes),
    /// NATS: nobody listens on the subject.
    NoResponders,
    /// The exchange broke.
    Failed(pipe::PipeError),
    /// Nothing within the wait.
    Timeout,
}

/// The next frame other than a credit or cancel, within `wait`.
pub(super) async fn next(demuxed: &mut Demuxed, wait: Duration) -> Next {
    let mut nobody = demuxed.no_responders.clone();
    tokio::select! {
        biased;
        frame = tokio::time::timeout(wait, demuxed.frames.recv()) => match frame {
            Err(_) => Next::Timeout,
            Ok(None) => {
                if *demuxed.no_responders.borrow() {
                    Next::NoResponders
                } else {
                    Next::Failed(pipe::PipeError::Failed("the reply subscription ended".into()))
                }
            }
            Ok(Some(Ok((frame, payload)))) => Next::Frame(frame, payload),
            Ok(Some(Err(e))) => Next::Failed(e),
        },
        _ = nobody.wait_for(|n| *n) => Next::NoResponders,
    }
}

/// The answer for a wait for the head that brought something else.
pub(super) fn unexpected(target: &Target<'_>, got: Next, wait: Duration) -> Response {
    match got {
        Next::NoResponders => target.nobody.clone().into_response(),
        Next::Timeout => problem(
            StatusCode::GATEWAY_TIMEOUT,
            "forward_timeout",
            "No answer from the holding gateway",
            format!(
                "{} accepted the request but gave no answer within {wait:?}: the device may \
                 have run the call",
                target.who
            ),
        ),
        Next::Failed(e) => unavailable(target, &e),
        Next::Frame(other, _) => unavailable(target, &format!("it answered {other:?} for a head")),
    }
}

/// Opens an inbox, sends the request, and waits for the holder's `accepted`: its peer inbox
/// and window.
pub(super) async fn start(
    ctx: &Ctx,
    target: &Target<'_>,
    head: &RequestHead,
    payload: Bytes,
) -> Result<(Demuxed, (Option<String>, u32)), Response> {
    let limits = &ctx.limits;
    let (inbox, mut demuxed) = ctx
        .replies
        .open(limits.window)
        .await
        .map_err(|e| unavailable(target, &e))?;
    ctx.client
        .publish_with_reply_and_headers(target.subject.clone(), inbox, head.encode(), payload)
        .await
        .map_err(|e| unavailable(target, &e))?;
    // The holder acknowledges at once; silence means it never had the request.
    match next(&mut demuxed, limits.accept_timeout).await {
        Next::Frame(Frame::Accepted { peer, window }, _) => Ok((demuxed, (peer, window))),
        Next::NoResponders => Err(target.nobody.clone().into_response()),
        Next::Frame(other, _) => Err(unavailable(
            target,
            &format!("it answered {other:?} before accepting"),
        )),
        Next::Failed(e) => Err(unavailable(target, &e)),
        Next::Timeout => Err(problem(
            StatusCode::GATEWAY_TIMEOUT,
            "forward_timeout",
            "Forwarded call not acknowledged",
            format!(
                "{} did not acknowledge the request within {:?}; it did not start there (the \
                 gateway may be overloaded or cut off): retry",
                target.who, limits.accept_timeout
            ),
        )),
    }
}

/// Sends `request` to `target` and returns the holder's response as it gave it.
pub(super) async fn exchange(ctx: &Ctx, target: Target<'_>, request: Request) -> Response {
    match run(ctx, &target, request).await {
        Ok(r) | Err(r) => r,
    }
}

async fn run(ctx: &Ctx, target: &Target<'_>, request: Request) -> Result<Response, Response> {
    let limits = &ctx.limits;
    let (parts, body) = request.into_parts();
    let mode = match body.size_hint().exact() {
        Some(n) if n <= limits.chunk as u64 => BodyMode::Whole,
        _ => BodyMode::Stream,
    };
    let head = RequestHead {
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_string(), |p| p.to_string()),
        body: mode,
        carried: h::CARRIED
            .iter()
            .filter_map(|&name| {
                let v = parts.headers.get(name)?.to_str().ok()?;
                Some((name, v.to_string()))
            })
            .collect(),
        window: limits.window,
    };
    let (payload, upload) = match mode {
        BodyMode::Whole => {
            let bytes = body
                .collect()
                .await
                .map_err(|e| unavailable(target, &e))?
                .to_bytes();
            (bytes, None)
        }
        BodyMode::Stream => (Bytes::new(), Some(body)),
    };
    let (mut demuxed, accepted) = start(ctx, target, &head, payload).await?;
    let uploading = match (upload, accepted) {
        (Some(body), (Some(peer), window)) => {
            pipe::grant(&demuxed.credits, window);
            let client = ctx.client.clone();
            let credits = demuxed.credits.clone();
            let send = SendLimits {
                chunk: limits.chunk,
                keepalive: None,
                stall: limits.stall,
            };
            Some(AbortOnDrop(tokio::spawn(async move {
                if let Err(e) = pipe::send_body(&client, &peer, body, &credits, send).await {
                    tracing::debug!("uploading over NATS: {e}");
                }
            })))
        }
        (Some(_), (None, _)) => {
            return Err(unavailable(
                target,
                &"it took a streamed body without saying where to send it",
            ));
        }
        (None, _) => None,
    };

    let wait = target.deadline + limits.head_margin;
    let (status, carried, body, peer, payload) = match next(&mut demuxed, wait).await {
        Next::Frame(
            Frame::Head {
                status,
                carried,
                body,
                peer,
            },
            payload,
        ) => (status, carried, body, peer, payload),
        other => return Err(unexpected(target, other, wait)),
    };
    let content_type = carried
        .iter()
        .find(|(name, _)| *name == "Content-Type")
        .map_or("", |(_, v)| v.as_str())
        .to_string();
    let body = match (body, peer) {
        (BodyMode::Whole, _) => return Ok(whole(status, payload, &content_type)),
        (BodyMode::Stream, Some(peer)) => {
            let frames = std::mem::replace(&mut demuxed.frames, tokio::sync::mpsc::channel(1).1);
            let cancel = CancelOnDrop {
                client: ctx.client.clone(),
                peer: peer.clone(),
            };
            pipe::receive_body(
                ctx.client.clone(),
                peer,
                frames,
                limits.window,
                limits.stall,
                (demuxed, uploading, cancel),
            )
        }
        (BodyMode::Stream, None) => {
            return Err(unavailable(target, &"a streamed body without a peer"));
        }
    };
    let mut response = whole(status, Bytes::new(), &content_type);
    *response.body_mut() = body;
    Ok(response)
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Tells the holder to stop when the response body is dropped (the caller went away); after a
/// body that ended, the holder has finished and ignores it.
struct CancelOnDrop {
    client: async_nats::Client,
    peer: String,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let client = self.client.clone();
        let peer = std::mem::take(&mut self.peer);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = pipe::publish(&client, &peer, &Frame::Cancel, Bytes::new()).await;
            });
        }
    }
}
