//! BLE devices: the gateway as a BLE central keeps peripherals connected, calls them by id,
//! and reconnects them when the connection drops. On the simulated BLE link (connection events,
//! time on air) and on the runtime's BLE links over their fake GATT connection (there is no
//! Bluetooth controller here).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use blerpc::backoff::Backoff;
use blerpc::link::ble::central::BleCentralLink;
use blerpc::link::ble::fake;
use blerpc::link::ble::peripheral::BlePeripheralLink;
use blerpc::{Server, ServerConfig};
use blerpc_gateway::{Gateway, GatewayConfig};

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

#[tokio::test(start_paused = true)]
async fn a_simulated_ble_peripheral_is_kept_connected_and_reconnected() {
    let gateway = Gateway::new(GatewayConfig::default()).unwrap();
    let server = device(3);
    let monitors = Arc::new(Mutex::new(Vec::new()));
    let seen = monitors.clone();
    let connect = move || {
        let (central, peripheral) = blerpc_sim::pair(blerpc_sim::LinkParams::default()).unwrap();
        seen.lock().unwrap().push(central.monitor());
        let server = server.clone();
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
