//! A fleet of gateways on a real `nats-server` (JetStream on), in one process: each gateway
//! joins the fleet and serves its API on loopback; devices attach to the gateway of the test's
//! choosing over in-memory links. A backend calling any gateway must get what the holding
//! gateway answers; a device held nowhere must be `503` at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// Shared with the other suites; this one uses part of it.
#[allow(dead_code)]
mod util;

use std::time::Duration;

use axum::http::Method;
use blerpc_gateway::nats::{Fleet, FleetCallError, FleetClient, NatsConfig, NatsLimits};
use blerpc_gateway::{Gateway, GatewayConfig, http::Api};
use blerpc_test_support::nats::NatsServer;
use futures_util::StreamExt as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::oneshot;
use util::{Device, Http};

struct Member {
    http: Http,
    addr: std::net::SocketAddr,
    gateway: Gateway,
    fleet: Fleet,
    _stop: oneshot::Sender<()>,
}

async fn join(nats: &NatsServer, name: &str, limits: NatsLimits) -> Member {
    let (listener, addr) = util::listener().await;
    let gateway = util::gateway(GatewayConfig::default(), addr, "");
    let mut config = NatsConfig::new(&nats.url, name);
    config.limits = limits;
    let fleet = Fleet::join(gateway.clone(), config).await.unwrap();
    let api = Api::new(
        fleet.routing(),
        gateway.config().tokens.clone(),
        gateway.config().dashboard_interval,
    );
    let router = blerpc_gateway::http::api_router(api);
    let (stop, stopped) = oneshot::channel::<()>();
    let served = gateway.clone();
    tokio::spawn(async move {
        blerpc_gateway::http::serve_router(router, &served, listener, None, async move {
            let _ = stopped.await;
        })
        .await
    });
    Member {
        http: Http::new(addr),
        addr,
        gateway,
        fleet,
        _stop: stop,
    }
}

fn limits() -> NatsLimits {
    NatsLimits {
        heartbeat: Duration::from_millis(200),
        node_timeout: Duration::from_secs(2),
        ..NatsLimits::default()
    }
}

/// Waits up to 10 s until every member knows every other.
async fn acquainted(members: &[&Member]) {
    for _ in 0..1000 {
        if members
            .iter()
            .all(|m| m.fleet.nodes().len() == members.len())
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the gateways never heard of each other");
}

/// Waits up to 10 s until `member`'s directory says `id` is `online` at `node`.
async fn sees(member: &Member, id: &str, node: &str, online: bool) {
    for _ in 0..1000 {
        if let Some(p) = member.fleet.directory().get(id)
            && p.node.as_str() == node
            && p.online == online
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "{} never saw {id} {} at {node}: {:?}",
        member.fleet.node(),
        if online { "online" } else { "offline" },
        member.fleet.directory().get(id)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_gateway_answers_for_a_device_another_holds() {
    let nats = NatsServer::start();
    let a = join(&nats, "gw-a", limits()).await;
    let b = join(&nats, "gw-b", limits()).await;
    acquainted(&[&a, &b]).await;
    let d = Device::new(11);
    let _link = d.attach(&a.gateway).await;
    sees(&b, &d.id, "gw-a", true).await;

    // Unary: the same status and body as from the holder.
    let direct_echo = a.http.call(&d.id, "echo", r#"{"message":"hi"}"#).await;
    let forwarded = b.http.call(&d.id, "echo", r#"{"message":"hi"}"#).await;
    assert_eq!(forwarded.status, 200, "{}", forwarded.text());
    assert_eq!(forwarded.content_type(), direct_echo.content_type());
    assert_eq!(forwarded.body, direct_echo.body);

    // Many at once share B's one reply subscription: each gets its own answer.
    let answers = futures_util::future::join_all((0..64).map(|i| {
        let (http, id) = (&b.http, &d.id);
        async move {
            let body = format!(r#"{{"message":"call {i}"}}"#);
            (i, http.call(id, "echo", &body).await)
        }
    }))
    .await;
    for (i, answer) in answers {
        assert_eq!(answer.status, 200, "{}", answer.text());
        assert_eq!(answer.json()["message"], format!("call {i}"));
    }

    // The device's record, from its holder.
    let view = b.http.get(&format!("/v1/devices/{}", d.id)).await;
    assert_eq!(view.status, 200, "{}", view.text());
    assert_eq!(view.json()["status"], "online");
    assert_eq!(view.json()["calls"], 66);

    // A bad request is the holder's 400, problem and all.
    let bad = b.http.call(&d.id, "echo", "{not json").await;
    let local_bad = a.http.call(&d.id, "echo", "{not json").await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.body, local_bad.body);

    // A device→caller stream as NDJSON and as SSE, streamed through.
    let nd = b
        .http
        .call(&d.id, "counter_stream", r#"{"count":50}"#)
        .await;
    assert_eq!(nd.status, 200, "{}", nd.text());
    assert_eq!(nd.content_type(), "application/x-ndjson");
    let direct = a
        .http
        .call(&d.id, "counter_stream", r#"{"count":50}"#)
        .await;
    assert_eq!(nd.body, direct.body);
    let sse = b
        .http
        .request(
            Method::POST,
            &format!("/v1/devices/{}/calls/counter_stream", d.id),
            &[("accept", "text/event-stream")],
            r#"{"count":2}"#.to_string(),
        )
        .await;
    assert_eq!(sse.content_type(), "text/event-stream");
    assert_eq!(sse.text().matches("data:").count(), 2, "{}", sse.text());

    // A stream the device refuses midway ends with the same error line.
    let refused = b
        .http
        .call(&d.id, "counter_stream", r#"{"count":1000000}"#)
        .await;
    let last: serde_json::Value =
        serde_json::from_str(refused.text().lines().last().unwrap()).unwrap();
    assert_eq!(last["error"]["type"], "urn:blerpc:problem:device_error");

    // An NDJSON upload, streamed in frames within the window (more items than a window).
    let upload: String = (0..200)
        .map(|i| format!("{{\"seq\":{i},\"value\":{}}}\n", i * 3))
        .collect();
    let up = b
        .http
        .request(
            Method::POST,
            &format!("/v1/devices/{}/calls/counter_upload", d.id),
            &[("content-type", "application/x-ndjson")],
            upload,
        )
        .await;
    assert_eq!(up.status, 200, "{}", up.text());
    assert_eq!(up.json()["received_count"], 200);

    // The relayed link, end to end: the backend's central at B, the device's relayed
    // connection at A, the ciphertext between them over NATS; the device's key pinned.
    assert_eq!(b.http.relayed_echo(&d, "end to end").await, "end to end");
    assert_eq!(b.http.relayed_echo(&d, "again").await, "again");

    // A backend on NATS alone: the same answers as over HTTP.
    let nats_client = async_nats::connect(nats.url.as_str()).await.unwrap();
    let native = FleetClient::new(nats_client, "blerpc", NatsLimits::default()).unwrap();
    let echo = native
        .call(
            &d.id,
            "echo",
            r#"{"message":"hi"}"#,
            Some(Duration::from_secs(5)),
        )
        .await
        .unwrap();
    assert_eq!((echo.status, &echo.body[..]), (200, &direct_echo.body[..]));
    assert_eq!(echo.content_type, "application/json");
    let (status, chunks) = native
        .stream(&d.id, "counter_stream", r#"{"count":50}"#)
        .await
        .unwrap();
    assert_eq!(status, 200);
    let streamed: Vec<u8> = chunks.map(|c| c.unwrap().to_vec()).concat().await;
    assert_eq!(streamed, nd.body.to_vec());
    let items = futures_util::stream::iter((0..100).map(|i| format!(r#"{{"seq":{i},"value":1}}"#)));
    let up = native
        .upload(&d.id, "counter_upload", items, None)
        .await
        .unwrap();
    assert_eq!(up.status, 200, "{:?}", up);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&up.body).unwrap()["received_count"],
        100
    );
    let nowhere = native
        .call(&"ef".repeat(32), "echo", "{}", None)
        .await
        .unwrap();
    assert_eq!(nowhere.status, 503);
    assert_eq!(nowhere.content_type, "application/problem+json");
    assert!(matches!(
        native.call("a.b", "echo", "{}", None).await,
        Err(FleetCallError::BadDevice(_))
    ));

    // The fleet's list and metrics, from both gateways.
    let e = Device::new(12);
    let _link_e = e.attach(&b.gateway).await;
    sees(&a, &e.id, "gw-b", true).await;
    let mut ids = vec![d.id.clone(), e.id.clone()];
    ids.sort();
    for m in [&a, &b] {
        let (listed, connected, _) = m.http.listed().await;
        assert_eq!(listed, ids);
        assert_eq!(connected, 2);
    }
    // Pages across the fleet, each device with its gateway.
    let first = b.http.get("/v1/devices?limit=1").await.json();
    assert_eq!(first["devices"].as_array().unwrap().len(), 1, "{first}");
    assert_eq!(first["devices"][0]["id"], ids[0]);
    assert_eq!(first["next"], ids[0]);
    let second = b
        .http
        .get(&format!("/v1/devices?limit=1&after={}", ids[0]))
        .await
        .json();
    assert_eq!(second["devices"][0]["id"], ids[1], "{second}");
    assert!(second["next"].is_null(), "{second}");
    let all = a.http.get("/v1/devices?online=true").await.json();
    let gateway_of = |id: &str| {
        all["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["id"] == id)
            .map(|v| v["gateway"].clone())
    };
    assert_eq!(gateway_of(&d.id), Some(serde_json::json!("gw-a")), "{all}");
    assert_eq!(gateway_of(&e.id), Some(serde_json::json!("gw-b")), "{all}");
    let offline = a.http.get("/v1/devices?online=false").await.json();
    assert_eq!(offline["devices"], serde_json::json!([]), "{offline}");
    b.http
        .get("/v1/devices?limit=lots")
        .await
        .assert_problem(400, "bad_request");

    let metrics = a.http.get("/metrics").await.text();
    assert!(
        metrics.contains("blerpc_gateway_devices_connected 2"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_held_nowhere_is_503_at_once_and_strangers_404() {
    let nats = NatsServer::start();
    let slow_to_time_out = NatsLimits {
        accept_timeout: Duration::from_secs(30),
        ..limits()
    };
    let a = join(&nats, "gw-a", slow_to_time_out.clone()).await;
    let b = join(&nats, "gw-b", slow_to_time_out).await;
    let d = Device::new(21);
    let link = d.attach(&a.gateway).await;
    sees(&b, &d.id, "gw-a", true).await;

    // The subject goes with the connection; asked before the directory has heard, NATS says
    // "no responders" at once: 503 not_connected, not a 504 after the 30 s accept timeout.
    drop(link);
    let started = std::time::Instant::now();
    let holder = blerpc_gateway::routing::Holder::Node {
        node: blerpc_gateway::routing::NodeId::new("gw-a"),
        online: true,
    };
    let request = axum::http::Request::post(format!("/v1/devices/{}/calls/echo", d.id))
        .body(axum::body::Body::from(r#"{"message":"x"}"#))
        .unwrap();
    // Wait until gateway A has let the subject go: a probe on it finds no responders.
    let client = async_nats::connect(&nats.url).await.unwrap();
    let subject = blerpc_gateway::nats::Subjects::new(&NatsConfig::new(&nats.url, "probe").prefix)
        .unwrap()
        .device(&d.id)
        .unwrap();
    for _ in 0..1000 {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Blerpc-Probe", "1");
        let asked = client.request_with_headers(subject.clone(), headers, bytes::Bytes::new());
        if matches!(
            tokio::time::timeout(Duration::from_secs(2), asked).await,
            Ok(Err(e)) if e.kind() == async_nats::RequestErrorKind::NoResponders
        ) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let response = b.fleet.routing().forwarder.forward(&holder, request).await;
    assert_eq!(response.status(), 503);
    assert!(started.elapsed() < Duration::from_secs(25));

    // Once the directory knows, the answer is the holder's: known, not connected.
    sees(&b, &d.id, "gw-a", false).await;
    let offline = b.http.call(&d.id, "echo", r#"{"message":"x"}"#).await;
    offline.assert_problem(503, "not_connected");
    assert_eq!(b.http.status(&d.id).await.as_deref(), Some("offline"));

    // A relayed link to a device held nowhere: the holder's refusal, not an upgrade.
    let link = b.http.get(&format!("/v1/devices/{}/link", d.id)).await;
    assert_eq!(link.status, 503, "{}", link.text());

    // A device nobody knows is every gateway's 404.
    let stranger = "cd".repeat(32);
    b.http
        .call(&stranger, "echo", "{}")
        .await
        .assert_problem(404, "unknown_device");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_that_moves_is_found_where_it_is_and_a_dead_gateway_s_devices_go_offline() {
    let nats = NatsServer::start();
    let a = join(&nats, "gw-a", limits()).await;
    let b = join(&nats, "gw-b", limits()).await;
    acquainted(&[&a, &b]).await;
    let d = Device::new(31);
    let _old = d.attach(&a.gateway).await;
    sees(&b, &d.id, "gw-a", true).await;

    // The device reconnects to B (its connection to A not yet closed): B's newer claim wins
    // everywhere, and A lets its stale connection go.
    let _new = d.attach(&b.gateway).await;
    sees(&a, &d.id, "gw-b", true).await;
    for _ in 0..1000 {
        if a.gateway.registry().online() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        a.gateway.registry().online(),
        0,
        "A kept the stale connection"
    );
    let echo = a.http.call(&d.id, "echo", r#"{"message":"moved"}"#).await;
    assert_eq!(echo.status, 200, "{}", echo.text());
    assert_eq!(echo.json()["message"], "moved");

    // B dies without a word (its tasks stop, its heartbeat with them): within the node timeout
    // A's directory has the device offline.
    let Member { fleet, gateway, .. } = b;
    drop(fleet);
    drop(gateway);
    sees(&a, &d.id, "gw-b", false).await;
    assert_eq!(a.fleet.nodes().len(), 1);
}

/// Submits a durable call through `member`; the answer.
async fn durable(member: &Member, id: &str, header: &str, body: &str) -> util::Answer {
    member
        .http
        .request(
            Method::POST,
            &format!("/v1/devices/{id}/calls/echo"),
            &[("blerpc-durable", header)],
            body.to_string(),
        )
        .await
}

/// Waits up to 10 s until call `call` of `id` is in `state`; its record.
async fn call_state(member: &Member, id: &str, call: &str, state: &str) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    for _ in 0..1000 {
        let a = member
            .http
            .get(&format!("/v1/devices/{id}/durable/{call}"))
            .await;
        last = a.json();
        if last["state"] == state {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("call {call} never {state}: {last}");
}

/// Waits up to 10 s until `member` has a call in flight to device `id` (`sent` is written just
/// before the call goes out: the device has it only once it is in flight).
async fn in_flight(member: &Member, id: &str) {
    for _ in 0..1000 {
        let view = member.http.get(&format!("/v1/devices/{id}")).await.json();
        if view["in_flight"] == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no call in flight to {id}");
}

fn states(record: &serde_json::Value) -> Vec<String> {
    record["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["state"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_calls_wait_for_their_device_and_end_in_true_states() {
    let nats = NatsServer::start();
    let a = join(&nats, "gw-a", limits()).await;
    let b = join(&nats, "gw-b", limits()).await;
    acquainted(&[&a, &b]).await;
    let d = Device::new(41);
    // Known to the fleet, offline now.
    let link = d.attach(&a.gateway).await;
    sees(&b, &d.id, "gw-a", true).await;
    drop(link);
    sees(&b, &d.id, "gw-a", false).await;
    let events_client = async_nats::connect(nats.url.as_str()).await.unwrap();
    let mut events = events_client
        .subscribe(format!("blerpc.v1.durable.{}.>", d.id))
        .await
        .unwrap();

    // And as server-sent events from gateway A.
    let mut sse = tokio::net::TcpStream::connect(a.addr).await.unwrap();
    sse.write_all(
        format!(
            "GET /v1/devices/{}/durable/events HTTP/1.1\r\nHost: g\r\nAuthorization: Bearer {}\r\n\r\n",
            d.id,
            util::TOKEN
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut head = [0u8; 512];
    let n = sse.read(&mut head).await.unwrap();
    assert!(String::from_utf8_lossy(&head[..n]).starts_with("HTTP/1.1 200"));

    // Stored at once, for later.
    let queued = durable(&b, &d.id, "ttl=60", r#"{"message":"later"}"#).await;
    assert_eq!(queued.status, 202, "{}", queued.text());
    let call = queued.json()["id"].as_str().unwrap().to_string();
    assert_eq!(queued.json()["state"], "queued");
    assert_eq!(
        queued.headers.get("location").unwrap(),
        &format!("/v1/devices/{}/durable/{call}", d.id)
    );
    // Cancelled while queued; not after.
    let doomed = durable(&b, &d.id, "ttl=60", r#"{"message":"never"}"#)
        .await
        .json();
    let doomed = doomed["id"].as_str().unwrap().to_string();
    let cancelled = a
        .http
        .request(
            Method::DELETE,
            &format!("/v1/devices/{}/durable/{doomed}", d.id),
            &[],
            String::new(),
        )
        .await;
    assert_eq!(
        cancelled.json()["state"],
        "cancelled",
        "{}",
        cancelled.text()
    );
    a.http
        .request(
            Method::DELETE,
            &format!("/v1/devices/{}/durable/{doomed}", d.id),
            &[],
            String::new(),
        )
        .await
        .assert_problem(409, "call_not_queued");
    // Expired while queued.
    let brief = durable(&a, &d.id, "ttl=1", r#"{"message":"soon gone"}"#)
        .await
        .json();
    let brief = brief["id"].as_str().unwrap().to_string();
    // Refused at once: what could never run.
    durable(&b, &d.id, "ttl=60", "{not json")
        .await
        .assert_problem(400, "bad_request");
    durable(&b, &d.id, "ttl=forever", "{}")
        .await
        .assert_problem(400, "bad_request");
    let expired = call_state(&b, &d.id, &brief, "expired").await;
    assert_eq!(states(&expired), ["queued", "expired"]);

    // The device connects to B: the queued call runs there, once, with its answer.
    let _link = d.attach(&b.gateway).await;
    let done = call_state(&a, &d.id, &call, "succeeded").await;
    assert_eq!(states(&done), ["queued", "sent", "succeeded"]);
    assert_eq!(done["response"]["message"], "later");
    assert_eq!(done["attempts"], 1);
    assert!(done["history"][1]["by"] == "gw-b", "{done}");
    let never = call_state(&a, &d.id, &doomed, "cancelled").await;
    assert_eq!(states(&never), ["queued", "cancelled"]);
    let listed = b
        .http
        .get(&format!("/v1/devices/{}/durable", d.id))
        .await
        .json();
    assert_eq!(listed["calls"].as_array().unwrap().len(), 3, "{listed}");
    let none = b
        .http
        .get(&format!("/v1/devices/{}/durable", "ee".repeat(32)))
        .await
        .json();
    assert_eq!(none["calls"], serde_json::json!([]), "{none}");

    // Each change was pushed over NATS, in order.
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let m = tokio::time::timeout(Duration::from_secs(5), events.next())
            .await
            .unwrap()
            .unwrap();
        let r: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
        if r["id"] == call.as_str() {
            seen.push(r["state"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(seen, ["queued", "sent", "succeeded"]);
    // The same changes as server-sent events.
    let mut text = String::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    while !text.contains(r#""state":"succeeded""#) {
        let mut buf = [0u8; 4096];
        let n = tokio::time::timeout_at(until, sse.read(&mut buf))
            .await
            .expect("no succeeded event within 10 s")
            .unwrap();
        assert!(n > 0, "the event stream ended: {text}");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(text.contains("event: call"), "{text}");
    assert!(text.contains(&call), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_call_whose_device_is_lost_after_sending_is_unknown_or_sent_again() {
    let nats = NatsServer::start();
    let a = join(&nats, "gw-a", limits()).await;
    let b = join(&nats, "gw-b", limits()).await;
    acquainted(&[&a, &b]).await;
    let d = Device::new(42);
    d.stalled.store(true, std::sync::atomic::Ordering::Relaxed);
    let link = d.attach(&a.gateway).await;
    sees(&b, &d.id, "gw-a", true).await;
    // Idempotent: sent, never answered, the device lost: sent again when it is back.
    let again = durable(&b, &d.id, "ttl=60, idempotent", r#"{"message":"again"}"#)
        .await
        .json();
    let again = again["id"].as_str().unwrap().to_string();
    call_state(&b, &d.id, &again, "sent").await;
    in_flight(&a, &d.id).await;
    drop(link);
    let requeued = call_state(&b, &d.id, &again, "queued").await;
    assert_eq!(
        states(&requeued),
        ["queued", "sent", "outcome_unknown", "queued"]
    );
    d.stalled.store(false, std::sync::atomic::Ordering::Relaxed);
    let link = d.attach(&a.gateway).await;
    let done = call_state(&b, &d.id, &again, "succeeded").await;
    assert_eq!(done["response"]["message"], "again");
    assert_eq!(done["attempts"], 2);
    assert_eq!(
        states(&done),
        [
            "queued",
            "sent",
            "outcome_unknown",
            "queued",
            "sent",
            "succeeded"
        ]
    );

    // Not idempotent: the unknown outcome is final, and the call is never sent again.
    d.stalled.store(true, std::sync::atomic::Ordering::Relaxed);
    let once = durable(&b, &d.id, "ttl=60", r#"{"message":"once"}"#)
        .await
        .json();
    let once = once["id"].as_str().unwrap().to_string();
    call_state(&b, &d.id, &once, "sent").await;
    in_flight(&a, &d.id).await;
    drop(link);
    let unknown = call_state(&b, &d.id, &once, "outcome_unknown").await;
    assert_eq!(states(&unknown), ["queued", "sent", "outcome_unknown"]);
    assert!(unknown["error"]["detail"].is_string(), "{unknown}");
    d.stalled.store(false, std::sync::atomic::Ordering::Relaxed);
    let _link = d.attach(&a.gateway).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let still = call_state(&b, &d.id, &once, "outcome_unknown").await;
    assert_eq!(still["attempts"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_calls_survive_a_nats_server_restart_and_a_gateway_restart() {
    let mut nats = NatsServer::start();
    let a = join(&nats, "gw-a", limits()).await;
    let d = Device::new(43);
    let link = d.attach(&a.gateway).await;
    sees(&a, &d.id, "gw-a", true).await;
    drop(link);
    sees(&a, &d.id, "gw-a", false).await;
    let queued = durable(&a, &d.id, "ttl=120", r#"{"message":"kept"}"#)
        .await
        .json();
    let call = queued["id"].as_str().unwrap().to_string();

    // The NATS server is killed and started again on its files; the gateway that took the call
    // goes too, and another one joins.
    nats.restart();
    let Member { fleet, gateway, .. } = a;
    drop(fleet);
    drop(gateway);
    let b = join(&nats, "gw-b", limits()).await;
    let kept = call_state(&b, &d.id, &call, "queued").await;
    assert_eq!(kept["request"]["message"], "kept");

    // The device connects to the new gateway: the call runs, once.
    let _link = d.attach(&b.gateway).await;
    let done = call_state(&b, &d.id, &call, "succeeded").await;
    assert_eq!(states(&done), ["queued", "sent", "succeeded"]);
    assert_eq!(done["response"]["message"], "kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_with_its_limit_of_open_durable_calls_is_refused_more() {
    let nats = NatsServer::start();
    let limited = NatsLimits {
        max_open_durable_per_device: 2,
        ..limits()
    };
    let a = join(&nats, "gw-a", limited).await;
    let d = Device::new(43);
    for n in 0..2 {
        let answer = durable(&a, &d.id, "ttl=60", &format!(r#"{{"message":"{n}"}}"#)).await;
        assert_eq!(answer.status, 202, "{}", answer.text());
    }
    // The limit counts the calls the gateway's watch of the store has seen.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let refused = durable(&a, &d.id, "ttl=60", r#"{"message":"more"}"#).await;
    assert_eq!(refused.status, 429, "{}", refused.text());
    let problem = refused.json();
    assert_eq!(problem["type"], "urn:blerpc:problem:too_many_durable_calls");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("2 durable calls"),
        "{problem}"
    );
    // Another device is not affected.
    let other = Device::new(44);
    let answer = durable(&a, &other.id, "ttl=60", r#"{"message":"x"}"#).await;
    assert_eq!(answer.status, 202, "{}", answer.text());
}

/// A gateway cut off from NATS (its server gone) still leaves the fleet, within its
/// `leave_timeout`, instead of waiting on a request timeout for each of its devices.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_without_nats_still_leaves_in_time() {
    let mut nats = NatsServer::start();
    let a = join(
        &nats,
        "gw-a",
        NatsLimits {
            leave_timeout: Duration::from_millis(500),
            ..limits()
        },
    )
    .await;
    let devices: Vec<Device> = (41..49).map(Device::new).collect();
    let mut links = Vec::new();
    for d in &devices {
        links.push(d.attach(&a.gateway).await);
        sees(&a, &d.id, "gw-a", true).await;
    }
    nats.kill();
    // One after another, each release alone took about 4 s of tries without NATS.
    let left = tokio::time::timeout(Duration::from_secs(15), a.fleet.leave()).await;
    assert!(left.is_ok(), "leaving without NATS hung");
}
