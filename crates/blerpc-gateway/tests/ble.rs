//! BLE devices: the gateway as a BLE central keeps peripherals connected, calls them by id,
//! and reconnects them when the connection drops; it watches their links (asks their
//! diagnostics on its schedule, keeps the last answer in the device's report with its
//! connections, counts the fleet's link figures in `/metrics`). On the simulated BLE link
//! (connection events, time on air, an interval update) and on the runtime's BLE links over
//! their fake GATT connection (there is no Bluetooth controller here).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use blerpc::backoff::Backoff;
use blerpc::link::ble::central::BleCentralLink;
use blerpc::link::ble::fake;
use blerpc::link::ble::peripheral::BlePeripheralLink;
use blerpc::link::{Link, LinkFields, LinkProbe};
use blerpc::{Server, ServerConfig};
use blerpc_gateway::link_watch::{DeviceReport, NOT_ASKING};
use blerpc_gateway::{Gateway, GatewayConfig};
use blerpc_sim::{LinkParams, Monitor, SimLink};

fn device(seed: u8) -> Server {
    let service = blerpc_demo::pb::BlerpcServer::new(blerpc_demo::DemoService::default());
    let config = ServerConfig {
        identity: Some([seed; 32]),
        ..ServerConfig::default()
    };
    Server::new(service, config).unwrap()
}

fn views(gateway: &Gateway) -> Vec<blerpc_gateway::DeviceView> {
    gateway
        .device_page(&blerpc_gateway::routing::ListQuery::default())
        .items
}

/// Waits (on tokio's clock) until the registry's only device has `status` and `connections`.
async fn wait_for(gateway: &Gateway, status: &str, connections: u64) -> String {
    for _ in 0..2000 {
        if let Some(d) = views(gateway).first()
            && d.status.as_str() == status
            && d.connections == connections
        {
            return d.id.clone();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "no device {status} after {connections} connections: {:?}",
        views(gateway)
    );
}

async fn calls_work(gateway: &Gateway, id: &str) {
    let echo = gateway
        .call_json(id, "echo", r#"{"message":"over the air"}"#, Some(5000))
        .await
        .unwrap();
    assert_eq!(echo, r#"{"message":"over the air"}"#);
    let read = gateway
        .call_json(
            id,
            "flash_read",
            r#"{"address":0,"length":600}"#,
            Some(5000),
        )
        .await
        .unwrap();
    assert!(read.len() > 800, "{read}");
}

/// Keeps one simulated BLE peripheral connected to `gateway`: `server` on the peripheral's end
/// (as `wrap` makes it) of a link with `params`, a new link after each drop (backoff 50 ms
/// doubling to 400 ms). Returns the links' monitors, one per connection.
fn keep_simulated<P: Link>(
    gateway: &Gateway,
    server: Server,
    params: LinkParams,
    wrap: fn(SimLink) -> P,
) -> Arc<Mutex<Vec<Monitor>>> {
    let monitors = Arc::new(Mutex::new(Vec::new()));
    let seen = monitors.clone();
    let connect = move || {
        let (central, peripheral) = blerpc_sim::pair(params).unwrap();
        seen.lock().unwrap().push(central.monitor());
        let server = server.clone();
        let peripheral = wrap(peripheral);
        tokio::spawn(async move { server.serve_link(peripheral).await });
        std::future::ready(Ok::<_, std::io::Error>(central))
    };
    let keeper = gateway.clone();
    tokio::spawn(async move {
        keeper
            .keep_connected(
                "sim peripheral",
                connect,
                Backoff::new(Duration::from_millis(50), Duration::from_millis(400)),
                std::future::pending(),
            )
            .await
    });
    monitors
}

#[tokio::test(start_paused = true)]
async fn a_simulated_ble_peripheral_is_kept_connected_and_reconnected() {
    let gateway = Gateway::new(GatewayConfig::default()).unwrap();
    let monitors = keep_simulated(&gateway, device(3), LinkParams::default(), |link| link);
    let id = wait_for(&gateway, "online", 1).await;
    assert_eq!(views(&gateway)[0].link.as_deref(), Some("sim"));
    calls_work(&gateway, &id).await;
    // The connection drops (out of range): offline, then back by itself.
    monitors.lock().unwrap()[0].disconnect("supervision timeout");
    wait_for(&gateway, "offline", 1).await;
    let again = wait_for(&gateway, "online", 2).await;
    assert_eq!(again, id);
    calls_work(&gateway, &id).await;
    assert_eq!(monitors.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_peripheral_over_the_ble_links_is_reconnected_after_a_disconnect() {
    let gateway = Gateway::new(GatewayConfig::default()).unwrap();
    let server = device(4);
    let handles = Arc::new(Mutex::new(Vec::new()));
    let seen = handles.clone();
    let connect = move || {
        let (central, peripheral) = fake::pair(247);
        seen.lock().unwrap().push(central.handle());
        let server = server.clone();
        tokio::spawn(async move { server.serve_link(BlePeripheralLink::new(peripheral)).await });
        std::future::ready(Ok::<_, std::io::Error>(BleCentralLink::new(central)))
    };
    let keeper = gateway.clone();
    tokio::spawn(async move {
        keeper
            .keep_connected(
                "fake peripheral",
                connect,
                Backoff::new(Duration::from_millis(20), Duration::from_millis(100)),
                std::future::pending(),
            )
            .await
    });
    let id = wait_for(&gateway, "online", 1).await;
    calls_work(&gateway, &id).await;
    handles.lock().unwrap()[0].disconnect();
    wait_for(&gateway, "online", 2).await;
    calls_work(&gateway, &id).await;
}

/// A peripheral's link whose radio reports `rssi_dbm` beside what the link itself gives.
struct WithRssi<L> {
    link: L,
    rssi_dbm: i32,
}

impl<L: Link> Link for WithRssi<L> {
    type Tx = L::Tx;
    type Rx = L::Rx;
    fn att_mtu(&self) -> usize {
        self.link.att_mtu()
    }
    fn peer_id(&self) -> String {
        self.link.peer_id()
    }
    fn link_report(&self) -> Option<LinkProbe> {
        let inner = self.link.link_report()?;
        let rssi_dbm = self.rssi_dbm;
        Some(Arc::new(move || LinkFields {
            rssi_dbm: Some(rssi_dbm),
            ..inner()
        }))
    }
    fn split(self) -> (L::Tx, L::Rx) {
        self.link.split()
    }
}

/// A phone's link: 30 ms until the peripheral's update to 15 ms takes effect, 5 s in.
fn params() -> LinkParams {
    LinkParams {
        initial_interval: Some(Duration::from_millis(30)),
        ..LinkParams::default()
    }
}

/// A gateway watching one simulated BLE peripheral kept connected (its radio giving −67 dBm,
/// on a phone's link); the link monitors, one per connection.
fn watched(config: GatewayConfig) -> (Gateway, Arc<Mutex<Vec<Monitor>>>) {
    let gateway = Gateway::new(config).unwrap();
    let monitors = keep_simulated(&gateway, device(9), params(), |link| WithRssi {
        link,
        rssi_dbm: -67,
    });
    (gateway, monitors)
}

/// Waits (on tokio's clock) for the only device's report to satisfy `ok`.
async fn report_when(gateway: &Gateway, ok: impl Fn(&DeviceReport) -> bool) -> DeviceReport {
    let mut last = None;
    for _ in 0..3000 {
        let id = gateway
            .device_page(&blerpc_gateway::routing::ListQuery::default())
            .items
            .first()
            .map(|d| d.id.clone());
        if let Some(r) = id.and_then(|id| gateway.device_report(&id)) {
            if ok(&r) {
                return r;
            }
            last = Some(r);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "the report never came to pass: {last:#?}\n{}",
        gateway.metrics().render()
    );
}

#[tokio::test(start_paused = true)]
async fn a_ble_devices_link_is_watched_through_its_reconnects() {
    let config = GatewayConfig {
        diagnostics_every: Some(Duration::from_secs(10)),
        diagnostics_spread: Duration::from_millis(500),
        ..GatewayConfig::default()
    };
    let (gateway, monitors) = watched(config);
    let first = report_when(&gateway, |r| r.diagnostics.value().is_some()).await;
    let d = &first.diagnostics.value().unwrap().fields;
    assert_eq!(d.conn_interval_us.value(), Some(&30_000), "{d:#?}");
    assert_eq!(d.rssi_dbm.value(), Some(&-67));
    assert_eq!(d.connections.value(), Some(&1));
    assert_eq!(first.reconnects, 0);
    assert_eq!(first.sessions.len(), 1);
    assert_eq!(first.sessions[0].link, "sim");
    assert!(first.sessions[0].disconnected.is_none());

    // Asked again on the schedule (every 10 s of the test's clock), after the interval
    // update 5 s in: the report follows the link.
    let ci = u32::try_from(params().conn_interval.as_micros()).unwrap();
    let later = report_when(&gateway, |r| {
        r.diagnostics
            .value()
            .is_some_and(|d| d.fields.conn_interval_us.value() == Some(&ci))
    })
    .await;
    assert_eq!(later.reconnects, 0);
    assert_eq!(
        later
            .diagnostics
            .value()
            .unwrap()
            .fields
            .connections
            .value(),
        Some(&1)
    );

    // The link drops; the device is back by itself, and its report says so.
    monitors.lock().unwrap()[0].disconnect("supervision timeout");
    let back = report_when(&gateway, |r| {
        r.reconnects == 1 && r.device.status.as_str() == "online"
    })
    .await;
    assert_eq!(back.sessions.len(), 2, "{back:#?}");
    assert!(back.sessions[0].disconnected.is_none());
    assert!(back.sessions[1].disconnected.is_some());
    assert!(back.sessions[1].disconnected.as_deref() >= Some(back.sessions[1].connected.as_str()));
    // Asked on the new connection too.
    report_when(&gateway, |r| {
        r.diagnostics
            .value()
            .is_some_and(|d| d.fields.connections.value() == Some(&2))
    })
    .await;

    let text = gateway.metrics().render();
    for line in [
        "blerpc_gateway_device_reconnects_total 1",
        // -67 dBm: in the -65 bucket and above, not in -70.
        r#"blerpc_gateway_link_rssi_dbm_bucket{le="-70.0"} 0"#,
        r#"blerpc_gateway_link_conn_interval_seconds_bucket{le="4.0"}"#,
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
    let ok = text
        .lines()
        .find_map(|l| l.strip_prefix(r#"blerpc_gateway_diagnostics_total{outcome="ok"} "#))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap();
    assert!(ok >= 3, "{text}");
    let rssi_count = text
        .lines()
        .find_map(|l| l.strip_prefix(r#"blerpc_gateway_link_rssi_dbm_bucket{le="-65.0"} "#))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap();
    assert_eq!(rssi_count, ok, "every answer gave its RSSI:\n{text}");
}

#[tokio::test(start_paused = true)]
async fn a_gateway_that_does_not_ask_says_so_in_the_report() {
    let config = GatewayConfig {
        diagnostics_every: None,
        ..GatewayConfig::default()
    };
    let (gateway, _monitors) = watched(config);
    let r = report_when(&gateway, |r| r.device.status.as_str() == "online").await;
    // Long past any spread: still nothing asked.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let r = gateway.device_report(&r.device.id).unwrap();
    assert_eq!(r.diagnostics.reason(), Some(NOT_ASKING));
    assert!(
        !gateway
            .metrics()
            .render()
            .contains("blerpc_gateway_diagnostics_total{")
    );
}

/// `blerpc_gateway_diagnostics_total{outcome}` so far.
fn diagnostics_total(gateway: &Gateway, outcome: &str) -> u64 {
    let prefix = format!(r#"blerpc_gateway_diagnostics_total{{outcome="{outcome}"}} "#);
    gateway
        .metrics()
        .render()
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map_or(0, |n| n.parse().unwrap())
}

#[tokio::test(start_paused = true)]
async fn the_link_watch_asks_only_an_idle_device() {
    // One call at a time, one queued: an ask in the queue would refuse a caller.
    let config = GatewayConfig {
        max_in_flight: 1,
        max_queued: 1,
        diagnostics_every: Some(Duration::from_secs(1)),
        diagnostics_spread: Duration::from_millis(1),
        ..GatewayConfig::default()
    };
    let (gateway, _monitors) = watched(config);
    let first = report_when(&gateway, |r| r.diagnostics.value().is_some()).await;
    let id = first.device.id;
    assert_eq!(diagnostics_total(&gateway, "ok"), 1);

    // A caller holds the device's one call for 4 s (4 of the watch's periods).
    let (device, connection) = gateway.route(&id).unwrap();
    let deadline = Duration::from_secs(30);
    let held = gateway
        .slot(
            device,
            connection,
            false,
            tokio::time::Instant::now(),
            deadline,
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The queue's one place is still the next caller's.
    let waiting = tokio::spawn({
        let (gateway, id) = (gateway.clone(), id.clone());
        async move {
            gateway
                .call_json(&id, "echo", r#"{"message":"next"}"#, Some(30_000))
                .await
        }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        (
            diagnostics_total(&gateway, "ok"),
            diagnostics_total(&gateway, "failed")
        ),
        (1, 0),
        "the watch asked a busy device"
    );
    drop(held);
    assert_eq!(waiting.await.unwrap().unwrap(), r#"{"message":"next"}"#);
    // Idle again: asked again.
    report_when(&gateway, |_| diagnostics_total(&gateway, "ok") >= 2).await;
    assert_eq!(diagnostics_total(&gateway, "failed"), 0);
}
