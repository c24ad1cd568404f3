//! Several processes pinning into one known-keys file at once lose no pin.
//!
//! The parent test re-executes this test binary once per child, with `BLERPC_KK_CHILD` naming
//! the child's file, its index and a start signal; the child role ([`known_keys_pin_child`])
//! waits for the signal, then pins `PINS` distinct device ids through the public
//! [`KnownKeysFile`] (trust on first use, as `blerpc call` does) and exits. Every pin of every
//! child must be in the file at the end, with its own key, and every child must have
//! succeeded. (Against the previous store, a fixed temporary name and no lock, 5 of 6 children
//! failed and 92 of 120 pins were lost.)
#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use blerpc::blerpc_proto::handshake::{KnownKeys as _, TofuOutcome, tofu_verify};
use blerpc::known_keys::KnownKeysFile;

const CHILDREN: usize = 6;
const PINS: usize = 20;
const ENV: &str = "BLERPC_KK_CHILD";

fn device(child: usize, pin: usize) -> String {
    format!("tcp://10.0.{child}.{pin}:7000")
}

fn key(child: usize, pin: usize) -> [u8; 32] {
    let mut k = [0u8; 32];
    k[0] = child as u8;
    k[1] = pin as u8;
    k[31] = 0xa5;
    k
}

/// The child role: a no-op unless the parent set `BLERPC_KK_CHILD=<file>|<index>|<go file>`.
#[test]
fn known_keys_pin_child() {
    let Ok(spec) = std::env::var(ENV) else {
        return;
    };
    let mut parts = spec.split('|');
    let file = PathBuf::from(parts.next().unwrap());
    let index: usize = parts.next().unwrap().parse().unwrap();
    let go = PathBuf::from(parts.next().unwrap());
    // Start together, so that the read-modify-write cycles overlap.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !go.exists() {
        assert!(Instant::now() < deadline, "no start signal");
        std::thread::sleep(Duration::from_millis(1));
    }
    for pin in 0..PINS {
        // One store per connection, as a client builds it.
        let mut store = KnownKeysFile::new(&file);
        let outcome = tofu_verify(&mut store, &device(index, pin), &key(index, pin));
        assert!(
            matches!(outcome, Ok(TofuOutcome::FirstUse)),
            "child {index} pin {pin}: {outcome:?}"
        );
    }
}

fn spawn_child(file: &Path, index: usize, go: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "known_keys_pin_child",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(ENV, format!("{}|{index}|{}", file.display(), go.display()))
        // The child's harness chatter stays out of the parent's output; a failure's panic
        // message still reaches stderr.
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn the child role")
}

#[test]
fn known_keys_concurrent_pinning_processes_lose_no_pin() {
    if std::env::var_os(ENV).is_some() {
        return; // this process is a child
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("known_keys.json");
    let go = dir.path().join("go");
    // A pin made before the children start survives too.
    KnownKeysFile::new(&file)
        .put("tcp://before:1", &[0xbb; 32])
        .unwrap();
    let children: Vec<_> = (0..CHILDREN).map(|i| spawn_child(&file, i, &go)).collect();
    std::fs::write(&go, b"").unwrap();
    let failed: Vec<usize> = children
        .into_iter()
        .enumerate()
        .filter_map(|(i, mut c)| (!c.wait().unwrap().success()).then_some(i))
        .collect();

    let store = KnownKeysFile::new(&file);
    let mut lost = Vec::new();
    for child in 0..CHILDREN {
        for pin in 0..PINS {
            match store.get(&device(child, pin)).unwrap() {
                Some(k) => assert_eq!(k, key(child, pin), "{}", device(child, pin)),
                None => lost.push(device(child, pin)),
            }
        }
    }
    assert_eq!(store.get("tcp://before:1").unwrap(), Some([0xbb; 32]));
    assert!(
        failed.is_empty() && lost.is_empty(),
        "children that failed: {failed:?}; {} of {} pins lost, first: {:?}",
        lost.len(),
        CHILDREN * PINS,
        lost.iter().take(4).collect::<Vec<_>>()
    );
    // No temporary or lock debris besides the one lock file.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "go")
        .collect();
    names.sort();
    assert!(
        names == ["known_keys.json", "known_keys.json.lock"] || names == ["known_keys.json"],
        "{names:?}"
    );
}
