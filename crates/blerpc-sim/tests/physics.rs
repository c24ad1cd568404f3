//! The real client and server over the simulated BLE link, on tokio's virtual time.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use blerpc::blerpc_proto::connection::SetupPipelining;
use blerpc_demo::{functional, pb};
use blerpc_sim::{LinkParams, Phy};
use tokio::time::Instant;

async fn connect(params: LinkParams) -> pb::BlerpcClient {
    common::connect(params).await.0
}

/// Mean virtual time of one echo, over 20 echoes after a warm-up.
async fn echo_ms(ci_ms: u64) -> f64 {
    let c = connect(LinkParams {
        conn_interval: Duration::from_millis(ci_ms),
        ..Default::default()
    })
    .await;
    let req = || pb::EchoRequest {
        message: "hello".into(),
    };
    c.echo(req()).await.unwrap();
    let t0 = Instant::now();
    for _ in 0..20 {
        assert_eq!(c.echo(req()).await.unwrap().message, "hello");
    }
    t0.elapsed().as_secs_f64() * 1000.0 / 20.0
}

#[tokio::test(start_paused = true)]
async fn an_echo_costs_two_connection_intervals() {
    let wall = std::time::Instant::now();
    let at15 = echo_ms(15).await;
    let at30 = echo_ms(30).await;
    println!("echo: {at15:.2} ms at CI 15 ms, {at30:.2} ms at CI 30 ms");
    assert!((25.0..=35.0).contains(&at15), "{at15}");
    assert!((50.0..=70.0).contains(&at30), "{at30}");
    assert!(wall.elapsed() < Duration::from_secs(2));
}

/// Virtual time from `Client::connect` to a connected, encrypted client, in connection intervals.
async fn setup_intervals(ci_ms: u64, mode: Option<SetupPipelining>) -> f64 {
    let params = LinkParams {
        conn_interval: Duration::from_millis(ci_ms),
        ..Default::default()
    };
    let t0 = Instant::now();
    let (c, _) = common::connect_with(params, |config| config.setup_pipelining = mode).await;
    let took = t0.elapsed().as_secs_f64() * 1000.0 / ci_ms as f64;
    let r = c
        .echo(pb::EchoRequest {
            message: "after setup".into(),
        })
        .await
        .unwrap();
    assert_eq!(r.message, "after setup");
    took
}

#[tokio::test(start_paused = true)]
async fn pipelined_setup_saves_a_round_trip_per_request_sent_early() {
    // A round trip costs two connection intervals (see above); the reference order makes four
    // before the first call (TIMEOUT, CAPABILITIES, key exchange steps 1 and 3).
    for ci in [15, 30] {
        let off = setup_intervals(ci, Some(SetupPipelining::Off)).await;
        let requests = setup_intervals(ci, Some(SetupPipelining::Requests)).await;
        let kx = setup_intervals(ci, Some(SetupPipelining::KeyExchange)).await;
        // The simulated link is a BLE link: its default is `Requests`.
        let default = setup_intervals(ci, None).await;
        assert!((default - requests).abs() < 0.5, "{default} vs {requests}");
        println!(
            "setup at CI {ci} ms: {off:.1} intervals in order, {requests:.1} with TIMEOUT and \
             CAPABILITIES together, {kx:.1} with step 1 too"
        );
        assert!((6.0..=10.0).contains(&off), "{off}");
        assert!(
            requests <= off - 1.5 && requests >= off - 2.5,
            "{off} → {requests}"
        );
        assert!(
            kx <= requests - 1.5 && kx >= requests - 2.5,
            "{requests} → {kx}"
        );
    }
}

/// Virtual time of one 8 KB flash_read, in connection events.
async fn read_8k_events(params: LinkParams) -> f64 {
    let ci = params.conn_interval;
    let c = connect(params).await;
    let req = || pb::FlashReadRequest {
        address: 0,
        length: 8192,
    };
    c.flash_read(req()).await.unwrap();
    let t0 = Instant::now();
    let r = c.flash_read(req()).await.unwrap();
    assert_eq!(r.data.len(), 8192);
    t0.elapsed().as_secs_f64() / ci.as_secs_f64()
}

#[tokio::test(start_paused = true)]
async fn throughput_follows_the_event_budget_and_the_phy() {
    let wall = std::time::Instant::now();
    let roomy = LinkParams {
        event_budget: Duration::from_millis(15),
        ..Default::default()
    };
    let mut by_n = Vec::new();
    for n in [2usize, 4, 8] {
        let ev = read_8k_events(LinkParams {
            max_pdus_per_event: Some(n),
            ..roomy
        })
        .await;
        println!("8 KB read, {n} packets/event: {ev:.2} events");
        // ceil(35 / n) events of response plus the request's event (and the partial event
        // before it), give or take one.
        let expect = 35usize.div_ceil(n) as f64 + 1.0;
        assert!(
            ev >= expect - 1.0 && ev <= expect + 1.5,
            "{n}: {ev} vs {expect}"
        );
        by_n.push(ev);
    }
    assert!(by_n[0] > by_n[1] && by_n[1] > by_n[2], "{by_n:?}");

    // A 7.5 ms budget fits 3 full pairs at 1M (2.47 ms each) and 5 at 2M (1.39 ms each).
    let budget = LinkParams::default();
    let m1 = read_8k_events(LinkParams {
        phy: Phy::Le1M,
        ..budget
    })
    .await;
    let m2 = read_8k_events(LinkParams {
        phy: Phy::Le2M,
        ..budget
    })
    .await;
    println!("8 KB read, 7.5 ms budget: {m1:.2} events at 1M, {m2:.2} events at 2M");
    assert!(m1 > m2 * 1.4, "1M {m1} vs 2M {m2}");
    assert!(wall.elapsed() < Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn all_twelve_reference_tests_pass_over_the_simulated_link() {
    let wall = std::time::Instant::now();
    let t0 = Instant::now();
    let c = connect(LinkParams::default()).await;
    let results = functional::run_all(&c).await;
    assert_eq!(results.len(), 12);
    for r in &results {
        assert!(r.passed(), "{}: {:?}", r.name, r.outcome);
    }
    println!(
        "functional tests: {:.1} s of virtual time",
        t0.elapsed().as_secs_f64()
    );
    assert!(wall.elapsed() < Duration::from_secs(3));
}
