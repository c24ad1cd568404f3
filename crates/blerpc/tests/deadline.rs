//! The deadline extension end to end on the runtime (in-memory link): a unary handler, or a
//! server stream's producer, sees the time its central still waits
//! (`blerpc::server::deadline()`) and is stopped when it passes; without the extension it sees
//! none.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use blerpc::{Client, ClientConfig};
use blerpc_proto::connection::CallError;
use common::*;
use futures_util::StreamExt;
use tokio::time::Instant;

fn millis(reply: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(reply.try_into().ok()?))
}

/// What `deadline_left` answers to a call given `ms` milliseconds: the time its handler saw
/// left, or `None` when it saw no deadline.
async fn left_of(client: &Client, ms: u64) -> Option<u32> {
    let at = Instant::now() + Duration::from_millis(ms);
    let reply = client
        .call_until("deadline_left", Vec::new(), at)
        .await
        .unwrap();
    if reply.is_empty() {
        return None;
    }
    Some(millis(&reply).expect("4 bytes"))
}

#[tokio::test]
async fn a_handler_sees_the_time_its_central_still_waits() {
    let client = connect_to_server(ClientConfig::default()).await;
    assert!(client.info().capabilities.is_some());
    let left = left_of(&client, 800).await.expect("a deadline");
    assert!((500..=800).contains(&left), "{left} ms");
    // Without the caller's deadline: the call timeout (5 s).
    let left = millis(&client.call("deadline_left", Vec::new()).await.unwrap()).unwrap();
    assert!((4_500..=5_000).contains(&left), "{left} ms");
}

#[tokio::test]
async fn a_handler_past_its_deadline_is_stopped_and_the_connection_goes_on() {
    // No CANCEL: the deadline alone stops the handler.
    let mut config = ClientConfig::default();
    config.central.cancel = false;
    let client = connect_to_server(config).await;
    let before = HANG_DROPPED.load(Ordering::SeqCst);
    let started = Instant::now();
    let err = client
        .call_until("hang", Vec::new(), started + Duration::from_millis(200))
        .await
        .unwrap_err();
    assert_eq!(err.call_error(), Some(CallError::Timeout), "{err}");
    // The server stops the handler at the deadline the request carried; bounded wait.
    let stop_by = started + Duration::from_secs(2);
    while HANG_DROPPED.load(Ordering::SeqCst) == before && Instant::now() < stop_by {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(HANG_DROPPED.load(Ordering::SeqCst), before + 1);
    // Every slot was released: four calls at once answer.
    let calls = (0..4).map(|i| client.call("echo", vec![i]));
    let replies = futures_util::future::join_all(calls).await;
    for (i, reply) in replies.into_iter().enumerate() {
        assert_eq!(reply.unwrap(), vec![i as u8]);
    }
}

#[tokio::test]
async fn a_stream_past_its_deadline_is_stopped_and_the_next_one_starts() {
    // No CANCEL: the deadline alone stops the producer, whose ERROR ends the central's drain
    // (the endless stream would otherwise hold the next one).
    let mut config = ClientConfig::default();
    config.central.cancel = false;
    let client = connect_to_server(config).await;
    let started = Instant::now();
    let mut ticks = client
        .server_stream_until(
            "ticking_stream",
            Vec::new(),
            started + Duration::from_millis(300),
        )
        .await
        .unwrap();
    let mut lefts = Vec::new();
    let end = loop {
        match ticks.next().await {
            Some(Ok(item)) => lefts.push(millis(&item).expect("a deadline")),
            Some(Err(e)) => break e,
            None => panic!("the endless stream ended"),
        }
    };
    assert_eq!(end.call_error(), Some(CallError::Timeout), "{end}");
    assert!(lefts.len() >= 5, "{lefts:?}");
    assert!(
        lefts.windows(2).all(|w| w[1] < w[0]) && lefts[0] <= 300,
        "{lefts:?}"
    );
    // The next stream starts and answers well before the drain's 2 s of silence could end.
    let next = async {
        let items: Vec<_> = client
            .server_stream("counter_stream", counter_stream_req(3))
            .await
            .unwrap()
            .collect()
            .await;
        items.len()
    };
    let count = tokio::time::timeout(Duration::from_secs(1), next).await;
    assert_eq!(count.ok(), Some(3), "the next stream was held");
}

#[tokio::test]
async fn without_the_extension_a_handler_sees_no_deadline() {
    let mut config = ClientConfig::default();
    config.central.deadline = false;
    let client = connect_to_server(config).await;
    assert_eq!(left_of(&client, 800).await, None);
}
