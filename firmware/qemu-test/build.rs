//! Turns the reference vectors (`testdata/vectors/*.json`, generated from `blerpc-protocol==0.8.0`
//! by `tools/vectors/gen.py`) into one compact binary file the test image embeds
//! (`include_bytes!`), so the microcontroller needs no JSON parser and no allocator.
//!
//! Layout: a sequence of records `[kind u8][name: u16 len + bytes][body: u32 len + fields…]`; byte strings are
//! `u32 len + bytes`, lists `u16 count + items`, integers little-endian. `src/blob.rs`
//! reads it back; the kinds are the `KIND_*` constants of that file.
//!
//! On the host, also cross-targets a memory layout for cortex-m-rt (`memory.x`, QEMU mps2-an505).

// A build script reports a bad vector file by failing the build with its message.
#![allow(clippy::expect_used, clippy::too_many_arguments)]

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::Digest;

const KIND_SPLIT: u8 = 1;
const KIND_SPLIT_ERROR: u8 = 2;
const KIND_CONTROL: u8 = 3;
const KIND_COMMAND: u8 = 4;
const KIND_ENCRYPT: u8 = 5;
const KIND_NONCE: u8 = 6;
const KIND_EXHAUST: u8 = 7;
const KIND_DECRYPT: u8 = 8;
const KIND_EXCHANGE: u8 = 9;
const KIND_ASSEMBLY: u8 = 10;

#[derive(Default)]
struct Blob {
    out: Vec<u8>,
    skipped: Vec<String>,
    /// Where the open record's `u32` body length goes.
    open: Option<usize>,
}

impl Blob {
    fn u8(&mut self, v: u8) {
        self.out.push(v);
    }
    fn u16(&mut self, v: usize) {
        self.out
            .extend_from_slice(&u16::try_from(v).expect("u16 field").to_le_bytes());
    }
    fn u32(&mut self, v: u64) {
        self.out
            .extend_from_slice(&u32::try_from(v).expect("u32 field").to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u64);
        self.out.extend_from_slice(b);
    }
    fn fixed(&mut self, b: &[u8], n: usize) {
        assert_eq!(b.len(), n, "fixed field of {n} bytes");
        self.out.extend_from_slice(b);
    }
    /// Starts a record: `[kind][name][u32 body length][body]`; the length is filled in when
    /// the next record starts (or at `close`), so a reader can skip a record it failed on.
    fn record(&mut self, kind: u8, name: &str) {
        self.close();
        self.u8(kind);
        self.u16(name.len());
        self.out.extend_from_slice(name.as_bytes());
        self.open = Some(self.out.len());
        self.out.extend_from_slice(&[0; 4]);
    }
    fn close(&mut self) {
        if let Some(at) = self.open.take() {
            let len = u32::try_from(self.out.len() - at - 4).expect("record over 4 GiB");
            self.out[at..at + 4].copy_from_slice(&len.to_le_bytes());
        }
    }
}

fn load(dir: &Path, family: &str) -> Vec<Value> {
    let path = dir.join(format!("{family}.json"));
    println!("cargo::rerun-if-changed={}", path.display());
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text).expect("vector JSON");
    v["cases"].as_array().expect("cases").clone()
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str()
        .unwrap_or_else(|| panic!("{k} is not a string in {v}"))
}
fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} is not a number"))
}
fn h(v: &Value, k: &str) -> Vec<u8> {
    hex::decode(s(v, k)).unwrap_or_else(|e| panic!("{k}: {e}"))
}
fn hex_list(v: &Value, k: &str) -> Vec<Vec<u8>> {
    v[k].as_array()
        .unwrap_or_else(|| panic!("{k} is not a list"))
        .iter()
        .map(|x| hex::decode(x.as_str().expect("hex")).expect("hex"))
        .collect()
}
fn role(v: &Value) -> u8 {
    match s(v, "role") {
        "central" => 0,
        "peripheral" => 1,
        other => panic!("role {other}"),
    }
}
fn direction(d: &str) -> u8 {
    match d {
        "c2p" => 0,
        "p2c" => 1,
        "any" => 2,
        other => panic!("direction {other}"),
    }
}

fn split_record(
    b: &mut Blob,
    name: &str,
    tid: u8,
    mtu: u64,
    pattern: u8,
    payload: &[u8],
    sha: &[u8],
    containers: &[Vec<u8>],
) {
    b.record(KIND_SPLIT, name);
    b.u8(tid);
    b.u16(mtu as usize);
    b.u8(pattern);
    b.u32(payload.len() as u64);
    if pattern == 2 {
        b.out.extend_from_slice(payload);
    }
    b.fixed(sha, 32);
    b.u16(containers.len());
    for c in containers {
        b.bytes(c);
    }
}

fn splits(b: &mut Blob, dir: &Path) {
    for case in load(dir, "splits") {
        let name = s(&case, "name");
        let expect = &case["expect"];
        let desc = &case["payload"];
        let len = n(desc, "len");
        let sha = h(desc, "sha256");
        let (pattern, payload) = match s(desc, "pattern") {
            "mod251" => (0u8, (0..len).map(|i| (i % 251) as u8).collect::<Vec<_>>()),
            "mod256" => (1, (0..len).map(|i| (i % 256) as u8).collect()),
            "hex" => (2, h(desc, "hex")),
            other => panic!("pattern {other}"),
        };
        if expect.get("see_case").is_some() {
            // The reference failed (a chunk over 255); our output is its capped twin's case.
            b.skipped
                .push(format!("{name}: the reference's own failure (see_case)"));
            continue;
        }
        if let Some(max) = expect.get("max").and_then(Value::as_u64) {
            b.record(KIND_SPLIT_ERROR, name);
            b.u8(n(&case, "tid") as u8);
            b.u16(n(&case, "mtu") as usize);
            b.u32(len);
            b.u32(max);
            continue;
        }
        assert_eq!(expect, &serde_json::json!({"match": true}), "{name}");
        let containers = hex_list(&case["outcome"], "containers");
        split_record(
            b,
            name,
            n(&case, "tid") as u8,
            n(&case, "mtu"),
            pattern,
            &payload,
            &sha,
            &containers,
        );
    }
}

fn control_message(case: &Value) -> (u8, [u16; 3]) {
    let f = &case["fields"];
    let get = |k: &str| f[k].as_u64().map(|v| v as u16).unwrap_or(0);
    match s(case, "message") {
        "TIMEOUT_REQUEST" => (0, [0; 3]),
        "TIMEOUT_RESPONSE" => (1, [get("timeout_ms"), 0, 0]),
        "STREAM_END_C2P" => (2, [0; 3]),
        "STREAM_END_P2C" => (3, [0; 3]),
        "CAPABILITIES_REQUEST" if f.as_object().is_some_and(|o| o.is_empty()) => (4, [0; 3]),
        "CAPABILITIES_REQUEST" => (
            5,
            [
                get("max_request_payload_size"),
                get("max_response_payload_size"),
                get("flags"),
            ],
        ),
        "CAPABILITIES_RESPONSE" => (
            6,
            [
                get("max_request_payload_size"),
                get("max_response_payload_size"),
                get("flags"),
            ],
        ),
        "ERROR" => (7, [get("error_code"), 0, 0]),
        "KEY_EXCHANGE" => (8, [get("step"), 0, 0]),
        "UNKNOWN" => (9, [get("control_cmd"), 0, 0]),
        other => panic!("control message {other}"),
    }
}

fn control(b: &mut Blob, dir: &Path) {
    for case in load(dir, "control") {
        let expect = &case["expect"];
        let outcome = match expect.get("ignore").and_then(Value::as_str) {
            None => {
                assert_eq!(expect, &serde_json::json!({"match": true}));
                0
            }
            Some("UnknownType") => 1,
            Some("UnknownControlCmd") => 2,
            Some("BadControlPayload") => 3,
            Some(other) => panic!("ignore {other}"),
        };
        b.record(KIND_CONTROL, s(&case, "name"));
        b.u8(direction(s(&case, "direction")));
        b.u8(u8::from(case["emit"].as_bool() == Some(true)));
        b.u8(outcome);
        let (message, fields) = if outcome == 0 {
            control_message(&case)
        } else {
            (0, [0; 3])
        };
        b.u8(message);
        for f in fields {
            b.u16(f as usize);
        }
        b.u8(case["fields"]["control_cmd"].as_u64().unwrap_or(0) as u8);
        b.bytes(&h(&case, "container_hex"));
    }
}

fn commands(b: &mut Blob, dir: &Path) {
    for case in load(dir, "commands") {
        assert_eq!(case["expect"], serde_json::json!({"match": true}));
        b.record(KIND_COMMAND, s(&case, "name"));
        b.u8(match s(&case, "cmd_type") {
            "REQUEST" => 0,
            "RESPONSE" => 1,
            other => panic!("cmd_type {other}"),
        });
        let name = s(&case, "cmd_name");
        b.u16(name.len());
        b.out.extend_from_slice(name.as_bytes());
        b.bytes(&h(&case, "data_hex"));
        b.bytes(&h(&case, "packet_hex"));
    }
}

fn session(b: &mut Blob, dir: &Path) {
    for case in load(dir, "session") {
        let name = s(&case, "name");
        match s(&case, "op") {
            "encrypt" => {
                assert_eq!(case["expect"], serde_json::json!({"match": true}));
                b.record(KIND_ENCRYPT, name);
                b.fixed(&h(&case, "session_key"), 16);
                b.u8(role(&case));
                b.u8(direction(s(&case, "direction")));
                b.u32(n(&case, "counter"));
                b.fixed(&h(&case, "nonce_hex"), 12);
                b.bytes(&h(&case, "plaintext_hex"));
                b.bytes(&h(&case, "frame_hex"));
            }
            "split" => {
                let frame = h(&case, "frame_hex");
                let sha = sha2::Sha256::digest(&frame);
                let containers = hex_list(&case, "containers");
                split_record(
                    b,
                    name,
                    n(&case, "tid") as u8,
                    n(&case, "mtu"),
                    2,
                    &frame,
                    &sha,
                    &containers,
                );
            }
            "nonce" => {
                b.record(KIND_NONCE, name);
                b.u8(direction(s(&case, "direction")));
                b.u32(n(&case, "counter"));
                b.fixed(&h(&case, "nonce_hex"), 12);
            }
            "encrypt_exhaust" => {
                assert_eq!(s(&case["expect"], "error"), "CounterExhausted");
                b.record(KIND_EXHAUST, name);
                b.fixed(&h(&case, "session_key"), 16);
                b.u8(role(&case));
                b.u32(n(&case, "start_counter"));
                b.bytes(&h(&case, "plaintext_hex"));
                b.bytes(&h(&case, "last_frame_hex"));
            }
            "decrypt_sequence" => {
                b.record(KIND_DECRYPT, name);
                b.fixed(&h(&case, "session_key"), 16);
                b.u8(role(&case));
                let steps = case["steps"].as_array().expect("steps");
                b.u16(steps.len());
                for step in steps {
                    b.bytes(&h(step, "frame_hex"));
                    let e = &step["expect"];
                    if e.get("plaintext_hex").is_some() {
                        b.u8(0);
                        b.bytes(&h(e, "plaintext_hex"));
                    } else {
                        b.u8(match s(e, "error") {
                            "Replay" => 1,
                            "BadTag" => 2,
                            "FrameTooShort" => 3,
                            other => panic!("session error {other}"),
                        });
                    }
                }
            }
            other => panic!("session op {other}"),
        }
    }
}

fn key_exchange(b: &mut Blob, dir: &Path) {
    for case in load(dir, "key_exchange") {
        let name = s(&case, "name");
        if s(&case, "kind") != "exchange" {
            b.skipped.push(format!(
                "{name}: a transcript case (it drives the connection state machines with std buffers; \
                 run by crates/blerpc-proto/tests/vectors.rs)"
            ));
            continue;
        }
        let i = &case["inputs"];
        let v = &case["values"];
        b.record(KIND_EXCHANGE, name);
        b.fixed(&h(i, "central_x25519_private"), 32);
        b.fixed(&h(i, "peripheral_x25519_private"), 32);
        b.fixed(&h(i, "peripheral_ed25519_seed"), 32);
        b.fixed(&h(i, "central_confirm_nonce"), 12);
        b.fixed(&h(i, "peripheral_confirm_nonce"), 12);
        b.fixed(&h(v, "central_x25519_public"), 32);
        b.fixed(&h(v, "peripheral_x25519_public"), 32);
        b.fixed(&h(v, "peripheral_ed25519_public"), 32);
        b.fixed(&h(v, "shared_secret"), 32);
        b.fixed(&h(v, "session_key"), 16);
        b.fixed(&h(v, "session_key_with_swapped_salt"), 16);
        b.fixed(&h(v, "signature"), 64);
        let steps = case["steps"].as_array().expect("steps");
        assert_eq!(steps.len(), 4);
        for step in steps {
            b.u8(n(step, "container_tid") as u8);
            b.bytes(&h(step, "payload_hex"));
            b.bytes(&h(step, "container_hex"));
        }
    }
}

fn assembly(b: &mut Blob, dir: &Path) {
    for case in load(dir, "assembly") {
        b.record(KIND_ASSEMBLY, s(&case, "name"));
        let containers = hex_list(&case, "containers");
        let expect = case["expect"].as_array().expect("expect");
        assert_eq!(containers.len(), expect.len());
        b.u16(containers.len());
        for (c, e) in containers.iter().zip(expect) {
            b.bytes(c);
            match (s(e, "result"), e.get("reason").and_then(Value::as_str)) {
                ("complete", _) => {
                    b.u8(0);
                    b.bytes(&h(e, "payload_hex"));
                }
                ("pending", _) => b.u8(1),
                ("dropped", Some("SeqGap")) => b.u8(2),
                ("ignored", Some("UnknownTid")) => b.u8(3),
                ("ignored", Some("Control")) => b.u8(4),
                ("ignored", Some("UnknownType")) => b.u8(5),
                other => panic!("assembly result {other:?}"),
            }
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let dir = manifest.join("../../testdata/vectors");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));

    let mut b = Blob::default();
    splits(&mut b, &dir);
    control(&mut b, &dir);
    commands(&mut b, &dir);
    session(&mut b, &dir);
    key_exchange(&mut b, &dir);
    assembly(&mut b, &dir);
    b.close();
    std::fs::write(out.join("vectors.bin"), &b.out).expect("write vectors.bin");
    let skipped: String = b.skipped.iter().map(|s| format!("{s:?},\n")).collect();
    std::fs::write(out.join("skipped.rs"), format!("&[\n{skipped}]\n")).expect("write skipped.rs");

    // The test image's memory (cortex-m-rt's `memory.x`), QEMU mps2-an505 in the secure state
    // it boots in: code in ZBT SSRAM1 at its secure alias 0x1000_0000 (QEMU's initial VTOR_S),
    // data in ZBT SSRAM2/3 at 0x3800_0000.
    std::fs::write(
        out.join("memory.x"),
        "MEMORY\n{\n  FLASH : ORIGIN = 0x10000000, LENGTH = 4M\n  RAM : ORIGIN = 0x38000000, LENGTH = 4M\n}\n",
    )
    .expect("write memory.x");
    println!("cargo::rustc-link-search={}", out.display());
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("none") {
        println!("cargo::rustc-link-arg-bins=-Tlink.x");
    }
    println!("cargo::rerun-if-changed=build.rs");
}
