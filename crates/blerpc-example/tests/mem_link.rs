//! The generated clients and servers talk to each other over the runtime's in-memory link,
//! encrypted, at the smallest MTU that allows encryption and at a common BLE MTU.

#![allow(clippy::unwrap_used, reason = "test helpers outside #[test] functions")]

use blerpc::client::PinPolicy;
use blerpc::link::mem;
use blerpc::{Client, ClientConfig, Server, ServerConfig};
use blerpc_example::demo::{self, BlerpcClient, BlerpcServer};
use blerpc_example::thermostat::{self, ThermostatClient, ThermostatServer};
use blerpc_example::{DemoHandlers, SimThermostat};
use futures_util::StreamExt;

/// Serves `dispatch` on one end of an in-memory link and connects a client to the other.
async fn connect(dispatch: impl blerpc::server::Dispatch, att_mtu: usize) -> Client {
    let (central, peripheral) = mem::pair(att_mtu);
    let server = Server::new(
        dispatch,
        ServerConfig {
            identity: Some([7; 32]),
            ..Default::default()
        },
    )
    .unwrap();
    let key = server.identity_public().unwrap();
    tokio::spawn(async move { server.serve_link(peripheral).await });
    Client::connect(
        central,
        ClientConfig {
            pinning: PinPolicy::Trust(key),
            ..Default::default()
        },
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn thermostat_all_commands() {
    for mtu in [136, 247] {
        let client = ThermostatClient::new(
            connect(ThermostatServer::new(SimThermostat::default()), mtu).await,
        );

        let reading = client
            .get_reading(thermostat::GetReadingRequest {})
            .await
            .unwrap();
        assert_eq!(reading.centi_celsius, SimThermostat::ROOM);

        let set = client
            .set_target(thermostat::SetTargetRequest {
                centi_celsius: 2000,
            })
            .await
            .unwrap();
        assert_eq!(set.centi_celsius, 2000);

        // A handler error reaches the client as a call error.
        let refused = client
            .set_target(thermostat::SetTargetRequest {
                centi_celsius: 9000,
            })
            .await;
        assert!(
            matches!(
                refused,
                Err(blerpc::Error::Central(blerpc::client::CentralError::Call(
                    _
                )))
            ),
            "{refused:?}"
        );

        // p2c: as a Stream, and collected.
        let mut watch = client
            .watch(thermostat::WatchRequest { count: 5 })
            .await
            .unwrap();
        let mut seqs = Vec::new();
        while let Some(reading) = watch.next().await {
            seqs.push(reading.unwrap().seq);
        }
        assert_eq!(seqs, [0, 1, 2, 3, 4]);
        let all = client
            .watch(thermostat::WatchRequest { count: 3 })
            .await
            .unwrap()
            .collect_vec()
            .await
            .unwrap();
        assert_eq!(
            all.iter().map(|r| r.centi_celsius).collect::<Vec<_>>(),
            [2150, 2151, 2152]
        );
        let none = client
            .watch(thermostat::WatchRequest { count: 0 })
            .await
            .unwrap();
        assert!(none.collect_vec().await.unwrap().is_empty());

        // c2p: from an iterator and from a stream.
        let steps = [(360, 2100), (480, 1800), (1080, 2200), (1320, 1600)].map(
            |(minute, centi_celsius)| thermostat::ScheduleStep {
                minute,
                centi_celsius,
            },
        );
        let summary = client.upload_schedule(steps).await.unwrap();
        assert_eq!(
            summary,
            thermostat::ScheduleSummary {
                steps: 4,
                min_centi_celsius: 1600,
                max_centi_celsius: 2200
            }
        );
        let summary = client
            .upload_schedule_stream(futures_util::stream::iter(steps))
            .await
            .unwrap();
        assert_eq!(summary.steps, 4);
    }
}

#[tokio::test]
async fn thermostat_bidirectional_stream() {
    use thermostat::{SetTargetRequest, SetTargetResponse};
    let target = |centi_celsius| SetTargetRequest { centi_celsius };
    for mtu in [136, 247] {
        let client = ThermostatClient::new(
            connect(ThermostatServer::new(SimThermostat::default()), mtu).await,
        );

        // Requests and responses interleave on one call.
        let mut adjust = client.adjust().await.unwrap();
        adjust.send(target(2000)).await.unwrap();
        assert_eq!(
            adjust.message().await.unwrap(),
            Some(SetTargetResponse {
                centi_celsius: 2000
            })
        );
        // Another task sends and finishes through a sender while this one reads; the
        // peripheral ends the call once the central's half is over.
        let sender = adjust.sender();
        let sending = tokio::spawn(async move {
            for centi_celsius in [1800, 1900, 2100] {
                sender.send(target(centi_celsius)).await?;
            }
            sender.finish().await
        });
        let mut rest = Vec::new();
        while let Some(response) = adjust.next().await {
            rest.push(response.unwrap().centi_celsius);
        }
        assert_eq!(rest, [1800, 1900, 2100]);
        sending.await.unwrap().unwrap();

        // A handler error (an out-of-range target) is an error item, then the end.
        let mut adjust = client.adjust().await.unwrap();
        adjust.send(target(9000)).await.unwrap();
        let refused = adjust.next().await;
        assert!(
            matches!(
                refused,
                Some(Err(blerpc::Error::Central(
                    blerpc::client::CentralError::Call(_)
                )))
            ),
            "{refused:?}"
        );
        assert!(adjust.next().await.is_none());

        // An item that does not decode reaches the handler as a decode error, which it returns.
        let mut raw = client.inner().bidi_stream("adjust").await.unwrap();
        raw.send(vec![0xff]).await.unwrap();
        let undecodable = raw.next().await;
        assert!(
            matches!(
                undecodable,
                Some(Err(blerpc::Error::Central(
                    blerpc::client::CentralError::Call(_)
                )))
            ),
            "{undecodable:?}"
        );

        // A response that does not decode is `Error::Decode` on the typed stream: a
        // `SetTargetResponse` (field 1 a varint) read as an `EchoResponse` (a string).
        let raw = client.inner().bidi_stream("adjust").await.unwrap();
        let mut misread = thermostat::BidiStream::<SetTargetRequest, demo::EchoResponse>::new(raw);
        misread.send(target(2000)).await.unwrap();
        let item = misread.next().await;
        assert!(
            matches!(item, Some(Err(blerpc::Error::Decode(_)))),
            "{item:?}"
        );
    }
}

#[tokio::test]
async fn demo_service_matches_the_reference_behaviour() {
    let client = BlerpcClient::new(connect(BlerpcServer::new(DemoHandlers), 247).await);

    let echo = client
        .echo(demo::EchoRequest {
            message: "hello".into(),
        })
        .await
        .unwrap();
    assert_eq!(echo.message, "hello");

    let read = client
        .flash_read(demo::FlashReadRequest {
            address: 250,
            length: 8,
        })
        .await
        .unwrap();
    assert_eq!(read.address, 250);
    assert_eq!(read.data, [250, 251, 252, 253, 254, 255, 0, 1]);

    // Large enough to be split over many containers.
    let write = client
        .data_write(demo::DataWriteRequest {
            data: vec![0xa5; 4000],
        })
        .await
        .unwrap();
    assert_eq!(write.length, 4000);

    let items = client
        .counter_stream(demo::CounterStreamRequest { count: 10 })
        .await
        .unwrap()
        .collect_vec()
        .await
        .unwrap();
    assert_eq!(items.len(), 10);
    assert!(
        items
            .iter()
            .all(|i| i.value == i32::try_from(i.seq).unwrap() * 10)
    );

    let upload = client
        .counter_upload((0..7).map(|seq| demo::CounterUploadRequest { seq, value: 0 }))
        .await
        .unwrap();
    assert_eq!(upload.received_count, 7);
    // (An empty upload has no answer on the wire: STREAM_END_C2P does not name the command.)
}

#[tokio::test]
async fn service_synthesized_from_message_pairs() {
    use blerpc_example::LegacyHandlers;
    use blerpc_example::legacy::{LegacyClient, LegacyServer, PingRequest, TicksRequest};

    let client = LegacyClient::new(connect(LegacyServer::new(LegacyHandlers), 247).await);
    assert_eq!(
        client.ping(PingRequest { token: 42 }).await.unwrap().token,
        42
    );
    let ticks = client
        .ticks(TicksRequest { count: 4 })
        .await
        .unwrap()
        .collect_vec()
        .await
        .unwrap();
    assert_eq!(
        ticks.iter().map(|t| t.index).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    // The wire names are the reference's: snake_case of the pair's stem.
    assert_eq!(
        client.inner().call("ping", vec![0x08, 0x07]).await.unwrap(),
        [0x08, 0x07]
    );
}

#[tokio::test(start_paused = true)]
async fn wire_names_and_error_paths() {
    let client = connect(BlerpcServer::new(DemoHandlers), 247).await;

    // The generated server answers the reference's wire names with plain protobuf.
    // EchoRequest { message: "hi" } = field 1, length-delimited, 2 bytes.
    let reply = client.call("echo", b"\x0a\x02hi".to_vec()).await.unwrap();
    assert_eq!(reply, b"\x0a\x02hi");

    // A request that does not decode, and a name the service does not have: error replies.
    let garbage = client.call("echo", vec![0xff, 0xff, 0xff]).await;
    assert!(
        matches!(
            garbage,
            Err(blerpc::Error::Central(blerpc::client::CentralError::Call(
                _
            )))
        ),
        "{garbage:?}"
    );
    let unknown = client.call("no_such_command", Vec::new()).await;
    assert!(
        matches!(
            unknown,
            Err(blerpc::Error::Central(blerpc::client::CentralError::Call(
                _
            )))
        ),
        "{unknown:?}"
    );

    // A p2c request that does not decode ends the stream with an error.
    let mut stream = client
        .server_stream("counter_stream", vec![0xff])
        .await
        .unwrap();
    let first = stream.next().await;
    assert!(matches!(first, Some(Err(_))), "{first:?}");

    // A c2p item that does not decode fails the upload.
    // (The runtime does not yet report a handler failure that precedes STREAM_END_C2P, so this
    // may end in the call timeout; the paused clock makes that instant.)
    let mut upload = client.client_stream("counter_upload").await.unwrap();
    upload.send(vec![0xff]).await.unwrap();
    assert!(upload.finish().await.is_err());

    // A reply the client cannot decode is a decode error on the typed client: `flash_read`'s
    // reply read as an `EchoResponse` (field 1 is a varint there, a string here).
    let typed = BlerpcClient::new(client.clone());
    let raw = typed
        .inner()
        .call("flash_read", b"\x08\x01\x10\x01".to_vec())
        .await
        .unwrap();
    let misread = <demo::EchoResponse as blerpc::__private::prost::Message>::decode(raw.as_slice());
    assert!(misread.is_err());
}
