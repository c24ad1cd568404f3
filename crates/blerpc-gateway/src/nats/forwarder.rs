//! The fleet's [`Forwarder`]: what this gateway holds is answered in process, the rest goes
//! over NATS to the gateway that holds it ([`forward`](super::forward)).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::future::BoxFuture;

use super::forward;
use super::link::link_device;
use super::presence::Inner;
use crate::calls::CallFailure;
use crate::http::Problem;
use crate::registry::DeviceView;
use crate::routing::local::{LOCAL, LocalForwarder, unknown_node};
use crate::routing::{
    ForwardError, Forwarder, Holder, ListQuery, MetricSet, NodeId, Page, Snapshot,
};

/// Forwards over NATS what this gateway does not hold.
#[derive(Clone, Debug)]
pub(super) struct FleetForwarder {
    pub(super) inner: Arc<Inner>,
    pub(super) local: LocalForwarder,
}

/// The device id of a `/v1/devices/{id}…` path.
fn device_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/v1/devices/")?;
    let id = rest.split('/').next()?;
    (!id.is_empty()).then_some(id)
}

impl FleetForwarder {
    fn deadline(&self, request: &Request) -> Duration {
        let asked = request
            .headers()
            .get(crate::http::api::DEADLINE_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse::<u64>().ok());
        self.inner
            .gateway
            .deadline(asked)
            .unwrap_or(self.inner.gateway.config().default_deadline)
    }

    /// `GET path` on `node`, its 200 answer decoded.
    fn fetch<T: Send + 'static>(
        &self,
        node: &NodeId,
        path: String,
        decode: fn(&[u8]) -> Result<T, String>,
    ) -> BoxFuture<'static, Result<T, ForwardError>> {
        let this = self.clone();
        let node = node.clone();
        Box::pin(async move {
            let body = this.get(&node, path).await?;
            decode(&body).map_err(|reason| ForwardError::BadAnswer { node, reason })
        })
    }

    async fn get(&self, node: &NodeId, path: String) -> Result<Bytes, ForwardError> {
        let subject = self
            .inner
            .subjects
            .node(node.as_str())
            .ok_or_else(|| ForwardError::UnknownNode(node.clone()))?;
        let unavailable = |reason: String| ForwardError::Unavailable {
            node: node.clone(),
            reason,
        };
        let request = Request::get(path)
            .body(axum::body::Body::empty())
            .map_err(|e| unavailable(e.to_string()))?;
        let who = format!("gateway {node}");
        let target = forward::Target {
            subject,
            who: &who,
            nobody: node_gone(node),
            deadline: self.inner.ctx.limits.accept_timeout,
        };
        let response = forward::exchange(&self.inner.ctx, target, request).await;
        crate::routing::ok_body(node, response).await
    }
    /// Whether a gateway answers on `subject` that it holds the device now (a probe: no
    /// responders, or an answer other than 200 within the accept timeout, is no).
    async fn present(&self, subject: String) -> bool {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(super::envelope::header::PROBE, "1");
        let asked = self
            .inner
            .ctx
            .client
            .request_with_headers(subject, headers, Bytes::new());
        match tokio::time::timeout(self.inner.ctx.limits.accept_timeout, asked).await {
            Ok(Ok(answer)) => answer.headers.as_ref().is_some_and(|h| {
                h.get(super::envelope::header::STATUS)
                    .is_some_and(|v| v.as_str() == "200")
            }),
            _ => false,
        }
    }

    /// Sends `request` over NATS: to the device's subject if it is `online`, else to `node`
    /// (which answers for it from what it knows).
    async fn remote(
        self,
        node: NodeId,
        online: bool,
        device: Option<String>,
        request: Request,
    ) -> Response {
        let inner = self.inner.clone();
        let deadline = self.deadline(&request);
        let not_connected = |id: &str| Problem::from(CallFailure::NotConnected(id.to_string()));
        let (subject, who, nobody) = match (&device, online) {
            (Some(id), true) => match inner.subjects.device(id) {
                Some(s) => (
                    s,
                    format!("the gateway holding device {id}"),
                    not_connected(id),
                ),
                None => {
                    return Problem::from(CallFailure::UnknownDevice(id.clone())).into_response();
                }
            },
            _ => match inner.subjects.node(node.as_str()) {
                Some(s) => (
                    s,
                    format!("gateway {node}"),
                    device
                        .as_deref()
                        .map_or_else(|| node_gone(&node), not_connected),
                ),
                None => return unknown_node(&node),
            },
        };
        let target = forward::Target {
            subject,
            who: &who,
            nobody,
            deadline,
        };
        if online && link_device(request.method().as_str(), request.uri().path()).is_some() {
            return super::link::open(&inner.ctx, target, request).await;
        }
        forward::exchange(&inner.ctx, target, request).await
    }
}

/// The answer for a request to a gateway that has left the fleet.
fn node_gone(node: &NodeId) -> Problem {
    Problem::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "node_gone",
        "Gateway gone",
        format!("gateway {node} is not in the fleet now"),
    )
}

impl Forwarder for FleetForwarder {
    fn nodes(&self) -> Vec<NodeId> {
        self.inner.nodes()
    }

    fn forward(&self, to: &Holder, request: Request) -> BoxFuture<'static, Response> {
        let device = device_of(request.uri().path()).map(str::to_string);
        let held_here = device.as_deref().is_some_and(|d| {
            self.inner
                .gateway
                .registry()
                .get(d)
                .is_some_and(|d| d.connection().is_some())
        });
        let remote = match to {
            Holder::Node { node, online } if *node != self.inner.node && !held_here => {
                Some((node.clone(), *online))
            }
            _ => None,
        };
        // The directory is the fleet's view, and it lags behind connections (a claim is
        // written, replicated and watched): a device it has offline, or does not know, may be
        // connected somewhere already. Its subject is the truth: ask there first.
        let probe = match (&device, to) {
            (_, _) if held_here => None,
            (_, Holder::Node { online: true, .. }) => None,
            (Some(id), _) => self.inner.subjects.device(id),
            (None, _) => None,
        };
        if let Some(subject) = probe {
            let this = self.clone();
            let to = to.clone();
            return Box::pin(async move {
                if this.present(subject).await {
                    // Online, wherever it is: the device's subject is what is used.
                    let node = match &to {
                        Holder::Node { node, .. } => node.clone(),
                        Holder::Nobody => this.inner.node.clone(),
                    };
                    return this.remote(node, true, device, request).await;
                }
                match to {
                    Holder::Node { node, online } if node != this.inner.node => {
                        this.remote(node, online, device, request).await
                    }
                    _ => this.local.forward(&Holder::Nobody, request).await,
                }
            });
        }
        let Some((node, online)) = remote else {
            return self.local.forward(&Holder::Nobody, request);
        };
        Box::pin(self.clone().remote(node, online, device, request))
    }

    fn device_page(
        &self,
        node: &NodeId,
        query: ListQuery,
    ) -> BoxFuture<'static, Result<Page<DeviceView>, ForwardError>> {
        if *node == self.inner.node {
            return self.local.device_page(&LOCAL, query);
        }
        let path = format!("/internal/v1/devices?{}", query_string(&query));
        self.fetch(node, path, |b| {
            serde_json::from_slice(b).map_err(|e| e.to_string())
        })
    }

    fn snapshot(&self, node: &NodeId) -> BoxFuture<'static, Result<Snapshot, ForwardError>> {
        if *node == self.inner.node {
            return self.local.snapshot(&LOCAL);
        }
        let path = "/internal/v1/snapshot".to_string();
        self.fetch(node, path, |b| {
            serde_json::from_slice(b).map_err(|e| e.to_string())
        })
    }

    fn metrics(&self, node: &NodeId) -> BoxFuture<'static, Result<MetricSet, ForwardError>> {
        if *node == self.inner.node {
            return self.local.metrics(&LOCAL);
        }
        let path = "/internal/v1/metrics".to_string();
        self.fetch(node, path, |b| {
            MetricSet::decode(b).map_err(|e| e.to_string())
        })
    }
}

/// `query` as a URL query string.
fn query_string(query: &ListQuery) -> String {
    let mut parts = Vec::new();
    if let Some(on) = query.online {
        parts.push(format!("online={on}"));
    }
    if let Some(after) = &query.after {
        parts.push(format!("after={}", percent(after)));
    }
    if query.limit > 0 {
        parts.push(format!("limit={}", query.limit));
    }
    parts.join("&")
}

fn percent(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_ids_come_from_device_paths_only() {
        assert_eq!(device_of("/v1/devices/ab/calls/echo"), Some("ab"));
        assert_eq!(device_of("/v1/devices/ab"), Some("ab"));
        assert_eq!(device_of("/v1/devices/"), None);
        assert_eq!(device_of("/v1/schema"), None);
    }

    #[test]
    fn list_queries_travel_as_query_strings() {
        let q = ListQuery {
            online: Some(true),
            after: Some("a b&c".into()),
            limit: 5,
        };
        assert_eq!(query_string(&q), "online=true&after=a%20b%26c&limit=5");
        assert_eq!(query_string(&ListQuery::default()), "");
    }
}
