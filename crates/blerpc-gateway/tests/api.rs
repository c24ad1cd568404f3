//! The HTTP API of a single gateway, in process: the gateway served on `127.0.0.1:0` in the
//! test's runtime (as mini-redis tests its server), devices attached over in-memory links, and
//! every answer checked as a backend sees it: statuses, bodies, problem+json.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod util;

use std::sync::atomic::Ordering;

use axum::http::Method;
use blerpc_gateway::GatewayConfig;
use util::{Device, Http};

/// A gateway with `devices` attached (each device's link closes when its sender drops).
async fn started(
    config: GatewayConfig,
    devices: &[&Device],
) -> (
    Http,
    blerpc_gateway::Gateway,
    Vec<tokio::sync::oneshot::Sender<()>>,
    tokio::sync::oneshot::Sender<()>,
) {
    let (listener, addr) = util::listener().await;
    let gateway = util::gateway(config, addr, "");
    let mut links = Vec::new();
    for d in devices {
        links.push(d.attach(&gateway).await);
    }
    let stop = util::serve(gateway.clone(), listener);
    (Http::new(addr), gateway, links, stop)
}

#[tokio::test]
async fn devices_are_listed_and_called_by_id() {
    let (a, b) = (Device::new(1), Device::new(2));
    let (http, _gateway, _links, _stop) = started(GatewayConfig::default(), &[&a, &b]).await;

    let mut ids = vec![a.id.clone(), b.id.clone()];
    ids.sort();
    assert_eq!(http.listed().await, (ids.clone(), 2, 2));

    let one = http.get(&format!("/v1/devices/{}", a.id)).await;
    assert_eq!(one.status, 200);
    let one = one.json();
    assert_eq!(one["status"], "online");
    assert_eq!(one["link"], "mem");
    assert_eq!(one["encrypted"], true);
    assert_eq!(one["relay"], true);

    // A page at a time, by id, with a cursor; filtered by status.
    let first = http.get("/v1/devices?limit=1").await.json();
    assert_eq!(first["devices"][0]["id"], ids[0], "{first}");
    assert_eq!(first["next"], ids[0]);
    let rest = http
        .get(&format!("/v1/devices?after={}", ids[0]))
        .await
        .json();
    assert_eq!(rest["devices"][0]["id"], ids[1], "{rest}");
    assert!(rest["next"].is_null());
    let offline = http.get("/v1/devices?online=false").await.json();
    assert_eq!(offline["devices"], serde_json::json!([]));
    assert!(
        first["devices"][0].get("gateway").is_none(),
        "one gateway names none"
    );

    let echo = http.call(&a.id, "echo", r#"{"message":"hi"}"#).await;
    assert_eq!(echo.status, 200, "{}", echo.text());
    assert_eq!(echo.content_type(), "application/json");
    assert_eq!(echo.json()["message"], "hi");
    // Counted in the device's record.
    let one = http.get(&format!("/v1/devices/{}", a.id)).await.json();
    assert_eq!(one["calls"], 1);
    assert_eq!(one["errors"], 0);
}

#[tokio::test]
async fn a_devices_diagnostics_are_its_own_answer_or_a_problem() {
    let a = Device::new(1);
    // The gateway asks only when told to here: the device's counts are this test's.
    let config = GatewayConfig {
        diagnostics_every: None,
        ..GatewayConfig::default()
    };
    let (http, _gateway, _links, _stop) = started(config, &[&a]).await;
    let report = http.get(&format!("/v1/devices/{}/report", a.id)).await;
    assert_eq!(report.status, 200, "{}", report.text());
    let report = report.json();
    assert!(
        report["diagnostics"]["unavailable"]
            .as_str()
            .is_some_and(|why| why.contains("--diagnostics-every 0")),
        "{report}"
    );
    let echo = http.call(&a.id, "echo", r#"{"message":"hi"}"#).await;
    assert_eq!(echo.status, 200, "{}", echo.text());
    let d = http.get(&format!("/v1/devices/{}/diagnostics", a.id)).await;
    assert_eq!(d.status, 200, "{}", d.text());
    assert_eq!(d.content_type(), "application/json");
    let d = d.json();
    // The device's own count: the echo and this request.
    assert_eq!(d["calls"], 2, "{d}");
    assert_eq!(d["connections"], 1, "{d}");
    assert_eq!(d["att_mtu"], 247, "{d}");
    assert!(
        d["conn_interval_us"]["unavailable"]
            .as_str()
            .is_some_and(|why| why.starts_with("not a BLE link")),
        "{d}"
    );
    http.get("/v1/devices/00ff/diagnostics")
        .await
        .assert_problem(404, "unknown_device");
    // The answer is the device's last, in its report, and counted in /metrics.
    let report = http.get(&format!("/v1/devices/{}/report", a.id)).await;
    assert_eq!(report.status, 200, "{}", report.text());
    assert_eq!(report.content_type(), "application/json");
    let report = report.json();
    assert_eq!(report["schema"], "blerpc-gateway-device-report/1");
    assert_eq!(report["diagnostics"]["fields"]["calls"], 2, "{report}");
    assert!(
        report["diagnostics"]["age_s"].as_f64().is_some(),
        "{report}"
    );
    assert_eq!(report["device"]["id"], a.id.as_str());
    assert_eq!(report["calls"]["calls"], 1, "the gateway's calls: the echo");
    assert_eq!(report["reconnects"], 0);
    assert_eq!(report["sessions"][0]["link"], "mem", "{report}");
    assert!(report["sessions"][0]["disconnected"].is_null(), "{report}");
    http.metrics_with(&[
        r#"blerpc_gateway_diagnostics_total{outcome="ok"} 1"#,
        "blerpc_gateway_link_att_mtu_count 1",
        // An in-memory link has no interval: nothing observed.
        "blerpc_gateway_link_conn_interval_seconds_count 0",
    ])
    .await;
    http.get("/v1/devices/00ff/report")
        .await
        .assert_problem(404, "unknown_device");
}

#[tokio::test]
async fn streams_go_out_as_ndjson_or_sse_and_uploads_come_in_as_ndjson() {
    let d = Device::new(3);
    let (http, _gateway, _links, _stop) = started(GatewayConfig::default(), &[&d]).await;

    let nd = http.call(&d.id, "counter_stream", r#"{"count":3}"#).await;
    assert_eq!(nd.status, 200, "{}", nd.text());
    assert_eq!(nd.content_type(), "application/x-ndjson");
    let items: Vec<serde_json::Value> = nd
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(items.len(), 3);
    assert_eq!(items[2]["value"], 20);

    let sse = http
        .request(
            Method::POST,
            &format!("/v1/devices/{}/calls/counter_stream", d.id),
            &[("accept", "text/event-stream")],
            r#"{"count":2}"#.to_string(),
        )
        .await;
    assert_eq!(sse.status, 200);
    assert_eq!(sse.content_type(), "text/event-stream");
    let data: Vec<serde_json::Value> = sse
        .text()
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim_start()).unwrap())
        .collect();
    assert_eq!(data.len(), 2, "{}", sse.text());
    assert_eq!(data[1]["seq"], 1);

    // A stream the device refuses midway ends with an error line.
    let refused = http
        .call(&d.id, "counter_stream", r#"{"count":1000000}"#)
        .await;
    assert_eq!(refused.status, 200);
    let last: serde_json::Value =
        serde_json::from_str(refused.text().lines().last().unwrap()).unwrap();
    assert_eq!(last["error"]["type"], "urn:blerpc:problem:device_error");

    let upload: String = (0..5)
        .map(|i| format!("{{\"seq\":{i},\"value\":{}}}\n", i * 3))
        .collect();
    let up = http
        .request(
            Method::POST,
            &format!("/v1/devices/{}/calls/counter_upload", d.id),
            &[("content-type", "application/x-ndjson")],
            upload,
        )
        .await;
    assert_eq!(up.status, 200, "{}", up.text());
    assert_eq!(up.json()["received_count"], 5);
    let bad = http
        .request(
            Method::POST,
            &format!("/v1/devices/{}/calls/counter_upload", d.id),
            &[],
            "{\"seq\":0}\nnot json\n".to_string(),
        )
        .await;
    bad.assert_problem(400, "bad_request");
}

#[tokio::test]
async fn failures_are_problems_with_their_own_status() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("devices.json");
    let (d, offline) = (Device::new(4), Device::new(5));
    std::fs::write(
        &path,
        format!(r#"{{"kitchen": "{}", "garage": "{}"}}"#, d.id, offline.id),
    )
    .unwrap();
    let config = GatewayConfig {
        admission: blerpc_gateway::Admission::AllowList(path),
        ..GatewayConfig::default()
    };
    let (http, gateway, _links, _stop) = started(config, &[&d]).await;

    // Unknown, known but never connected, unknown command, bad body, bad deadline.
    http.call(&"11".repeat(32), "echo", "{}")
        .await
        .assert_problem(404, "unknown_device");
    http.get(&format!("/v1/devices/{}", "11".repeat(32)))
        .await
        .assert_problem(404, "unknown_device");
    let never = http.call(&offline.id, "echo", "{}").await;
    never.assert_problem(503, "not_connected");
    assert_eq!(never.headers["retry-after"], "1");
    assert_eq!(http.status(&offline.id).await.as_deref(), Some("offline"));
    http.call(&d.id, "nope", "{}")
        .await
        .assert_problem(400, "unknown_command");
    http.call(&d.id, "echo", "{not json")
        .await
        .assert_problem(400, "bad_request");
    let zero = http
        .request(
            Method::POST,
            &format!("/v1/devices/{}/calls/echo", d.id),
            &[("blerpc-deadline-ms", "0")],
            "{}".to_string(),
        )
        .await;
    zero.assert_problem(400, "bad_request");
    http.get("/v1/nothing-here")
        .await
        .assert_problem(404, "not_found");

    // A device that does not answer within the deadline: 504.
    d.stalled.store(true, Ordering::Relaxed);
    let late = http
        .request(
            Method::POST,
            &format!("/v1/devices/{}/calls/echo", d.id),
            &[("blerpc-deadline-ms", "200")],
            r#"{"message":"late"}"#.to_string(),
        )
        .await;
    late.assert_problem(504, "deadline");
    d.stalled.store(false, Ordering::Relaxed);
    assert_eq!(gateway.metrics().calls("deadline"), 1);

    // A body above the limit: 413.
    let big = format!(r#"{{"message":"{}"}}"#, "x".repeat(2 << 20));
    http.call(&d.id, "echo", &big)
        .await
        .assert_problem(413, "too_large");
}

#[tokio::test]
async fn a_device_that_leaves_is_offline_and_503() {
    let d = Device::new(6);
    let (http, _gateway, mut links, _stop) = started(GatewayConfig::default(), &[&d]).await;
    http.wait_status(&d.id, "online").await;
    drop(links.pop());
    http.wait_status(&d.id, "offline").await;
    http.call(&d.id, "echo", "{}")
        .await
        .assert_problem(503, "not_connected");
    assert_eq!(http.listed().await, (vec![d.id.clone()], 0, 1));
}

#[tokio::test]
async fn the_api_needs_a_bearer_token_but_the_page_health_and_spec_do_not() {
    let d = Device::new(7);
    let (mut http, _gateway, _links, _stop) = started(GatewayConfig::default(), &[&d]).await;
    http.token = Some("not-the-token-0123456789".into());
    http.get("/v1/devices")
        .await
        .assert_problem(401, "unauthorized");
    http.token = None;
    for path in [
        "/v1/devices".to_string(),
        format!("/v1/devices/{}", d.id),
        "/v1/schema".to_string(),
        "/metrics".to_string(),
        "/v1/events".to_string(),
        "/internal/v1/snapshot".to_string(),
    ] {
        let a = http.get(&path).await;
        a.assert_problem(401, "unauthorized");
        assert_eq!(a.headers["www-authenticate"], "Bearer", "{path}");
    }
    http.call(&d.id, "echo", "{}")
        .await
        .assert_problem(401, "unauthorized");
    assert_eq!(http.get("/healthz").await.text(), "ok\n");
    let page = http.get("/").await;
    assert_eq!(page.status, 200);
    assert!(page.text().contains("<html"), "{}", page.text());
    let spec = http.get("/v1/openapi.yaml").await;
    assert_eq!(spec.content_type(), "application/yaml");
    assert!(spec.text().starts_with("openapi: 3"));
}

/// A call is answered in front of the router (its hot path); a path that needs decoding or is
/// not a call goes through the router. Both give the same answers.
#[tokio::test]
async fn a_call_is_answered_alike_in_front_of_the_router_and_through_it() {
    let d = Device::new(8);
    let (mut http, _gateway, _links, _stop) = started(GatewayConfig::default(), &[&d]).await;
    let hot = http.call(&d.id, "echo", r#"{"message":"hot"}"#).await;
    assert_eq!(hot.json()["message"], "hot", "{}", hot.text());
    // Percent-encoded: through the router, decoded by its `Path`.
    let encoded = http
        .request(
            Method::POST,
            &format!("/v1/devices/{}/calls/ech%6F", d.id),
            &[],
            r#"{"message":"routed"}"#.to_string(),
        )
        .await;
    assert_eq!(encoded.status, 200, "{}", encoded.text());
    assert_eq!(encoded.json()["message"], "routed");
    // Not a call: another method, a longer path.
    let get = http
        .request(
            Method::GET,
            &format!("/v1/devices/{}/calls/echo", d.id),
            &[],
            String::new(),
        )
        .await;
    assert_eq!(get.status, 405, "{}", get.text());
    http.call(&d.id, "echo/more", "{}")
        .await
        .assert_problem(404, "not_found");
    // The token is checked on both paths.
    http.token = Some("not-the-token-0123456789".into());
    for path in [
        format!("/v1/devices/{}/calls/echo", d.id),
        format!("/v1/devices/{}/calls/ech%6F", d.id),
    ] {
        let refused = http
            .request(Method::POST, &path, &[], "{}".to_string())
            .await;
        refused.assert_problem(401, "unauthorized");
        assert_eq!(refused.headers["www-authenticate"], "Bearer", "{path}");
    }
}

#[tokio::test]
async fn schema_metrics_and_a_dashboard_snapshot() {
    let d = Device::new(8);
    let (http, _gateway, _links, _stop) = started(GatewayConfig::default(), &[&d]).await;
    assert_eq!(
        http.call(&d.id, "echo", r#"{"message":"x"}"#).await.status,
        200
    );

    let schema = http.get("/v1/schema").await.json();
    assert_eq!(schema["service"], "blerpc.Blerpc");
    assert!(
        schema["commands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "counter_upload" && c["kind"] == "client_stream")
    );

    http.metrics_with(&[
        "blerpc_gateway_devices_connected 1",
        r#"blerpc_gateway_calls_total{status="ok"} 1"#,
        "blerpc_gateway_call_duration_seconds_count 1",
        "# TYPE blerpc_connections_accepted counter",
    ])
    .await;

    // The event stream's first snapshot comes at once; read it and hang up.
    let first = tokio::time::timeout(std::time::Duration::from_secs(5), first_event(&http))
        .await
        .unwrap();
    assert_eq!(first["connected"], 1);
    assert_eq!(first["calls_ok"], 1);
    assert_eq!(first["devices"][0]["id"], d.id.as_str());
}

/// The dashboard has a section for the chosen device's durable calls, fed by the durable API;
/// outside a fleet that API says durable calls are unavailable, and the page says they need
/// `--nats` (the browser test in `tests/dashboard/` sees both, with a real fleet).
#[tokio::test]
async fn the_dashboard_shows_durable_calls_or_why_there_are_none() {
    let d = Device::new(9);
    let (http, _gateway, _links, _stop) = started(GatewayConfig::default(), &[&d]).await;
    let page = http.get("/").await.text();
    for part in [
        r#"<section id="durable""#,
        r#"id="durable-calls""#,
        r#"+ "/events""#,
        r#"method: "DELETE""#,
        "durable_unavailable",
        "run the gateway with --nats",
    ] {
        assert!(page.contains(part), "the page has no {part}");
    }
    for path in ["durable", "durable/events"] {
        http.get(&format!("/v1/devices/{}/{path}", d.id))
            .await
            .assert_problem(404, "durable_unavailable");
    }
}

/// The first snapshot of `GET /v1/events`.
async fn first_event(http: &Http) -> serde_json::Value {
    http.first_sse_data("/v1/events").await
}

#[tokio::test]
async fn a_relayed_link_runs_its_own_session_with_the_device() {
    let d = Device::new(9);
    let (http, gateway, _links, _stop) = started(GatewayConfig::default(), &[&d]).await;
    assert_eq!(http.relayed_echo(&d, "end to end").await, "end to end");
    // Not an upgrade: 426.
    http.get(&format!("/v1/devices/{}/link", d.id))
        .await
        .assert_problem(426, "upgrade_required");
    let relays = gateway.metrics().render();
    assert!(
        relays.contains(r#"blerpc_gateway_relays_total{outcome="opened"} 1"#),
        "{relays}"
    );
}

#[tokio::test]
async fn device_pages_merge_the_records_and_the_allow_list_by_id() {
    use blerpc_gateway::routing::ListQuery;
    let devices: Vec<Device> = (60..66).map(Device::new).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("devices.json");
    let entries: Vec<String> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| format!("\"d{i}\": \"{}\"", d.id))
        .collect();
    std::fs::write(&path, format!("{{{}}}", entries.join(","))).unwrap();
    let config = GatewayConfig {
        admission: blerpc_gateway::Admission::AllowList(path),
        ..GatewayConfig::default()
    };
    // 0 and 2 online, 3 connected once and gone, the others never seen.
    let (http, gateway, mut links, _stop) =
        started(config, &[&devices[0], &devices[2], &devices[3]]).await;
    drop(links.pop());
    http.wait_status(&devices[3].id, "offline").await;

    let walk = |online: Option<bool>, limit: usize| {
        let gateway = gateway.clone();
        async move {
            let mut query = ListQuery {
                online,
                after: None,
                limit,
            };
            let mut ids = Vec::new();
            loop {
                let page = gateway.device_page(&query);
                assert!(page.items.len() <= limit);
                ids.extend(page.items.into_iter().map(|v| v.id));
                match page.next {
                    Some(next) => query.after = Some(next),
                    None => return ids,
                }
            }
        }
    };
    let sorted = |picked: &[usize]| {
        let mut ids: Vec<String> = picked.iter().map(|&i| devices[i].id.clone()).collect();
        ids.sort();
        ids
    };
    for limit in [1, 2, 3, 7] {
        assert_eq!(
            walk(None, limit).await,
            sorted(&[0, 1, 2, 3, 4, 5]),
            "{limit}"
        );
        assert_eq!(walk(Some(true), limit).await, sorted(&[0, 2]), "{limit}");
        assert_eq!(
            walk(Some(false), limit).await,
            sorted(&[1, 3, 4, 5]),
            "{limit}"
        );
    }
    // The API's list is the same walk.
    assert_eq!(http.listed().await.0, sorted(&[0, 1, 2, 3, 4, 5]));
    // The directory pages hold the records only: who connected, to this node.
    let presence = blerpc_gateway::Directory::page(&gateway, &ListQuery::default());
    let held: Vec<(String, bool)> = presence
        .items
        .into_iter()
        .map(|p| (p.device, p.online))
        .collect();
    let mut want = vec![
        (devices[0].id.clone(), true),
        (devices[2].id.clone(), true),
        (devices[3].id.clone(), false),
    ];
    want.sort();
    assert_eq!(held, want);
}
