//! Large messages through `Client` and `Server` with their default configurations (the
//! large-message extension is on in the runtime): 65,536-byte and 1 MiB echoes, encrypted, over
//! the in-memory link and TCP; uploads of large items; a clear error against a server without
//! the extension.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::time::Duration;

use blerpc::client::CentralError;
use blerpc::client::Error;
use blerpc::link::mem;
use blerpc::{Client, Server, ServerConfig};
use blerpc_proto::connection::{CallError, DEFAULT_MAX_LARGE_MESSAGE_LEN};
use common::*;
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(60);

/// `len` bytes that are not one repeated value.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// A 65,536-byte and a 1 MiB echo, request and response each beyond the classic limit.
async fn echo_large(client: &Client) {
    let limit = DEFAULT_MAX_LARGE_MESSAGE_LEN as u32;
    let large = client.info().large_messages.expect("extension in force");
    assert_eq!((large.max_request, large.max_response), (limit, limit));
    for len in [65_536, 1024 * 1024] {
        let data = pattern(len);
        let reply = client.call("echo", data.clone()).await.unwrap();
        assert_eq!(reply.len(), len);
        assert!(reply == data, "{len}-byte echo differs");
    }
    // Small calls keep working alongside.
    assert_eq!(client.call("echo", b"hi".to_vec()).await.unwrap(), b"hi");
}

#[tokio::test]
async fn echo_65536_and_1_mib_over_mem_encrypted() {
    let server = server(true);
    let config = client_config(&server);
    let (a, b) = mem::pair(247);
    tokio::spawn(async move { server.serve_link(b).await });
    timeout(LIMIT, async {
        let client = Client::connect(a, config).await.unwrap();
        assert!(client.info().encrypted);
        echo_large(&client).await;
        // An upload of three 100 KB items.
        let mut up = client.client_stream("counter_upload").await.unwrap();
        for i in 0..3u8 {
            up.send(vec![i; 100_000]).await.unwrap();
        }
        assert_eq!(upload_reply_of(&up.finish().await.unwrap()), Some(3));
    })
    .await
    .unwrap();
}

#[cfg(feature = "tcp")]
#[tokio::test]
async fn echo_65536_and_1_mib_over_tcp_encrypted() {
    use blerpc::link::tcp::{self, TcpAcceptor, TcpOptions};
    let server = server(true);
    let config = client_config(&server);
    let acceptor = TcpAcceptor::bind("127.0.0.1:0", TcpOptions::default())
        .await
        .unwrap();
    let addr = acceptor.local_addr().unwrap();
    let (stop_tx, task) = common::serve_in_background(server, acceptor);
    timeout(LIMIT, async {
        let link = tcp::connect(addr, &TcpOptions::default()).await.unwrap();
        let client = Client::connect(link, config).await.unwrap();
        assert!(client.info().encrypted);
        // TCP carries long containers: both sides announce the extension by default.
        assert!(client.info().long_containers);
        echo_large(&client).await;
    })
    .await
    .unwrap();
    drop(stop_tx);
    task.await.unwrap();
}

/// Long containers on or off at either end of a TCP link: in force only when both links carry
/// them (`TcpOptions::long_containers`) and the server's config allows them; every combination
/// carries 65,536-byte and 1 MiB echoes. The in-memory link never announces them.
#[cfg(feature = "tcp")]
#[tokio::test]
async fn long_containers_are_negotiated_per_connection_over_tcp() {
    use blerpc::link::tcp::{self, TcpAcceptor, TcpOptions};
    for (client_long, server_long, server_config_long) in [
        (true, true, true),
        (false, true, true),
        (true, false, true),
        (true, true, false),
    ] {
        let mut config = ServerConfig {
            identity: Some(SEED),
            ..ServerConfig::default()
        };
        config.peripheral.long_containers = server_config_long;
        let server = Server::new(Demo, config).unwrap();
        let config = client_config(&server);
        let options = |long_containers| TcpOptions {
            long_containers,
            ..TcpOptions::default()
        };
        let acceptor = TcpAcceptor::bind("127.0.0.1:0", options(server_long))
            .await
            .unwrap();
        let addr = acceptor.local_addr().unwrap();
        let (stop_tx, task) = common::serve_in_background(server, acceptor);
        timeout(LIMIT, async {
            let link = tcp::connect(addr, &options(client_long)).await.unwrap();
            let client = Client::connect(link, config).await.unwrap();
            let want = client_long && server_long && server_config_long;
            assert_eq!(
                client.info().long_containers,
                want,
                "client {client_long} server {server_long} config {server_config_long}"
            );
            echo_large(&client).await;
        })
        .await
        .unwrap();
        drop(stop_tx);
        task.await.unwrap();
    }
    // The in-memory link keeps classic containers.
    let server = server(true);
    let config = client_config(&server);
    let (a, b) = mem::pair(247);
    tokio::spawn(async move { server.serve_link(b).await });
    let client = timeout(LIMIT, Client::connect(a, config))
        .await
        .unwrap()
        .unwrap();
    assert!(!client.info().long_containers);
}

#[tokio::test]
async fn server_without_the_extension_gives_a_clear_error() {
    let mut config = ServerConfig {
        identity: Some(SEED),
        ..ServerConfig::default()
    };
    config.peripheral.large_messages = false;
    let server = Server::new(Demo, config).unwrap();
    let config = client_config(&server);
    let (a, b) = mem::pair(247);
    tokio::spawn(async move { server.serve_link(b).await });
    timeout(LIMIT, async {
        let client = Client::connect(a, config).await.unwrap();
        assert_eq!(client.info().large_messages, None);
        let err = client.call("echo", vec![0; 65_536]).await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::Central(CentralError::Call(CallError::RequestTooLarge {
                    len: 65_566,
                    max: 61_438
                }))
            ),
            "{err:?}"
        );
        // What fits the classic limits still goes through.
        let data = pattern(60_000);
        assert_eq!(client.call("echo", data.clone()).await.unwrap(), data);
    })
    .await
    .unwrap();
}
