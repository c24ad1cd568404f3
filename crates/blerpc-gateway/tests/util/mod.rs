//! The harness of the HTTP API's in-process tests: gateways served on `127.0.0.1:0` in the
//! test's runtime, devices (the demo service on a `blerpc::Server`) attached over in-memory
//! links, and a small HTTP client.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Request};
use blerpc::link::mem;
use blerpc::link::ws::{self, WsOptions};
use blerpc::server::{BoxFuture, BoxStream, CallKind, Dispatch, Status};
use blerpc::{Server, ServerConfig};
use blerpc_gateway::relay::RELAY_COMMAND;
use blerpc_gateway::{Gateway, GatewayConfig};
use http_body_util::BodyExt as _;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::oneshot;

/// The bearer token the tests' gateways accept.
pub const TOKEN: &str = "in-process-test-token-0123456789";

/// A device: the demo service with identity seed `seed`, answering `blerpc.relay` by dialling
/// the relay URL and serving a fresh connection there (as `blerpc serve --dial` does), and
/// leaving unary calls unanswered while `stalled` is set.
#[derive(Clone)]
pub struct Device {
    pub server: Server,
    pub stalled: Arc<AtomicBool>,
    /// The device id: its identity key in hex.
    pub id: String,
    pub key: [u8; 32],
}

struct DeviceService {
    demo: Arc<dyn Dispatch>,
    /// Serves relayed connections.
    plain: Server,
    stalled: Arc<AtomicBool>,
}

impl Dispatch for DeviceService {
    fn kind(&self, name: &str) -> Option<CallKind> {
        if name == RELAY_COMMAND {
            Some(CallKind::Unary)
        } else {
            self.demo.kind(name)
        }
    }

    fn unary(&self, name: &str, request: Bytes) -> BoxFuture<Result<Vec<u8>, Status>> {
        if self.stalled.load(Ordering::Relaxed) {
            return Box::pin(std::future::pending());
        }
        if name != RELAY_COMMAND {
            return self.demo.unary(name, request);
        }
        let plain = self.plain.clone();
        Box::pin(async move {
            let url = String::from_utf8(request.to_vec()).map_err(Status::decode)?;
            let link = ws::connect(&url, &WsOptions::default())
                .await
                .map_err(|e| Status::handler_failed(e.to_string()))?;
            tokio::spawn(async move { plain.serve_link(link).await });
            Ok(Vec::new())
        })
    }

    fn server_stream(&self, name: &str, request: Bytes) -> BoxStream<Result<Vec<u8>, Status>> {
        self.demo.server_stream(name, request)
    }

    fn client_stream(
        &self,
        name: &str,
        items: BoxStream<Bytes>,
    ) -> BoxFuture<Result<Vec<u8>, Status>> {
        self.demo.client_stream(name, items)
    }

    fn sole_upload(&self) -> Option<&'static str> {
        self.demo.sole_upload()
    }
}

fn demo() -> Arc<dyn Dispatch> {
    // With `chat`, to check a stream both ways end to end through a relayed link.
    Arc::new(blerpc_demo::chat::WithChat(
        blerpc_demo::pb::BlerpcServer::new(blerpc_demo::DemoService::default()),
    ))
}

impl Device {
    /// The device with identity seed `seed`.
    pub fn new(seed: u8) -> Device {
        let config = ServerConfig {
            identity: Some([seed; 32]),
            ..ServerConfig::default()
        };
        let plain = Server::new(demo(), config.clone()).unwrap();
        let stalled = Arc::new(AtomicBool::new(false));
        let mut on_gateway = config;
        on_gateway.peripheral.relay = true;
        let service = DeviceService {
            demo: demo(),
            plain,
            stalled: stalled.clone(),
        };
        let server = Server::new(service, on_gateway).unwrap();
        let key = server.identity_public().unwrap();
        Device {
            server,
            stalled,
            id: hex::encode(key),
            key,
        }
    }

    /// Connects the device to `gateway` over an in-memory link; returns once it is attached.
    /// Dropping the returned sender (or sending on it) closes the link.
    pub async fn attach(&self, gateway: &Gateway) -> oneshot::Sender<()> {
        let (gateway_end, device_end) = mem::pair(247);
        let (close, closed) = oneshot::channel::<()>();
        let server = self.server.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = server.serve_link(device_end) => {}
                _ = closed => {}
            }
        });
        let attached = gateway.attach(gateway_end).await.unwrap();
        assert_eq!(attached.id, self.id);
        close
    }
}

/// Binds `127.0.0.1:0`.
pub async fn listener() -> (tokio::net::TcpListener, SocketAddr) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    (l, addr)
}

/// A gateway with `config`'s limits and tokens (none: the test token), devices dialling
/// their relayed links at `addr` and `relay_prefix`.
pub fn gateway(config: GatewayConfig, addr: SocketAddr, relay_prefix: &str) -> Gateway {
    let tokens = if config.tokens.is_empty() {
        vec![TOKEN.to_string()]
    } else {
        config.tokens.clone()
    };
    Gateway::new(GatewayConfig {
        tokens,
        relay_base: Some(format!("ws://{addr}{relay_prefix}")),
        ..config
    })
    .unwrap()
}

/// Serves `gateway`'s API on `listener` until the returned sender is dropped.
pub fn serve(gateway: Gateway, listener: tokio::net::TcpListener) -> oneshot::Sender<()> {
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(blerpc_gateway::http::serve(gateway, listener, async move {
        let _ = stopped.await;
    }));
    stop
}

/// An HTTP response, read whole.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.text()))
    }

    pub fn content_type(&self) -> &str {
        self.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// Asserts an RFC 9457 problem with `status` and `kind`.
    pub fn assert_problem(&self, status: u16, kind: &str) {
        assert_eq!(self.status, status, "{}", self.text());
        assert_eq!(self.content_type(), "application/problem+json");
        let p = self.json();
        assert_eq!(p["type"], format!("urn:blerpc:problem:{kind}"), "{p}");
        assert_eq!(p["status"], status);
        assert!(p["title"].as_str().is_some_and(|t| !t.is_empty()), "{p}");
        assert!(p["detail"].as_str().is_some_and(|d| !d.is_empty()), "{p}");
    }
}

/// A client of one gateway's API.
#[derive(Clone)]
pub struct Http {
    client: Client<HttpConnector, Body>,
    base: String,
    pub token: Option<String>,
}

impl Http {
    /// A client of `addr`, presenting the test token.
    pub fn new(addr: SocketAddr) -> Http {
        Http {
            client: Client::builder(TokioExecutor::new()).build_http(),
            base: format!("http://{addr}"),
            token: Some(TOKEN.to_string()),
        }
    }

    /// `method path` with `headers` and `body`.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Body>,
    ) -> Answer {
        let mut b = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let response = self
            .client
            .request(b.body(body.into()).unwrap())
            .await
            .unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        Answer {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.request(Method::GET, path, &[], Body::empty()).await
    }

    /// `POST /v1/devices/{id}/calls/{command}` with `body`.
    pub async fn call(&self, id: &str, command: &str, body: &str) -> Answer {
        self.request(
            Method::POST,
            &format!("/v1/devices/{id}/calls/{command}"),
            &[],
            body.to_string(),
        )
        .await
    }

    /// The data of the first event of the never-ending event stream at `path`.
    pub async fn first_sse_data(&self, path: &str) -> serde_json::Value {
        let mut b = Request::get(format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        let response = self
            .client
            .request(b.body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let mut body = response.into_body();
        let mut text = String::new();
        while !text.contains("\n\n") {
            let frame = body.frame().await.unwrap().unwrap();
            if let Some(data) = frame.data_ref() {
                text.push_str(&String::from_utf8_lossy(data));
            }
        }
        let data: String = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim_start)
            .collect();
        serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    /// `GET /metrics`, checked: the OpenMetrics text, each of `lines` in it, `# EOF` last.
    pub async fn metrics_with(&self, lines: &[&str]) -> String {
        let m = self.get("/metrics").await;
        assert!(m.content_type().starts_with("application/openmetrics-text"));
        let text = m.text();
        for line in lines {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
        text
    }

    /// `GET /v1/devices`: the ids listed, in order, and the totals (connected, known).
    pub async fn listed(&self) -> (Vec<String>, u64, u64) {
        let list = self.get("/v1/devices").await;
        assert_eq!(list.status, 200, "{}", list.text());
        assert_eq!(list.content_type(), "application/json");
        let list = list.json();
        let ids = list["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_str().unwrap().to_string())
            .collect();
        let total = |k: &str| list[k].as_u64().unwrap();
        (ids, total("connected"), total("known"))
    }

    /// The status of device `id` (`None`: unknown).
    pub async fn status(&self, id: &str) -> Option<String> {
        let a = self.get(&format!("/v1/devices/{id}")).await;
        (a.status == 200).then(|| a.json()["status"].as_str().unwrap_or("").to_string())
    }

    /// Waits up to 10 s until device `id` has `status`.
    pub async fn wait_status(&self, id: &str, status: &str) {
        for _ in 0..1000 {
            if self.status(id).await.as_deref() == Some(status) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("device {id} never {status}");
    }

    /// A call to `echo` on `id` over a relayed link through this gateway, end to end (the
    /// device's key pinned).
    pub async fn relayed_echo(&self, device: &Device, message: &str) -> String {
        let url = format!(
            "{}/v1/devices/{}/link",
            self.base.replacen("http", "ws", 1),
            device.id
        );
        let options = WsOptions {
            headers: vec![("Authorization".into(), format!("Bearer {TOKEN}"))],
            ..WsOptions::default()
        };
        let link = ws::connect(&url, &options).await.unwrap();
        let config = blerpc::ClientConfig {
            pinning: blerpc::client::PinPolicy::Trust(device.key),
            ..blerpc::ClientConfig::default()
        };
        let client = blerpc::Client::connect(link, config).await.unwrap();
        assert!(client.info().encrypted);
        let typed = blerpc_demo::pb::BlerpcClient::new(client.clone());
        let echo = typed
            .echo(blerpc_demo::pb::EchoRequest {
                message: message.to_string(),
            })
            .await
            .unwrap();
        // Messages longer than the relay's reads (4 KiB) both ways, whole.
        let data: Vec<u8> = (0..12_000u32).map(|i| (i % 251) as u8).collect();
        let written = typed
            .data_write(blerpc_demo::pb::DataWriteRequest { data: data.into() })
            .await
            .unwrap();
        assert_eq!(written.length, 12_000);
        let read = typed
            .flash_read(blerpc_demo::pb::FlashReadRequest {
                address: 0,
                length: 8192,
            })
            .await
            .unwrap();
        assert_eq!(read.data.len(), 8192);
        // A bidirectional stream through the relay: each item echoed, both ways at once.
        let mut chat = client.bidi_stream("chat").await.unwrap();
        for i in 0..20u8 {
            chat.send(vec![i; 300]).await.unwrap();
        }
        chat.finish().await.unwrap();
        let echoes: Vec<Vec<u8>> = futures_util::StreamExt::collect::<Vec<_>>(&mut chat)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(echoes, (0..20u8).map(|i| vec![i; 300]).collect::<Vec<_>>());
        client.close().await;
        echo.message
    }
}
