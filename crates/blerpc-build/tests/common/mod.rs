//! What the generator tests share.
#![allow(clippy::unwrap_used, reason = "test helpers outside #[test] functions")]

use std::path::Path;

/// Compares `generated` with `tests/golden/<file>`; with `BLERPC_BLESS=1` set, rewrites the
/// golden file instead (after an intended change).
pub fn check_golden(generated: &str, file: &str) {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(file);
    if std::env::var_os("BLERPC_BLESS").is_some() {
        std::fs::write(&golden, generated).unwrap();
    }
    let expected = std::fs::read_to_string(&golden).unwrap_or_default();
    assert!(
        generated == expected,
        "generated code differs from {} (rerun with BLERPC_BLESS=1 if intended)",
        golden.display()
    );
}
