//! One gateway from several workers, in one process: two worker gateways, each serving its API
//! on loopback with an internal token, behind a [`Front`] that routes by the workers' claims
//! (the one-box directory) and merges their parts; devices attached to the worker of the test's
//! choosing. What a backend sees must be what a single gateway answers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod util;

use axum::http::Method;
use blerpc_gateway::cluster::Front;
use blerpc_gateway::{Gateway, GatewayConfig};
use tokio::sync::oneshot;
use util::{Device, Http};

const INTERNAL: &str = "internal-token-of-the-test-front-0123456789abcdef";

/// One box: a front and `n` workers, all on `127.0.0.1:0`.
struct Cluster {
    front: Http,
    /// The front itself (a clone of the one serving).
    directory: Front,
    workers: Vec<Gateway>,
    _stops: Vec<oneshot::Sender<()>>,
}

async fn start(n: usize) -> Cluster {
    let (front_listener, front_addr) = util::listener().await;
    let mut workers = Vec::new();
    let mut addrs = Vec::new();
    let mut stops = Vec::new();
    for k in 0..n {
        let (listener, addr) = util::listener().await;
        // Devices dial relayed connections at the front, which passes `/w{k}/…` to worker k.
        let config = GatewayConfig {
            tokens: vec![INTERNAL.to_string()],
            ..GatewayConfig::default()
        };
        let g = util::gateway(config, front_addr, &format!("/w{k}"));
        stops.push(util::serve(g.clone(), listener));
        workers.push(g);
        addrs.push(addr);
    }
    let front = Front::new(addrs, INTERNAL.to_string(), vec![util::TOKEN.to_string()]);
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(front.clone().serve(
        front_listener,
        blerpc_gateway::http::listener::HttpLimits::of(&GatewayConfig::default()),
        async move {
            let _ = stopped.await;
        },
    ));
    stops.push(stop);
    Cluster {
        front: Http::new(front_addr),
        directory: front,
        workers,
        _stops: stops,
    }
}

#[tokio::test]
async fn each_device_is_called_through_the_worker_that_holds_it() {
    let b = start(2).await;
    let (d0, d1) = (Device::new(21), Device::new(22));
    let _l0 = d0.attach(&b.workers[0]).await;
    let _l1 = d1.attach(&b.workers[1]).await;
    for d in [&d0, &d1] {
        b.front.wait_status(&d.id, "online").await;
        let echo = b
            .front
            .call(&d.id, "echo", &format!(r#"{{"message":"{}"}}"#, d.id))
            .await;
        assert_eq!(echo.status, 200, "{}", echo.text());
        assert_eq!(echo.json()["message"], d.id.as_str());
    }
    // Each call ran on the holder.
    assert_eq!(b.workers[0].metrics().calls("ok"), 1);
    assert_eq!(b.workers[1].metrics().calls("ok"), 1);

    // Streams out and in, through the front.
    let nd = b
        .front
        .call(&d1.id, "counter_stream", r#"{"count":4}"#)
        .await;
    assert_eq!(nd.content_type(), "application/x-ndjson");
    assert_eq!(nd.text().lines().count(), 4, "{}", nd.text());
    let sse = b
        .front
        .request(
            Method::POST,
            &format!("/v1/devices/{}/calls/counter_stream", d0.id),
            &[("accept", "text/event-stream")],
            r#"{"count":3}"#.to_string(),
        )
        .await;
    assert_eq!(sse.content_type(), "text/event-stream");
    assert_eq!(sse.text().matches("data:").count(), 3, "{}", sse.text());
    let up = b
        .front
        .request(
            Method::POST,
            &format!("/v1/devices/{}/calls/counter_upload", d1.id),
            &[],
            "{\"seq\":0}\n{\"seq\":1}\n".to_string(),
        )
        .await;
    assert_eq!(up.json()["received_count"], 2);

    // The deadline header reaches the worker: 504 from there.
    d0.stalled.store(true, std::sync::atomic::Ordering::Relaxed);
    b.front
        .request(
            Method::POST,
            &format!("/v1/devices/{}/calls/echo", d0.id),
            &[("blerpc-deadline-ms", "150")],
            "{}".to_string(),
        )
        .await
        .assert_problem(504, "deadline");
    d0.stalled
        .store(false, std::sync::atomic::Ordering::Relaxed);

    // Relayed end to end: the front splices the backend's upgrade to worker 1, and the
    // device's relayed connection from /w1/… to worker 1 too.
    assert_eq!(
        b.front.relayed_echo(&d1, "through the front").await,
        "through the front"
    );
}

#[tokio::test]
async fn the_front_merges_lists_snapshots_and_metrics_and_checks_tokens() {
    let b = start(2).await;
    let (d0, d1, d2) = (Device::new(31), Device::new(32), Device::new(33));
    let _l = [
        d0.attach(&b.workers[0]).await,
        d1.attach(&b.workers[1]).await,
        d2.attach(&b.workers[1]).await,
    ];
    for d in [&d0, &d1, &d2] {
        b.front.wait_status(&d.id, "online").await;
    }
    assert_eq!(b.front.call(&d2.id, "echo", "{}").await.status, 200);

    let mut want = vec![d0.id.clone(), d1.id.clone(), d2.id.clone()];
    want.sort_unstable();
    assert_eq!(b.front.listed().await, (want, 3, 3));

    let m = b
        .front
        .metrics_with(&[
            "blerpc_gateway_devices_connected 3",
            r#"blerpc_gateway_calls_total{status="ok"} 1"#,
            "blerpc_gateway_device_connections_total 3",
            "blerpc_gateway_call_duration_seconds_count 1",
        ])
        .await;
    assert_eq!(
        m.matches("# TYPE blerpc_gateway_devices_connected ")
            .count(),
        1
    );

    let snap = b.front.first_sse_data("/v1/events").await;
    assert_eq!(snap["connected"], 3);
    assert_eq!(snap["calls_ok"], 1);
    assert_eq!(snap["devices"].as_array().map(Vec::len), Some(3));

    let schema = b.front.get("/v1/schema").await;
    assert_eq!(schema.json()["service"], "blerpc.Blerpc");

    // The backends' tokens at the front; the internal one is the workers' alone.
    let mut stranger = b.front.clone();
    stranger.token = None;
    stranger
        .get("/v1/devices")
        .await
        .assert_problem(401, "unauthorized");
    stranger.token = Some(INTERNAL.to_string());
    stranger
        .get("/v1/devices")
        .await
        .assert_problem(401, "unauthorized");
    b.front
        .call(&"11".repeat(32), "echo", "{}")
        .await
        .assert_problem(404, "unknown_device");
    b.front
        .get("/w7/v1/relay/0123")
        .await
        .assert_problem(404, "not_found");
}

#[tokio::test]
async fn a_device_that_moves_is_routed_to_its_new_worker_and_a_stale_release_loses() {
    let b = start(2).await;
    let d = Device::new(41);
    let first = d.attach(&b.workers[0]).await;
    b.front.wait_status(&d.id, "online").await;
    // It reconnects through worker 1 before worker 0 notices its old link is gone.
    let _second = d.attach(&b.workers[1]).await;
    let routed_to_1 = || async {
        let before = b.workers[1].metrics().calls("ok");
        let echo = b.front.call(&d.id, "echo", r#"{"message":"m"}"#).await;
        echo.status == 200 && b.workers[1].metrics().calls("ok") == before + 1
    };
    let mut moved = false;
    for _ in 0..500 {
        if routed_to_1().await {
            moved = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(moved, "the front kept routing to worker 0");
    // Worker 0's link now goes: its release is of an older claim and must not take the
    // device offline at the front.
    drop(first);
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        assert_eq!(b.front.status(&d.id).await.as_deref(), Some("online"));
        assert_eq!(b.directory.online(), 1);
    }
    assert!(routed_to_1().await);
}

#[tokio::test]
async fn a_device_that_leaves_is_offline_at_the_front_and_503() {
    let b = start(2).await;
    let d = Device::new(51);
    let link = d.attach(&b.workers[1]).await;
    b.front.wait_status(&d.id, "online").await;
    assert_eq!(b.directory.online(), 1);
    drop(link);
    b.front.wait_status(&d.id, "offline").await;
    for _ in 0..100 {
        if b.directory.online() == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(b.directory.online(), 0);
    b.front
        .call(&d.id, "echo", "{}")
        .await
        .assert_problem(503, "not_connected");
    assert_eq!(b.front.listed().await, (vec![d.id.clone()], 0, 1));
}
