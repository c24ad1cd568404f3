//! The no-alloc generator: its text pinned by golden files, and the generated code compiled here
//! (`tests/golden/scalars.noalloc.rs`, included below) and checked byte for byte against prost
//! for every field type. Set `BLERPC_BLESS=1` to rewrite the golden files after an intended
//! change.

#![allow(clippy::unwrap_used, reason = "test helpers outside #[test] functions")]

mod common;

use std::path::{Path, PathBuf};

use blerpc_build::Error;
use prost::Message as _;

/// The generated scalars file, compiled.
#[allow(missing_docs, dead_code, clippy::all)]
mod pbgen {
    include!("golden/scalars.noalloc.rs");
}

/// The generated chat room (a bidirectional stream), compiled.
#[allow(missing_docs, dead_code, clippy::all)]
mod chatgen {
    include!("golden/chat.noalloc.rs");
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("blerpc-build-no-alloc")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Generates `proto` (under `include`) and compares `<package>.noalloc.rs` with the golden file.
fn golden(name: &str, include: &Path, proto: &str, side: Option<&Path>, package: &str) {
    let dir = scratch(name);
    let mut builder = blerpc_build::configure()
        .out_dir(&dir)
        .emit_cargo_directives(false);
    if let Some(side) = side {
        builder = builder.side_file(side);
    }
    builder
        .compile_no_alloc(&[include.join(proto)], &[include])
        .unwrap();
    let file = format!("{package}.noalloc.rs");
    common::check_golden(&std::fs::read_to_string(dir.join(&file)).unwrap(), &file);
}

#[test]
fn golden_demo_messages() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    golden(
        "demo",
        &root.join("proto"),
        "blerpc.proto",
        Some(&root.join("proto/streaming.txt")),
        "blerpc",
    );
}

#[test]
fn golden_scalars() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    golden("scalars", &dir, "scalars.proto", None, "scalars");
}

/// The same message as prost sees it.
#[derive(Clone, PartialEq, prost::Message)]
struct ProstScalars {
    #[prost(int32, tag = "1")]
    i32: i32,
    #[prost(int64, tag = "2")]
    i64: i64,
    #[prost(uint32, tag = "3")]
    u32: u32,
    #[prost(uint64, tag = "4")]
    u64: u64,
    #[prost(sint32, tag = "5")]
    s32: i32,
    #[prost(sint64, tag = "6")]
    s64: i64,
    #[prost(fixed32, tag = "7")]
    f32: u32,
    #[prost(fixed64, tag = "8")]
    f64: u64,
    #[prost(sfixed32, tag = "9")]
    sf32: i32,
    #[prost(sfixed64, tag = "10")]
    sf64: i64,
    #[prost(bool, tag = "11")]
    flag: bool,
    #[prost(float, tag = "12")]
    real: f32,
    #[prost(double, tag = "13")]
    wide: f64,
    #[prost(int32, tag = "14")]
    mode: i32,
    #[prost(string, tag = "15")]
    text: String,
    #[prost(bytes = "vec", tag = "16")]
    blob: Vec<u8>,
    #[prost(uint32, optional, tag = "17")]
    maybe: Option<u32>,
    #[prost(string, optional, tag = "18")]
    maybe_text: Option<String>,
    #[prost(float, optional, tag = "19")]
    maybe_real: Option<f32>,
    #[prost(double, optional, tag = "20")]
    maybe_wide: Option<f64>,
    #[prost(bytes = "vec", optional, tag = "21")]
    maybe_blob: Option<Vec<u8>>,
    #[prost(uint32, tag = "300")]
    far: u32,
}

fn samples() -> Vec<ProstScalars> {
    let zero = ProstScalars::default();
    let extremes = ProstScalars {
        i32: i32::MIN,
        i64: i64::MIN,
        u32: u32::MAX,
        u64: u64::MAX,
        s32: i32::MIN,
        s64: i64::MIN,
        f32: u32::MAX,
        f64: u64::MAX,
        sf32: -1,
        sf64: i64::MIN,
        flag: true,
        real: -1.5,
        wide: f64::MAX,
        mode: 1,
        text: "héllo".into(),
        blob: vec![0, 1, 2, 255],
        maybe: Some(0),
        maybe_text: Some(String::new()),
        maybe_real: Some(0.0),
        maybe_wide: Some(-2.5),
        maybe_blob: Some(Vec::new()),
        far: 1,
    };
    let small = ProstScalars {
        i32: -1,
        i64: 300,
        u32: 127,
        u64: 128,
        s32: -64,
        s64: 63,
        flag: false,
        maybe: Some(7),
        maybe_text: None,
        maybe_blob: Some(vec![9, 8]),
        text: "x".repeat(200),
        ..ProstScalars::default()
    };
    vec![zero, extremes, small]
}

fn ours(p: &ProstScalars) -> pbgen::Scalars<'_, &[u8]> {
    pbgen::Scalars {
        i32: p.i32,
        i64: p.i64,
        u32: p.u32,
        u64: p.u64,
        s32: p.s32,
        s64: p.s64,
        f32: p.f32,
        f64: p.f64,
        sf32: p.sf32,
        sf64: p.sf64,
        flag: p.flag,
        real: p.real,
        wide: p.wide,
        mode: p.mode,
        text: &p.text,
        blob: &p.blob,
        maybe: p.maybe,
        maybe_text: p.maybe_text.as_deref(),
        maybe_real: p.maybe_real,
        maybe_wide: p.maybe_wide,
        maybe_blob: p.maybe_blob.as_deref(),
        far: p.far,
    }
}

#[test]
fn every_field_type_encodes_and_decodes_as_prost_does() {
    for p in samples() {
        let expected = p.encode_to_vec();
        let m = ours(&p);
        assert_eq!(m.encoded_len(), expected.len(), "{p:?}");
        let mut out = vec![0u8; expected.len()];
        assert_eq!(m.encode(&mut out).unwrap(), expected.len());
        assert_eq!(out, expected, "{p:?}");
        // And back: ours decodes prost's bytes into the same values.
        assert_eq!(pbgen::Scalars::decode(&expected).unwrap(), m);
        // A byte short is refused, never a panic.
        if !expected.is_empty() {
            let mut short = vec![0u8; expected.len() - 1];
            assert_eq!(m.encode(&mut short), Err(pbgen::codec::BufferTooShort));
            assert!(pbgen::Scalars::decode(&expected[..expected.len() - 1]).is_err());
        }
    }
}

#[test]
fn fixed_size_messages_know_their_longest_encoding() {
    assert_eq!(pbgen::Empty::MAX_ENCODED_LEN, 0);
    assert_eq!(pbgen::Empty {}.encoded_len(), 0);
    assert!(pbgen::Empty::decode(b"\x08\x01").is_ok());
    assert_eq!(
        pbgen::Empty::decode(b"\x08"),
        Err(pbgen::codec::DecodeError::Truncated)
    );
}

#[test]
fn unknown_fields_and_mismatched_wire_types_are_skipped() {
    // field 99 varint, field 15 (text) sent as a varint: both skipped; then u32 = 5.
    let bytes = b"\x98\x06\x01\x78\x01\x18\x05";
    let m = pbgen::Scalars::decode(bytes).unwrap();
    assert_eq!((m.u32, m.text), (5, ""));
    // The last value of a repeated scalar wins.
    assert_eq!(pbgen::Scalars::decode(b"\x18\x01\x18\x02").unwrap().u32, 2);
    // Garbage is a typed error.
    use pbgen::codec::DecodeError;
    assert_eq!(
        pbgen::Scalars::decode(b"\x0b"),
        Err(DecodeError::WireType(3))
    );
    assert_eq!(
        pbgen::Scalars::decode(b"\x00\x01"),
        Err(DecodeError::FieldZero)
    );
    assert_eq!(
        pbgen::Scalars::decode(b"\x7a\x02\xff\xfe"),
        Err(DecodeError::Utf8)
    );
    assert_eq!(
        pbgen::Scalars::decode(&[
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff
        ]),
        Err(DecodeError::VarintTooLong)
    );
    assert_eq!(
        pbgen::Scalars::decode(b"\x7a\x05ab"),
        Err(DecodeError::Truncated)
    );
}

/// A bytes field written in place by its source, with no slice in between.
#[derive(Default)]
struct Pattern(usize);

impl pbgen::codec::BytesField for Pattern {
    fn field_len(&self) -> usize {
        self.0
    }
    fn write_to(&self, out: &mut [u8]) {
        for (i, b) in out.iter_mut().enumerate() {
            *b = i as u8;
        }
    }
}

#[test]
fn a_bytes_field_can_be_written_in_place() {
    let m = pbgen::Scalars {
        blob: Pattern(300),
        ..pbgen::Scalars::default()
    };
    let mut out = vec![0u8; m.encoded_len()];
    let n = m.encode(&mut out).unwrap();
    let back = pbgen::Scalars::decode(&out[..n]).unwrap();
    assert_eq!(back.blob.len(), 300);
    assert!(back.blob.iter().enumerate().all(|(i, &b)| b == i as u8));
}

fn refused(proto: &str) -> Error {
    let dir = scratch("refused");
    std::fs::write(dir.join("x.proto"), proto).unwrap();
    blerpc_build::configure()
        .out_dir(&dir)
        .emit_cargo_directives(false)
        .compile_no_alloc(&[dir.join("x.proto")], &[&dir])
        .unwrap_err()
}

#[test]
fn fields_that_need_storage_are_refused_by_name() {
    let e = refused("syntax = \"proto3\"; message A { repeated uint32 xs = 1; }");
    assert!(matches!(&e, Error::NoAlloc { message, field, .. } if message == "A" && field == "xs"));
    assert!(e.to_string().contains("x.proto: A.xs: repeated"), "{e}");
    let e = refused("syntax = \"proto3\"; message B {} message A { B b = 1; }");
    assert!(e.to_string().contains("A.b: message-typed"), "{e}");
    let e = refused("syntax = \"proto3\"; message A { oneof o { uint32 x = 1; string y = 2; } }");
    assert!(e.to_string().contains("A.x: `oneof`"), "{e}");
}

#[test]
fn a_bidirectional_stream_is_generated_with_its_kind() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    golden("chat", &dir, "chat.proto", None, "chat");
    use chatgen::RoomCommand;
    use chatgen::codec::CallKind;
    assert_eq!(RoomCommand::from_name("chat"), Some(RoomCommand::Chat));
    assert_eq!(RoomCommand::Chat.name(), "chat");
    assert_eq!(RoomCommand::Chat.kind(), CallKind::BidiStream);
    // Its items both ways, as prost encodes them: Said { text: "hi" }, Heard { seq: 1, .. }.
    let mut out = [0u8; 16];
    let n = chatgen::Said { text: "hi" }.encode(&mut out).unwrap();
    assert_eq!(&out[..n], b"\x0a\x02hi");
    let heard = chatgen::Heard::decode(b"\x08\x01\x12\x02hi").unwrap();
    assert_eq!((heard.seq, heard.text), (1, "hi"));
}

#[test]
fn every_command_has_its_kind_and_a_side_file_narrows_a_bidirectional_one() {
    let proto = "syntax = \"proto3\";\npackage b;\nmessage M {}\nservice Chat {\n  rpc Ping(M) returns (M);\n  rpc Talk(stream M) returns (stream M);\n  rpc Up(stream M) returns (M);\n  rpc Down(M) returns (stream M);\n}\n";
    // Its own directory: other tests generate in parallel.
    let dir = scratch("kinds");
    std::fs::write(dir.join("x.proto"), proto).unwrap();
    let generate = |side: Option<&str>| {
        let out = dir.join(if side.is_some() { "side" } else { "plain" });
        std::fs::create_dir_all(&out).unwrap();
        let mut builder = blerpc_build::configure()
            .out_dir(&out)
            .emit_cargo_directives(false);
        if let Some(side) = side {
            std::fs::write(dir.join("streaming.txt"), side).unwrap();
            builder = builder.side_file(dir.join("streaming.txt"));
        }
        builder
            .compile_no_alloc(&[dir.join("x.proto")], &[&dir])
            .unwrap();
        std::fs::read_to_string(out.join("b.noalloc.rs")).unwrap()
    };
    let text = generate(None);
    for line in [
        "ChatCommand::Ping => codec::CallKind::Unary,",
        "ChatCommand::Talk => codec::CallKind::BidiStream,",
        "ChatCommand::Up => codec::CallKind::ClientStream,",
        "ChatCommand::Down => codec::CallKind::ServerStream,",
        "/// `talk`: a bidirectional stream.",
    ] {
        assert!(text.contains(line), "{line} missing:\n{text}");
    }
    let text = generate(Some("talk p2c\n"));
    assert!(
        text.contains("ChatCommand::Talk => codec::CallKind::ServerStream,"),
        "{text}"
    );
}
