//! The diagnostics extension on the runtime (in-memory link): the server counts what its
//! connections did and says why a field is missing; a peripheral without the extension is
//! never asked.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use blerpc::diagnostics::{NOT_ANNOUNCED, Reading};
use blerpc::{ClientConfig, ServerConfig};
use common::*;

#[tokio::test]
async fn the_server_reports_its_counts_and_why_fields_are_missing() {
    let client = connect_to_server(ClientConfig::default()).await;
    for _ in 0..3 {
        client.call("echo", b"hi".to_vec()).await.unwrap();
    }
    assert!(client.call("no_such_command", Vec::new()).await.is_err());
    let d = client.diagnostics().await.unwrap();
    // Three echoes, the unknown command, and this request itself.
    assert_eq!(d.calls, Reading::Value(5));
    assert_eq!(d.connections, Reading::Value(1));
    let errors = d.errors.value().expect("errors counted");
    assert_eq!(errors.0.len(), 1, "{errors}");
    assert_eq!(errors.0.get("UNKNOWN_COMMAND"), Some(&1));
    assert_eq!(d.busy, Reading::Value(0));
    assert_eq!(d.link_losses, Reading::Value(0));
    assert_eq!(d.att_mtu, Reading::Value(247));
    assert_eq!(
        d.version,
        Reading::Value(format!("blerpc {}", env!("CARGO_PKG_VERSION")))
    );
    assert!(d.uptime_ms.value().is_some());
    assert!(d.outbox_high_water.value().is_some_and(|b| *b > 0));
    for missing in [&d.conn_interval_us, &d.phy, &d.data_length] {
        assert!(
            missing.reason().unwrap().starts_with("not a BLE link"),
            "{missing}"
        );
    }
    assert!(d.rssi_dbm.reason().unwrap().starts_with("not a BLE link"));
    assert!(
        d.build_id
            .reason()
            .unwrap()
            .contains("ServerConfig::build_id")
    );
    assert!(d.ram_high_water.reason().unwrap().contains("OS"));
}

#[tokio::test]
async fn a_build_id_and_version_come_from_the_configuration() {
    let server = blerpc::Server::new(
        Demo,
        ServerConfig {
            version: "thermostat 2.1".into(),
            build_id: Some("ci-4242".into()),
            ..plaintext()
        },
    )
    .unwrap();
    let client = connect_plaintext(server).await;
    let d = client.diagnostics().await.unwrap();
    assert_eq!(d.version, Reading::Value("thermostat 2.1".into()));
    assert_eq!(d.build_id, Reading::Value("ci-4242".into()));
}

#[tokio::test]
async fn a_peripheral_without_the_extension_is_not_asked() {
    let mut config = plaintext();
    config.peripheral.diagnostics = false;
    let server = blerpc::Server::new(Demo, config).unwrap();
    let metrics = server.metrics();
    let client = connect_plaintext(server).await;
    let d = client.diagnostics().await.unwrap();
    for (field, value) in d.rows() {
        assert_eq!(value, format!("unavailable: {NOT_ANNOUNCED}"), "{field}");
    }
    assert_eq!(metrics.totals().calls, 0, "no request went out");
}

/// A server configuration without an identity (no encryption).
fn plaintext() -> ServerConfig {
    let mut config = ServerConfig::default();
    config.peripheral.require_encryption = false;
    config
}

/// A client of `server` (no identity) over an in-memory link.
async fn connect_plaintext(server: blerpc::Server) -> blerpc::Client {
    let (a, b) = blerpc::link::mem::pair(247);
    tokio::spawn(async move { server.serve_link(b).await });
    let mut config = ClientConfig::default();
    config.central.require_encryption = false;
    blerpc::Client::connect(a, config).await.unwrap()
}
