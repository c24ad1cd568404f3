//! The arguments the process tests give `blerpc gateway`.

use std::path::{Path, PathBuf};

/// Writes `token` as the only bearer token of a tokens file in `dir`; its path.
pub fn tokens_file(dir: &Path, token: &str) -> PathBuf {
    let p = dir.join("tokens");
    std::fs::write(&p, format!("# backends\n{token}\n"))
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", p.display()));
    p
}

/// The arguments every test gateway gets: a TCP device listener and an HTTP port on loopback
/// (free ports), enrolment into `dir/devices.json`, `token` accepted; then `more`.
pub fn enrolling(dir: &Path, token: &str, more: &[&str]) -> Vec<String> {
    let tokens = tokens_file(dir, token);
    let known = dir.join("devices.json");
    let mut args: Vec<String> = [
        "--devices",
        "tcp://127.0.0.1:0",
        "--http",
        "127.0.0.1:0",
        "--enroll",
    ]
    .map(String::from)
    .to_vec();
    args.push("--known-devices".into());
    args.push(known.display().to_string());
    args.push("--tokens".into());
    args.push(tokens.display().to_string());
    args.extend(more.iter().map(|a| a.to_string()));
    args
}
