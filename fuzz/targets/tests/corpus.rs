//! Runs every committed fuzz input through its target on stable, so the targets cannot rot.
//!
//! For each target in `blerpc_fuzz::TARGETS`, every file in `fuzz/corpus/<target>/`
//! (the seeds) and `fuzz/regressions/<target>/` (minimised crashers, kept once fixed) is passed
//! to the same function `cargo fuzz` calls. The seeds are generated from the reference vectors in
//! `testdata/vectors/` and from traffic of the two-peer harness by the ignored test below:
//!
//! ```text
//! cargo test -p blerpc-fuzz --test corpus -- --ignored generate_corpus
//! ```
//!
//! A regression whose file name starts with `open-` reproduces a core bug that is not fixed yet:
//! it runs only in the ignored `open_regressions` test. Drop the prefix once the bug is fixed.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::fs;
use std::path::{Path, PathBuf};

use blerpc_fuzz::TARGETS;
use blerpc_fuzz::connection::{
    Chan, Op, WorldConfig, capture_traffic, encode_program, two_party_responses,
};
use blerpc_fuzz::input::encode_chunk;
use serde_json::Value;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Files of `fuzz/<kind>/<target>/`, sorted, skipping dot files.
fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let Ok(dir) = fs::read_dir(fuzz_dir().join(kind).join(target)) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = dir
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    files.sort();
    files
}

/// Prints the input being run if the target panics.
struct Current<'a>(&'a Path);
impl Drop for Current<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("fuzz input failed: {}", self.0.display());
        }
    }
}

fn run_target(name: &str) {
    let (_, f) = TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .expect("known target");
    let corpus = inputs("corpus", name);
    assert!(
        !corpus.is_empty(),
        "fuzz/corpus/{name}/ is empty: run the generator"
    );
    let fixed = inputs("regressions", name)
        .into_iter()
        .filter(|p| !is_open(p));
    for path in corpus.iter().cloned().chain(fixed) {
        let data = fs::read(&path).unwrap();
        let _guard = Current(&path);
        f(&data);
    }
}

fn is_open(path: &Path) -> bool {
    path.file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("open-")
}

/// Known, unfixed core bugs: each `open-*` regression must still fail (so it is not stale).
/// When one starts passing, rename it without the prefix.
#[test]
#[ignore = "reproduces open core bugs (fuzz/regressions/*/open-*)"]
fn open_regressions() {
    let mut report = Vec::new();
    for (name, f) in TARGETS {
        for path in inputs("regressions", name)
            .into_iter()
            .filter(|p| is_open(p))
        {
            let data = fs::read(&path).unwrap();
            let outcome = std::panic::catch_unwind(|| f(&data));
            report.push(format!(
                "{}: {}",
                path.display(),
                if outcome.is_err() {
                    "fails (open)"
                } else {
                    "PASSES: drop the open- prefix"
                }
            ));
        }
    }
    println!("{}", report.join("\n"));
    assert!(
        report.iter().all(|r| r.ends_with("(open)")),
        "some open regressions pass now"
    );
}

macro_rules! corpus_tests {
    ($($name:ident),* $(,)?) => {
        $( #[test] fn $name() { run_target(stringify!($name)); } )*

        #[test]
        fn every_target_has_a_corpus_test() {
            let tested = [$(stringify!($name)),*];
            for (name, _) in TARGETS {
                assert!(tested.contains(name), "no corpus test for {name}");
            }
        }
    };
}

corpus_tests!(
    call_table,
    container_parse,
    control_parse,
    command_parse,
    key_exchange_parse,
    diagnostics_parse,
    capabilities_parse,
    assembler,
    handshake_central,
    handshake_peripheral,
    session_open,
    connection_central,
    connection_peripheral,
    connection_runtime_limits,
    stream_framing,
    ws_receive,
    two_party,
    known_keys_file,
    identity_file,
    json_protobuf,
    dissector,
    serial_deframer,
    gateway_inputs,
    nats_envelope,
    nats_pipe,
    nats_records,
);

/// The seed corpus is real traffic: the echo program checks at least one response.
#[test]
fn large_seeds_complete_calls() {
    // Both sides agree: the stretched (LARGE FIRST) echo and the small one complete.
    let d = fs::read(fuzz_dir().join("corpus/two_party/large_plaintext_mtu23")).unwrap();
    assert_eq!(two_party_responses(&d), 2);
    // One side only: the stretched echo fails locally, the small one completes.
    let d = fs::read(fuzz_dir().join("corpus/two_party/large_central_only")).unwrap();
    assert_eq!(two_party_responses(&d), 1);
}

#[test]
fn two_party_seed_completes_calls() {
    let data = fs::read(fuzz_dir().join("corpus/two_party/encrypted_echo_calls")).unwrap();
    assert!(two_party_responses(&data) >= 3);
    // The pipelined setups reach the calls too.
    for seed in [
        "pipelined_requests_calls",
        "pipelined_key_exchange_calls",
        "pipelined_key_exchange_plaintext",
    ] {
        let data = fs::read(fuzz_dir().join("corpus/two_party").join(seed)).unwrap();
        assert!(two_party_responses(&data) >= 2, "{seed}");
    }
}

// ----- the generator ------------------------------------------------------------------------------

fn vectors(name: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/vectors")
        .join(name);
    let v: Value = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    v["cases"].as_array().unwrap().clone()
}

fn unhex(v: &Value) -> Vec<u8> {
    hex::decode(v.as_str().unwrap_or("")).unwrap()
}

struct Seeds {
    target: &'static str,
    files: Vec<(String, Vec<u8>)>,
}

impl Seeds {
    fn new(target: &'static str) -> Self {
        Seeds {
            target,
            files: Vec::new(),
        }
    }
    fn add(&mut self, name: &str, data: Vec<u8>) {
        let clean: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(80)
            .collect();
        if !self.files.iter().any(|(n, d)| *n == clean || *d == data) {
            self.files.push((clean, data));
        }
    }
    fn write(self) {
        let dir = fuzz_dir().join("corpus").join(self.target);
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        for (name, data) in &self.files {
            fs::write(dir.join(name), data).unwrap();
        }
        println!("{}: {} files", self.target, self.files.len());
    }
}

/// Cases of `large_messages.json` (tools/vectors/large.py) of the given kinds.
fn large_vectors(kinds: &[&str]) -> Vec<Value> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/vectors/large_messages.json");
    let doc: Value = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| kinds.iter().any(|k| c["kind"] == *k))
        .cloned()
        .collect()
}

fn program(config: WorldConfig, ops: &[Op]) -> Vec<u8> {
    encode_program(&config, ops)
}

/// Writes `fuzz/corpus/<target>/` for every target. Deterministic: rerunning changes nothing.
#[test]
#[ignore = "writes the seed corpus; run by hand after changing a wire format or a target"]
fn generate_corpus() {
    let mut s = Seeds::new("call_table");
    for (name, program) in blerpc_fuzz::table::seed_programs() {
        s.add(name, program);
    }
    s.write();
    let mut s = Seeds::new("gateway_inputs");
    for (name, input) in blerpc_fuzz::gateway::seed_inputs() {
        s.add(name, input);
    }
    s.write();
    for target in ["nats_envelope", "nats_pipe", "nats_records"] {
        let mut s = Seeds::new(target);
        for (_, name, input) in blerpc_fuzz::fleet::seed_inputs()
            .into_iter()
            .filter(|(t, _, _)| *t == target)
        {
            s.add(name, input);
        }
        s.write();
    }

    let (enc_c2p, enc_p2c) = capture_traffic(true);
    let (pt_c2p, pt_p2c) = capture_traffic(false);

    // container_parse: every container of the vectors, plus captured PDUs.
    let mut s = Seeds::new("container_parse");
    for c in vectors("control.json").iter().step_by(3) {
        s.add(c["name"].as_str().unwrap(), unhex(&c["container_hex"]));
    }
    for c in vectors("assembly.json") {
        for (i, h) in c["containers"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .take(4)
        {
            s.add(&format!("{}_{i}", c["name"].as_str().unwrap()), unhex(h));
        }
    }
    for c in vectors("invalid.json")
        .iter()
        .filter(|c| c["op"] == "container.parse")
    {
        s.add(c["name"].as_str().unwrap(), unhex(&c["input"]["hex"]));
    }
    for c in vectors("splits.json").iter().step_by(25) {
        if let Some(h) = c["outcome"]["containers"]
            .as_array()
            .and_then(|a| a.first())
        {
            s.add(c["name"].as_str().unwrap(), unhex(h));
        }
    }
    for (i, pdu) in enc_p2c
        .iter()
        .chain(&pt_c2p)
        .enumerate()
        .step_by(3)
        .take(24)
    {
        s.add(&format!("traffic_{i}"), pdu.clone());
    }
    for c in large_vectors(&["container", "container_invalid"]) {
        s.add(c["name"].as_str().unwrap(), unhex(&c["hex"]));
    }
    s.write();

    // control_parse: [cmd][payload] of every control vector and captured control.
    let mut s = Seeds::new("control_parse");
    for c in vectors("control.json") {
        let bytes = unhex(&c["container_hex"]);
        let mut d = vec![(bytes[2] >> 2) & 0x0F];
        d.extend_from_slice(&bytes[4..]);
        s.add(c["name"].as_str().unwrap(), d);
    }
    for (i, pdu) in enc_c2p.iter().chain(&enc_p2c).enumerate() {
        if pdu[2] >> 6 == 3 {
            let mut d = vec![(pdu[2] >> 2) & 0x0F];
            d.extend_from_slice(&pdu[4..]);
            s.add(&format!("traffic_{i}"), d);
        }
    }
    for c in large_vectors(&["control", "control_invalid"]) {
        let bytes = unhex(&c["container_hex"]);
        let mut d = vec![(bytes[2] >> 2) & 0x0F];
        d.extend_from_slice(&bytes[4..]);
        s.add(c["name"].as_str().unwrap(), d);
    }
    s.write();

    // command_parse.
    let mut s = Seeds::new("command_parse");
    for c in vectors("commands.json") {
        s.add(c["name"].as_str().unwrap(), unhex(&c["packet_hex"]));
    }
    for c in vectors("invalid.json")
        .iter()
        .filter(|c| c["op"] == "command.parse")
    {
        s.add(c["name"].as_str().unwrap(), unhex(&c["input"]["hex"]));
    }
    for c in large_vectors(&["command_invalid"]) {
        s.add(c["name"].as_str().unwrap(), unhex(&c["hex"]));
    }
    s.add("large_command_70000", {
        let mut d = hex::decode("8101657011010000").unwrap();
        d.extend((0..70_000u32).map(|i| i as u8));
        d
    });
    s.write();

    // key_exchange_parse and capabilities_parse.
    let mut s = Seeds::new("key_exchange_parse");
    for c in vectors("key_exchange.json") {
        for st in c["steps"].as_array().into_iter().flatten() {
            s.add(
                &format!("{}_step{}", c["name"].as_str().unwrap(), st["step"]),
                unhex(&st["payload_hex"]),
            );
        }
    }
    for c in vectors("invalid.json")
        .iter()
        .filter(|c| c["op"].as_str().unwrap().starts_with("kx."))
    {
        if let Some(h) = c["input"]["hex"]
            .as_str()
            .or(c["input"]["payload_hex"].as_str())
        {
            s.add(c["name"].as_str().unwrap(), hex::decode(h).unwrap());
        }
    }
    s.add("step3_truncated", {
        let mut v = vec![3];
        v.extend([0u8; 40]);
        v
    });
    s.write();

    let mut s = Seeds::new("capabilities_parse");
    for c in vectors("control.json")
        .iter()
        .filter(|c| c["message"].as_str().unwrap().starts_with("CAPABILITIES"))
    {
        s.add(
            c["name"].as_str().unwrap(),
            unhex(&c["container_hex"])[4..].to_vec(),
        );
    }
    for c in large_vectors(&["control", "control_invalid"]) {
        s.add(
            c["name"].as_str().unwrap(),
            unhex(&c["container_hex"])[4..].to_vec(),
        );
    }
    s.add("four_bytes", vec![0x00, 0x30, 0xff, 0xff]);
    s.add(
        "seven_bytes",
        vec![0x00, 0x01, 0x00, 0x01, 0x03, 0x80, 0x55],
    );
    s.write();

    let mut s = Seeds::new("diagnostics_parse");
    {
        use blerpc_proto::wire::diagnostics::{Diagnostics, Field, List};
        let emit = |d: Diagnostics<'_>| {
            let mut out = vec![0u8; 256];
            let n = d.emit(&mut out).unwrap();
            out.truncate(n);
            out
        };
        s.add("empty", Vec::new());
        s.add(
            "tcp_server",
            emit(Diagnostics {
                att_mtu: Some(247),
                uptime_ms: Some(5000),
                version: Some("0.5.0"),
                unavailable: List::Items(&[(Field::ConnIntervalUs, "not a BLE link")]),
                ..Diagnostics::default()
            }),
        );
        s.add(
            "firmware",
            emit(Diagnostics {
                conn_interval_us: Some(15_000),
                phy: Some(2),
                rssi_dbm: Some(-67),
                errors: List::Items(&[(0x02, 7), (0x04, 1)]),
                ram_high_water: Some(63_304),
                ..Diagnostics::default()
            }),
        );
        // Unknown fields (99 varint, 21 fixed32) around att_mtu.
        s.add(
            "unknown_fields",
            vec![0x98, 0x06, 0x01, 0xad, 0x01, 1, 2, 3, 4, 0x30, 0x17],
        );
    }
    s.write();

    // assembler: [max_len u16][in_flight][mtu][split chunk] then [release][container]...
    let mut s = Seeds::new("assembler");
    for c in vectors("assembly.json") {
        let mut d = vec![0xE8, 0x03, 4, 13];
        encode_chunk(b"\x00split me", &mut d);
        for h in c["containers"].as_array().unwrap() {
            d.push(0);
            encode_chunk(&unhex(h), &mut d);
        }
        s.add(c["name"].as_str().unwrap(), d);
    }
    for c in vectors("splits.json").iter().step_by(15) {
        let mtu = c["mtu"].as_u64().unwrap();
        let Some(containers) = c["outcome"]["containers"].as_array() else {
            continue;
        };
        let payload = unhex(&c["payload"]["hex"]);
        if payload.len() > 500 || !(10..=265).contains(&mtu) {
            continue;
        }
        let mut d = vec![0xFF, 0x03, 2, (mtu - 10) as u8];
        encode_chunk(&payload, &mut d);
        for h in containers {
            d.push(0x80);
            encode_chunk(&unhex(h), &mut d);
        }
        s.add(c["name"].as_str().unwrap(), d);
    }
    // Large mode (in_flight bit 7): a LARGE FIRST, seq through 255 and wrapping, a gap after the
    // wrap; and the large split of a stretched message at MTU 13.
    s.add("large_seq_wrap", {
        let mut d = vec![0xE8, 0x03, 0x82, 3];
        encode_chunk(&[0xF0, 1, 2, 3], &mut d);
        d.push(0);
        encode_chunk(&[0x21, 0, 0x01, 0x2c, 0x01, 0, 0, 1, 0xaa], &mut d);
        for seq in 1..=300u32 {
            d.push(0);
            encode_chunk(&[0x21, seq as u8, 0x40, 0], &mut d);
        }
        d.push(0);
        encode_chunk(&[0x21, 0x2e, 0x40, 1, 0xbb], &mut d);
        d.push(0);
        encode_chunk(&[0x22, 0, 0x01, 0xff, 0xff, 0, 0, 0], &mut d);
        d
    });
    s.add("large_first_not_negotiated", {
        let mut d = vec![0xE8, 0x03, 0x02, 3];
        encode_chunk(&[], &mut d);
        d.push(0);
        encode_chunk(&[0x21, 0, 0x01, 0x05, 0, 0, 0, 1, 0xaa], &mut d);
        d.push(0);
        encode_chunk(&[0x21, 1, 0x40, 1, 0xbb], &mut d);
        d
    });
    s.add("stretched_split_mtu23", {
        let mut d = vec![0x00, 0x02, 1, 13];
        encode_chunk(&[0xF8, 1, 2, 3, 4, 5, 6, 7], &mut d);
        d
    });
    s.write();

    // Handshakes: genuine transcripts (mode 1, no mutation), single mutations, and raw vectors.
    let kx = vectors("key_exchange.json");
    let steps: Vec<Vec<u8>> = kx[0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| unhex(&s["payload_hex"]))
        .collect();
    for target in ["handshake_central", "handshake_peripheral"] {
        let mut s = Seeds::new(target);
        s.add("genuine", vec![1, 0, 0, 0, 0]);
        s.add("genuine_trailing", vec![1, 0, 3, 1, 2, 3, 0, 2, 9, 9]);
        for (i, pos) in [0u8, 5, 40, 100, 128].iter().enumerate() {
            s.add(
                &format!("first_mutated_{i}"),
                vec![1, 1, *pos, 0x01, 0, 0, 0],
            );
            s.add(
                &format!("second_mutated_{i}"),
                vec![1, 0, 0, 1, *pos % 45, 0x80, 0],
            );
        }
        let (a, b) = if target == "handshake_central" {
            (&steps[1], &steps[3])
        } else {
            (&steps[0], &steps[2])
        };
        let mut raw = vec![0];
        encode_chunk(a, &mut raw);
        raw.extend_from_slice(b);
        s.add("raw_vector_transcript", raw);
        s.add("raw_garbage", vec![0, 3, 2, 0, 0, 4]);
        s.write();
    }

    // session_open: [role] then ops (0 seal, 1 replay, 2 flip, 3 set counter, 4 raw).
    let mut s = Seeds::new("session_open");
    for c in vectors("session.json") {
        let Some(frame) = c["frame_hex"].as_str() else {
            continue;
        };
        let frame = hex::decode(frame).unwrap();
        if frame.len() > 510
            || c["session_key"].as_str() != Some("12e68d830b3802896b9f0948a4f5fe5a")
        {
            continue;
        }
        let role = u8::from(c["direction"] == "p2c");
        let mut d = vec![role, 4];
        encode_chunk(&frame, &mut d);
        d.extend_from_slice(&[4]);
        encode_chunk(&frame, &mut d);
        s.add(c["name"].as_str().unwrap(), d);
    }
    let mut d = vec![0];
    for op in [
        &[0u8, 3, b'a', b'b', b'c'][..],
        &[0, 0],
        &[1, 0],
        &[2, 1, 7, 0, 3],
        &[3, 0xfe, 0xff, 0xff, 0xff],
        &[0, 1, 9],
        &[0, 1, 9],
        &[1, 3],
    ] {
        d.extend_from_slice(op);
    }
    s.add("seal_replay_flip_exhaust", d);
    s.add(
        "counter_gap_and_back",
        vec![1, 3, 9, 0, 0, 0, 0, 0, 3, 2, 0, 0, 0, 0, 1, 1, 1],
    );
    s.write();

    // Connection targets: whole programs.
    let enc = WorldConfig::ENCRYPTED;
    let pt = WorldConfig::PLAINTEXT;
    let echo = |d: &[u8]| Op::StartCall {
        kind: 0,
        name: 0,
        data: d.to_vec(),
    };
    let connect = [Op::Run, Op::AcceptIdentity, Op::Run];
    let calls: Vec<Op> = connect
        .iter()
        .cloned()
        .chain([
            echo(b"\x0a\x05hello"),
            echo(&[7; 300]),
            Op::Run,
            Op::StartCall {
                kind: 1,
                name: 1,
                data: vec![8, 3],
            },
            Op::Run,
            Op::StartCall {
                kind: 2,
                name: 2,
                data: vec![],
            },
            Op::SendStreamItem {
                call: 3,
                data: vec![8, 1],
            },
            Op::SendStreamItem {
                call: 3,
                data: vec![8, 2],
            },
            Op::FinishStream { call: 3 },
            Op::Run,
            echo(b"late"),
            Op::Advance(6_000),
            Op::Run,
        ])
        .collect();
    let lossy: Vec<Op> = connect
        .iter()
        .cloned()
        .chain([
            echo(b"one"),
            echo(&[1; 250]),
            Op::C2P(Chan::Duplicate),
            Op::C2P(Chan::Reorder),
            Op::C2P(Chan::Deliver),
            Op::C2P(Chan::Drop),
            Op::Run,
            Op::P2C(Chan::Flip { pos: 3, bit: 1 }),
            Op::P2C(Chan::Duplicate),
            Op::Run,
            Op::FireTimeout,
            Op::Run,
        ])
        .collect();
    let busy: Vec<Op> = {
        connect
            .iter()
            .cloned()
            .chain([
                echo(b"busy"),
                Op::Run,
                Op::Serve { choice: 5, arg: 0 },
                Op::Run,
                Op::FireTimeout,
                Op::Run,
                Op::Serve { choice: 0, arg: 0 },
                Op::Run,
                echo(b"silent"),
                Op::Run,
                Op::Serve { choice: 7, arg: 0 },
                Op::FireTimeout,
                Op::FireTimeout,
            ])
            .collect()
    };
    let manual = WorldConfig {
        central: enc.central & 0x7F,
        limits: 3,
        ..enc
    };

    // Large messages (WorldConfig.limits bit 5: central, bit 6: peripheral): a stretched echo
    // (first byte > 0xF0: about 10 KB) needs a LARGE FIRST at MTU 23 in plaintext.
    let large_calls: Vec<Op> = connect
        .iter()
        .cloned()
        .chain([
            echo(&[0xF8, 1, 2, 3, 4, 5, 6, 7]),
            Op::Run,
            echo(b"small"),
            Op::Run,
            echo(&[0xFF, 9, 8, 7]),
            Op::C2P(Chan::Drop),
            Op::Run,
            Op::FireTimeout,
            Op::Run,
        ])
        .collect();
    let large_both = WorldConfig { limits: 0x60, ..pt };

    for target in ["connection_central", "connection_peripheral", "two_party"] {
        let mut s = Seeds::new(target);
        s.add("large_plaintext_mtu23", program(large_both, &large_calls));
        s.add(
            "large_central_only",
            program(WorldConfig { limits: 0x20, ..pt }, &large_calls),
        );
        s.add(
            "large_peripheral_only",
            program(WorldConfig { limits: 0x40, ..pt }, &large_calls),
        );
        s.add(
            "large_small_response_limit_mtu27",
            program(
                WorldConfig {
                    mtu: 2,
                    limits: 0xE0,
                    ..pt
                },
                &large_calls,
            ),
        );
        s.add("encrypted_setup", program(enc, &connect));
        s.add("encrypted_calls", program(enc, &calls));
        s.add("plaintext_calls", program(pt, &calls));
        s.add("encrypted_lossy", program(enc, &lossy));
        s.add("plaintext_lossy", program(pt, &lossy));
        s.add("busy_retry", program(manual, &busy));
        s.add(
            "setup_timeouts",
            program(
                enc,
                &[Op::FireTimeout, Op::FireTimeout, Op::Run, Op::FireTimeout],
            ),
        );
        s.add(
            "reject_identity",
            program(enc, &[Op::Run, Op::RejectIdentity, Op::Run]),
        );
        s.add(
            "pinned_wrong_key",
            program(
                WorldConfig {
                    central: 0b1000_0111,
                    ..enc
                },
                &[Op::Run],
            ),
        );
        // Pipelined setup (the MTU byte's top bits: 0x40 TIMEOUT and CAPABILITIES together,
        // 0x80 step 1 too), encrypted and plaintext.
        s.add(
            "pipelined_requests_calls",
            program(
                WorldConfig {
                    mtu: 0x40 | enc.mtu,
                    ..enc
                },
                &calls,
            ),
        );
        s.add(
            "pipelined_key_exchange_calls",
            program(
                WorldConfig {
                    mtu: 0x80 | enc.mtu,
                    ..enc
                },
                &calls,
            ),
        );
        s.add(
            "pipelined_key_exchange_plaintext",
            program(
                WorldConfig {
                    mtu: 0x80 | 8,
                    ..pt
                },
                &calls,
            ),
        );
        s.add(
            "mtu_23_encrypted_required",
            program(WorldConfig { mtu: 0, ..enc }, &[Op::Run]),
        );
        s.add(
            "close_both",
            program(
                enc,
                &[
                    Op::Run,
                    Op::AcceptIdentity,
                    Op::Run,
                    echo(b"x"),
                    Op::CloseCentral,
                    Op::ClosePeripheral,
                    Op::Run,
                ],
            ),
        );
        if target == "two_party" {
            let echoes: Vec<Op> = connect
                .iter()
                .cloned()
                .chain([
                    echo(b"a"),
                    echo(&[2; 240]),
                    echo(b""),
                    Op::Run,
                    echo(b"d"),
                    Op::Run,
                ])
                .collect();
            s.add("encrypted_echo_calls", program(enc, &echoes));
        }
        if target == "connection_central" {
            // Replay captured peripheral traffic into a fresh central, raw.
            let inject: Vec<Op> = enc_p2c
                .iter()
                .map(|p| Op::InjectCentral(p.clone()))
                .collect();
            s.add(
                "inject_encrypted_traffic",
                program(
                    WorldConfig {
                        central: 0b0000_0010,
                        ..enc
                    },
                    &inject,
                ),
            );
            let inject: Vec<Op> = pt_p2c
                .iter()
                .map(|p| Op::InjectCentral(p.clone()))
                .collect();
            let mut ops = vec![Op::StartCall {
                kind: 0,
                name: 0,
                data: vec![],
            }];
            ops.splice(0..0, inject.iter().take(2).cloned());
            ops.extend(inject);
            s.add("inject_plaintext_traffic", program(pt, &ops));
        }
        if target == "connection_peripheral" {
            let inject: Vec<Op> = enc_c2p
                .iter()
                .map(|p| Op::InjectPeripheral(p.clone()))
                .collect();
            s.add("inject_encrypted_traffic", program(enc, &inject));
            let mut ops: Vec<Op> = pt_c2p
                .iter()
                .map(|p| Op::InjectPeripheral(p.clone()))
                .collect();
            ops.extend([
                Op::PeripheralRaw {
                    what: 0,
                    tid: 2,
                    data: vec![1, 2],
                },
                Op::PeripheralRaw {
                    what: 3 | (1 << 3),
                    tid: 3,
                    data: vec![8, 1],
                },
                Op::PeripheralRaw {
                    what: 4,
                    tid: 3,
                    data: vec![],
                },
                Op::PeripheralRaw {
                    what: 5 | (2 << 3),
                    tid: 0,
                    data: vec![8, 9],
                },
                Op::Run,
            ]);
            s.add(
                "inject_plaintext_traffic_and_respond",
                program(WorldConfig { central: 0, ..pt }, &ops),
            );
        }
        s.write();
    }
}

/// Writes the seeds of the runtime's and the CLI's parser targets (`known_keys_file`,
/// `identity_file`, `json_protobuf`, `dissector`, `serial_deframer`) only, so the other
/// targets' corpora (minimised fuzzer finds among them) are left alone. The committed corpora
/// of these targets are these seeds merged with a fuzzing run and minimised
/// (`cargo +nightly fuzz cmin`, see fuzz/README.md).
#[test]
#[ignore = "writes seeds; run by hand after changing one of these targets' input formats"]
fn generate_runtime_corpus() {
    // known_keys_file: the file's contents.
    let key = "5a".repeat(32);
    let mut s = Seeds::new("known_keys_file");
    s.add("empty_object", b"{}\n".to_vec());
    s.add("empty_file", Vec::new());
    s.add(
        "as_written_matched",
        format!("{{\n  \"tcp://fuzz:7000\": \"{key}\"\n}}\n").into_bytes(),
    );
    s.add(
        "other_key_mismatch",
        format!("{{\"tcp://fuzz:7000\": \"{}\"}}", "01".repeat(32)).into_bytes(),
    );
    s.add(
        "bad_entry_for_the_device",
        br#"{"tcp://fuzz:7000": "zz", "other": "0102"}"#.to_vec(),
    );
    s.add(
        "others_then_first_use",
        format!(
            "{{\"ble://AA:BB\": \"{}\", \"serial:///dev/ttyUSB0\": \" {} \\n\", \"x\": \"\"}}",
            "AB".repeat(32),
            "0f".repeat(32)
        )
        .into_bytes(),
    );
    s.add(
        "duplicate_ids",
        format!("{{\"a\": \"{key}\", \"a\": \"{}\"}}", "00".repeat(32)).into_bytes(),
    );
    s.add(
        "escapes",
        format!(r#"{{"\u0074cp://fuzz:7000": "{key}", "\ud83d\ude00": "\n"}}"#).into_bytes(),
    );
    s.add(
        "signed_digits",
        format!("{{\"d\": \"{}\"}}", "+f".repeat(32)).into_bytes(),
    );
    s.add("array", b"[\"5a\"]".to_vec());
    s.add("number_value", br#"{"a": 1}"#.to_vec());
    s.add("not_utf8", b"{\"a\": \"\xff\"}".to_vec());
    s.add("truncated", b"{\"a\": \"5a".to_vec());
    s.write();

    // identity_file: the file's contents.
    let mut s = Seeds::new("identity_file");
    s.add("keygen", format!("{}\n", "42".repeat(32)).into_bytes());
    s.add("rfc8032", {
        b"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60".to_vec()
    });
    s.add(
        "upper_crlf",
        format!("\r\n {}\t\r\n", "A5".repeat(32)).into_bytes(),
    );
    s.add(
        "unicode_space",
        format!("\u{3000}{}\u{85}", "0f".repeat(32)).into_bytes(),
    );
    s.add("binary_seed", vec![0x42; 32]);
    s.add(
        "pem",
        b"-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n"
            .to_vec(),
    );
    s.add("short", "ab".repeat(31).into_bytes());
    s.add("long", "ab".repeat(33).into_bytes());
    s.add("prefix_0x", format!("0x{}", "ab".repeat(31)).into_bytes());
    s.add(
        "inner_space",
        format!("{} {}", "ab".repeat(16), "ab".repeat(16)).into_bytes(),
    );
    s.add("not_utf8", b"\xff\xfe".to_vec());
    s.write();

    // json_protobuf: [selector] then JSON (bit 7 clear) or protobuf bytes (bit 7 set).
    let mut s = Seeds::new("json_protobuf");
    let requests: [(u8, &str, &str); 9] = [
        (0, "echo_hi", r#"{"message":"hi"}"#),
        (0, "echo_empty", ""),
        (0, "echo_unicode", r#"{"message":"h\u00e9\ud83d\ude00\n"}"#),
        (1, "flash_read", r#"{"address": 1, "length": 3}"#),
        (1, "flash_read_bad", r#"{"length": 4, "address": -1}"#),
        (2, "data_write", r#"{"data":"AAEC"}"#),
        (3, "counter_stream", r#"{"count":"3"}"#),
        (4, "counter_upload", r#"{"seq":1,"value":-30}"#),
        (4, "unknown_field", r#"{"seq":1,"valu":2}"#),
    ];
    for (m, name, json) in requests {
        let mut d = vec![m];
        d.extend_from_slice(json.as_bytes());
        s.add(&format!("request_{name}"), d);
    }
    let responses: [(u8, &str, &[u8]); 6] = [
        (0, "echo", b"\x0a\x02hi"),
        (1, "flash_read", b"\x08\x01\x12\x03\x26\x45\x64"),
        (2, "data_write", b"\x08\x80\x02"),
        (
            3,
            "counter_stream_negative",
            b"\x08\x03\x10\xe2\xff\xff\xff\xff\xff\xff\xff\xff\x01",
        ),
        (4, "counter_upload", b"\x08\x02"),
        (0, "unknown_field_and_bad_utf8", b"\x18\x01\x0a\x01\xff"),
    ];
    for (m, name, bytes) in responses {
        let mut d = vec![0x80 | m];
        d.extend_from_slice(bytes);
        s.add(&format!("response_{name}"), d);
    }
    s.write();

    // dissector: [options] then binary PDUs as chunks, or (bit 7) a capture file.
    let mut s = Seeds::new("dissector");
    let key_bit = 0x20;
    let mtu247 = 5;
    let mtu23 = 1;
    let mut all_control = vec![mtu247];
    for c in vectors("control.json") {
        encode_chunk(&unhex(&c["container_hex"]), &mut all_control);
    }
    s.add("control_vectors", all_control);
    for c in vectors("assembly.json") {
        let mut d = vec![mtu23];
        for h in c["containers"].as_array().unwrap() {
            encode_chunk(&unhex(h), &mut d);
        }
        s.add(&format!("assembly_{}", c["name"].as_str().unwrap()), d);
    }
    for c in vectors("session.json").iter().step_by(4) {
        let frame = unhex(&c["frame_hex"]);
        if frame.is_empty() || frame.len() > 200 {
            continue;
        }
        let n = frame.len() as u8;
        let mut pdu = vec![3, 0, 0, n, 0, n];
        pdu.extend_from_slice(&frame);
        let mut d = vec![mtu247 | key_bit];
        encode_chunk(&pdu, &mut d);
        s.add(&format!("session_{}", c["name"].as_str().unwrap()), d);
    }
    let (enc_c2p, enc_p2c) = capture_traffic(true);
    let mut d = vec![mtu247 | 0x40];
    for pdu in enc_c2p.iter().chain(&enc_p2c).take(24) {
        encode_chunk(pdu, &mut d);
    }
    s.add("traffic_encrypted_strict", d);
    let (pt_c2p, _) = capture_traffic(false);
    let mut d = vec![mtu247 | 0x08];
    for pdu in pt_c2p.iter().take(24) {
        encode_chunk(pdu, &mut d);
    }
    s.add("traffic_plaintext_c2p", d);
    let mut d = vec![0x80 | mtu23];
    d.extend_from_slice(
        b"# the README's example\n2a000028000e00046563686f20000a1e42424242\n\
          2a:01:40:10:42:42:42:42:42:42:42:42:42:42:42:42:42:42:42:42\n\
          0x2a 0x02 0x40 0x0a 42424242424242424242   # last\n\n0 c4\n0x\nzz\n",
    );
    s.add("text_capture", d);
    s.write();

    // serial_deframer: [max_pdu u16][step][mode] then a line or a program.
    let mut s = Seeds::new("serial_deframer");
    s.add(
        "documented_example",
        vec![
            244, 0, 0, 0, 0x00, 0x01, 0x01, 0x04, 0xc4, 0x02, 0x64, 0x03, 0xcb, 0xde, 0x00,
        ],
    );
    s.add(
        "garbage_and_short",
        vec![
            20, 0, 3, 0, 0x00, 0x02, 0x11, 0x00, 0x00, 0x04, 0x11, 0x00, 0x01, 0x00, 0x05,
        ],
    );
    let mut d = vec![244, 0, 7, 1];
    d.push(0);
    encode_chunk(b"one", &mut d);
    d.push(1);
    encode_chunk(&[0x55; 300], &mut d);
    d.push(0);
    encode_chunk(&[0; 244], &mut d);
    d.push(2 | (5 << 2));
    encode_chunk(&(0..100).collect::<Vec<u8>>(), &mut d);
    d.push(3 | (2 << 2));
    encode_chunk(b"truncated", &mut d);
    d.push(0);
    encode_chunk(b"", &mut d);
    d.push(0);
    encode_chunk(&(1..=254).collect::<Vec<u8>>(), &mut d);
    s.add("program_frames_noise_damage", d);
    let mut d = vec![20, 0, 1, 1];
    d.push(0);
    encode_chunk(&[9; 21], &mut d);
    d.push(0);
    encode_chunk(&[8; 20], &mut d);
    s.add("program_at_the_limit", d);
    s.write();
}
