//! The BLE links end to end on the in-memory fake GATT connection (there is no Bluetooth
//! controller in CI): every call shape through `BleCentralLink` and `BlePeripheralLink`, MTU
//! propagation, write-without-response flow control and disconnection.
#![cfg(all(feature = "ble-central", feature = "ble-peripheral"))]
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::time::Duration;

use blerpc::client::CentralError;
use blerpc::client::PinPolicy;
use blerpc::link::ble::central::BleCentralLink;
use blerpc::link::ble::fake::{self, FakeOptions};
use blerpc::link::ble::peripheral::BlePeripheralLink;
use blerpc::link::{Link, LinkError, LinkRx, LinkTx};
use blerpc::{Client, ClientConfig, Error};
use blerpc_proto::connection::{CallError, SetupPipelining};
use common::*;

async fn connect(
    att_mtu: usize,
    options: FakeOptions,
) -> (Client, fake::FakeHandle, fake::FakeHandle) {
    connect_with(att_mtu, options, |_| {}).await
}

/// [`connect`], with `tune` adjusting the client's configuration.
async fn connect_with(
    att_mtu: usize,
    options: FakeOptions,
    tune: impl FnOnce(&mut ClientConfig),
) -> (Client, fake::FakeHandle, fake::FakeHandle) {
    let (central, peripheral) = fake::pair_with(att_mtu, options);
    let (ch, ph) = (central.handle(), peripheral.handle());
    let server = server(true);
    let key = server.identity_public().unwrap();
    tokio::spawn(async move { server.serve_link(BlePeripheralLink::new(peripheral)).await });
    let mut config = ClientConfig {
        pinning: PinPolicy::Trust(key),
        ..Default::default()
    };
    tune(&mut config);
    let client = Client::connect(BleCentralLink::new(central), config)
        .await
        .unwrap();
    (client, ch, ph)
}

/// [`common::every_call_shape`] and a request of many write commands.
async fn every_call_shape_and_a_long_write(client: &Client) {
    assert!(client.info().encrypted);
    common::every_call_shape(client).await;
    // A request of many write commands.
    let big = data_write_req(&[0x5a; 6000]);
    assert_eq!(client.call("echo", big.clone()).await.unwrap(), big);
}

#[tokio::test]
async fn every_call_shape_encrypted_at_the_firmware_mtu() {
    let (client, central, peripheral) = connect(247, FakeOptions::default()).await;
    assert_eq!(client.info().att_mtu, 247);
    assert_eq!(client.info().peer_id, "ble://fake-peripheral");
    every_call_shape_and_a_long_write(&client).await;
    assert_eq!((central.dropped(), peripheral.dropped()), (0, 0));
}

#[tokio::test]
async fn every_call_shape_at_an_ios_sized_mtu() {
    // iOS: maximumWriteValueLength(.withoutResponse) + 3 = 185.
    let (client, central, _) = connect(185, FakeOptions::default()).await;
    assert_eq!(client.info().att_mtu, 185);
    every_call_shape_and_a_long_write(&client).await;
    assert!(central.sent() > 40);
}

#[tokio::test]
async fn a_congested_stack_slows_the_link_down_and_loses_nothing() {
    // Two credits per direction and 1 ms on the air per PDU: the link waits for credits.
    let options = FakeOptions {
        credits: 2,
        air_time: Duration::from_millis(1),
        flow_control: true,
    };
    let (client, central, peripheral) = connect(247, options).await;
    every_call_shape_and_a_long_write(&client).await;
    assert_eq!((central.dropped(), peripheral.dropped()), (0, 0));
}

#[tokio::test]
async fn link_backpressure_is_full_then_flush_waits_for_credits() {
    let options = FakeOptions {
        credits: 2,
        air_time: Duration::from_millis(2),
        flow_control: true,
    };
    let (central, peripheral) = fake::pair_with(247, options);
    let handle = central.handle();
    let (mut tx, _crx) = BleCentralLink::new(central).with_queue_limit(8).split();
    let (_ptx, mut rx) = BlePeripheralLink::new(peripheral).split();
    for i in 0..8u8 {
        assert!(!tx.is_full());
        tx.queue(&[i; 100]).unwrap();
    }
    assert!(tx.is_full());
    assert!(matches!(
        tx.queue(&[0; 245]),
        Err(LinkError::TooLarge { len: 245, max: 244 })
    ));
    // Nobody reads: the stack's 2 credits and the writer's few slots fill up and the flush
    // stalls; dropping it loses nothing.
    let stalled = tokio::time::timeout(Duration::from_millis(30), tx.flush()).await;
    assert!(stalled.is_err());
    assert!(tx.has_pending());
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        for _ in 0..40 {
            got.push(rx.recv().await.unwrap().unwrap()[0]);
        }
        got
    });
    for i in 8..40u8 {
        if tx.is_full() {
            tx.flush().await.unwrap();
        }
        tx.queue(&[i; 100]).unwrap();
    }
    tx.flush().await.unwrap();
    assert_eq!(reader.await.unwrap(), (0..40).collect::<Vec<u8>>());
    assert_eq!(handle.dropped(), 0);
}

#[tokio::test]
async fn a_stack_without_flow_control_drops_writes_and_the_call_fails() {
    // Like iOS writing without checking canSendWriteWithoutResponse (wire.md §2.2): the stack
    // drops what does not fit and the call fails, never with a wrong answer: the peripheral
    // reports the sequence gap it sees (SEQUENCE_GAP), or, when the dropped containers leave it
    // nothing to report (a FIRST lost, say), the central times out. Which one depends on which
    // writes the timing drops.
    let options = FakeOptions {
        credits: 2,
        air_time: Duration::from_millis(2),
        flow_control: false,
    };
    let (central, peripheral) = fake::pair_with(247, options);
    let handle = central.handle();
    let server = server(true);
    let key = server.identity_public().unwrap();
    tokio::spawn(async move { server.serve_link(BlePeripheralLink::new(peripheral)).await });
    let mut config = ClientConfig {
        pinning: PinPolicy::Trust(key),
        ..Default::default()
    };
    config.central.call_timeout = Duration::from_millis(400);
    let client = Client::connect(BleCentralLink::new(central), config)
        .await
        .unwrap();
    let big = data_write_req(&[1; 4000]);
    let err = client.call("echo", big).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Central(CentralError::Call(
                CallError::Timeout
                    | CallError::Peer(blerpc_proto::wire::error_code::ErrorCode::SequenceGap)
            ))
        ),
        "{err}"
    );
    assert!(handle.dropped() > 0);
}

#[tokio::test]
async fn a_radio_disconnection_closes_the_connection() {
    let (client, central, _) = connect(247, FakeOptions::default()).await;
    assert!(client.call("echo", vec![1]).await.is_ok());
    central.disconnect();
    let err = client.call("echo", vec![2]).await.unwrap_err();
    assert!(err.is_disconnected(), "{err}");
}

#[tokio::test]
async fn closing_the_client_disconnects_and_ends_the_peripheral_side() {
    let (central, peripheral) = fake::pair(247);
    let handle = peripheral.handle();
    let server = server(true);
    let key = server.identity_public().unwrap();
    let serving =
        tokio::spawn(async move { server.serve_link(BlePeripheralLink::new(peripheral)).await });
    let client = Client::connect(
        BleCentralLink::new(central),
        ClientConfig {
            pinning: PinPolicy::Trust(key),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    client.close().await;
    tokio::time::timeout(Duration::from_secs(2), serving)
        .await
        .expect("server side ended")
        .unwrap()
        .unwrap();
    assert!(handle.sent() > 0);
}

/// BLE links keep step 1 for after the CAPABILITIES reply (a BLE peripheral may be any reference
/// firmware); the client's configuration overrides the link's choice.
#[tokio::test]
async fn ble_links_pipeline_the_setup_requests_only() {
    let (central, peripheral) = fake::pair_with(247, FakeOptions::default());
    assert_eq!(
        BleCentralLink::new(central).setup_pipelining(),
        SetupPipelining::Requests
    );
    assert_eq!(
        BlePeripheralLink::new(peripheral).setup_pipelining(),
        SetupPipelining::Requests
    );
    // Every order completes over the fake GATT link, and a call works after it.
    for mode in [
        SetupPipelining::Off,
        SetupPipelining::Requests,
        SetupPipelining::KeyExchange,
    ] {
        let (client, _, _) = connect_with(247, FakeOptions::default(), |config| {
            config.setup_pipelining = Some(mode)
        })
        .await;
        assert!(client.info().encrypted, "{mode:?}");
        let req = echo_req("setup order");
        assert_eq!(client.call("echo", req.clone()).await.unwrap(), req);
    }
}
