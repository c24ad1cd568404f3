//! `blerpc-bench scale --quick`: 3,000 WebSocket connections over 2 server workers and 2
//! load-generator processes, in every variant (ping/pong frames; encrypted bleRPC echo with a
//! key exchange per connection; the raw TCP echo baseline). Checks that every connection was established, that nothing
//! failed, and that the figures are sane, from the JSON report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::Value;

/// The number at `path` in `v`.
fn f(v: &Value, path: &[&str]) -> f64 {
    let mut x = v;
    for p in path {
        x = match p.parse::<usize>() {
            Ok(i) => &x[i],
            Err(_) => &x[*p],
        };
    }
    x.as_f64()
        .unwrap_or_else(|| panic!("{path:?} is not a number in {v}"))
}

#[test]
fn quick_scale_run_has_no_errors_and_sane_figures() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("scale.json");
    let svg = dir.path().join("scale.svg");
    let started = Instant::now();
    let mut cmd = blerpc_test_support::bin();
    cmd.args(["scale", "--quick", "--timeout-ms", "20000", "--json"])
        .arg(&json)
        .arg("--svg")
        .arg(&svg);
    let out = blerpc_test_support::run_within(cmd, "", Duration::from_secs(170));
    let (stdout, stderr) = (&out.stdout, &out.stderr);
    assert!(
        out.status.success(),
        "blerpc-bench scale --quick failed ({:?})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    eprintln!("bench scale --quick took {:?}", started.elapsed());
    // The tables, with the published figures and the targets.
    assert!(stdout.contains("### Handshake storm"), "{stdout}");
    assert!(stdout.contains("published (ping)"), "{stdout}");
    assert!(stdout.contains("### Targets"), "{stdout}");
    // The raw TCP baseline ran beside, and each variant's rounds are set against it.
    assert!(stdout.contains("tcp (baseline, no target)"), "{stdout}");
    assert!(
        stdout.contains("ping: round metric × the raw TCP baseline's"),
        "{stdout}"
    );
    // The kernel settings are reported (changed, enough, or why not).
    assert!(stderr.contains("kernel: net.core.somaxconn"), "{stderr}");

    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3, "one run per variant: ping, echo, tcp");
    for run in runs {
        let variant = run["variant"].as_str().unwrap();
        let ctx = format!("{variant}: {run}");
        assert_eq!(run["connections"], 3000, "{ctx}");
        assert_eq!(run["established"], 3000, "{ctx}");
        assert_eq!(run["workers"], 2, "{ctx}");
        assert_eq!(run["clients"], 2, "{ctx}");
        assert_eq!(run["errors"], serde_json::json!([0, 0, 0]), "{ctx}");
        // Every connection's upgrade was timed, and took between 1 µs and 20 s; the raw TCP
        // baseline has no upgrade.
        if variant == "tcp" {
            assert_eq!(f(run, &["upgrade_tail", "count"]), 0.0, "{ctx}");
        } else {
            assert_eq!(f(run, &["upgrade_tail", "count"]), 3000.0, "{ctx}");
            let up = f(run, &["upgrade", "median"]);
            assert!(up > 0.001 && up < 20_000.0, "{ctx}");
        }
        // Pure latency: 1,000 samples alone and 1,000 with the others idle, each under 1 s.
        for key in ["pure_alone_tail", "pure_idle_tail"] {
            assert_eq!(f(run, &[key, "count"]), 1000.0, "{ctx}");
            let p50 = f(run, &[key, "p50"]);
            assert!(p50 > 0.001 && p50 < 1000.0, "{key} {ctx}");
        }
        // Rounds: at least one, the metric positive, messages counted, latency sane.
        assert!(f(run, &["rounds"]) >= 2.0, "{ctx}");
        let metric = f(run, &["round_metric", "avg"]);
        assert!(metric > 0.0 && metric < 100.0, "{ctx}");
        assert!(f(run, &["round_tail", "count"]) >= 3000.0, "{ctx}");
        assert!(f(run, &["round_msgs_per_s"]) > 0.0, "{ctx}");
        // Memory: the server grew with 3,000 connections, by less than 1 MiB each.
        let per_conn = f(run, &["server_bytes_per_conn"]);
        assert!(per_conn > 0.0 && per_conn < 1_048_576.0, "{ctx}");
        assert!(f(run, &["client_rss"]) > 0.0, "{ctx}");
        // CPU was spent during the storm on both sides.
        assert!(
            f(run, &["storm_cpu", "0"]) + f(run, &["storm_cpu", "1"]) > 0.0,
            "{ctx}"
        );
        // Only the echo variant has a bleRPC setup (key exchange) per connection.
        assert_eq!(run["setup"].is_null(), variant != "echo", "{ctx}");
    }
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("Round metric"),
        "{svg}"
    );
}
