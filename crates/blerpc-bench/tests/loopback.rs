//! `blerpc-bench loopback --quick`: the real binary, its server process, both transports, every
//! row in the table and the JSON with sane figures and no errors.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed unwrap is a failed test

use std::time::{Duration, Instant};

use serde_json::Value;

#[test]
fn quick_run_has_every_row_with_sane_figures() {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("loopback.json");
    let svg_path = dir.path().join("loopback.svg");
    let mut cmd = blerpc_test_support::bin();
    cmd.args([
        "loopback",
        "--quick",
        "--messages",
        "50",
        "--load-messages",
        "100",
        "--clients",
        "5",
        "--svg",
    ])
    .arg(&svg_path)
    .arg("--json")
    .arg(&json_path);
    let t0 = Instant::now();
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Bounded: kill it if it hangs.
    let output = loop {
        if child.try_wait().unwrap().is_some() {
            break child.wait_with_output().unwrap();
        }
        if t0.elapsed() > blerpc_test_support::TIMEOUT {
            let _ = child.kill();
            panic!(
                "blerpc-bench loopback --quick took over {:?}",
                blerpc_test_support::TIMEOUT
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    // Progress went to stderr, the tables to stdout.
    assert!(stderr.contains("rep 1/1"), "{stderr}");
    for needle in [
        "bleRPC, E2E encryption on",
        "bleRPC, E2E encryption off",
        "bare baseline",
        "bare + AES-GCM baseline",
        "Connection setup",
        "0 errors",
        "4 calls in flight",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?}:\n{stdout}");
    }
    // Table rows by their first two cells (the column widths follow the contents).
    let has_row = |label: &str, clients: &str| {
        stdout.lines().any(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            cells.get(1) == Some(&label) && cells.get(2) == Some(&clients)
        })
    };
    for (label, payload) in [
        ("TCP, 5 clients", "64 B"),
        ("TLS, 5 clients", "64 B"),
        ("TCP, 4 in flight", "64 KiB"),
        ("TLS, 4 in flight", "64 KiB"),
    ] {
        assert!(has_row(label, payload), "no {label} row:\n{stdout}");
    }
    // Nothing wider than a terminal.
    for line in stdout.lines() {
        assert!(
            line.chars().count() <= 120,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    // The target lines (wrapped with a hanging indent), one paragraph each.
    let section = stdout
        .split("Targets (shown, not asserted)\n\n")
        .nth(1)
        .and_then(|t| t.split("\n\n").next())
        .unwrap();
    let mut targets: Vec<String> = Vec::new();
    for line in section.lines() {
        match targets.last_mut() {
            Some(t) if line.starts_with("      ") => t.push_str(&line[5..]),
            _ => targets.push(line.to_string()),
        }
    }
    assert_eq!(targets.len(), 4, "{section}");
    assert!(
        targets
            .iter()
            .all(|t| t.starts_with("PASS ") || t.starts_with("MISS ")),
        "{section}"
    );
    // The × bare targets show what the cipher alone costs on the same rows.
    let cipher_floor = targets
        .iter()
        .filter(|t| t.contains("× bare") && t.contains("the AES-GCM seal and open alone"))
        .count();
    assert_eq!(cipher_floor, 2, "{stdout}");

    // The chart: both transports, an E2E bar per payload and transport (4 × 2), and its
    // legend swatch; the sealed baseline's bars likewise.
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.starts_with("<svg"), "{svg}");
    assert!(
        svg.contains("TCP: p50 over") && svg.contains("TLS: p50 over"),
        "{svg}"
    );
    assert_eq!(svg.matches("fill=\"#1F77B4\"").count(), 8 + 1, "{svg}");
    assert_eq!(svg.matches("fill=\"#FF9F1C\"").count(), 8 + 1, "{svg}");

    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(report["errors"], 0);
    assert_eq!(report["reps"], 1);
    let rows = report["rows"].as_array().unwrap();
    // 2 transports × (4 payloads + the pipelined 64 KiB row + the load row) × 5 variants.
    assert_eq!(rows.len(), 60, "{report:#}");
    let pipelined: Vec<&Value> = rows.iter().filter(|r| r["window"] == 4).collect();
    assert_eq!(pipelined.len(), 10, "{report:#}");
    let grpc = rows.iter().filter(|r| r["variant"] == "grpc").count();
    assert_eq!(grpc, 12, "{report:#}");
    for row in pipelined {
        assert_eq!(row["payload"], 65_536, "{row:#}");
        assert_eq!(row["clients"], 1, "{row:#}");
        assert!(row["published"].is_null(), "{row:#}");
    }
    for row in rows {
        assert_eq!(row["errors"], 0, "{row:#}");
        let unsupported = !row["unsupported"].is_null();
        if unsupported {
            // Only bleRPC may refuse a payload, and only the 64 KiB one (classic bleRPC's limit).
            assert!(
                !row["variant"].as_str().unwrap().starts_with("bare"),
                "{row:#}"
            );
            assert_eq!(row["payload"], 65_536, "{row:#}");
            assert!(row["median"].is_null(), "{row:#}");
            continue;
        }
        let m = &row["median"];
        let expected = if row["clients"] == 1 { 50 } else { 100 };
        assert_eq!(m["messages"], expected, "{row:#}");
        let p50 = m["p50_ms"].as_f64().unwrap();
        let p95 = m["p95_ms"].as_f64().unwrap();
        let p99 = m["p99_ms"].as_f64().unwrap();
        let mean = m["mean_ms"].as_f64().unwrap();
        let rate = m["msg_per_s"].as_f64().unwrap();
        assert!(p50 > 0.0 && p50 <= p95 && p95 <= p99, "{row:#}");
        assert!(mean > 0.0 && mean < 10_000.0, "{row:#}");
        assert!(rate > 0.0 && rate < 10_000_000.0, "{row:#}");
        if row["variant"] != "bare" {
            assert!(row["p50_vs_bare"].as_f64().unwrap() > 0.0, "{row:#}");
        }
        // E2E rows: against the plaintext run and against the cipher alone.
        if row["variant"] == "blerpc_e2e" {
            assert!(row["p50_vs_plain"].as_f64().unwrap() > 0.0, "{row:#}");
            assert!(row["p50_vs_bare_aead"].as_f64().unwrap() > 0.0, "{row:#}");
        }
    }
    // The published figure sits beside each published row.
    let published = rows.iter().filter(|r| !r["published"].is_null()).count();
    assert_eq!(published, 8 * 5, "{report:#}");
    // Connection setup timed per step for every transport and variant (tonic connects and
    // shakes hands inside one call: its TLS handshake has no time of its own).
    let setup = report["setup"].as_array().unwrap();
    assert_eq!(setup.len(), 10, "{report:#}");
    for s in setup {
        let variant = s["variant"].as_str().unwrap();
        assert!(s["tcp_connect_ms"].as_f64().unwrap() > 0.0, "{s:#}");
        assert!(s["first_call_ms"].as_f64().unwrap() > 0.0, "{s:#}");
        assert_eq!(
            s["tls_handshake_ms"].is_null(),
            s["transport"] == "tcp" || variant == "grpc",
            "{s:#}"
        );
        assert_eq!(
            s["blerpc_setup_ms"].is_null(),
            !variant.starts_with("blerpc"),
            "{s:#}"
        );
    }
}
