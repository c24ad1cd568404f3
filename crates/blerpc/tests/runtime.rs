//! The runtime end to end over the in-memory link: every call shape, pinning, refusals, limits,
//! many centrals at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::time::Duration;

use blerpc::client::CentralError;
use blerpc::client::{IdentityError, PinPolicy};
use blerpc::known_keys::KnownKeysFile;
use blerpc::link::{Link, LinkRx, LinkTx, mem};
use blerpc::{Client, ClientConfig, Error, Server, ServerConfig};
use blerpc_proto::connection::{CallError, CloseReason};
use blerpc_proto::wire::error_code::ErrorCode;
use common::*;
use futures_util::StreamExt;

async fn connect_pair(pin: PinPolicy) -> (Result<Client, Error>, Server) {
    let (a, b) = mem::pair(247);
    let server = server(true);
    let s = server.clone();
    tokio::spawn(async move { s.serve_link(b).await });
    let client = Client::connect(
        a,
        ClientConfig {
            pinning: pin,
            ..Default::default()
        },
    )
    .await;
    (client, server)
}

#[tokio::test]
async fn an_encrypted_connection_reports_the_peripheral_identity() {
    let key = server(true).identity_public().unwrap();
    let (client, _s) = connect_pair(PinPolicy::Trust(key)).await;
    let client = client.unwrap();
    assert!(client.info().encrypted);
    assert_eq!(client.info().peer_identity, Some(key));
    every_call_shape(&client).await;
}

#[tokio::test]
async fn concurrent_calls_from_many_tasks_share_one_connection() {
    let key = server(true).identity_public().unwrap();
    let (client, _s) = connect_pair(PinPolicy::Trust(key)).await;
    let client = client.unwrap();
    let mut tasks = Vec::new();
    for i in 0..50u32 {
        let c = client.clone();
        tasks.push(tokio::spawn(async move {
            let req = echo_req(&format!("msg {i}"));
            // More tasks than calls in flight: BUSY from the server and the local cap both apply.
            loop {
                match c.call("echo", req.clone()).await {
                    Ok(r) => return assert_eq!(r, req),
                    Err(Error::Central(CentralError::Call(CallError::TooManyCalls { .. }))) => {
                        tokio::time::sleep(Duration::from_millis(1)).await
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test]
async fn a_wrong_pinned_key_is_refused() {
    let (client, _s) = connect_pair(PinPolicy::Trust([9; 32])).await;
    assert!(
        matches!(
            client,
            Err(Error::Central(CentralError::Setup(
                CloseReason::IdentityRejected
            )))
        ),
        "{client:?}"
    );
}

#[tokio::test]
async fn trust_on_first_use_pins_and_then_refuses_another_identity() {
    let dir = tempfile::tempdir().unwrap();
    let store = KnownKeysFile::new(dir.path().join("known_keys.json"));
    let (client, server_a) = connect_pair(PinPolicy::KnownKeys(store.clone())).await;
    client.unwrap();
    let text = std::fs::read_to_string(store.path()).unwrap();
    assert!(text.contains(&blerpc::known_keys::to_hex(
        &server_a.identity_public().unwrap()
    )));
    // Same device id (mem://b), same key: accepted.
    let (client, _) = connect_pair(PinPolicy::KnownKeys(store.clone())).await;
    client.unwrap();
    // Same device id, another identity: refused with a message naming both keys.
    let (a, b) = mem::pair(247);
    let other = Server::new(
        Demo,
        ServerConfig {
            identity: Some([1; 32]),
            ..Default::default()
        },
    )
    .unwrap();
    let other_key = other.identity_public();
    tokio::spawn(async move { other.serve_link(b).await });
    let err = Client::connect(
        a,
        ClientConfig {
            pinning: PinPolicy::KnownKeys(store),
            ..Default::default()
        },
    )
    .await
    .unwrap_err();
    let Error::Central(CentralError::Identity(IdentityError::Changed {
        pinned, presented, ..
    })) = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(Some(*pinned), server_a.identity_public());
    assert_eq!(Some(*presented), other_key);
    assert!(err.to_string().contains("is pinned"), "{err}");
}

#[tokio::test]
async fn a_central_that_skips_the_key_exchange_is_refused() {
    let (a, b) = mem::pair(247);
    let s = server(true);
    tokio::spawn(async move { s.serve_link(b).await });
    let (mut tx, mut rx) = a.split();
    // A plaintext REQUEST echo "hello" on tid 9 (wire.md §6.2), no TIMEOUT/CAPS/KX.
    tx.queue(&[
        9, 0, 0, 15, 0, 15, 0, 4, b'e', b'c', b'h', b'o', 7, 0, 0x0a, 5, b'h', b'e', b'l', b'l',
        b'o',
    ])
    .unwrap();
    tx.flush().await.unwrap();
    let reply = rx.recv().await.unwrap().unwrap().to_vec();
    assert_eq!(
        reply,
        vec![9, 0, 0xd4, 1, ErrorCode::EncryptionRequired.to_byte()]
    );
}

#[tokio::test]
async fn a_request_over_the_limit_gets_a_clear_error() {
    let mut config = ServerConfig {
        identity: Some(SEED),
        ..Default::default()
    };
    config.peripheral.max_request_len = 1000;
    let server = Server::new(Demo, config).unwrap();
    let key = server.identity_public().unwrap();
    let (a, b) = mem::pair(247);
    tokio::spawn(async move { server.serve_link(b).await });
    let client = Client::connect(
        a,
        ClientConfig {
            pinning: PinPolicy::Trust(key),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let err = client
        .call("data_write", data_write_req(&[0; 2000]))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Central(CentralError::Call(CallError::RequestTooLarge {
                max: 1000,
                ..
            }))
        ),
        "{err}"
    );
    assert!(err.to_string().contains("at most 1000"), "{err}");
    // Within the limit it works.
    assert!(
        client
            .call("data_write", data_write_req(&[0; 900]))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn unknown_commands_and_handler_failures_are_reported() {
    let key = server(true).identity_public().unwrap();
    let (client, _s) = connect_pair(PinPolicy::Trust(key)).await;
    let client = client.unwrap();
    let err = client.call("nope", vec![]).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Central(CentralError::Call(CallError::Peer(
                ErrorCode::UnknownCommand
            )))
        ),
        "{err}"
    );
    let big = flash_read_req(0, 9000);
    let err = client.call("flash_read", big).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Central(CentralError::Call(CallError::Peer(
                ErrorCode::HandlerFailed
            )))
        ),
        "{err}"
    );
}

#[tokio::test]
async fn plaintext_when_both_sides_allow_it() {
    let mut config = ServerConfig::default();
    config.peripheral.require_encryption = false;
    let server = Server::new(Demo, config).unwrap();
    let (a, b) = mem::pair(247);
    tokio::spawn(async move { server.serve_link(b).await });
    let mut cc = ClientConfig {
        pinning: PinPolicy::NoPin,
        ..Default::default()
    };
    cc.central.require_encryption = false;
    let client = Client::connect(a, cc).await.unwrap();
    assert!(!client.info().encrypted);
    assert_eq!(
        client.call("echo", vec![1, 2, 3]).await.unwrap(),
        vec![1, 2, 3]
    );
}

/// `server` serving an in-memory listener (`backlog` links queued) until the returned sender
/// fires: the listener, the stop sender and the serving task.
fn serve_mem(
    server: Server,
    backlog: usize,
) -> (
    tokio::sync::mpsc::Sender<mem::MemLink>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), blerpc::server::ServerError>>,
) {
    let (listener_tx, acceptor) = MemAcceptor::new(backlog);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(async move {
        server
            .serve(acceptor, async {
                let _ = stop_rx.await;
            })
            .await
    });
    (listener_tx, stop_tx, serving)
}

/// A client connected through an in-memory `listener`, pinning `key`.
async fn connect_mem(listener: &tokio::sync::mpsc::Sender<mem::MemLink>, key: [u8; 32]) -> Client {
    let (a, b) = mem::pair(247);
    listener.send(b).await.unwrap();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_answers_1000_concurrent_centrals() {
    let server = server(true);
    let key = server.identity_public().unwrap();
    let (listener_tx, stop_tx, serving) = serve_mem(server, 16);
    let mut tasks = Vec::new();
    for i in 0..1000u32 {
        let (a, b) = mem::pair(247);
        listener_tx.send(b).await.unwrap();
        tasks.push(tokio::spawn(async move {
            let mut config = ClientConfig {
                pinning: PinPolicy::Trust(key),
                ..Default::default()
            };
            // 1,000 key exchanges at once on two threads: without a crypto provider feature a
            // debug build runs the portable ciphers unoptimised, and the last setups wait
            // longer than the defaults allow. This test is about answering them all.
            config.central.setup_timeout = Duration::from_secs(120);
            config.central.handshake_step_timeout = Duration::from_secs(120);
            let c = Client::connect(a, config).await.unwrap();
            let req = echo_req(&format!("central {i}"));
            assert_eq!(c.call("echo", req.clone()).await.unwrap(), req);
            c
        }));
    }
    let mut clients = Vec::new();
    for t in tasks {
        clients.push(t.await.unwrap());
    }
    // All 1000 are connected at once; each answers again.
    for (i, c) in clients.iter().enumerate() {
        let req = echo_req(&format!("again {i}"));
        assert_eq!(c.call("echo", req.clone()).await.unwrap(), req);
    }
    drop(clients);
    stop_tx.send(()).unwrap();
    serving.await.unwrap().unwrap();
}

#[tokio::test]
async fn graceful_shutdown_finishes_in_flight_calls() {
    let server = server(true);
    let key = server.identity_public().unwrap();
    let (listener_tx, stop_tx, serving) = serve_mem(server, 1);
    let c = connect_mem(&listener_tx, key).await;
    let slow = tokio::spawn({
        let c = c.clone();
        async move { c.call("slow", vec![7]).await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    stop_tx.send(()).unwrap();
    assert_eq!(slow.await.unwrap().unwrap(), vec![7]);
    serving.await.unwrap().unwrap();
    // After shutdown the connection is gone.
    assert!(c.call("echo", vec![1]).await.is_err());
}

/// An idle connection whose loop has turned many times (its shutdown waiter registered long
/// before) still drains and closes at once on shutdown, far inside a grace period that would
/// otherwise abort it.
#[tokio::test]
async fn shutdown_reaches_a_connection_idle_after_many_turns() {
    let server = Server::new(
        Demo,
        ServerConfig {
            identity: Some(SEED),
            shutdown_grace: Duration::from_secs(60),
            ..Default::default()
        },
    )
    .unwrap();
    let key = server.identity_public().unwrap();
    let (listener_tx, stop_tx, serving) = serve_mem(server, 1);
    let c = connect_mem(&listener_tx, key).await;
    for i in 0..50u8 {
        assert_eq!(c.call("echo", vec![i]).await.unwrap(), vec![i]);
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let t = std::time::Instant::now();
    stop_tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), serving)
        .await
        .expect("the idle connection drained on shutdown, not after the grace")
        .unwrap()
        .unwrap();
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(c.call("echo", vec![1]).await.is_err());
}

/// Without the streams extension (a reference peripheral), a stream whose reader falls
/// behind by more than `stream_buffer` items gets the items it buffered, then
/// `STREAM_OVERFLOW` (never a silent end), and the connection goes on. (With it, the
/// peripheral waits for the reader: `tests/streams.rs`.)
#[tokio::test]
async fn a_stream_reader_that_falls_behind_gets_its_items_then_stream_overflow() {
    let (a, b) = mem::pair(247);
    let s = server(true);
    let key = s.identity_public().unwrap();
    tokio::spawn(async move { s.serve_link(b).await });
    let mut config = ClientConfig {
        pinning: PinPolicy::Trust(key),
        stream_buffer: 3,
        ..Default::default()
    };
    config.central.streams = false;
    let client = Client::connect(a, config).await.unwrap();
    let mut stream = client
        .server_stream("counter_stream", counter_stream_req(50))
        .await
        .unwrap();
    // Nobody reads while the items arrive.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut items = 0;
    let err = loop {
        match stream.next().await {
            Some(Ok(_)) => items += 1,
            Some(Err(e)) => break e,
            None => panic!("the stream ended silently after {items} items"),
        }
    };
    assert_eq!(items, 3, "the buffered items come first");
    assert!(
        matches!(
            err,
            Error::Central(CentralError::StreamOverflow { limit: 3 })
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "more than 3 stream items arrived before they were read: read them faster or give the stream a larger buffer"
    );
    assert!(stream.next().await.is_none());
    let req = echo_req("after");
    assert_eq!(client.call("echo", req.clone()).await.unwrap(), req);
}

#[tokio::test]
async fn dropping_a_stream_cancels_it_and_the_connection_goes_on() {
    let key = server(true).identity_public().unwrap();
    let (client, _s) = connect_pair(PinPolicy::Trust(key)).await;
    let client = client.unwrap();
    let mut stream = client
        .server_stream("counter_stream", counter_stream_req(10_000))
        .await
        .unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(
        counter_item_of(&first),
        Some((0, 0)),
        "the first item is seq 0"
    );
    drop(stream);
    let req = echo_req("after");
    assert_eq!(client.call("echo", req.clone()).await.unwrap(), req);
}

#[tokio::test]
async fn an_upload_whose_handler_fails_early_reports_the_error_promptly() {
    let key = server(true).identity_public().unwrap();
    let (client, _s) = connect_pair(PinPolicy::Trust(key)).await;
    let client = client.unwrap();
    let start = std::time::Instant::now();
    let mut up = client.client_stream("failing_upload").await.unwrap();
    for i in 0..5u32 {
        up.send(counter_item(i, 0)).await.unwrap();
    }
    let err = up.finish().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Central(CentralError::Call(CallError::Peer(
                ErrorCode::HandlerFailed
            )))
        ),
        "{err}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "took {:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn an_empty_upload_to_a_service_that_cannot_tell_its_command_gets_an_error_promptly() {
    // The test service has two upload commands, so STREAM_END_C2P alone is ambiguous.
    let key = server(true).identity_public().unwrap();
    let (client, _s) = connect_pair(PinPolicy::Trust(key)).await;
    let client = client.unwrap();
    let start = std::time::Instant::now();
    let up = client.client_stream("counter_upload").await.unwrap();
    let err = up.finish().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Central(CentralError::Call(CallError::Peer(
                ErrorCode::UnknownCommand
            )))
        ),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(2));
}

/// The request message of the demo's `echo` (field 1, bytes) and `counter_stream` (field 1,
/// count), for the `*_message` calls.
#[derive(Clone, PartialEq, prost::Message)]
struct Request {
    #[prost(bytes = "vec", tag = "1")]
    data: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Count {
    #[prost(uint32, tag = "1")]
    count: u32,
}

#[tokio::test]
async fn message_calls_frame_the_request_and_match_byte_calls() {
    let key = server(true).identity_public().unwrap();
    let (client, _s) = connect_pair(PinPolicy::Trust(key)).await;
    let client = client.unwrap();
    // Below and above one classic transaction's data (the in-memory link is classic: 61 KB at
    // MTU 247 is the most one transaction carries).
    for len in [0usize, 5, 1_000, 20_000] {
        let message = Request {
            data: (0..len).map(|i| (i % 251) as u8).collect(),
        };
        let bytes = prost::Message::encode_to_vec(&message);
        let by_message = client.call_message("echo", &message).await.unwrap();
        let by_bytes = client.call("echo", bytes.clone()).await.unwrap();
        assert_eq!(by_message, bytes, "{len}");
        assert_eq!(by_bytes, bytes, "{len}");
    }
    let items: Vec<_> = client
        .server_stream_message("counter_stream", &Count { count: 3 })
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(items.len(), 3);
    assert!(items.iter().all(Result::is_ok));
    // A name the command header cannot carry fails before anything is sent; an empty one is
    // refused by the connection; unknown commands are the peer's answer, as with `call`.
    let long = "n".repeat(256);
    let message = Request { data: vec![1] };
    for name in [long.as_str(), ""] {
        assert!(matches!(
            client.call_message(name, &message).await,
            Err(Error::Central(CentralError::Call(CallError::InvalidName)))
        ));
        assert!(matches!(
            client.server_stream_message(name, &message).await,
            Err(Error::Central(CentralError::Call(CallError::InvalidName)))
        ));
    }
    assert!(matches!(
        client.call_message("nope", &message).await,
        Err(Error::Central(CentralError::Call(CallError::Peer(
            ErrorCode::UnknownCommand
        ))))
    ));
    // Still fine afterwards.
    assert_eq!(
        client.call_message("echo", &message).await.unwrap(),
        prost::Message::encode_to_vec(&message)
    );
}

/// A deadline given with the call is kept by the connection: the slow handler (50 ms) outlasts
/// a 10 ms deadline, which fails with the core's timeout; a deadline it meets gets the answer,
/// and the connection goes on.
#[tokio::test]
async fn a_call_past_its_deadline_times_out_and_the_connection_goes_on() {
    let key = server(true).identity_public().unwrap();
    let (client, _s) = connect_pair(PinPolicy::Trust(key)).await;
    let client = client.unwrap();
    let soon = tokio::time::Instant::now() + Duration::from_millis(10);
    // The core's own call timeout is seconds away: only the call's deadline can end it.
    let err = client.call_until("slow", vec![7], soon).await.unwrap_err();
    assert_eq!(err.call_error(), Some(CallError::Timeout), "{err}");
    let later = tokio::time::Instant::now() + Duration::from_secs(5);
    assert_eq!(
        client.call_until("slow", vec![8], later).await.unwrap(),
        vec![8]
    );
    assert_eq!(client.call("echo", vec![9]).await.unwrap(), vec![9]);
}
