//! The holder's side: answer a request that came over NATS with the gateway's own router, and
//! send the response back as frames (see [`envelope`](super::envelope)).

use async_nats::Message;
use axum::Router;
use axum::body::Body;
use axum::body::HttpBody as _;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::BodyExt as _;

use super::Ctx;
use super::envelope::{BodyMode, Frame, RequestHead};
use super::pipe::{self, Demuxed, SendLimits};
use crate::Gateway;
use crate::http::Problem;

/// Answers `message` with `router`. Failures to reach the requester are logged: it has gone.
pub(super) async fn answer(ctx: Ctx, gateway: Gateway, router: Router, message: Message) {
    let Some(reply) = message.reply.as_ref().map(|r| r.to_string()) else {
        tracing::debug!(subject = %message.subject, "a request without a reply subject: ignored");
        return;
    };
    if message
        .headers
        .as_ref()
        .is_some_and(|h| h.get(super::envelope::header::PROBE).is_some())
    {
        answer_probe(&ctx, &gateway, &reply, &message.subject).await;
        return;
    }
    if let Err(e) = exchange(&ctx, &gateway, router, &reply, message).await {
        tracing::debug!("answering over NATS: {e}");
    }
}

/// Answers a probe on a device's subject: `Blerpc-Status: 200` if the device is connected
/// here, `503` if not (it left while the probe was on its way).
async fn answer_probe(ctx: &Ctx, gateway: &Gateway, reply: &str, subject: &str) {
    let device = subject.rsplit('.').next().unwrap_or_default();
    let here = gateway
        .registry()
        .get(device)
        .is_some_and(|d| d.connection().is_some());
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(
        super::envelope::header::STATUS,
        if here { "200" } else { "503" },
    );
    if let Err(e) = ctx
        .client
        .publish_with_headers(reply.to_string(), headers, Bytes::new())
        .await
    {
        tracing::debug!("answering a probe over NATS: {e}");
    }
}

/// Answers `message` with 429: this gateway answers as many forwarded requests as it may.
pub(super) async fn refuse(ctx: Ctx, message: Message) {
    let Some(reply) = message.reply.as_ref().map(|r| r.to_string()) else {
        return;
    };
    let problem = Problem::new(
        StatusCode::TOO_MANY_REQUESTS,
        "too_many_forwarded",
        "Too many forwarded requests",
        format!(
            "this gateway answers {} requests from other gateways at once (max_forwarded): retry",
            ctx.limits.max_forwarded
        ),
    );
    let accepted = Frame::Accepted {
        peer: None,
        window: 0,
    };
    if pipe::publish(&ctx.client, &reply, &accepted, Bytes::new())
        .await
        .is_ok()
    {
        let _ = send_response(&ctx, &reply, problem.into_response(), None, 0).await;
    }
}

async fn exchange(
    ctx: &Ctx,
    gateway: &Gateway,
    router: Router,
    reply: &str,
    message: Message,
) -> Result<(), pipe::PipeError> {
    let limits = &ctx.limits;
    let head = match RequestHead::decode(message.headers.as_ref()) {
        Ok(h) => h,
        Err(e) => {
            let problem = Problem::new(
                StatusCode::BAD_REQUEST,
                "bad_envelope",
                "Not a bleRPC gateway request",
                format!(
                    "the request on {} is not one this gateway reads: {e}",
                    message.subject
                ),
            );
            return send_response(ctx, reply, problem.into_response(), None, 0).await;
        }
    };
    if let Some(id) = super::link::link_device(&head.method, &head.path) {
        return super::link::serve(ctx, gateway, reply, &head, &id).await;
    }
    // The inbox the requester sends its body frames, credits and `cancel` to.
    let mut inbox = match head.body {
        BodyMode::Stream => Some(open_inbox(ctx).await?),
        BodyMode::Whole => None,
    };
    pipe::publish(
        &ctx.client,
        reply,
        &Frame::Accepted {
            peer: inbox.as_ref().map(|(subject, _)| subject.clone()),
            window: limits.window,
        },
        Bytes::new(),
    )
    .await?;
    let body = match inbox.as_mut() {
        Some((_, demuxed)) => {
            let frames = std::mem::replace(&mut demuxed.frames, tokio::sync::mpsc::channel(1).1);
            pipe::receive_body(
                ctx.client.clone(),
                reply.to_string(),
                frames,
                limits.window,
                limits.stall,
                (),
            )
        }
        None => Body::from(message.payload),
    };
    let request = match to_request(&head, body) {
        Ok(r) => r,
        Err(problem) => {
            return send_response(ctx, reply, problem.into_response(), inbox, head.window).await;
        }
    };
    let response = crate::http::on_holder(gateway, router, request).await;
    send_response(ctx, reply, response, inbox, head.window).await
}

/// An inbox for the requester's frames to this side.
pub(super) async fn open_inbox(ctx: &Ctx) -> Result<(String, Demuxed), pipe::PipeError> {
    ctx.replies.open(ctx.limits.window).await
}

fn to_request(head: &RequestHead, body: Body) -> Result<Request, Problem> {
    let bad = |what: String| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "bad_envelope",
            "Not a bleRPC gateway request",
            what,
        )
    };
    let mut request = Request::builder()
        .method(head.method.as_str())
        .uri(head.path.as_str())
        .body(body)
        .map_err(|e| bad(format!("method {} path {}: {e}", head.method, head.path)))?;
    for (name, value) in &head.carried {
        let value = HeaderValue::from_str(value).map_err(|_| {
            bad(format!(
                "the {name} header is not a valid HTTP header value"
            ))
        })?;
        // The carried names are valid header names; `from_bytes` lower-cases them.
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| bad(format!("{name} is not a header name")))?;
        request.headers_mut().insert(name, value);
    }
    Ok(request)
}

/// Sends `response` to `reply`: whole if its size is known and fits a frame, else streamed.
pub(super) async fn send_response(
    ctx: &Ctx,
    reply: &str,
    response: Response,
    inbox: Option<(String, Demuxed)>,
    window: u32,
) -> Result<(), pipe::PipeError> {
    let limits = &ctx.limits;
    let (parts, body) = response.into_parts();
    // The one response header a head carries.
    let carried: Vec<(&'static str, String)> = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| ("Content-Type", v.to_string()))
        .into_iter()
        .collect();
    let status = parts.status.as_u16();
    if body
        .size_hint()
        .exact()
        .is_some_and(|n| n <= limits.chunk as u64)
    {
        let bytes = body
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        let head = Frame::Head {
            status,
            carried,
            body: BodyMode::Whole,
            peer: None,
        };
        return pipe::publish(&ctx.client, reply, &head, bytes).await;
    }
    let (peer, demuxed) = match inbox {
        Some(inbox) => inbox,
        None => open_inbox(ctx).await?,
    };
    let head = Frame::Head {
        status,
        carried,
        body: BodyMode::Stream,
        peer: Some(peer),
    };
    pipe::publish(&ctx.client, reply, &head, Bytes::new()).await?;
    // The requester's window is the first credit.
    pipe::grant(&demuxed.credits, window);
    let mut cancelled = demuxed.cancelled.clone();
    let send = pipe::send_body(
        &ctx.client,
        reply,
        body,
        &demuxed.credits,
        SendLimits {
            chunk: limits.chunk,
            keepalive: Some(limits.keepalive),
            stall: limits.stall,
        },
    );
    tokio::select! {
        r = send => r.map(|_| ()),
        _ = cancelled.wait_for(|c| *c) => Err(pipe::PipeError::Cancelled),
    }
}
