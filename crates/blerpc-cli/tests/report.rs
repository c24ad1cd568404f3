//! `blerpc report` against `blerpc serve` over TCP and TLS, and `blerpc report compare` of the
//! two: the files written, the JSON's schema and the flagged environment difference.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use blerpc_test_support::{blerpc, run, serve};

/// Runs a 2-second report against `url` with `extra` flags into `out`; the parsed JSON.
fn report(url: &str, key: &str, extra: &[&str], out: &std::path::Path) -> serde_json::Value {
    let mut cmd = blerpc();
    cmd.args(["report", "--connect", url, "--trust-key", key])
        .args([
            "--duration",
            "2",
            "--mix",
            "echo:3,flash_read_8k:1,data_write_200:1",
        ])
        .args(["--board", "loopback", "--out"])
        .arg(out)
        .args(extra);
    let d = run(cmd, "");
    assert!(d.status.success(), "{}", d.stderr);
    assert!(d.stdout.contains("# bleRPC field report"), "{}", d.stdout);
    for f in [
        "report.json",
        "report.md",
        "latency-over-time.svg",
        "latency-distribution.svg",
    ] {
        assert!(out.join(f).is_file(), "{f} missing: {}", d.stderr);
    }
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
}

#[test]
fn a_report_over_tcp_and_tls_and_their_comparison() {
    let dir = tempfile::tempdir().unwrap();
    let (_tcp, url, key) = serve(&["--listen", "tcp://127.0.0.1:0"]);
    let a = report(&url, &key, &[], &dir.path().join("tcp"));
    assert_eq!(a["schema"], "blerpc-report/1");
    assert_eq!(a["run"]["failed"], 0, "{a}");
    assert!(a["run"]["ok"].as_u64().unwrap() > 10, "{a}");
    assert!(a["latency"]["flash_read_8k"]["count"].as_u64().unwrap() > 0);
    assert_eq!(a["link"]["kind"], "tcp");
    assert_eq!(a["link"]["encrypted"], true);
    assert_eq!(a["link"]["tls"]["missing"], "no TLS on this link (tcp)");
    assert_eq!(a["environment"]["board"], "loopback");
    assert_eq!(
        a["environment"]["distance"]["missing"],
        "not given (--distance)"
    );
    assert!(
        a["device"]["before"]["conn_interval_us"]["unavailable"]
            .as_str()
            .unwrap()
            .starts_with("not a BLE link")
    );
    assert!(a["device"]["after"]["calls"].as_u64().unwrap() > a["run"]["ok"].as_u64().unwrap());

    let pki = dir.path().join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    blerpc::link::local_ca::LocalPki::generate()
        .unwrap()
        .write_to(&pki)
        .unwrap();
    let p = |f: &str| pki.join(f).to_str().unwrap().to_string();
    let (_tls, url, key) = serve(&[
        "--listen",
        "tls://127.0.0.1:0",
        "--tls-cert",
        &p("cert.pem"),
        "--tls-key",
        &p("key.pem"),
    ]);
    let url = url.replace("127.0.0.1", "localhost");
    let b = report(
        &url,
        &key,
        &["--tls-ca", &p("ca.pem")],
        &dir.path().join("tls"),
    );
    assert_eq!(b["link"]["kind"], "tls");
    assert_eq!(b["link"]["tls"], "verified against the CA of --tls-ca");
    assert_eq!(b["run"]["failed"], 0, "{b}");

    let mut cmd = blerpc();
    cmd.args(["report", "compare"])
        .arg(dir.path().join("tcp/report.json"))
        .arg(dir.path().join("tls/report.json"));
    let d = run(cmd, "");
    assert!(d.status.success(), "{}", d.stderr);
    assert!(
        d.stdout.contains("**Different environment**"),
        "{}",
        d.stdout
    );
    assert!(
        d.stdout.contains("| link kind | tcp | tls |"),
        "{}",
        d.stdout
    );
    assert!(d.stdout.contains("| echo p50 ms |"), "{}", d.stdout);
}

#[test]
fn report_mistakes_get_one_line_each() {
    let mut cmd = blerpc();
    cmd.args([
        "report",
        "--connect",
        "tcp://127.0.0.1:9",
        "--mix",
        "ping:1",
    ]);
    let d = run(cmd, "");
    assert!(!d.status.success());
    assert!(d.stderr.contains("KIND:WEIGHT"), "{}", d.stderr);
    let mut cmd = blerpc();
    cmd.args([
        "report",
        "compare",
        "/nonexistent/a.json",
        "/nonexistent/b.json",
    ]);
    let d = run(cmd, "");
    assert!(!d.status.success());
    assert!(d.stderr.contains("/nonexistent/a.json"), "{}", d.stderr);
}
