//! The real `blerpc` binary: output, JSON on stdout, exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed unwrap is a failed test

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

fn blerpc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_blerpc"))
        .args(args)
        .output()
        .expect("spawn blerpc")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn decodes_flash_read_first_container() {
    let o = blerpc(&["decode", "000000110011000a666c6173685f726561640300108040"]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    assert!(
        out.contains("#0  FIRST       tid=0x00 seq=0 total_length=17 payload_len=17  (MTU 247: fits, 1 container)"),
        "{out}"
    );
    assert!(
        out.contains("    → REQUEST flash_read  data_len=3  data=108040"),
        "{out}"
    );
}

#[test]
fn malformed_exits_1_and_names_the_field_on_stderr() {
    let o = blerpc(&["decode", "0000c4026400", "2a01400342"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("PDU 1: field `payload` at byte 4 is truncated: needs 3 bytes, 1 available"),
        "{err}"
    );
    // Everything else is still printed.
    assert!(stdout(&o).contains("timeout_ms=100"));
}

#[test]
fn json_errors_are_in_the_document_and_exit_1() {
    let o = blerpc(&["decode", "--json", "0000g400"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stderr.is_empty());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON document");
    assert_eq!(v["ok"], false);
    assert_eq!(v["errors"][0]["layer"], "hex");
    assert_eq!(v["errors"][0]["offset"], 4);
    assert_eq!(
        v["pdus"][0]["error"]["message"],
        "argument 1: invalid hex digit 'g' at char 4"
    );
}

#[test]
fn key_decrypts_session_frame() {
    let o = blerpc(&[
        "decode",
        "--json",
        "--key",
        "12e68d830b3802896b9f0948a4f5fe5a",
        "0x03 0x00 0x00 0x23 0x00 0x23 000000009cf7d7150c42a6bf48b246912998ab4473c7ea2df3ba26f3bc8c6fa37d7401",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["messages"][0]["command"]["name"], "echo");
    assert_eq!(v["messages"][0]["command"]["data_hex"], "0a0568656c6c6f");
    assert_eq!(v["messages"][0]["encryption"]["direction"], "c2p");
}

#[test]
fn stdin_lines_with_comments() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_blerpc"))
        .args(["decode", "--mtu", "23", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            b"# echo B*30 at MTU 23\n2a:00:00:28:00:0e:00:04:65:63:68:6f:20:00:0a:1e:42:42:42:42\n\n\
              2A01401042424242424242424242424242424242  # seq 1\n2a02400a42424242424242424242\n",
        )
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    assert!(out.contains("→ REQUEST echo  data_len=32"), "{out}");
    assert!(out.contains("container 3 of 3, 40/40 bytes"), "{out}");
}

#[test]
fn file_input_and_direction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("capture.txt");
    std::fs::write(
        &path,
        "# a CAPABILITIES exchange\n0100d006000000000000  # request\n\n0100d0060030ffff0100\n",
    )
    .unwrap();
    let path = path.to_str().unwrap();
    // Arguments first, then the file's lines, named by line.
    let o = blerpc(&["decode", "--json", "0000c400", "--file", path]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let sources: Vec<&str> = v["pdus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["source"].as_str().unwrap())
        .collect();
    assert_eq!(
        sources,
        [
            "argument 1",
            &format!("line 2 of {path}"),
            &format!("line 4 of {path}")
        ]
    );
    assert_eq!(
        v["pdus"][2]["control"]["flag_names"][0],
        "ENCRYPTION_SUPPORTED"
    );
    // --direction p2c: the empty TIMEOUT is a response without its timeout_ms.
    let o = blerpc(&["decode", "--direction", "p2c", "0000c400"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("TIMEOUT response (P→C, --direction)"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        blerpc(&["decode", "--direction", "sideways", "0000c400"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(blerpc(&["decode"]).status.code(), Some(2));
    assert_eq!(
        blerpc(&["decode", "--key", "0011", "0000c400"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        blerpc(&["decode", "--mtu", "5", "0000c400"]).status.code(),
        Some(2)
    );
    assert_eq!(
        blerpc(&["decode", "--file", "/nonexistent/x"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn strict_fails_on_warnings() {
    let o = blerpc(&[
        "decode",
        "--strict",
        "--mtu",
        "23",
        "000000110011000a666c6173685f726561640300108040",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("ATT MTU 23 allows 20"));
}
