//! The three ways a backend reaches a device, each one call at a time: directly (the runtime's
//! central over TCP, encrypted, the key pinned), over the gateway's HTTP API (JSON over one
//! keep-alive HTTP/1.1 connection), and relayed (the runtime's central over the gateway's link
//! WebSocket, its own key exchange with the device through the gateway).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use blerpc::client::PinPolicy;
use blerpc::link::tcp::{self, TcpOptions};
use blerpc::link::ws::{self, WsOptions};
use blerpc::{Client, ClientConfig};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

/// One way to call the device's `echo`.
pub(crate) enum Caller {
    /// The runtime's central, over a link straight to the device or relayed.
    Central(Client),
    /// HTTP/JSON through the gateway.
    Http {
        send: SendRequest<Full<Bytes>>,
        path: String,
        host: String,
        token: String,
    },
}

fn pinned(key: [u8; 32]) -> ClientConfig {
    ClientConfig {
        pinning: PinPolicy::Trust(key),
        ..ClientConfig::default()
    }
}

/// The direct baseline: a central over TCP to the device's own listener.
pub(crate) async fn direct(device: &str, key: [u8; 32]) -> anyhow::Result<Caller> {
    let addr = device
        .strip_prefix("tcp://")
        .ok_or_else(|| anyhow!("the device listens on {device}, not tcp://"))?;
    let link = tcp::connect(addr, &TcpOptions::default()).await?;
    Ok(Caller::Central(Client::connect(link, pinned(key)).await?))
}

/// A central over the gateway's relayed link to the device.
pub(crate) async fn relayed(
    gateway: SocketAddr,
    id: &str,
    key: [u8; 32],
    token: &str,
) -> anyhow::Result<Caller> {
    let options = WsOptions {
        headers: vec![("Authorization".into(), format!("Bearer {token}"))],
        ..WsOptions::default()
    };
    let link = ws::connect(&format!("ws://{gateway}/v1/devices/{id}/link"), &options)
        .await
        .context("cannot open the relayed link")?;
    Ok(Caller::Central(Client::connect(link, pinned(key)).await?))
}

/// HTTP/JSON through the gateway, on one keep-alive connection.
pub(crate) async fn http(gateway: SocketAddr, id: &str, token: &str) -> anyhow::Result<Caller> {
    let stream = tokio::net::TcpStream::connect(gateway).await?;
    stream.set_nodelay(true)?;
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(Caller::Http {
        send,
        path: format!("/v1/devices/{id}/calls/echo"),
        host: gateway.to_string(),
        token: token.to_string(),
    })
}

/// The demo's `EchoRequest { message }` as protobuf.
fn echo_pb(message: &str) -> Vec<u8> {
    let mut out = vec![0x0a, message.len() as u8];
    out.extend_from_slice(message.as_bytes());
    out
}

impl Caller {
    /// Closes the caller's connection.
    pub(crate) async fn close(self) {
        if let Caller::Central(c) = self {
            c.close().await;
        }
    }

    /// One `echo` of `message` (at most 127 bytes), checked; returns its latency.
    pub(crate) async fn echo(&mut self, message: &str) -> anyhow::Result<Duration> {
        let started = Instant::now();
        match self {
            Caller::Central(client) => {
                let request = echo_pb(message);
                let answer = client.call("echo", request.clone()).await?;
                let elapsed = started.elapsed();
                if answer != request {
                    bail!("wrong echo: {answer:?}");
                }
                Ok(elapsed)
            }
            Caller::Http { .. } => {
                let body = format!(r#"{{"message":"{message}"}}"#);
                let (status, answer, elapsed) = self.post(&body).await?;
                if status != 200 || answer != body.as_bytes() {
                    bail!("HTTP {status}: {}", String::from_utf8_lossy(&answer));
                }
                Ok(elapsed)
            }
        }
    }

    /// One `echo` over HTTP that must be answered `status` (a refusal the bench times);
    /// returns its latency.
    pub(crate) async fn refused(&mut self, status: u16) -> anyhow::Result<Duration> {
        let (got, answer, elapsed) = self.post(r#"{"message":"m"}"#).await?;
        if got != status {
            bail!(
                "HTTP {got} where {status} was due: {}",
                String::from_utf8_lossy(&answer)
            );
        }
        Ok(elapsed)
    }

    /// Posts `body` to an HTTP caller's path: the status, the answer and the latency.
    async fn post(&mut self, body: &str) -> anyhow::Result<(u16, Bytes, Duration)> {
        let Caller::Http { path, .. } = self else {
            bail!("not an HTTP caller");
        };
        let path = path.clone();
        self.request(hyper::Method::POST, &path, &[], body).await
    }

    /// Any request on an HTTP caller's connection (JSON `body`, unless empty, with `headers`
    /// too): the status, the answer and the latency.
    pub(crate) async fn request(
        &mut self,
        method: hyper::Method,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> anyhow::Result<(u16, Bytes, Duration)> {
        let Caller::Http {
            send, host, token, ..
        } = self
        else {
            bail!("not an HTTP caller");
        };
        let started = Instant::now();
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", host.as_str())
            .header("authorization", format!("Bearer {token}"));
        if !body.is_empty() {
            request = request.header("content-type", "application/json");
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(Bytes::from(body.to_string())))?;
        send.ready().await?;
        let response = send.send_request(request).await?;
        let status = response.status().as_u16();
        let answer = response.into_body().collect().await?.to_bytes();
        Ok((status, answer, started.elapsed()))
    }
}
