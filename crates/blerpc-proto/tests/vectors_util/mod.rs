//! Loading the reference vectors of `testdata/vectors/*.json` (schema: `tools/vectors/README.md`)
//! and reporting every failing case of a family at once.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::fmt::Debug;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

use rand_core::{CryptoRng, RngCore};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The result of checking one case (or one part of it): `Err` carries a human-readable reason.
pub type Check = Result<(), String>;

/// One vector file.
pub struct Family {
    /// The file stem (`splits`, `control`, ...).
    pub name: &'static str,
    /// The file's `cases`.
    pub cases: Vec<Value>,
}

/// Loads `testdata/vectors/<family>.json` and checks the envelope every file shares.
pub fn load(family: &'static str) -> Family {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/vectors")
        .join(format!("{family}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let doc: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    assert_eq!(doc["family"], family, "{}: family", path.display());
    assert_eq!(
        doc["schema_version"],
        1,
        "{}: schema_version",
        path.display()
    );
    assert_eq!(
        doc["reference"],
        "blerpc-protocol 0.8.0",
        "{}: reference",
        path.display()
    );
    let cases = doc["cases"].as_array().cloned().unwrap_or_default();
    assert!(!cases.is_empty(), "{}: no cases", path.display());
    let mut names: Vec<&str> = cases.iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(
        names.len(),
        cases.len(),
        "{}: a case without a name",
        path.display()
    );
    names.sort_unstable();
    names.dedup();
    assert_eq!(
        names.len(),
        cases.len(),
        "{}: duplicate case names",
        path.display()
    );
    Family {
        name: family,
        cases,
    }
}

impl Family {
    /// Runs `check` on every case (a panic counts as a failure), then panics listing every
    /// failing case by name. Returns the number of cases checked.
    pub fn run(&self, mut check: impl FnMut(&Value) -> Check) -> usize {
        let mut failures = Vec::new();
        for case in &self.cases {
            let name = case["name"].as_str().unwrap_or("?");
            match catch_unwind(AssertUnwindSafe(|| check(case))) {
                Ok(Ok(())) => {}
                Ok(Err(why)) => failures.push(format!("  {name}: {why}")),
                Err(panic) => failures.push(format!("  {name}: PANIC {}", panic_text(&panic))),
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} cases in {}.json failed:\n{}",
            failures.len(),
            self.cases.len(),
            self.name,
            failures.join("\n")
        );
        self.cases.len()
    }

    /// The case called `name`.
    pub fn case(&self, name: &str) -> Option<&Value> {
        self.cases.iter().find(|c| c["name"] == name)
    }
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "(non-string panic)".to_owned())
}

// ----- typed access to JSON fields (schema errors are reported like any other failure) --------

/// `v[key]` as a string.
pub fn str_of<'a>(v: &'a Value, key: &str) -> Result<&'a str, String> {
    v[key]
        .as_str()
        .ok_or_else(|| format!("field `{key}` is not a string"))
}

/// `v[key]` as an unsigned integer.
pub fn u64_of(v: &Value, key: &str) -> Result<u64, String> {
    v[key]
        .as_u64()
        .ok_or_else(|| format!("field `{key}` is not an unsigned integer"))
}

/// `v[key]` as a `usize`.
pub fn usize_of(v: &Value, key: &str) -> Result<usize, String> {
    u64_of(v, key).and_then(|n| usize::try_from(n).map_err(|e| format!("`{key}`: {e}")))
}

/// `v[key]` as a `u8`.
pub fn u8_of(v: &Value, key: &str) -> Result<u8, String> {
    u64_of(v, key).and_then(|n| u8::try_from(n).map_err(|e| format!("`{key}`: {e}")))
}

/// `v[key]` as a `u16`.
pub fn u16_of(v: &Value, key: &str) -> Result<u16, String> {
    u64_of(v, key).and_then(|n| u16::try_from(n).map_err(|e| format!("`{key}`: {e}")))
}

/// `v[key]` as a `u32`.
pub fn u32_of(v: &Value, key: &str) -> Result<u32, String> {
    u64_of(v, key).and_then(|n| u32::try_from(n).map_err(|e| format!("`{key}`: {e}")))
}

/// `v[key]` as an array.
pub fn arr_of<'a>(v: &'a Value, key: &str) -> Result<&'a Vec<Value>, String> {
    v[key]
        .as_array()
        .ok_or_else(|| format!("field `{key}` is not an array"))
}

/// Decodes a lowercase hex string.
pub fn unhex(s: &str) -> Result<Vec<u8>, String> {
    hex::decode(s).map_err(|e| format!("bad hex {s:?}: {e}"))
}

/// `v[key]` as hex bytes.
pub fn hex_of(v: &Value, key: &str) -> Result<Vec<u8>, String> {
    unhex(str_of(v, key)?)
}

/// `v[key]` as a fixed-size array of hex bytes.
pub fn arr_hex_of<const N: usize>(v: &Value, key: &str) -> Result<[u8; N], String> {
    let bytes = hex_of(v, key)?;
    <[u8; N]>::try_from(bytes.as_slice())
        .map_err(|_| format!("field `{key}` has {} bytes, expected {N}", bytes.len()))
}

/// `v[key]`, an array of hex strings, decoded.
pub fn hex_list_of(v: &Value, key: &str) -> Result<Vec<Vec<u8>>, String> {
    arr_of(v, key)?
        .iter()
        .map(|h| {
            h.as_str()
                .ok_or_else(|| format!("`{key}`: not a string"))
                .and_then(unhex)
        })
        .collect()
}

/// Rebuilds the bytes of a payload descriptor `{"pattern", "len", "sha256", "hex"?}` and checks
/// its length and hash.
pub fn payload_of(desc: &Value) -> Result<Vec<u8>, String> {
    let len = usize_of(desc, "len")?;
    let bytes: Vec<u8> = match str_of(desc, "pattern")? {
        "mod251" => (0..len).map(|i| (i % 251) as u8).collect(),
        "mod256" => (0..len).map(|i| (i % 256) as u8).collect(),
        "hex" => hex_of(desc, "hex")?,
        other => return Err(format!("unknown payload pattern {other:?}")),
    };
    if bytes.len() != len {
        return Err(format!(
            "payload has {} bytes, descriptor says {len}",
            bytes.len()
        ));
    }
    let hash = hex::encode(Sha256::digest(&bytes));
    if hash != str_of(desc, "sha256")? {
        return Err(format!(
            "payload sha256 {hash} does not match the descriptor"
        ));
    }
    Ok(bytes)
}

// ----- comparisons -----------------------------------------------------------------------------

/// `Ok` if the byte strings are equal, else a message showing both in hex.
pub fn same_bytes(what: &str, got: &[u8], want: &[u8]) -> Check {
    if got == want {
        return Ok(());
    }
    let at = got
        .iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()));
    Err(format!(
        "{what}: got {} bytes, want {} bytes, first difference at byte {at}\n    got  {}\n    want {}",
        got.len(),
        want.len(),
        abbreviate(got),
        abbreviate(want)
    ))
}

fn abbreviate(b: &[u8]) -> String {
    if b.len() <= 96 {
        hex::encode(b)
    } else {
        format!(
            "{}…{} ({} bytes)",
            hex::encode(&b[..48]),
            hex::encode(&b[b.len() - 16..]),
            b.len()
        )
    }
}

/// `Ok` if `got == want`, else a message with both.
pub fn same<T: PartialEq + Debug>(what: &str, got: T, want: T) -> Check {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, want {want:?}"))
    }
}

/// `Ok` if `cond`, else `why`.
pub fn ensure(cond: bool, why: impl FnOnce() -> String) -> Check {
    if cond { Ok(()) } else { Err(why()) }
}

// ----- a scripted RNG --------------------------------------------------------------------------

/// A "random" source that serves recorded bytes in order (the fixed ephemeral keys and nonces of
/// the vectors) and panics when asked for more than was planned.
#[derive(Debug, Default)]
pub struct ScriptedRng {
    bytes: VecDeque<u8>,
}

impl ScriptedRng {
    /// Serves `parts`, concatenated, in order.
    pub fn new(parts: &[&[u8]]) -> Self {
        ScriptedRng {
            bytes: parts.iter().flat_map(|p| p.iter().copied()).collect(),
        }
    }

    /// Bytes planned but not drawn.
    pub fn remaining(&self) -> usize {
        self.bytes.len()
    }
}

impl RngCore for ScriptedRng {
    fn next_u32(&mut self) -> u32 {
        let mut b = [0u8; 4];
        self.fill_bytes(&mut b);
        u32::from_le_bytes(b)
    }
    fn next_u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.fill_bytes(&mut b);
        u64::from_le_bytes(b)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        assert!(
            dest.len() <= self.bytes.len(),
            "unplanned randomness: {} bytes asked, {} left in the script",
            dest.len(),
            self.bytes.len()
        );
        let n = dest.len();
        for (d, s) in dest.iter_mut().zip(self.bytes.drain(..n)) {
            *d = s;
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoRng for ScriptedRng {}
