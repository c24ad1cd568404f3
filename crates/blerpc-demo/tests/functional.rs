//! The demo service passes the reference functional tests over the in-memory link, encrypted.
#![allow(clippy::unwrap_used)]

use blerpc::blerpc_proto::connection::CallError;
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

/// The error a refused call ends with.
async fn refusal(c: &pb::BlerpcClient, call: functional::Call) -> blerpc::Error {
    use functional::Call;
    match call {
        Call::Echo(message) => c
            .echo(pb::EchoRequest {
                message: message.into(),
            })
            .await
            .map(drop),
        Call::FlashRead { address, length } => c
            .flash_read(pb::FlashReadRequest { address, length })
            .await
            .map(drop),
        Call::CounterStream { count } => {
            let s = c
                .counter_stream(pb::CounterStreamRequest { count })
                .await
                .unwrap();
            s.collect_vec().await.map(drop)
        }
        other => panic!("no refusal of {other:?} in the table"),
    }
    .unwrap_err()
}

#[tokio::test]
async fn limits_are_enforced_with_the_reference_errors() {
    let client = connect_demo().await;
    let c = pb::BlerpcClient::new(client);
    for r in functional::REFUSALS {
        let e = refusal(&c, r.call).await;
        assert!(
            e.call_error() == Some(CallError::Peer(r.code)),
            "{}: {e}",
            r.name
        );
    }
    // The connection still serves after the refusals.
    let r = c
        .echo(pb::EchoRequest {
            message: "still there".into(),
        })
        .await
        .unwrap();
    assert_eq!(r.message, "still there");
}

#[tokio::test]
async fn an_empty_upload_is_answered_like_the_reference_firmware() {
    let client = connect_demo().await;
    let c = pb::BlerpcClient::new(client);
    let r = c.counter_upload(std::iter::empty()).await.unwrap();
    assert_eq!(r.received_count, 0);
}
