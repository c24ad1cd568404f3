//! The streams extension end to end on the runtime (in-memory link): a bidirectional stream
//! whose items interleave both ways, and flow control holding a fast producer to a slow
//! reader instead of failing the stream or growing memory.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::time::Duration;

use blerpc::ClientConfig;
use common::*;
use futures_util::StreamExt;

#[tokio::test]
async fn a_chat_interleaves_items_both_ways() {
    let client = connect_to_server(ClientConfig::default()).await;
    let mut chat = client.bidi_stream("chat").await.unwrap();
    // Each echo comes back before the next item goes: both ways at once, under one stream.
    for i in 0..50u32 {
        chat.send(i.to_le_bytes().to_vec()).await.unwrap();
        let echo = tokio::time::timeout(Duration::from_secs(5), chat.next())
            .await
            .expect("an echo in time")
            .expect("the stream is open")
            .unwrap();
        assert_eq!(echo, i.to_le_bytes());
    }
    // 300 more sent from another task ahead of the (slow) handler: the peripheral's window
    // holds the sender while the echoes stream back.
    let sender = chat.sender();
    let sending = tokio::spawn(async move {
        for i in 0..300u32 {
            sender.send(i.to_le_bytes().to_vec()).await.unwrap();
        }
        sender.finish().await.unwrap();
    });
    for i in 0..300u32 {
        let echo = tokio::time::timeout(Duration::from_secs(5), chat.next())
            .await
            .expect("an echo in time")
            .expect("the stream is open")
            .unwrap();
        assert_eq!(echo, i.to_le_bytes());
    }
    sending.await.unwrap();
    // The peripheral ends the call once this side ended and every echo went.
    let end = tokio::time::timeout(Duration::from_secs(5), chat.next()).await;
    assert!(matches!(end, Ok(None)), "{end:?}");
    // The connection goes on.
    assert_eq!(
        client.call("echo", echo_req("after")).await.unwrap(),
        echo_req("after")
    );
}

#[tokio::test]
async fn a_slow_reader_slows_a_server_stream_instead_of_failing_it() {
    // A reader buffering 8 items, 2,000 items produced as fast as the link goes: without
    // flow control the stream overflows (StreamOverflow); with it the producer waits.
    let config = ClientConfig {
        stream_buffer: 8,
        ..ClientConfig::default()
    };
    let client = connect_to_server(config).await;
    let mut items = client
        .server_stream("counter_stream", counter_stream_req(2_000))
        .await
        .unwrap();
    let mut n = 0u32;
    while let Some(item) = items.next().await {
        let (seq, _) = counter_item_of(&item.unwrap()).unwrap();
        assert_eq!(seq, n);
        n += 1;
        if n.is_multiple_of(100) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    assert_eq!(n, 2_000);
}

#[tokio::test]
async fn without_the_extension_the_classic_stream_overflows_a_slow_reader() {
    let mut config = ClientConfig {
        stream_buffer: 8,
        ..ClientConfig::default()
    };
    config.central.streams = false;
    let client = connect_to_server(config).await;
    let err = client.bidi_stream("chat").await.unwrap_err();
    assert!(format!("{err}").contains("streams extension"), "{err}");
    let mut items = client
        .server_stream("counter_stream", counter_stream_req(2_000))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut failed = false;
    while let Some(item) = items.next().await {
        if item.is_err() {
            failed = true;
            break;
        }
    }
    assert!(
        failed,
        "a reader that fell 8 items behind overflows without flow control"
    );
}
