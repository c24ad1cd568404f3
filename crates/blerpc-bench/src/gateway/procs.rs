//! The gateway bench's processes: `blerpc gateway` and `blerpc serve` devices, both run from
//! this binary (the CLI's own code), their stdout lines parsed, killed on drop.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};

/// A child process whose stdout lines arrive on a channel; killed when dropped.
pub(crate) struct Proc {
    pub(crate) child: Child,
    lines: mpsc::Receiver<String>,
    name: String,
}

impl Proc {
    pub(crate) fn spawn(mut cmd: Command, name: &str) -> anyhow::Result<Proc> {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if cmd.get_envs().all(|(k, _)| k != "RUST_LOG") {
            cmd.env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            );
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start {name}"))?;
        let stdout: ChildStdout = child.stdout.take().context("no stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Proc {
            child,
            lines,
            name: name.to_string(),
        })
    }

    /// The next stdout line within 60 s.
    pub(crate) fn line(&mut self) -> anyhow::Result<String> {
        self.lines
            .recv_timeout(Duration::from_secs(60))
            .map_err(|e| anyhow!("{}: no output line ({e})", self.name))
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Every stdout line that has arrived, without waiting.
    pub(crate) fn lines_so_far(&mut self) -> Vec<String> {
        self.lines.try_iter().collect()
    }

    /// SIGKILLs the process (its workers follow: they die with their parent).
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running gateway: its HTTP address and device listener.
pub(crate) struct GatewayProc {
    pub(crate) proc: Proc,
    pub(crate) http: std::net::SocketAddr,
    pub(crate) devices: String,
}

/// Starts `blerpc gateway` (this binary's `gateway`) with a TCP device listener, admitting
/// the devices of `known` (an allow-list file) or every device (`None`: enrolment into a file
/// in `dir`), plus `extra` options.
pub(crate) fn gateway(
    dir: &Path,
    known: Option<&Path>,
    extra: &[&str],
) -> anyhow::Result<GatewayProc> {
    gateway_on(dir, known, extra, None)
}

/// [`gateway`], its process (and its workers) kept to CPU `cpu` if given (`taskset`).
pub(crate) fn gateway_on(
    dir: &Path,
    known: Option<&Path>,
    extra: &[&str],
    cpu: Option<usize>,
) -> anyhow::Result<GatewayProc> {
    let exe = std::env::current_exe().context("cannot find the blerpc-bench executable")?;
    let mut cmd = match cpu {
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.args(["-c", &cpu.to_string()]).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    cmd.args([
        "serve-gateway",
        "--worker-subcommand",
        "serve-gateway",
        "--devices",
        "tcp://127.0.0.1:0",
        "--http",
        "127.0.0.1:0",
    ])
    .env("XDG_CONFIG_HOME", dir);
    match known {
        Some(file) => {
            cmd.arg("--known-devices").arg(file);
        }
        None => {
            cmd.arg("--enroll")
                .arg("--known-devices")
                .arg(dir.join("enrolled.json"));
        }
    }
    cmd.args(extra);
    let mut proc = Proc::spawn(cmd, "blerpc gateway")?;
    let mut devices = None;
    loop {
        let line = proc.line()?;
        if let Some(url) = line.strip_prefix("devices ") {
            devices = Some(url.to_string());
        } else if let Some(addr) = line.strip_prefix("http http://") {
            let http = addr
                .parse()
                .with_context(|| format!("gateway line {line:?}"))?;
            let devices = devices.context("the gateway printed no device listener")?;
            return Ok(GatewayProc {
                proc,
                http,
                devices,
            });
        } else {
            bail!("unexpected gateway line {line:?}");
        }
    }
}

/// `pid` and every live process below it.
pub(crate) fn tree(pid: u32) -> Vec<u32> {
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    let mut all = vec![pid];
    for c in children
        .split_whitespace()
        .filter_map(|c| c.parse::<u32>().ok())
    {
        all.extend(tree(c));
    }
    all
}

/// The CPU time (user and system, seconds) of `pid` and every live process below it.
pub(crate) fn tree_cpu(pid: u32) -> f64 {
    tree(pid).into_iter().map(own_cpu).sum()
}

/// The time every thread of process `pid` has run on a CPU (seconds), from each thread's
/// `/proc/PID/task/TID/schedstat`: nanoseconds, where `/proc/PID/stat` counts ticks of 10 ms.
pub(crate) fn run_time(pid: u32) -> f64 {
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0.0;
    };
    threads
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum::<u64>() as f64
        / 1e9
}

/// The CPU time (user and system, seconds) of process `pid` alone, from `/proc/PID/stat`
/// (ticks of 1/100 s, Linux's `USER_HZ`).
pub(crate) fn own_cpu(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split_whitespace().collect();
            let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
            Some((ticks(11)? + ticks(12)?) as f64 / 100.0)
        })
        .unwrap_or(0.0)
}

/// A device: `blerpc serve` dialling the gateway and listening on TCP too (for the direct
/// baseline). Returns the process, its listen address and its identity key.
pub(crate) fn device(
    dir: &Path,
    dial: &str,
    key_file: &Path,
) -> anyhow::Result<(Proc, String, [u8; 32])> {
    let mut cmd = crate::process::serve_command()?;
    cmd.args(["--listen", "tcp://127.0.0.1:0", "--dial", dial])
        .arg("--identity")
        .arg(key_file)
        .args(["--flash-size", "65536"])
        // The call mode connects hundreds of times a second from one address.
        .args(["--max-connection-rate", "0"])
        .env("XDG_CONFIG_HOME", dir);
    let mut proc = Proc::spawn(cmd, "blerpc serve --dial")?;
    let (mut listen, mut key) = (None, None);
    while listen.is_none() || key.is_none() {
        let line = proc.line()?;
        let words: Vec<&str> = line.split(' ').collect();
        match words.as_slice() {
            ["dialling", _, "identity", k] => key = Some(k.to_string()),
            ["listening", url, "identity", _] => listen = Some(url.to_string()),
            _ => bail!("unexpected device line {line:?}"),
        }
    }
    let key = key.context("no identity")?;
    let key = blerpc::known_keys::parse_key(&key).context("the device's identity")?;
    let listen = listen.context("no listener")?;
    Ok((proc, listen, key))
}
