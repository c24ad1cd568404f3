//! Separate hosts for failover tests: network namespaces on one switch, made by the test and
//! removed when it ends.
//!
//! A [`Lan`] is a namespace holding a bridge (the switch); each [`Lan::host`] is a namespace
//! of its own with one interface, `eth0`, at `10.77.0.K/24`, cabled to the switch by a veth
//! pair. A host's processes start with [`Host::command`] (`ip netns exec`); the test's own code
//! runs on a host with [`Host::run`] (a thread that enters the namespace); [`Host::cut`] takes
//! the host's cable down at the switch, as a failed link would, and [`Host::mend`] brings it
//! back. Needs root (`ip netns`), as the fleet's CI has; addresses never leave the namespaces.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};

/// Runs `ip ARGS`, panicking with its stderr if it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `ip` (iproute2): {e}"));
    assert!(
        out.status.success(),
        "ip {}: {} (network namespaces need root)",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// A switch and the hosts cabled to it (see the [module docs](self)).
#[derive(Debug)]
pub struct Lan {
    tag: String,
    switch: String,
    hosts: Mutex<Vec<String>>,
    next: AtomicU8,
}

/// A host on a [`Lan`].
#[derive(Clone, Debug)]
pub struct Host {
    /// Its namespace.
    pub ns: String,
    /// Its address.
    pub ip: Ipv4Addr,
    switch: String,
    port: String,
}

impl Lan {
    /// A new switch in a namespace of its own.
    pub fn new() -> Lan {
        static N: AtomicU32 = AtomicU32::new(0);
        let tag = format!(
            "bl{}x{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let switch = format!("{tag}-sw");
        ip(&["netns", "add", &switch]);
        ip(&["-n", &switch, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &switch, "link", "set", "br0", "up"]);
        Lan {
            tag,
            switch,
            hosts: Mutex::new(Vec::new()),
            next: AtomicU8::new(1),
        }
    }

    /// A new host named `name` (in the namespace's name), cabled to the switch.
    pub fn host(&self, name: &str) -> Host {
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        assert!(k < 250, "a Lan has room for 249 hosts");
        let ns = format!("{}-{name}", self.tag);
        let port = format!("p{k}");
        ip(&["netns", "add", &ns]);
        self.hosts.lock().unwrap().push(ns.clone());
        ip(&[
            "-n",
            &self.switch,
            "link",
            "add",
            &port,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &ns,
        ]);
        ip(&["-n", &self.switch, "link", "set", &port, "master", "br0"]);
        ip(&["-n", &self.switch, "link", "set", &port, "up"]);
        let ip_addr = Ipv4Addr::new(10, 77, 0, k);
        ip(&[
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{ip_addr}/24"),
            "dev",
            "eth0",
        ]);
        ip(&["-n", &ns, "link", "set", "eth0", "up"]);
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        Host {
            ns,
            ip: ip_addr,
            switch: self.switch.clone(),
            port,
        }
    }
}

impl Default for Lan {
    fn default() -> Lan {
        Lan::new()
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        for ns in self.hosts.lock().unwrap().drain(..) {
            let _ = Command::new("ip").args(["netns", "del", &ns]).status();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.switch])
            .status();
    }
}

impl Host {
    /// `program` to be run on this host.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns]).arg(program);
        cmd
    }

    /// Takes the host's cable down at the switch: its packets go nowhere, nothing is reset.
    pub fn cut(&self) {
        ip(&["-n", &self.switch, "link", "set", &self.port, "down"]);
    }

    /// Brings the host's cable back.
    pub fn mend(&self) {
        ip(&["-n", &self.switch, "link", "set", &self.port, "up"]);
    }

    /// Runs `f` on a thread inside this host's network namespace (its sockets are the host's).
    pub fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/run/netns/{}", self.ns);
        std::thread::spawn(move || {
            let fd =
                std::fs::File::open(&path).unwrap_or_else(|e| panic!("cannot open {path}: {e}"));
            nix::sched::setns(&fd, nix::sched::CloneFlags::CLONE_NEWNET)
                .unwrap_or_else(|e| panic!("cannot enter {path}: {e}"));
            f()
        })
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
    }
}
