//! Interoperability with the reference implementation (blerpc-protocol 0.8.0) over TCP: the
//! reference central against `blerpc serve`, and `blerpc call` / `blerpc upload` against the
//! reference peripheral (tools/interop/*.py, run with the venv python).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use blerpc_test_support::{Proc, blerpc, repo, run, serve, venv_python};

#[test]
fn reference_central_against_blerpc_serve() {
    let python = venv_python();
    let (_server, url, key) = serve(&["--listen", "tcp://127.0.0.1:0"]);
    let addr = url.strip_prefix("tcp://").expect("tcp url");
    let mut cmd = Command::new(python);
    cmd.arg(repo().join("tools/interop/central.py")).args([
        "--connect",
        addr,
        "--identity-pub",
        &key,
    ]);
    let done = run(cmd, "");
    let passes = done
        .stdout
        .lines()
        .filter(|l| l.starts_with("PASS "))
        .count();
    assert!(
        done.status.success() && passes == 7,
        "central.py: {:?}, {passes} PASS lines\nstdout:\n{}\nstderr:\n{}",
        done.status,
        done.stdout,
        done.stderr
    );
}

/// Starts the reference peripheral; returns it, its port and its public key.
fn reference_peripheral() -> (Proc, u16, String) {
    let python = venv_python();
    let mut cmd = Command::new(python);
    cmd.arg(repo().join("tools/interop/peripheral.py")).args([
        "--listen",
        "127.0.0.1:0",
        "--seed",
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
    ]);
    let mut p = Proc::spawn(cmd, "peripheral.py");
    let line = p.line();
    let parts: Vec<&str> = line.split(' ').collect();
    assert!(
        parts.len() == 3 && parts[0] == "LISTENING",
        "unexpected: {line}"
    );
    let port = parts[1].parse().unwrap();
    let key = parts[2].to_string();
    (p, port, key)
}

fn call(port: u16, key: &str, args: &[&str], stdin: &str) -> String {
    let mut cmd = blerpc();
    cmd.arg(args[0])
        .args([
            "--connect",
            &format!("tcp://127.0.0.1:{port}"),
            "--trust-key",
            key,
        ])
        .args(&args[1..]);
    let done = run(cmd, stdin);
    assert!(
        done.status.success(),
        "blerpc {args:?}: {:?}\nstderr: {}",
        done.status,
        done.stderr
    );
    done.stdout
}

#[test]
fn blerpc_call_against_the_reference_peripheral() {
    let (_peripheral, port, key) = reference_peripheral();
    // RFC 8032 test 1: the public key of the seed above.
    assert_eq!(
        key,
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    );

    let out = call(
        port,
        &key,
        &["call", "echo", r#"{"message":"hello reference"}"#],
        "",
    );
    assert_eq!(out, "{\"message\":\"hello reference\"}\n");
    // Every setup order (tcp:// defaults to key-exchange: TIMEOUT, CAPABILITIES and step 1
    // in one flight); the reference peripheral answers each in order.
    for mode in ["off", "requests", "key-exchange"] {
        let out = call(
            port,
            &key,
            &[
                "call",
                "--setup-pipelining",
                mode,
                "echo",
                r#"{"message":"pipelined"}"#,
            ],
            "",
        );
        assert_eq!(out, "{\"message\":\"pipelined\"}\n", "{mode}");
    }

    let out = call(
        port,
        &key,
        &["call", "flash_read", r#"{"address":0,"length":8192}"#],
        "",
    );
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    // 8,192 bytes are 10,924 base64 characters.
    assert_eq!(v["data"].as_str().unwrap().len(), 10_924, "{out}");

    let out = call(
        port,
        &key,
        &["call", "data_write", r#"{"data":"AAECAwQFBgc="}"#],
        "",
    );
    assert_eq!(out, "{\"length\":8}\n");

    let out = call(
        port,
        &key,
        &["call", "counter_stream", r#"{"count":20}"#],
        "",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 20, "{out}");
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(*line, format!("{{\"seq\":{i},\"value\":{}}}", i * 10));
    }

    let items: String = (0..20)
        .map(|i| format!("{{\"seq\":{i},\"value\":{}}}\n", i * 10))
        .collect();
    let out = call(port, &key, &["upload", "counter_upload"], &items);
    assert_eq!(out, "{\"received_count\":20}\n");
}
