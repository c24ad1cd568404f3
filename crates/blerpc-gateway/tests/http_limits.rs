//! The HTTP face under a slow or greedy client, in process: request heads that never finish and
//! idle kept connections are closed within the header timeout, an address past its connection
//! limit is refused at accept, event streams beyond their cap are answered 503, each counted in
//! `/metrics`; a well-behaved caller from another address is answered throughout. A request
//! body trickled or stopped is answered 408 at the body timeout, one announced or sent over the
//! size limit 413 at once, and either connection closed. An address that opens connections
//! faster than its rate, or whose requests keep ending in protocol errors, is refused at accept
//! for a penalty, counted, while other addresses are served, and admitted again after it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// Shared with the other suites; this one uses part of it.
#[allow(dead_code)]
mod util;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use blerpc::link::guard::{GuardConfig, Rate};
use blerpc_gateway::GatewayConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use util::Http;

/// A connection from `from` (a loopback address) to `to`.
async fn connect_from(from: [u8; 4], to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((from, 0))).unwrap();
    socket.connect(to).await.unwrap()
}

/// Whether the server has closed `s` (a read returns end of file or a reset), within `limit`.
async fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    let mut buf = [0u8; 4096];
    let until = Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(until.into(), s.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => return false,
        }
    }
}

/// `GET /healthz` from `from`: the status line.
async fn health(from: [u8; 4], to: SocketAddr) -> String {
    let mut s = connect_from(from, to).await;
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).await.unwrap();
    answer.lines().next().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_greedy_http_clients_are_cut_off_and_counted() {
    let (listener, addr) = util::listener().await;
    let config = GatewayConfig {
        http_header_timeout: Duration::from_millis(500),
        max_http_connections_per_address: 20,
        max_event_streams: 1,
        // The caps alone (20 late heads from one address would run its default rate dry: the
        // guard has tests of its own).
        http_guard: GuardConfig {
            rate: None,
            ..GatewayConfig::default().http_guard
        },
        ..GatewayConfig::default()
    };
    let gateway = util::gateway(config, addr, "");
    let _stop = util::serve(gateway.clone(), listener);

    // 30 connections from one address send half a request head and stall: 20 admitted, 10
    // refused at once.
    let mut stalled = Vec::new();
    for _ in 0..30 {
        let mut s = connect_from([127, 0, 0, 1], addr).await;
        let _ = s
            .write_all(b"GET /v1/devices HTTP/1.1\r\nHost: g\r\n")
            .await;
        stalled.push(s);
    }
    // A caller from another address is answered meanwhile.
    assert_eq!(health([127, 0, 0, 2], addr).await, "HTTP/1.1 200 OK");
    // Every stalled connection is closed within the header timeout (and some slack).
    for s in &mut stalled {
        assert!(
            closed_within(s, Duration::from_secs(5)).await,
            "a stalled connection stayed open"
        );
    }

    // A kept connection that goes idle after an answer is closed the same way.
    let mut kept = connect_from([127, 0, 0, 3], addr).await;
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: g\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = kept.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let idle = Instant::now();
    assert!(closed_within(&mut kept, Duration::from_secs(5)).await);
    assert!(
        idle.elapsed() >= Duration::from_millis(400),
        "{:?}",
        idle.elapsed()
    );

    // One event stream at a time.
    let http = Http::new(addr);
    let mut first = connect_from([127, 0, 0, 4], addr).await;
    first
        .write_all(
            format!(
                "GET /v1/events HTTP/1.1\r\nHost: g\r\nAuthorization: Bearer {}\r\n\r\n",
                util::TOKEN
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let n = first.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    http.get("/v1/events")
        .await
        .assert_problem(503, "too_many_event_streams");

    let metrics = http.get("/metrics").await.text();
    for line in [
        r#"blerpc_gateway_http_refused_total{reason="per_address"} 10"#,
        r#"blerpc_gateway_http_refused_total{reason="event_streams"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} missing from:\n{metrics}");
    }
    let timeouts = counter(
        &metrics,
        r#"blerpc_gateway_http_timeouts_total{reason="head"}"#,
    );
    assert!(timeouts >= 21, "{timeouts} header timeouts counted");
}

/// The value of the series `name` (with its labels) in a `/metrics` text.
fn counter(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in:\n{metrics}"))
        .parse()
        .unwrap()
}

/// Sends `head` (and `body`) on a new connection: the answer's status line, how long it took,
/// and whether the gateway then closed the connection (within 2 s).
async fn answer(to: SocketAddr, head: &str, body: &[u8]) -> (String, Duration, bool) {
    let mut s = connect_from([127, 0, 0, 5], to).await;
    let started = Instant::now();
    s.write_all(head.as_bytes()).await.unwrap();
    // The gateway may answer (and close) before the body is all sent.
    let _ = s.write_all(body).await;
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
        .await
        .expect("no answer within 5 s")
        .unwrap_or(0);
    let took = started.elapsed();
    let status = String::from_utf8_lossy(&buf[..n])
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    (
        status,
        took,
        closed_within(&mut s, Duration::from_secs(2)).await,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_oversized_bodies_are_refused_and_the_connection_closed() {
    let (listener, addr) = util::listener().await;
    let config = GatewayConfig {
        http_body_timeout: Duration::from_millis(500),
        max_json_bytes: 1024,
        ..GatewayConfig::default()
    };
    let gateway = util::gateway(config, addr, "");
    let _stop = util::serve(gateway.clone(), listener);
    let post = |length: usize| {
        format!(
            "POST /v1/devices/ab/calls/echo HTTP/1.1\r\nHost: g\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n",
            util::TOKEN
        )
    };

    // Four bytes of twenty, then nothing: 408 at the body timeout, and closed.
    let (status, took, closed) = answer(addr, &post(20), b"{\"me").await;
    assert_eq!(status, "HTTP/1.1 408 Request Timeout");
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert!(closed, "the connection of a slow body stayed open");

    // A gigabyte announced: 413 before a byte of it is read, and closed.
    let (status, took, closed) = answer(addr, &post(1 << 30), &[]).await;
    assert_eq!(status, "HTTP/1.1 413 Payload Too Large");
    assert!(took < Duration::from_millis(400), "{took:?}");
    assert!(closed, "the connection of an oversized body stayed open");

    // A body sent in chunks past the limit (no length announced): 413 when it passes it.
    let chunked = format!(
        "POST /v1/devices/ab/calls/echo HTTP/1.1\r\nHost: g\r\nAuthorization: Bearer {}\r\n\
         Transfer-Encoding: chunked\r\n\r\n",
        util::TOKEN
    );
    let mut body = Vec::new();
    for _ in 0..4 {
        body.extend_from_slice(b"200\r\n");
        body.extend_from_slice(&[b'a'; 0x200]);
        body.extend_from_slice(b"\r\n");
    }
    let (status, _, closed) = answer(addr, &chunked, &body).await;
    assert_eq!(status, "HTTP/1.1 413 Payload Too Large");
    assert!(closed, "the connection of an oversized body stayed open");

    // A request head over hyper's buffer (400 KiB): refused at once, closed.
    let huge = format!(
        "GET /healthz HTTP/1.1\r\nHost: g\r\n{}\r\n",
        "X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n".repeat(10_000)
    );
    let (status, took, closed) = answer(addr, &huge, &[]).await;
    assert_eq!(status, "HTTP/1.1 431 Request Header Fields Too Large");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert!(closed, "the connection of an oversized head stayed open");

    let metrics = Http::new(addr).get("/metrics").await.text();
    assert_eq!(
        counter(
            &metrics,
            r#"blerpc_gateway_http_timeouts_total{reason="body"}"#
        ),
        1
    );
}

/// `GET /healthz` from `from` on a new connection: the status line, or `None` when the
/// gateway closed the connection unanswered or it could not be opened within 500 ms (a
/// penalized address's connection attempts are dropped in the kernel on Linux).
async fn try_health(from: [u8; 4], to: SocketAddr) -> Option<String> {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((from, 0))).unwrap();
    let limit = Duration::from_millis(500);
    let mut s = tokio::time::timeout(limit, socket.connect(to))
        .await
        .ok()?
        .ok()?;
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n")
        .await
        .ok()?;
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut answer))
        .await
        .expect("neither answered nor closed within 5 s")
        .ok()?;
    let answer = String::from_utf8_lossy(&answer);
    answer.lines().next().map(str::to_string)
}

/// Calls `try_health` from `from` until it is answered, at most `tries` times a
/// `pause` apart: how many calls went unanswered first.
async fn unanswered_until_answered(
    from: [u8; 4],
    to: SocketAddr,
    tries: usize,
    pause: Duration,
) -> usize {
    for n in 0..tries {
        if let Some(status) = try_health(from, to).await {
            assert_eq!(status, "HTTP/1.1 200 OK");
            return n;
        }
        tokio::time::sleep(pause).await;
    }
    panic!("{from:?} was not answered in {tries} tries");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_over_its_rate_or_erring_is_refused_until_its_penalty_ends() {
    let (listener, addr) = util::listener().await;
    let penalty = Duration::from_millis(800);
    let config = GatewayConfig {
        http_guard: GuardConfig {
            // Five at once, then one every 50 ms; a protocol error costs three.
            rate: Some(Rate {
                per_second: 20.0,
                burst: 5.0,
            }),
            offence_cost: 3.0,
            penalty,
            probation: Duration::ZERO,
            ..GuardConfig::default()
        },
        ..GatewayConfig::default()
    };
    let gateway = util::gateway(config, addr, "");
    let _stop = util::serve(gateway.clone(), listener);
    let fast = [127, 0, 0, 6];

    // Connections from one address as fast as they are answered: the burst's worth (and the
    // few tokens earned meanwhile) answered, then one refused at accept and the address
    // penalized.
    let mut answered = 0;
    let started = Instant::now();
    while try_health(fast, addr).await.is_some() {
        answered += 1;
        assert!(answered < 40, "never refused");
    }
    let refused_at = Instant::now();
    let earned = (started.elapsed().as_secs_f64() * 20.0).ceil() as usize;
    assert!((5..=5 + earned).contains(&answered), "{answered} answered");
    // Penalized: refused (on Linux, its connection attempts not even completed).
    assert_eq!(try_health(fast, addr).await, None);
    // Another address is served meanwhile.
    assert_eq!(
        try_health([127, 0, 0, 7], addr).await.as_deref(),
        Some("HTTP/1.1 200 OK")
    );
    assert!(
        refused_at.elapsed() < penalty,
        "the test ran too slowly to see the penalty"
    );
    // After the penalty (and two tokens earned since it ended), the address is answered again.
    tokio::time::sleep_until((refused_at + penalty + Duration::from_millis(100)).into()).await;
    unanswered_until_answered(fast, addr, 20, Duration::from_millis(100)).await;

    // An address whose requests end in protocol errors (a head over hyper's buffer: 431): each
    // costs a token to connect and three more, so the second runs the bucket dry.
    let erring = [127, 0, 0, 8];
    let oversized = format!(
        "GET /healthz HTTP/1.1\r\nHost: g\r\n{}\r\n",
        "X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n".repeat(10_000)
    );
    for _ in 0..2 {
        let mut s = connect_from(erring, addr).await;
        let _ = s.write_all(oversized.as_bytes()).await;
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer).await;
        assert!(
            String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 431"),
            "{}",
            String::from_utf8_lossy(&answer)
        );
    }
    // The offence is charged as the connection ends: wait for the penalty to show.
    let mut waited = 0;
    while try_health(erring, addr).await.is_some() {
        waited += 1;
        assert!(waited < 10, "an erring address was never refused");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let penalized_at = Instant::now();
    assert_eq!(
        try_health([127, 0, 0, 9], addr).await.as_deref(),
        Some("HTTP/1.1 200 OK")
    );
    assert!(penalized_at.elapsed() < penalty, "the test ran too slowly");
    tokio::time::sleep_until((penalized_at + penalty + Duration::from_millis(100)).into()).await;
    unanswered_until_answered(erring, addr, 20, Duration::from_millis(100)).await;

    let metrics = Http::new(addr).get("/metrics").await.text();
    assert_eq!(
        counter(
            &metrics,
            r#"blerpc_gateway_http_refused_total{reason="rate"}"#
        ),
        1
    );
    assert_eq!(
        counter(
            &metrics,
            r#"blerpc_gateway_http_penalties_total{reason="rate"}"#
        ),
        1
    );
    assert_eq!(
        counter(
            &metrics,
            r#"blerpc_gateway_http_penalties_total{reason="offences"}"#
        ),
        1
    );
}
