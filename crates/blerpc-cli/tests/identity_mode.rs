//! `blerpc serve` warns about an identity file other users can read, naming the file, its mode
//! and the fix; a private one gets no warning. Unix only (file modes).
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use blerpc_test_support::{Proc, bin};

fn seed_file(path: &Path, mode: u32) {
    std::fs::write(path, format!("{}\n", "42".repeat(32))).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Serves with `config` as `$XDG_CONFIG_HOME` and `args`; returns stderr once it listens.
fn serve_stderr(config: &Path, args: &[&str]) -> String {
    let mut cmd = bin();
    cmd.env("XDG_CONFIG_HOME", config)
        .args(["serve", "--listen", "tcp://127.0.0.1:0"])
        .args(args);
    let mut p = Proc::spawn(cmd, "blerpc serve");
    assert!(p.line().starts_with("listening "));
    p.stop()
}

#[test]
fn a_readable_identity_file_is_served_with_a_warning_naming_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    // The default identity (`blerpc keygen` without --out), world-readable.
    let default = dir.path().join("blerpc").join("identity.key");
    std::fs::create_dir_all(default.parent().unwrap()).unwrap();
    seed_file(&default, 0o644);
    let err = serve_stderr(dir.path(), &[]);
    let d = default.display();
    assert!(
        err.contains(&format!(
            "blerpc: warning: identity file {d} has mode 0644: other users can read the secret \
             seed; fix it with `chmod 600 {d}`"
        )),
        "{err}"
    );

    // --identity FILE, group-readable.
    let given = dir.path().join("given.key");
    seed_file(&given, 0o640);
    let err = serve_stderr(dir.path(), &["--identity", given.to_str().unwrap()]);
    assert!(
        err.contains(&format!("identity file {} has mode 0640", given.display())),
        "{err}"
    );
    assert!(
        err.contains(&format!("chmod 600 {}", given.display())),
        "{err}"
    );

    // Private files: no warning.
    std::fs::set_permissions(&default, std::fs::Permissions::from_mode(0o600)).unwrap();
    let err = serve_stderr(dir.path(), &[]);
    assert!(!err.contains("warning"), "{err}");
    assert!(err.contains("identity from"), "{err}");
}
