//! `blerpc-bench soak --quick`: 200 encrypted connections doing mixed calls and streams for
//! 20 s with reconnect churn and a hostile mix, and 10 clients over simulated BLE links that
//! lose packets and are dropped: every answer right, no operation failed other than the ones a
//! dropped link cut, and the server's memory flat (from the JSON report).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::Value;

#[test]
fn quick_soak_answers_every_call_right() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("soak.json");
    let mut cmd = blerpc_test_support::bin();
    cmd.args(["soak", "--quick", "--json"]).arg(&json);
    let out = blerpc_test_support::run_within(cmd, "", Duration::from_secs(120));
    assert!(
        out.status.success(),
        "soak --quick failed:\n{}\n{}",
        out.stdout,
        out.stderr
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["wrong"], 0, "{r}");
    assert!(r["errors"].as_object().unwrap().is_empty(), "{r}");
    for kind in ["echo", "counter_stream", "counter_upload"] {
        assert!(r["ok"][kind].as_u64().unwrap() > 100, "{kind}: {r}");
    }
    // Reconnect churn happened, and the hostile mix ran beside it.
    assert!(r["connects"].as_u64().unwrap() > 200, "{r}");
    assert!(r["hostile_opened"].as_u64().unwrap() > 0, "{r}");
    // Simulated BLE clients ran beside them, and their links were dropped and remade (10
    // clients, 8 s lives ±50 %, 20 s: at least one drop each).
    assert_eq!(r["ble_clients"], 10, "{r}");
    assert!(r["ble_connects"].as_u64().unwrap() >= 20, "{r}");
    // Memory: no sample more than 32 MiB above the first.
    let rss: Vec<f64> = r["rss_mib"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let peak = rss.iter().copied().fold(0.0, f64::max);
    assert!(peak < rss[0] + 32.0, "{rss:?}");
}
