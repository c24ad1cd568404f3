//! The small tools (`calls`, `codec`, `aead`, `copy`, `wakeup`) run end to end with tiny
//! parameters, so none of them rots: each prints its table with every row and exits 0.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use blerpc_test_support::{bin as bench, run};

/// Runs `blerpc-bench ARGS` and returns its stdout, asserting success.
fn table(args: &[&str]) -> String {
    let mut cmd = bench();
    cmd.args(args);
    let d = run(cmd, "");
    assert!(d.status.success(), "{args:?}\n{}\n{}", d.stdout, d.stderr);
    d.stdout
}

#[test]
fn calls_has_a_row_per_payload_and_variant() {
    let out = table(&[
        "calls",
        "--calls",
        "20",
        "--reps",
        "1",
        "--payloads",
        "0,64",
    ]);
    for variant in [
        "bare",
        "bleRPC plain",
        "bleRPC E2E",
        "bleRPC plain, mem",
        "bleRPC E2E, mem",
    ] {
        for payload in ["| 0 B |", "| 64 B |"] {
            assert!(
                out.lines()
                    .any(|l| l.starts_with(payload) && l.contains(&format!("| {variant} |"))),
                "no {payload} {variant} row:\n{out}"
            );
        }
    }
}

#[test]
fn codec_runs_every_workload_without_the_reference() {
    let out = table(&[
        "codec",
        "--no-python",
        "--reps",
        "1",
        "--samples",
        "1",
        "--iters",
        "2",
    ]);
    for w in ["enc_8k", "enc_echo", "plain_8k", "kx"] {
        assert!(out.lines().any(|l| l.starts_with(w)), "no {w} row:\n{out}");
    }
}

#[test]
fn aead_and_copy_print_their_tables() {
    let out = table(&[
        "aead",
        "--reps",
        "1",
        "--sizes",
        "100,1024",
        "--batch-bytes",
        "4096",
    ]);
    assert!(out.contains("| 100 |") && out.contains("| 1024 |"), "{out}");
    let out = table(&[
        "copy",
        "--reps",
        "1",
        "--sizes",
        "4096",
        "--batch-bytes",
        "65536",
    ]);
    assert!(out.contains("| 4 KiB |"), "{out}");
}

#[test]
fn wakeup_runs_its_server_process() {
    let out = table(&["wakeup", "--samples", "20", "--reps", "1", "--spins", "0,5"]);
    assert!(
        out.contains("| 0 µs |") && out.contains("| 5 µs |"),
        "{out}"
    );
}
