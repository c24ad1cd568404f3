//! A backend's client of a fleet over NATS, without HTTP: [`FleetClient`] calls any device by
//! its id on its subject (`{prefix}.v1.device.{id}`), in the [`envelope`](super::envelope)
//! format, and gets what the HTTP API would answer: the same statuses, the same bodies.

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http_body_util::BodyExt as _;

use super::forward::{self, Target};
use super::{Ctx, NatsLimits, Subjects};
use crate::calls::CallFailure;
use crate::http::Problem;

/// What a device's gateway answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status (200, or the problem's: 404 unknown device, 503 not connected, …).
    pub status: u16,
    /// The content type (`application/json`, `application/problem+json`, …).
    pub content_type: String,
    /// The body.
    pub body: Bytes,
}

/// Why a call could not be made at all (a device's refusal is an [`Answer`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FleetCallError {
    /// A device id that cannot be a subject token.
    #[error("{0:?} is not a device id (letters, digits, `-`, `_`, `=`; at most 128 bytes)")]
    BadDevice(String),
    /// A streamed body broke off.
    #[error("the answer broke off: {0}")]
    Body(String),
}

/// A backend's client of the fleet: calls devices on their subjects, without HTTP.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use blerpc_gateway::nats::{FleetClient, NatsLimits};
/// let nats = async_nats::connect("nats://127.0.0.1:4222").await?;
/// let fleet = FleetClient::new(nats, "blerpc", NatsLimits::default())?;
/// let answer = fleet.call(&"ab".repeat(32), "echo", r#"{"message":"hi"}"#, None).await?;
/// assert_eq!(answer.status, 200);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct FleetClient {
    ctx: Ctx,
    subjects: Subjects,
}

impl FleetClient {
    /// A client of the fleet under `prefix` on `client`'s NATS connection.
    pub fn new(
        client: async_nats::Client,
        prefix: &str,
        limits: NatsLimits,
    ) -> Result<FleetClient, super::subjects::BadPrefix> {
        Ok(FleetClient {
            subjects: Subjects::new(prefix)?,
            ctx: Ctx::new(client, 0, limits),
        })
    }

    async fn post(
        &self,
        device: &str,
        command: &str,
        body: Body,
        content_type: &str,
        accept: Option<&str>,
        deadline: Option<Duration>,
    ) -> Result<axum::response::Response, FleetCallError> {
        let subject = self
            .subjects
            .device(device)
            .ok_or_else(|| FleetCallError::BadDevice(device.to_string()))?;
        let mut request = Request::post(format!("/v1/devices/{device}/calls/{command}"))
            .header("content-type", content_type);
        if let Some(a) = accept {
            request = request.header("accept", a);
        }
        if let Some(d) = deadline {
            request = request.header(crate::http::api::DEADLINE_HEADER, d.as_millis().to_string());
        }
        let request = request
            .body(body)
            .map_err(|e| FleetCallError::Body(e.to_string()))?;
        let who = format!("the gateway holding device {device}");
        let target = Target {
            subject,
            who: &who,
            nobody: Problem::from(CallFailure::NotConnected(device.to_string())),
            // Without a deadline the holder applies its default, at most its maximum (300 s
            // unless configured otherwise).
            deadline: deadline.unwrap_or(Duration::from_secs(300)),
        };
        Ok(forward::exchange(&self.ctx, target, request).await)
    }

    /// A unary call (or a device→caller stream, read whole): `command` on `device` with the
    /// JSON request `json`, within `deadline` (the gateway's default if `None`).
    pub async fn call(
        &self,
        device: &str,
        command: &str,
        json: &str,
        deadline: Option<Duration>,
    ) -> Result<Answer, FleetCallError> {
        let response = self
            .post(
                device,
                command,
                Body::from(json.to_string()),
                "application/json",
                None,
                deadline,
            )
            .await?;
        answer(response).await
    }

    /// A device→caller stream: the status, and the NDJSON lines as they come (a stream that
    /// failed midway ends with a line `{"error": <problem>}`, as over HTTP).
    pub async fn stream(
        &self,
        device: &str,
        command: &str,
        json: &str,
    ) -> Result<
        (
            u16,
            impl Stream<Item = Result<Bytes, FleetCallError>> + use<>,
        ),
        FleetCallError,
    > {
        let response = self
            .post(
                device,
                command,
                Body::from(json.to_string()),
                "application/json",
                None,
                None,
            )
            .await?;
        let status = response.status().as_u16();
        let chunks = response
            .into_body()
            .into_data_stream()
            .map(|r| r.map_err(|e| FleetCallError::Body(e.to_string())));
        Ok((status, chunks))
    }

    /// A caller→device stream: `items` (one JSON request each) uploaded with flow control.
    pub async fn upload(
        &self,
        device: &str,
        command: &str,
        items: impl Stream<Item = String> + Send + 'static,
        deadline: Option<Duration>,
    ) -> Result<Answer, FleetCallError> {
        let lines = items.map(|mut item| {
            item.push('\n');
            Ok::<_, std::convert::Infallible>(Bytes::from(item))
        });
        let response = self
            .post(
                device,
                command,
                Body::from_stream(lines),
                "application/x-ndjson",
                None,
                deadline,
            )
            .await?;
        answer(response).await
    }
}

async fn answer(response: axum::response::Response) -> Result<Answer, FleetCallError> {
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| FleetCallError::Body(e.to_string()))?
        .to_bytes();
    Ok(Answer {
        status,
        content_type,
        body,
    })
}
