//! `blerpc serve --workers N` as users run it: N processes on one port, one identity, the
//! parent's options in every worker (and none of them, nor the seed, on a worker's command
//! line), all of them stopped when one dies or when the parent is told to stop. Linux: the
//! workers' command lines are read from /proc.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use blerpc_test_support::{Proc, bin, blerpc, run};

/// Starts `blerpc serve --workers 2 ARGS`; returns the process, the URL, the identity and the
/// workers' pids from its `listening URL identity KEY workers PID,PID` line.
fn serve_workers(args: &[&str]) -> (Proc, String, String, Vec<u32>) {
    let mut cmd = bin();
    cmd.args(["serve", "--workers", "2"]).args(args);
    let mut p = Proc::spawn(cmd, "blerpc serve --workers 2");
    let line = p.line();
    let parts: Vec<&str> = line.split(' ').collect();
    assert!(
        parts.len() == 6
            && parts[0] == "listening"
            && parts[2] == "identity"
            && parts[4] == "workers",
        "unexpected first line: {line}"
    );
    let pids = parts[5].split(',').map(|p| p.parse().unwrap()).collect();
    (p, parts[1].to_string(), parts[3].to_string(), pids)
}

fn call(url: &str, key: &str, command: &str, json: &str) -> blerpc_test_support::Done {
    let mut cmd = blerpc();
    cmd.args(["call", "--connect", url, "--trust-key", key, command, json]);
    run(cmd, "")
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        // A zombie (`Z`) has exited.
        .is_ok_and(|stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
}

fn wait_gone(pids: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while pids.iter().any(|p| alive(*p)) {
        assert!(Instant::now() < deadline, "still running: {pids:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How the parent exited, within 20 s.
fn wait_exit(server: &mut Proc) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "the parent kept running");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn workers_share_a_port_with_the_parents_options_and_stop_together() {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("id.key");
    let mut keygen = bin();
    keygen.args(["keygen", "--out", key_file.to_str().unwrap()]);
    let made = run(keygen, "");
    assert!(made.status.success(), "{}", made.stderr);
    let public = made.stdout.trim().to_string();
    let seed_hex = std::fs::read_to_string(&key_file)
        .unwrap()
        .trim()
        .to_string();

    let (server, url, key, pids) = serve_workers(&[
        "--listen",
        "tcp://127.0.0.1:0",
        "--identity",
        key_file.to_str().unwrap(),
        "--flash-size",
        "4096",
        "--readable",
        "1024..2048",
    ]);
    assert!(
        url.starts_with("tcp://127.0.0.1:") && !url.ends_with(":0"),
        "{url}"
    );
    assert_eq!(key, public, "the workers serve the identity in the file");
    assert_eq!(pids.len(), 2);
    // A worker's command line says what it is and nothing else: no option, no seed.
    for pid in &pids {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        assert_eq!(args[1..], ["serve", "--worker"], "{args:?}");
        assert!(!String::from_utf8_lossy(&cmdline).contains(&seed_hex));
    }
    // Calls over several connections (the kernel spreads them over the workers), every one
    // under the parent's options: flash_read only inside --readable, of the --flash-size image.
    for i in 0..6 {
        let d = call(&url, &key, "echo", &format!(r#"{{"message":"m{i}"}}"#));
        assert!(d.status.success(), "{}", d.stderr);
        assert_eq!(d.stdout.trim(), format!(r#"{{"message":"m{i}"}}"#));
        let d = call(&url, &key, "flash_read", r#"{"address":1024,"length":2}"#);
        assert!(d.status.success(), "{}", d.stderr);
        let d = call(&url, &key, "flash_read", r#"{"address":0,"length":2}"#);
        assert!(!d.status.success(), "outside --readable: {}", d.stdout);
    }

    // One worker dies: the parent stops the other and exits, saying which.
    let mut server = server;
    let victim = pids[0];
    blerpc::process::terminate(victim).unwrap();
    let status = wait_exit(&mut server);
    assert_eq!(status.code(), Some(2));
    let stderr = server.stop();
    assert!(
        stderr.contains(&format!("(pid {victim}) exited"))
            && stderr.contains("the other workers were stopped"),
        "{stderr}"
    );
    wait_gone(&pids);

    // SIGTERM to the parent: every worker stops, and the parent exits cleanly.
    let (mut server, _, _, pids) =
        serve_workers(&["--listen", "ws://127.0.0.1:0/x", "--plaintext"]);
    blerpc::process::terminate(server.child.id()).unwrap();
    let status = wait_exit(&mut server);
    assert!(status.success(), "{status:?}");
    wait_gone(&pids);
}
