//! The one converter of the vectors: every `testdata/vectors/*.json` file, turned into the binary
//! tree `src/tree.rs` reads (its module docs give the layout), written to `$OUT_DIR/vectors.bin`
//! and embedded by `src/lib.rs`. The host tests and the microcontroller image both read this
//! file, so nothing parses JSON twice and the microcontroller needs no JSON parser.
//!
//! The conversion knows no schema: objects, lists, integers, booleans and null keep their shape,
//! and a string is stored as bytes when it is an even number of lowercase hex digits (every hex
//! field of the vectors), as text otherwise.

// A build script reports a bad vector file by failing the build with its message.
#![allow(clippy::expect_used)]

use std::path::PathBuf;

use serde_json::Value;

// The tags and magic, as the reader knows them.
#[path = "src/format.rs"]
mod format;
use format::*;

fn u32_len(n: usize) -> [u8; 4] {
    u32::try_from(n).expect("a length over 4 GiB").to_le_bytes()
}

fn hex(s: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    if !s.len().is_multiple_of(2) {
        return None;
    }
    s.as_bytes()
        .chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// Appends `items` as a list or object: tag, count, byte size, then what `each` writes.
fn composite<T>(out: &mut Vec<u8>, tag: u8, items: &[T], each: impl Fn(&mut Vec<u8>, &T)) {
    out.push(tag);
    out.extend_from_slice(&u32_len(items.len()));
    let size_at = out.len();
    out.extend_from_slice(&[0; 4]);
    for item in items {
        each(out, item);
    }
    let size = u32_len(out.len() - size_at - 4);
    out[size_at..size_at + 4].copy_from_slice(&size);
}

fn write(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.push(NULL),
        Value::Bool(false) => out.push(FALSE),
        Value::Bool(true) => out.push(TRUE),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                out.push(UINT);
                out.extend_from_slice(&u.to_le_bytes());
            } else {
                let i = n
                    .as_i64()
                    .expect("an integer (the vectors hold no fractions)");
                out.push(NEG);
                out.extend_from_slice(&i.to_le_bytes());
            }
        }
        Value::String(s) => {
            let (tag, bytes) = match hex(s) {
                Some(b) => (BYTES, b),
                None => (TEXT, s.as_bytes().to_vec()),
            };
            out.push(tag);
            out.extend_from_slice(&u32_len(bytes.len()));
            out.extend_from_slice(&bytes);
        }
        Value::Array(items) => composite(out, LIST, items, write),
        Value::Object(map) => {
            let entries: Vec<_> = map.iter().collect();
            composite(out, OBJECT, &entries, |out, (k, v)| {
                out.push(u8::try_from(k.len()).expect("a key over 255 bytes"));
                out.extend_from_slice(k.as_bytes());
                write(out, v);
            });
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let dir = manifest.join("../../testdata/vectors");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    // The root: an object of file stem -> that file's document.
    let mut root = serde_json::Map::new();
    for path in &files {
        println!("cargo::rerun-if-changed={}", path.display());
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let doc: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
        let stem = path.file_stem().expect("file stem").to_string_lossy();
        root.insert(stem.into_owned(), doc);
    }
    let mut out = MAGIC.to_vec();
    write(&mut out, &Value::Object(root));
    let dest = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("vectors.bin");
    std::fs::write(&dest, out).unwrap_or_else(|e| panic!("{}: {e}", dest.display()));
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=src/format.rs");
}
