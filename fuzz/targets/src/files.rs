//! The files a user keeps: the known-keys file (`blerpc::known_keys`) and the identity seed
//! file (`blerpc::identity`). Each target checks the pure parser against a reference model,
//! then runs the same bytes through the real file path (a private directory per input, on
//! `/dev/shm` where there is one, removed afterwards).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use blerpc::blerpc_proto::handshake::{KnownKeys as _, TofuError, TofuOutcome, tofu_verify};
use blerpc::identity;
use blerpc::known_keys::{KnownKeysError, KnownKeysFile, emit_pins, parse_key, parse_pins, to_hex};
use serde_json::Value;

/// The device [`known_keys_file`] pins, and the key it presents.
const DEVICE: &str = "tcp://fuzz:7000";
const KEY: [u8; 32] = [0x5a; 32];

/// A fresh, empty directory for one input; removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let shm = PathBuf::from("/dev/shm");
        let base = if shm.is_dir() {
            shm
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!(
            "blerpc-fuzz-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The model of a key: 64 ASCII hex digits after trimming (Unicode) whitespace.
fn model_key(text: &str) -> Option<[u8; 32]> {
    let t = text.trim();
    if t.len() != 64 || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&t[2 * i..2 * i + 2], 16).unwrap();
    }
    Some(out)
}

/// Checks one key string: [`parse_key`] agrees with the model, and an accepted key prints
/// back as the same digits in lowercase.
fn check_key(text: &str) -> Option<[u8; 32]> {
    let got = parse_key(text);
    assert_eq!(got, model_key(text), "parse_key({text:?})");
    if let Some(k) = got {
        assert_eq!(to_hex(&k), text.trim().to_ascii_lowercase());
        assert_eq!(parse_key(&to_hex(&k)), Some(k));
    }
    got
}

/// The model of a known-keys file: a JSON object whose values are all strings.
fn model_pins(data: &[u8]) -> Option<BTreeMap<String, String>> {
    match serde_json::from_slice::<Value>(data).ok()? {
        Value::Object(map) => map
            .into_iter()
            .map(|(k, v)| match v {
                Value::String(s) => Some((k, s)),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// The known-keys file: `data` is the file's contents.
///
/// - [`parse_pins`] accepts exactly the JSON objects of strings (the model: `serde_json::Value`),
///   with the same entries; [`emit_pins`] → [`parse_pins`] gives them back, and emitting is
///   stable (the written file is canonical).
/// - Every entry's [`parse_key`] agrees with a reference model of "64 hex digits".
/// - Through a real [`KnownKeysFile`] holding `data`: trust on first use for one device gives
///   the outcome the model predicts (fails closed on a bad file or entry, matches or refuses a
///   pinned key), and a first-use pin keeps every other entry byte for byte.
pub fn known_keys_file(data: &[u8]) {
    let parsed = parse_pins(data).ok();
    assert_eq!(
        parsed,
        model_pins(data),
        "parse_pins disagrees with the model"
    );
    let Some(pins) = parsed else {
        // A file that does not parse refuses every device.
        return check_file(data, None);
    };
    let text = emit_pins(&pins).unwrap();
    assert!(text.ends_with('\n'));
    let again = parse_pins(text.as_bytes()).unwrap();
    assert_eq!(again, pins, "emit → parse lost or changed an entry");
    assert_eq!(emit_pins(&again).unwrap(), text, "emit is not canonical");
    for value in pins.values() {
        check_key(value);
    }
    check_file(data, Some(&pins));
}

fn check_file(data: &[u8], pins: Option<&BTreeMap<String, String>>) {
    let scratch = Scratch::new();
    let path = scratch.0.join("known_keys.json");
    std::fs::write(&path, data).unwrap();
    let mut store = KnownKeysFile::new(&path);
    let outcome = tofu_verify(&mut store, DEVICE, &KEY);
    let Some(pins) = pins else {
        assert!(
            matches!(
                outcome,
                Err(TofuError::Store(KnownKeysError::Malformed { .. }))
            ),
            "{outcome:?}"
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            data,
            "a bad file was rewritten"
        );
        return;
    };
    match pins.get(DEVICE).map(|v| model_key(v)) {
        None => {
            assert!(matches!(outcome, Ok(TofuOutcome::FirstUse)), "{outcome:?}");
            let mut want = pins.clone();
            want.insert(DEVICE.to_string(), to_hex(&KEY));
            let now = parse_pins(&std::fs::read(&path).unwrap()).unwrap();
            assert_eq!(now, want, "the pin lost or changed another entry");
            assert_eq!(store.get(DEVICE).unwrap(), Some(KEY));
        }
        Some(None) => assert!(
            matches!(
                outcome,
                Err(TofuError::Store(KnownKeysError::Malformed { .. }))
            ),
            "{outcome:?}"
        ),
        Some(Some(k)) if k == KEY => {
            assert!(matches!(outcome, Ok(TofuOutcome::Matched)), "{outcome:?}")
        }
        Some(Some(k)) => assert!(
            matches!(outcome, Err(TofuError::Mismatch { pinned, .. }) if pinned == k),
            "{outcome:?}"
        ),
    }
    if pins.contains_key(DEVICE) {
        assert_eq!(
            std::fs::read(&path).unwrap(),
            data,
            "a lookup rewrote the file"
        );
    }
}

/// The identity seed file: `data` is the file's contents.
///
/// - [`identity::parse_seed`] accepts exactly UTF-8 text that is 64 hex digits after trimming
///   whitespace (the model), with the model's bytes; [`parse_key`] on the text agrees.
/// - [`identity::load`] of a file holding `data` returns the same seed, or an error when the
///   model rejects it; [`identity::store`] of an accepted seed writes its lowercase hex and a
///   newline, which loads back to the seed.
pub fn identity_file(data: &[u8]) {
    let got = identity::parse_seed(data);
    let model = std::str::from_utf8(data).ok().and_then(model_key);
    assert_eq!(got, model, "parse_seed disagrees with the model");
    if let Ok(text) = std::str::from_utf8(data) {
        assert_eq!(check_key(text), got);
    }
    let scratch = Scratch::new();
    let path = scratch.0.join("id.key");
    identity_write(&path, data);
    match identity::load(&path) {
        Ok(loaded) => {
            assert_eq!(Some(loaded.seed), got);
            assert_eq!(loaded.shared, None, "written with mode 0600");
        }
        Err(e) => {
            assert_eq!(got, None, "load failed on a valid seed: {e}");
            assert!(matches!(e, identity::SeedFileError::NotASeed { .. }), "{e}");
            assert!(e.to_string().contains("64 hex digits"), "{e}");
        }
    }
    if let Some(seed) = got {
        identity::store(&path, &seed, true).unwrap();
        let written = std::fs::read(&path).unwrap();
        assert_eq!(written, format!("{}\n", to_hex(&seed)).as_bytes());
        assert_eq!(identity::load(&path).unwrap().seed, seed);
    }
}

/// Writes `data` with mode 0600 (a private file, as [`identity::store`] writes).
fn identity_write(path: &std::path::Path, data: &[u8]) {
    identity::write_private(path, data).unwrap();
}
