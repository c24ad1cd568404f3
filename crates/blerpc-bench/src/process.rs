//! The benchmarks' child processes: every suite that needs a second process (the loopback
//! server, the scale load generators and echo workers, the wake-up server, `blerpc serve` for
//! the scale test) re-executes this binary with a hidden subcommand, and reads what the
//! children cost from `/proc`.
//!
//! ```text
//! blerpc-bench role loopback-server        the loopback matrix's server (setup line on stdin)
//! blerpc-bench role scale-client JSON      one scale load generator
//! blerpc-bench role scale-echo PORT        one raw TCP echo worker of the scale baseline
//! blerpc-bench role wakeup-server          the wake-up benchmark's echo server
//! blerpc-bench role gateway-devices JSON   simulated devices dialling the gateway bench's gateway
//! blerpc-bench serve ...                   `blerpc serve`, the same code (blerpc_cli::serve)
//! blerpc-bench role http-call ADDR PATH TOKEN BODY   one HTTP call, as a one-shot client
//! blerpc-bench serve-gateway ...           `blerpc gateway`, the same code (blerpc_cli::gateway)
//! blerpc-bench call ...                    `blerpc call`, the same code (blerpc_cli::call)
//! ```

use std::io;
use std::process::Command;

use anyhow::Context as _;
use clap::Subcommand;

/// A child process role (`blerpc-bench role ...`).
#[derive(Debug, Subcommand)]
pub enum Role {
    /// The loopback matrix's server process (reads its setup line from stdin).
    LoopbackServer,
    /// One load-generator process of the scale test, configured by a JSON spec.
    ScaleClient {
        /// The spec (`scale::client::ClientSpec` as JSON).
        spec: String,
    },
    /// One raw TCP echo worker of the scale test (port 0: the kernel picks).
    ScaleEcho {
        /// The port to share with `SO_REUSEPORT`.
        port: u16,
    },
    /// The wake-up benchmark's echo server (prints its port).
    WakeupServer,
    /// Simulated devices of the gateway bench, dialling the gateway, configured by a JSON spec.
    GatewayDevices {
        /// The spec (`gateway::scale::SimSpec` as JSON).
        spec: String,
    },
    /// The gateway bench's floor: a bare TCP forwarder to `target` (`tcp://HOST:PORT`) that
    /// prints `listening ADDR`.
    Splice {
        /// Where every accepted connection is forwarded.
        target: String,
        /// Runtime threads (1: single-threaded), as the gateway's `--threads`. Default: one
        /// per CPU.
        #[arg(long, value_name = "N")]
        threads: Option<u16>,
    },
    /// One HTTP call through the gateway, as a one-shot client process (the gateway bench's
    /// command mode): POSTs `body` to `http://ADDR/PATH` with the bearer `token`, prints the
    /// answer, fails unless it is 200.
    HttpCall {
        /// `HOST:PORT`.
        addr: String,
        /// The path.
        path: String,
        /// The bearer token.
        token: String,
        /// The JSON body.
        body: String,
    },
}

/// Runs a child role; `Ok(false)` if it failed a check.
pub fn run(role: &Role) -> anyhow::Result<bool> {
    match role {
        Role::LoopbackServer => crate::loopback::server::run_child(),
        Role::ScaleClient { spec } => crate::scale::client::run(spec),
        Role::ScaleEcho { port } => crate::scale::echo::run(*port),
        Role::WakeupServer => crate::wakeup::serve().map(|()| true),
        Role::GatewayDevices { spec } => crate::gateway::scale::run_simulator(spec),
        Role::Splice { target, threads } => crate::gateway::splice::run(target, *threads),
        Role::HttpCall {
            addr,
            path,
            token,
            body,
        } => crate::gateway::http_call_once(addr, path, token, body),
    }
}

/// A command that runs this executable as the child role `args` (`["scale-echo", "0"]`).
pub fn command(args: &[&str]) -> anyhow::Result<Command> {
    let exe = std::env::current_exe().context("cannot find the blerpc-bench executable")?;
    let mut cmd = Command::new(exe);
    cmd.arg("role").args(args);
    Ok(cmd)
}

/// A command that runs `blerpc serve` from this executable (add the serve options).
pub fn serve_command() -> anyhow::Result<Command> {
    let exe = std::env::current_exe().context("cannot find the blerpc-bench executable")?;
    let mut cmd = Command::new(exe);
    cmd.arg("serve");
    Ok(cmd)
}

/// The resident set size of process `pid` in bytes (`VmRSS` in `/proc/PID/status`; Linux).
pub fn rss_bytes(pid: u32) -> io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    parse_vm_rss(&status).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no VmRSS line"))
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// User plus system CPU time of process `pid` in seconds (`utime` + `stime` of
/// `/proc/PID/stat`, in `USER_HZ` = 100 ticks per second, the fixed unit of that interface).
pub fn cpu_seconds(pid: u32) -> io::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_cpu_ticks(&stat)
        .map(|t| t as f64 / 100.0)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "malformed stat"))
}

fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may contain spaces: count after it.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = rest.split_whitespace();
    // After the name: state (3), ppid (4), ... utime is field 14, stime 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn proc_files_parse() {
        let status = "Name:\tblerpc\nVmPeak:\t  10 kB\nVmRSS:\t    2048 kB\nThreads:\t2\n";
        assert_eq!(parse_vm_rss(status), Some(2048 * 1024));
        assert_eq!(parse_vm_rss("Name: x\n"), None);
        let stat = "4242 (a b) S 1 4242 4242 0 -1 4194560 100 0 0 0 37 5 0 0 20 0 1 0 9 0 0";
        assert_eq!(parse_cpu_ticks(stat), Some(42));
        assert_eq!(parse_cpu_ticks("garbage"), None);
    }

    #[test]
    fn own_process_is_readable() {
        if cfg!(target_os = "linux") {
            assert!(rss_bytes(std::process::id()).unwrap() > 0);
            assert!(cpu_seconds(std::process::id()).unwrap() >= 0.0);
        }
    }
}
