//! The diagnostics extension on the simulated BLE link: the link's parameters as the
//! peripheral sees them, and a lost connection counted exactly. Virtual time.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use blerpc::client::PinPolicy;
use blerpc::diagnostics::Reading;
use blerpc::{Client, ClientConfig, Server, ServerConfig};
use blerpc_demo::{DemoService, pb};
use blerpc_sim::{LinkParams, pair};

#[tokio::test(start_paused = true)]
async fn the_link_is_reported_as_the_peripheral_sees_it_and_a_loss_is_counted() {
    let server = Arc::new(
        Server::new(
            pb::BlerpcServer::new(DemoService::default()),
            ServerConfig {
                identity: Some([3; 32]),
                ..Default::default()
            },
        )
        .unwrap(),
    );
    let key = server.identity_public().unwrap();
    let params = LinkParams {
        conn_interval: Duration::from_millis(30),
        initial_interval: None,
        data_length: 27,
        supervision_timeout: Duration::from_secs(4),
        ..LinkParams::default()
    };
    let connect = |params| {
        let server = server.clone();
        async move {
            let (central, peripheral) = pair(params).unwrap();
            let monitor = central.monitor();
            tokio::spawn(async move { server.serve_link(peripheral).await });
            let config = ClientConfig {
                pinning: PinPolicy::Trust(key),
                ..Default::default()
            };
            (Client::connect(central, config).await.unwrap(), monitor)
        }
    };
    // The first connection is lost on the air.
    let (first, monitor) = connect(params).await;
    first.call("echo", b"\x0a\x02hi".to_vec()).await.unwrap();
    monitor.disconnect("walked out of range");
    assert!(first.call("echo", b"\x0a\x02hi".to_vec()).await.is_err());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (second, _monitor) = connect(params).await;
    let d = second.diagnostics().await.unwrap();
    assert_eq!(d.conn_interval_us, Reading::Value(30_000));
    assert_eq!(d.peripheral_latency, Reading::Value(0));
    assert_eq!(d.supervision_timeout_ms, Reading::Value(4_000));
    assert_eq!(d.phy, Reading::Value(2));
    assert_eq!(d.data_length, Reading::Value(27));
    assert_eq!(d.att_mtu, Reading::Value(247));
    assert_eq!(
        d.rssi_dbm.reason(),
        Some("not reported by this link's BLE stack")
    );
    assert_eq!(d.connections, Reading::Value(2));
    assert_eq!(d.link_losses, Reading::Value(1));
    // The echo on the first connection, this request.
    assert_eq!(d.calls, Reading::Value(2));
}
