//! `blerpc-bench hostile --quick`: every attack against real `blerpc serve` processes (TCP,
//! WebSocket, TLS) while a legitimate client calls. The run itself fails when a legitimate
//! call fails, a hostile connection outlives the deadlines or the server's memory does not come
//! back; this test checks that verdict and, from the JSON report, that each attack met the
//! defence meant for it (by the server's own counters). The same against a `blerpc gateway`'s
//! HTTP port (`--link http`), in a test of its own that runs beside it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::Value;

/// The phase of `link` and `attack`.
fn phase<'a>(report: &'a Value, link: &str, attack: &str) -> &'a Value {
    report["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["link"] == link && p["attack"] == attack)
        .unwrap_or_else(|| panic!("no phase {link} {attack}"))
}

/// The count of `key` in a phase's list `field` of `[key, count]` pairs.
fn tally(p: &Value, field: &str, key: impl Into<Value>) -> u64 {
    let key = key.into();
    p[field]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r[0] == key)
        .and_then(|r| r[1].as_u64())
        .unwrap_or(0)
}

/// The count the server gave `reason` during a phase.
fn reason(p: &Value, reason: &str) -> u64 {
    tally(p, "reasons", reason)
}

#[test]
fn quick_hostile_run_keeps_the_legitimate_client_served() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("hostile.json");
    let mut cmd = blerpc_test_support::bin();
    cmd.args(["hostile", "--quick", "--json"]).arg(&json);
    let out = blerpc_test_support::run_within(cmd, "", Duration::from_secs(240));
    assert!(
        out.status.success(),
        "hostile --quick failed:\n{}\n{}",
        out.stdout,
        out.stderr
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(report["failures"].as_array().unwrap().is_empty());
    for p in report["phases"].as_array().unwrap() {
        assert_eq!(p["ok"], p["calls"], "{p}");
    }
    let opened = |p: &Value| p["opened"].as_u64().unwrap();
    // Each attack was stopped by the defence meant for it, as the server counted it.
    let silent = phase(&report, "tcp", "silent");
    assert_eq!(reason(silent, "setup_timeout"), opened(silent), "{silent}");
    let slow = phase(&report, "tcp", "slow-container");
    assert_eq!(reason(slow, "container_timeout"), opened(slow), "{slow}");
    // A stranger's data is refused unbuffered: its first container over the classic size fails
    // the link at its header, or it is closed after 16 refused containers.
    let memory = phase(&report, "tcp", "pre-auth-memory");
    assert_eq!(
        reason(memory, "framing") + reason(memory, "data_before_session"),
        opened(memory),
        "{memory}"
    );
    let kx = phase(&report, "tcp", "kx-flood");
    assert!(reason(kx, "key_exchange_attempts") > 0, "{kx}");
    // Floods of new connections run their addresses' buckets dry and are penalized (each
    // attack from fresh addresses); the reopen storm by its rate, the key-exchange flood by its
    // offences too.
    for attack in ["kx-flood", "reopen-storm"] {
        let p = phase(&report, "tcp", attack);
        assert!(reason(p, "penalties_imposed") > 0, "{p}");
    }
    let storm = phase(&report, "tcp", "reopen-storm");
    assert!(reason(storm, "connection_rate") > 0, "{storm}");
    let garbage = phase(&report, "tcp", "random-bytes");
    assert!(reason(garbage, "framing") > 0, "{garbage}");
    // 300 silent sockets against 128 handshake slots: the oldest made room for newcomers.
    for link in ["ws", "tls"] {
        let p = phase(&report, link, "silent");
        assert!(reason(p, "handshake_evicted") > 0, "{p}");
    }
    // Refusals and closes were logged.
    assert!(silent["log_bytes"].as_u64().unwrap() > 0, "{silent}");
}

/// How many times the gateway answered `status` in a phase (0: closed without an answer).
fn answers(p: &Value, status: u64) -> u64 {
    tally(p, "statuses", status)
}

#[test]
fn quick_hostile_run_against_the_gateway_keeps_the_http_caller_served() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("hostile-gateway.json");
    let mut cmd = blerpc_test_support::bin();
    cmd.args(["hostile", "--quick", "--link", "http", "--json"])
        .arg(&json);
    let out = blerpc_test_support::run_within(cmd, "", Duration::from_secs(120));
    assert!(
        out.status.success(),
        "hostile --quick --link http failed:\n{}\n{}",
        out.stdout,
        out.stderr
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(report["failures"].as_array().unwrap().is_empty());
    assert_eq!(report["phases"].as_array().unwrap().len(), 8);
    for p in report["phases"].as_array().unwrap() {
        assert_eq!(p["ok"], p["calls"], "{p}");
    }
    let closed = |p: &Value| p["closed_by_server"].as_u64().unwrap();
    // Connections the address guard refused at accept (closed unanswered).
    let refused = |p: &Value| reason(p, "refused:rate") + reason(p, "refused:penalized");
    // Half-sent heads and idle kept connections: every one closed at the header deadline
    // (0.5 s), counted, or refused at accept; the gateway counts those the attack stopped
    // waiting for too. An idle kept connection is no offence: none is refused.
    for (attack, status) in [("slowloris", 0), ("idle-keep-alive", 200)] {
        let p = phase(&report, "http", attack);
        assert!(closed(p) > 0, "{p}");
        assert_eq!(answers(p, status), closed(p), "{p}");
        assert!(reason(p, "timeouts:head") + refused(p) >= closed(p), "{p}");
        assert!(p["max_close_s"].as_f64().unwrap() < 1.5, "{p}");
    }
    let idle = phase(&report, "http", "idle-keep-alive");
    assert_eq!(refused(idle), 0, "{idle}");
    // Twice the per-address cap from one address: the excess refused at accept, and the
    // address penalized (for its rate, or for its silent connections' late heads).
    let flood = phase(&report, "http", "address-flood");
    assert!(reason(flood, "refused:per_address") > 0, "{flood}");
    let penalties = reason(flood, "penalties:rate") + reason(flood, "penalties:offences");
    assert!(penalties > 0, "{flood}");
    // A quarter more event streams than the cap: the cap's worth served, the rest 503.
    let streams = phase(&report, "http", "event-streams");
    assert!(reason(streams, "refused:event_streams") > 0, "{streams}");
    assert!(answers(streams, 503) > 0, "{streams}");
    assert_eq!(streams["held_past_deadline"], 32, "{streams}");
    // A trickled body: 408 at the body deadline, counted (or refused at accept once its
    // address's 408s ran its bucket dry).
    let slow = phase(&report, "http", "slow-body");
    assert!(closed(slow) > 0, "{slow}");
    assert!(answers(slow, 408) > 0, "{slow}");
    assert_eq!(
        answers(slow, 408) + answers(slow, 0),
        closed(slow),
        "{slow}"
    );
    assert!(answers(slow, 0) <= refused(slow), "{slow}");
    assert!(
        reason(slow, "timeouts:body") >= answers(slow, 408),
        "{slow}"
    );
    // Too large a head or body: refused at once, and the addresses that keep sending them
    // penalized for their offences.
    for (attack, status) in [("oversized-head", 431), ("oversized-body", 413)] {
        let p = phase(&report, "http", attack);
        assert!(answers(p, status) > 0, "{p}");
        assert!(p["max_close_s"].as_f64().unwrap() < 1.0, "{p}");
        assert!(reason(p, "penalties:offences") > 0, "{p}");
    }
}
