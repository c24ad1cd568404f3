//! `blerpc-bench gateway --quick`: a real `blerpc gateway` and real devices; every variant's
//! calls answer right (a wrong echo fails the run), and 300 dialled-in devices all connect and
//! answer calls to random ones without an error; the fleet's parts at toy size: 200 devices
//! across two gateways, one SIGKILLed, with no wrong answer and every device back; 60 durable
//! calls with a gateway SIGKILLed midway, every call ending true. Timings are the benchmark's
//! business, not this test's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::Value;

#[test]
fn quick_gateway_run_answers_every_call() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("gateway.json");
    let mut cmd = blerpc_test_support::bin();
    cmd.args(["gateway", "--quick", "--json"]).arg(&json);
    let out = blerpc_test_support::run_within(cmd, "", Duration::from_secs(240));
    assert!(
        out.status.success(),
        "gateway --quick failed:\n{}\n{}",
        out.stdout,
        out.stderr
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // Every mode and variant measured (the kept mode with its spliced floor), sane figures.
    let samples = report["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 10, "{report}");
    for s in samples {
        assert!(s["p50_ms"].as_f64().unwrap() > 0.0, "{s}");
        assert!(
            s["p99_ms"].as_f64().unwrap() >= s["p50_ms"].as_f64().unwrap(),
            "{s}"
        );
    }
    let scale = &report["scale"];
    assert_eq!(scale["connected"], 300, "{scale}");
    assert_eq!(scale["call_errors"], 0, "{scale}");
    assert!(scale["calls"].as_u64().unwrap() > 0, "{scale}");
    assert!(
        out.stdout.contains("gateway memory per device"),
        "{}",
        out.stdout
    );
    let failover = &report["failover"];
    assert_eq!(failover["before"]["ok"], 200, "{failover}");
    assert_eq!(failover["sweeps"]["ok"], 200, "{failover}");
    for part in ["before", "during", "sweeps"] {
        assert_eq!(failover[part]["wrong"], 0, "{failover}");
    }
    let durable = &report["durable"];
    assert_eq!(durable["calls"], 60, "{durable}");
    assert_eq!(durable["violation_count"], 0, "{durable}");
}
