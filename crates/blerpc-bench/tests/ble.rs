//! `blerpc-bench ble`: the simulated profiles (tables, JSON, plot) and `--connect` over TCP;
//! `links`; and the full suite.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use blerpc_test_support::{bin as bench, run, serve};
use serde_json::Value;

fn bench_json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn simulated_profiles_print_the_published_tables_and_write_json_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ble.json");
    let svg = dir.path().join("ble.svg");
    let mut cmd = bench();
    cmd.args(["ble", "--profile", "macos,android"])
        .arg("--json")
        .arg(&json)
        .arg("--plot")
        .arg(&svg);
    let d = run(cmd, "");
    assert!(d.status.success(), "{}\n{}", d.stdout, d.stderr);
    assert!(
        d.stdout
            .contains("published cells reproduced within ±10%: 12/12"),
        "{}",
        d.stdout
    );
    assert!(
        d.stdout.contains("56.6 KB/s, 141.3 ms/call"),
        "{}",
        d.stdout
    );
    assert!(d.stderr.contains("[2/2] android"), "{}", d.stderr);
    let v = bench_json(&json);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for r in runs {
        assert_eq!(r["functional"].as_array().unwrap().len(), 12);
        assert!(
            r["functional"]
                .as_array()
                .unwrap()
                .iter()
                .all(|t| t["pass"] == true)
        );
        assert_eq!(r["link"]["conn_interval_ms"], 15.0);
        assert_eq!(r["link"]["att_mtu"], 247);
        assert_eq!(r["link"]["phy"], "LE 2M");
        let b = &r["benchmarks"];
        for name in [
            "flash_read_throughput",
            "flash_read_overhead",
            "echo_roundtrip",
            "data_write_throughput",
        ] {
            assert!(b[name]["ms_per_call"].as_f64().unwrap() > 0.0, "{name}");
            let ratio = b[name]["ratio"].as_f64().unwrap();
            assert!(
                (0.9..=1.1).contains(&ratio),
                "{} {name}: {ratio}",
                r["profile"]
            );
            let pct = b[name]["percent_of_limit"].as_f64().unwrap();
            assert!(pct > 0.0 && pct <= 100.0 + 1e-9, "{name}: {pct}");
        }
        for name in ["counter_stream", "counter_upload"] {
            assert!(b[name]["ms_per_item"].as_f64().unwrap() > 0.0, "{name}");
        }
        assert!(b["flash_read_throughput"]["kb_per_s"].as_f64().unwrap() > 40.0);
        assert!(b["echo_roundtrip"].get("kb_per_s").is_none());
    }
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("flash_read_throughput"));
}

#[test]
fn the_interval_and_phy_options_change_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ble.json");
    let mut cmd = bench();
    cmd.args([
        "ble",
        "--profile",
        "nrf54l15",
        "--reps",
        "1",
        "--ci-ms",
        "30",
    ])
    .args(["--phy", "1M", "--mtu", "185", "--json"])
    .arg(&json);
    let d = run(cmd, "");
    assert!(d.status.success(), "{}\n{}", d.stdout, d.stderr);
    let v = bench_json(&json);
    let r = &v["runs"][0];
    assert_eq!(r["link"]["conn_interval_ms"], 30.0);
    assert_eq!(r["link"]["phy"], "LE 1M");
    assert_eq!(r["link"]["att_mtu"], 185);
    let echo = r["benchmarks"]["echo_roundtrip"]["ms_per_call"]
        .as_f64()
        .unwrap();
    assert!((echo - 60.0).abs() < 1.5, "echo at CI 30 ms: {echo}");
}

#[test]
fn bad_options_are_one_line_errors() {
    for args in [
        &["ble", "--profile", "zx81"][..],
        &["ble", "--mtu", "10"],
        &["ble", "--ci-ms", "0"],
        &["ble", "--reps", "0"],
        &["ble", "--loss", "1.5"],
    ] {
        let mut cmd = bench();
        cmd.args(args);
        let d = run(cmd, "");
        assert_eq!(d.status.code(), Some(2), "{args:?}: {}", d.stderr);
        assert_eq!(d.stderr.trim().lines().count(), 1, "{args:?}: {}", d.stderr);
        assert!(d.stderr.starts_with("blerpc-bench: "), "{}", d.stderr);
    }
}

#[test]
fn the_same_suite_runs_over_a_real_link() {
    let (_server, url, key) = serve(&["--listen", "tcp://127.0.0.1:0"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("tcp.json");
    let mut cmd = bench();
    cmd.args(["ble", "--connect", &url, "--trust-key", &key, "--reps", "1"])
        .arg("--json")
        .arg(&json);
    let d = run(cmd, "");
    assert!(d.status.success(), "{}\n{}", d.stdout, d.stderr);
    assert!(
        d.stdout.contains("functional tests: 12/12 PASS"),
        "{}",
        d.stdout
    );
    let v = bench_json(&json);
    let r = &v["runs"][0];
    assert_eq!(r["profile"], "link");
    assert!(r["link"].is_null());
    // Loopback TCP is far faster than BLE: every call well under a connection interval.
    let echo = r["benchmarks"]["echo_roundtrip"]["ms_per_call"]
        .as_f64()
        .unwrap();
    assert!(echo > 0.0 && echo < 15.0, "{echo}");
    // A wrong key is refused: the suite cannot run, a clear error, exit 1.
    let mut cmd = bench();
    cmd.args(["ble", "--connect", &url, "--trust-key", &"ab".repeat(32)]);
    let d = run(cmd, "");
    assert_eq!(d.status.code(), Some(1), "{}\n{}", d.stdout, d.stderr);
    assert!(d.stdout.contains("could not run"), "{}", d.stdout);
}

#[test]
fn the_reference_benchmarks_run_per_link() {
    let mut cmd = bench();
    cmd.args(["links", "--links", "mem,tcp", "--reps", "1"]);
    let d = run(cmd, "");
    assert!(d.status.success(), "{}\n{}", d.stdout, d.stderr);
    assert!(
        d.stdout
            .contains("reference benchmarks per link (mean of 1"),
        "{}",
        d.stdout
    );
    for name in blerpc_bench::reference::BENCHMARKS {
        let line = d
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name} (ms/")))
            .unwrap();
        // Two links, each with a figure, then the published one.
        let cells: Vec<f64> = line
            .split(')')
            .nth(1)
            .unwrap()
            .split_whitespace()
            .map(|c| c.parse().unwrap())
            .collect();
        assert_eq!(cells.len(), 3, "{line}");
        assert!(cells.iter().all(|c| *c > 0.0), "{line}");
    }
    // The throughput benchmarks in KB/s as well.
    for name in ["flash_read_throughput", "data_write_throughput"] {
        assert!(
            d.stdout
                .lines()
                .any(|l| l.starts_with(&format!("{name} (KB/s)"))),
            "{}",
            d.stdout
        );
    }
}

#[test]
fn the_full_suite_prints_narrow_tables_and_writes_its_results() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let mut cmd = bench();
    cmd.arg("--out").arg(&out);
    let d = run(cmd, "");
    assert!(d.status.success(), "{}\n{}", d.stdout, d.stderr);
    for line in d.stdout.lines() {
        assert!(
            line.chars().count() <= 120,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    assert!(
        d.stdout.contains(&format!(
            "results written to {} (JSON)",
            out.join("suite.json").display()
        )),
        "{}",
        d.stdout
    );
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("suite.json")).unwrap()).unwrap();
    assert_eq!(results["ok"], true);
    assert_eq!(results["ble"]["runs"].as_array().unwrap().len(), 5);
    let links = results["links"]["links"].as_array().unwrap();
    assert!(links.iter().any(|l| l["link"] == "tcp"), "{links:?}");
    for link in links {
        assert_eq!(link["functional"].as_array().unwrap().len(), 12, "{link}");
        assert!(
            link["benchmarks"]["echo_roundtrip"]["ms_per_call"]
                .as_f64()
                .unwrap()
                > 0.0
        );
    }
    assert!(
        std::fs::read_to_string(out.join("ble.svg"))
            .unwrap()
            .starts_with("<svg")
    );
}
