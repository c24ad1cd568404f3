//! End-to-end generator tests: `.proto` text in, Rust text and descriptors out.
//!
//! The generated code is compiled and run for real by `crates/blerpc-example`; these tests pin
//! the text (golden file) and the discovery and error rules.
//! Set `BLERPC_BLESS=1` to rewrite `tests/golden/blerpc.rs` and `tests/golden/chat.rs` after an
//! intended change.

#![allow(clippy::unwrap_used, reason = "test helpers outside #[test] functions")]

mod common;

use std::path::{Path, PathBuf};

use blerpc_build::Error;
use prost::Message;
use prost_types::FileDescriptorSet;

/// A fresh directory under the test target dir.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("blerpc-build")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("out")).unwrap();
    dir
}

/// Writes `files` into a scratch dir and compiles the first one with `builder`.
fn generate(
    name: &str,
    files: &[(&str, &str)],
    builder: impl FnOnce(blerpc_build::Builder, &Path) -> blerpc_build::Builder,
) -> Result<PathBuf, Error> {
    let dir = scratch(name);
    for (file, text) in files {
        std::fs::write(dir.join(file), text).unwrap();
    }
    let builder = builder(
        blerpc_build::configure()
            .out_dir(dir.join("out"))
            .emit_cargo_directives(false),
        &dir,
    );
    builder.compile(&[dir.join(files[0].0)], &[&dir])?;
    Ok(dir.join("out"))
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn descriptor(path: PathBuf) -> FileDescriptorSet {
    FileDescriptorSet::decode(std::fs::read(path).unwrap().as_slice()).unwrap()
}

#[test]
fn golden_demo_service() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = scratch("golden");
    blerpc_build::configure()
        .side_file(root.join("proto/streaming.txt"))
        .out_dir(dir.join("out"))
        .emit_cargo_directives(false)
        .compile(&[root.join("proto/blerpc.proto")], &[root.join("proto")])
        .unwrap();
    common::check_golden(&read(dir.join("out/blerpc.rs")), "blerpc.rs");

    // The descriptor beside it: the demo service with its streaming flags.
    let fds = descriptor(dir.join("out/blerpc_descriptor.bin"));
    let file = fds
        .file
        .iter()
        .find(|f| f.name() == "blerpc.proto")
        .unwrap();
    let service = &file.service[0];
    assert_eq!(service.name(), "Blerpc");
    let flags: Vec<(&str, bool, bool)> = service
        .method
        .iter()
        .map(|m| (m.name(), m.client_streaming(), m.server_streaming()))
        .collect();
    assert_eq!(
        flags,
        [
            ("Echo", false, false),
            ("FlashRead", false, false),
            ("DataWrite", false, false),
            ("CounterStream", false, true),
            ("CounterUpload", true, false),
        ]
    );
}

const PAIRS: &str = r#"
syntax = "proto3";
package blerpc;
// Echo request.
message EchoRequest { string message = 1; }
message EchoResponse { string message = 1; }
message CounterStreamRequest { uint32 count = 1; }
message CounterStreamResponse { uint32 seq = 1; int32 value = 2; }
message CounterUploadRequest { uint32 seq = 1; int32 value = 2; }
message CounterUploadResponse { uint32 received_count = 1; }
message OrphanRequest {}
message Request {}
message Response {}
"#;

#[test]
fn files_without_services_pair_messages() {
    let out = generate(
        "pairs",
        &[
            ("blerpc.proto", PAIRS),
            ("streaming.txt", "counter_stream p2c\ncounter_upload c2p\n"),
        ],
        |b, dir| b.side_file(dir.join("streaming.txt")),
    )
    .unwrap();
    let code = read(out.join("blerpc.rs"));
    assert!(code.contains("pub struct BlerpcClient"));
    assert!(code.contains("pub trait Blerpc:"));
    assert!(code.contains("impl<T: Blerpc> ::blerpc::server::Dispatch for BlerpcServer<T>"));
    assert!(
        code.contains(
            "\"echo\" => ::core::option::Option::Some(::blerpc::server::CallKind::Unary)"
        )
    );
    assert!(code.contains("ResponseStream<CounterStreamResponse>"));
    assert!(code.contains("items: Streaming<CounterUploadRequest>"));
    // Unpaired messages, and a bare Request/Response, are not commands.
    assert!(!code.contains("orphan"));

    let fds = descriptor(out.join("blerpc_descriptor.bin"));
    let service = &fds.file[0].service[0];
    assert_eq!(service.name(), "Blerpc");
    let methods: Vec<(&str, &str, bool, bool)> = service
        .method
        .iter()
        .map(|m| {
            (
                m.name(),
                m.input_type(),
                m.client_streaming(),
                m.server_streaming(),
            )
        })
        .collect();
    assert_eq!(
        methods,
        [
            ("Echo", ".blerpc.EchoRequest", false, false),
            ("CounterStream", ".blerpc.CounterStreamRequest", false, true),
            ("CounterUpload", ".blerpc.CounterUploadRequest", true, false),
        ]
    );
}

#[test]
fn without_a_side_file_pairs_are_unary() {
    let out = generate("pairs-unary", &[("blerpc.proto", PAIRS)], |b, _| b).unwrap();
    let code = read(out.join("blerpc.rs"));
    assert!(code.contains(
        "\"counter_stream\" => {\n                ::core::option::Option::Some(::blerpc::server::CallKind::Unary)"
    ) || code.contains("\"counter_stream\" => ::core::option::Option::Some(::blerpc::server::CallKind::Unary)"));
    assert!(!code.contains("ResponseStream"));
    assert!(!code.contains("Streaming<"));
}

#[test]
fn side_file_overrides_the_service_block() {
    let proto = r#"
        syntax = "proto3";
        package s;
        message A {} message B {}
        service Svc {
          rpc Pull(A) returns (B);
          rpc Push(stream A) returns (B);
        }
    "#;
    let out = generate(
        "override",
        &[("s.proto", proto), ("side.txt", "pull p2c\n")],
        |b, dir| b.side_file(dir.join("side.txt")),
    )
    .unwrap();
    let code = read(out.join("s.rs"));
    assert!(code.contains("pub async fn pull(\n        &self,\n        request: A,\n    ) -> ::core::result::Result<ResponseStream<B>, ::blerpc::Error>"));
    assert!(code.contains("pub async fn push<I>("));
    assert!(code.contains("pub async fn push_stream<S>("));
}

#[test]
fn golden_bidirectional_stream() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let out = scratch("golden-chat");
    blerpc_build::configure()
        .out_dir(out.join("out"))
        .emit_cargo_directives(false)
        .compile(&[dir.join("chat.proto")], &[&dir])
        .unwrap();
    common::check_golden(&read(out.join("out/chat.rs")), "chat.rs");
    // The descriptor keeps both streaming flags.
    let fds = descriptor(out.join("out/chat_descriptor.bin"));
    let method = &fds.file[0].service[0].method[0];
    assert_eq!(
        (
            method.name(),
            method.client_streaming(),
            method.server_streaming()
        ),
        ("Chat", true, true)
    );
}

#[test]
fn bidirectional_streams_are_generated_for_the_host() {
    let proto = "syntax = \"proto3\";\npackage b;\nmessage A {}\nmessage B {}\nservice Chat {\n  rpc Talk(stream A) returns (stream B);\n  rpc Ping(A) returns (B);\n}\n";
    let out = generate("bidi", &[("b.proto", proto)], |b, _| b).unwrap();
    let code = read(out.join("b.rs"));
    // The client opens the call and wraps it; the support types come once.
    assert!(
        code.contains("pub async fn talk(\n        &self,\n    ) -> ::core::result::Result<BidiStream<A, B>, ::blerpc::Error>"),
        "{code}"
    );
    assert!(code.contains(".bidi_stream(\"talk\")"), "{code}");
    assert_eq!(code.matches("pub struct BidiStream<I, O>").count(), 1);
    assert_eq!(code.matches("pub struct BidiSender<I>").count(), 1);
    // The handler reads decoded items and returns a stream of responses.
    assert!(code.contains("fn talk(\n        &self,\n        items: Streaming<A>,\n    ) -> impl ::blerpc::__private::futures_core::Stream<\n        Item = ::core::result::Result<B, ::blerpc::server::Status>,\n    > + ::core::marker::Send + 'static;"), "{code}");
    assert!(
        code.contains(
            "\"talk\" => {\n                ::core::option::Option::Some(::blerpc::server::CallKind::BidiStream)\n            }"
        ),
        "{code}"
    );
    assert!(code.contains("fn bidi_stream("), "{code}");
    assert!(
        code.contains("self.handler.talk(Streaming::new(items))"),
        "{code}"
    );
    // No p2c or c2p command: no ResponseStream, and no bidi_stream override without bidi.
    assert!(!code.contains("ResponseStream"), "{code}");

    // A service without bidirectional streams keeps the runtime's default `bidi_stream`.
    let plain = "syntax = \"proto3\";\npackage p;\nmessage A {}\nservice S {\n  rpc Up(stream A) returns (A);\n}\n";
    let code = read(
        generate("no-bidi", &[("p.proto", plain)], |b, _| b)
            .unwrap()
            .join("p.rs"),
    );
    assert!(!code.contains("fn bidi_stream("), "{code}");
    assert!(!code.contains("BidiStream"), "{code}");

    // A side-file entry narrows it to one direction (as for the reference's generators).
    let out = generate(
        "bidi-side",
        &[("b.proto", proto), ("side.txt", "talk c2p")],
        |b, dir| b.side_file(dir.join("side.txt")),
    )
    .unwrap();
    let code = read(out.join("b.rs"));
    assert!(code.contains("items: Streaming<A>"), "{code}");
    assert!(code.contains("pub async fn talk_stream<S>("), "{code}");
    assert!(!code.contains("BidiStream"), "{code}");
    let fds = descriptor(out.join("b_descriptor.bin"));
    let talk = &fds.file[0].service[0].method[0];
    assert_eq!(
        (talk.client_streaming(), talk.server_streaming()),
        (true, false)
    );
}

#[test]
fn bidirectional_support_types_must_not_clash_with_messages() {
    let proto = "syntax = \"proto3\";\npackage c;\nmessage BidiSender {}\nservice S {\n  rpc Talk(stream BidiSender) returns (stream BidiSender);\n}\n";
    let error = generate("bidi-clash", &[("c.proto", proto)], |b, _| b).unwrap_err();
    assert_eq!(
        error.to_string(),
        "package `c`: `BidiSender` would be both message BidiSender and the generated BidiSender<I>"
    );
    // The server alone needs neither name.
    generate("bidi-clash-server-only", &[("c.proto", proto)], |b, _| {
        b.build_client(false)
    })
    .unwrap();
}

#[test]
fn parse_errors_name_file_line_and_column() {
    let error = generate(
        "parse",
        &[("bad.proto", "syntax = \"proto3\";\n\nmessage {}\n")],
        |b, _| b,
    )
    .unwrap_err();
    match &error {
        Error::Proto {
            file, line, column, ..
        } => {
            assert_eq!(file.as_deref(), Some("bad.proto"));
            assert_eq!((*line, *column), (Some(3), Some(9)));
        }
        other => panic!("{other:?}"),
    }
    assert!(error.to_string().starts_with("bad.proto:3:9: "), "{error}");

    let missing = generate(
        "missing",
        &[("m.proto", "syntax = \"proto3\";\nimport \"nope.proto\";\n")],
        |b, _| b,
    )
    .unwrap_err();
    assert!(matches!(missing, Error::Proto { .. }), "{missing:?}");
    assert!(missing.to_string().contains("nope.proto"), "{missing}");
}

#[test]
fn side_file_errors_name_the_line() {
    let proto = "syntax = \"proto3\";\npackage p;\n";
    let error = generate(
        "side-error",
        &[("p.proto", proto), ("side.txt", "# ok\nx sideways\n")],
        |b, dir| b.side_file(dir.join("side.txt")),
    )
    .unwrap_err();
    assert!(
        matches!(error, Error::SideFile { line: 2, .. }),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .ends_with("side.txt:2: unknown direction `sideways` for `x` (expected p2c or c2p)"),
        "{error}"
    );
}

#[test]
fn two_methods_with_one_command_name_are_refused() {
    let proto = "syntax = \"proto3\";\npackage d;\nmessage M {}\nservice S {\n  rpc FlashRead(M) returns (M);\n  rpc flash_read(M) returns (M);\n}\n";
    let error = generate("dup", &[("d.proto", proto)], |b, _| b).unwrap_err();
    assert_eq!(
        error.to_string(),
        "d.proto:6: `flash_read` and `FlashRead` map to the same command `flash_read`"
    );
}

#[test]
fn generated_names_must_not_clash_with_messages() {
    let proto = "syntax = \"proto3\";\npackage c;\nmessage ThermostatClient {}\nservice Thermostat {\n  rpc Get(ThermostatClient) returns (ThermostatClient);\n}\n";
    let error = generate("clash", &[("c.proto", proto)], |b, _| b).unwrap_err();
    assert_eq!(
        error.to_string(),
        "package `c`: `ThermostatClient` would be both message ThermostatClient and the client of service Thermostat"
    );
    // Without the client there is no clash.
    generate("clash-server-only", &[("c.proto", proto)], |b, _| {
        b.build_client(false)
    })
    .unwrap();
}

#[test]
fn keywords_and_client_only_or_server_only() {
    let proto = "syntax = \"proto3\";\npackage k;\nmessage M {}\nservice K {\n  rpc Type(M) returns (M);\n  rpc Self(M) returns (M);\n}\n";
    let out = generate("keywords", &[("k.proto", proto)], |b, _| {
        b.build_server(false)
    })
    .unwrap();
    let code = read(out.join("k.rs"));
    assert!(code.contains("pub async fn r#type("), "{code}");
    assert!(code.contains("pub async fn self_("), "{code}");
    assert!(code.contains(".call_message(\"type\","), "{code}");
    assert!(!code.contains("Dispatch"));

    let out = generate("server-only", &[("k.proto", proto)], |b, _| {
        b.build_client(false)
    })
    .unwrap();
    let code = read(out.join("k.rs"));
    assert!(!code.contains("KClient"));
    assert!(
        code.contains("fn r#type(\n        &self,\n        request: M,"),
        "{code}"
    );
    // No stream commands: the stream entry points answer "unknown command" and ignore input.
    assert!(
        code.contains("_request: ::blerpc::__private::prost::bytes::Bytes"),
        "{code}"
    );
    assert!(
        code.contains("_items: ::blerpc::server::BoxStream"),
        "{code}"
    );
}

#[test]
fn descriptor_path_and_imports() {
    let common = "syntax = \"proto3\";\npackage common;\nmessage Id { uint32 value = 1; }\n";
    let api = "syntax = \"proto3\";\npackage api;\nimport \"common.proto\";\nservice Api {\n  rpc Lookup(common.Id) returns (common.Id);\n}\n";
    let out = generate(
        "imports",
        &[("api.proto", api), ("common.proto", common)],
        |b, dir| b.file_descriptor_set_path(dir.join("set.bin")),
    )
    .unwrap();
    let code = read(out.join("api.rs"));
    assert!(code.contains("request: super::common::Id"), "{code}");
    assert!(out.join("common.rs").exists());
    assert!(!out.join("api_descriptor.bin").exists());
    let fds = descriptor(out.join("../set.bin"));
    let names: Vec<&str> = fds.file.iter().map(|f| f.name()).collect();
    assert_eq!(names, ["common.proto", "api.proto"]);
}

#[test]
fn no_out_dir_is_an_error() {
    // Integration tests run without OUT_DIR.
    if std::env::var_os("OUT_DIR").is_some() {
        return;
    }
    let dir = scratch("no-out-dir");
    std::fs::write(dir.join("p.proto"), "syntax = \"proto3\";\n").unwrap();
    let error = blerpc_build::configure()
        .emit_cargo_directives(false)
        .compile(&[dir.join("p.proto")], &[&dir])
        .unwrap_err();
    assert!(matches!(error, Error::NoOutDir), "{error:?}");
}
