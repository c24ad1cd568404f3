//! `blerpc gateway`'s HTTP face under the attack the issue measured: 2,000 connections that send
//! half a request head and stall (slowloris). They are all closed within the header timeout,
//! none is left open, and a legitimate caller is answered throughout, every call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use blerpc_test_support::{Proc, blerpc, http};

const TOKEN: &str = "test-token-0123456789abcdef";

#[test]
fn two_thousand_stalled_http_connections_are_closed_within_the_header_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let args = blerpc_test_support::gateway::enrolling(
        dir.path(),
        TOKEN,
        &[
            "--http-header-timeout",
            "2",
            // The per-address cap and rate are tested in process (blerpc-gateway's
            // tests/http_limits.rs): here one address makes the 2,000 and the caller's
            // thousands of one-shot connections a second.
            "--http-max-per-address",
            "100000",
            "--http-max-connection-rate",
            "0",
        ],
    );
    let mut cmd = blerpc();
    cmd.arg("gateway").args(&args);
    let mut gw = Proc::spawn(cmd, "blerpc gateway");
    let addr: SocketAddr = loop {
        let line = gw.line();
        if let Some(a) = line.strip_prefix("http http://") {
            break a.parse().unwrap();
        }
    };
    // The legitimate caller alone first: its baseline.
    let legit = addr.to_string();
    let calls = |seconds: u64| {
        let mut latencies = Vec::new();
        let calling = Instant::now();
        while latencies.is_empty() || calling.elapsed() < Duration::from_secs(seconds) {
            let t = Instant::now();
            let r = http::get(&legit, "/v1/devices", Some(TOKEN));
            assert_eq!(r.status, 200, "{}", r.text());
            latencies.push(t.elapsed());
        }
        latencies.sort();
        latencies
    };
    let p99 = |l: &[Duration]| l[l.len() * 99 / 100];
    let baseline = calls(1);
    // 2,000 half-sent heads.
    let started = Instant::now();
    let mut stalled = Vec::new();
    for _ in 0..2000 {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /v1/devices HTTP/1.1\r\nHost: g\r\n")
            .unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stalled.push(s);
    }
    let opened = started.elapsed();
    // The legitimate caller, meanwhile: every call answered.
    let latencies = calls(2);
    // Every stalled connection is closed: a read ends (end of file or reset) within the
    // header timeout and some slack, none is left open.
    let mut open = 0;
    for s in &mut stalled {
        let mut buf = [0u8; 256];
        match s.read(&mut buf) {
            Ok(0) | Err(_) => {}
            Ok(_) => {
                // An answer (a 408 or similar) is also a close in progress; read to the end.
                let mut rest = Vec::new();
                if s.read_to_end(&mut rest).is_err() {
                    continue;
                }
            }
        }
        if s.read(&mut buf).is_ok_and(|n| n > 0) {
            open += 1;
        }
    }
    let took = started.elapsed();
    assert_eq!(open, 0, "{open} stalled connections still open");
    // Closed within the header timeout of the last one opened, and some slack.
    assert!(took < opened + Duration::from_secs(10), "{took:?}");
    eprintln!(
        "2,000 stalled heads (opened in {opened:?}) all closed by {took:?}; a legitimate \
         caller meanwhile: {} calls, p99 {:?} against {:?} alone ({:.2}x)",
        latencies.len(),
        p99(&latencies),
        p99(&baseline),
        p99(&latencies).as_secs_f64() / p99(&baseline).as_secs_f64()
    );
    // The count follows the close (a connection is counted as its task ends, which may be
    // just after the peer saw it closed): read it until it is there, for at most 2 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    let timeouts = loop {
        let metrics = http::get(&legit, "/metrics", Some(TOKEN)).text();
        let timeouts: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(r#"blerpc_gateway_http_timeouts_total{reason="head"} "#))
            .unwrap()
            .parse()
            .unwrap();
        if timeouts >= 2000 || std::time::Instant::now() >= deadline {
            break timeouts;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(timeouts >= 2000, "{timeouts} timeouts counted");
}
