//! The gateway's watch on a BLE device's link: it asks the device for its diagnostics on its
//! schedule, keeps the last answer in the device's report with the device's connections, and
//! counts the fleet's link figures in `/metrics`. On the simulated BLE link (connection events,
//! an interval update), the peripheral's radio giving an RSSI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use blerpc::backoff::Backoff;
use blerpc::link::{Link, LinkFields, LinkProbe};
use blerpc::{Server, ServerConfig};
use blerpc_gateway::link_watch::{DeviceReport, NOT_ASKING};
use blerpc_gateway::{Gateway, GatewayConfig};

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
fn params() -> blerpc_sim::LinkParams {
    blerpc_sim::LinkParams {
        initial_interval: Some(Duration::from_millis(30)),
        ..blerpc_sim::LinkParams::default()
    }
}

fn device() -> Server {
    let service = blerpc_demo::pb::BlerpcServer::new(blerpc_demo::DemoService::default());
    let config = ServerConfig {
        identity: Some([9; 32]),
        ..ServerConfig::default()
    };
    Server::new(service, config).unwrap()
}

/// A gateway keeping one simulated BLE peripheral connected; the link monitors, one per
/// connection.
fn kept(config: GatewayConfig) -> (Gateway, Arc<Mutex<Vec<blerpc_sim::Monitor>>>) {
    let gateway = Gateway::new(config).unwrap();
    let server = device();
    let monitors = Arc::new(Mutex::new(Vec::new()));
    let seen = monitors.clone();
    let connect = move || {
        let (central, peripheral) = blerpc_sim::pair(params()).unwrap();
        seen.lock().unwrap().push(central.monitor());
        let server = server.clone();
        let peripheral = WithRssi {
            link: peripheral,
            rssi_dbm: -67,
        };
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
    let (gateway, monitors) = kept(config);
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
    let (gateway, _monitors) = kept(config);
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
