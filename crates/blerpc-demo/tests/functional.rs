//! The demo service passes the reference functional tests over the in-memory link, encrypted.
#![allow(clippy::unwrap_used)]

use blerpc::client::PinPolicy;
use blerpc::link::mem;
use blerpc::{Client, ClientConfig, Server, ServerConfig};
use blerpc_demo::{DemoService, functional, pb};

/// A demo server on an in-memory link and a client that pins its key.
async fn connect_demo() -> Client {
    let server = Server::new(
        pb::BlerpcServer::new(DemoService::default()),
        ServerConfig {
            identity: Some([3; 32]),
            ..Default::default()
        },
    )
    .unwrap();
    let key = server.identity_public().unwrap();
    let (a, b) = mem::pair(247);
    tokio::spawn(async move { server.serve_link(b).await });
    Client::connect(
        a,
        ClientConfig {
            pinning: PinPolicy::Trust(key),
            ..Default::default()
        },
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn all_twelve_reference_tests_pass() {
    let client = connect_demo().await;
    let results = functional::run_all(&pb::BlerpcClient::new(client)).await;
    assert_eq!(results.len(), 12);
    for r in &results {
        assert!(r.passed(), "{}: {:?}", r.name, r.outcome);
    }
}

#[tokio::test]
async fn limits_are_enforced_with_clear_errors() {
    let client = connect_demo().await;
    let c = pb::BlerpcClient::new(client);
    let e = c
        .echo(pb::EchoRequest {
            message: "x".repeat(257),
        })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("decode"), "{e}");
    let e = c
        .flash_read(pb::FlashReadRequest {
            address: 0,
            length: 8193,
        })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("handler"), "{e}");
    let e = c
        .flash_read(pb::FlashReadRequest {
            address: (1 << 20) - 4,
            length: 8,
        })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("handler"), "{e}");
    let s = c
        .counter_stream(pb::CounterStreamRequest { count: 10_001 })
        .await
        .unwrap();
    let e = s.collect_vec().await.unwrap_err();
    assert!(e.to_string().contains("stream"), "{e}");
}

#[tokio::test]
async fn an_empty_upload_is_answered_like_the_reference_firmware() {
    let client = connect_demo().await;
    let c = pb::BlerpcClient::new(client);
    let r = c.counter_upload(std::iter::empty()).await.unwrap();
    assert_eq!(r.received_count, 0);
}
