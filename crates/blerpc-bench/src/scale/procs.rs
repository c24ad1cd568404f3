//! The scale test's child processes: the server workers (`blerpc serve`, or the raw TCP echo)
//! and the load generators, each killed and reaped when dropped, and the event stream the
//! load generators report on.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use blerpc_demo::progress::Steps;

use super::client::{ClientSpec, Command, Event};

/// A child process killed (and reaped) when dropped.
pub(super) struct Reaped(pub(super) Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = blerpc::process::terminate(self.0.id());
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(self.0.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// The first line a child writes to its piped stdout (its listening line); the rest of its
/// output is not read.
fn first_line(child: &mut Reaped, what: &str) -> anyhow::Result<String> {
    let stdout = child
        .0
        .stdout
        .take()
        .ok_or_else(|| anyhow!("{what}: stdout is not piped"))?;
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .with_context(|| format!("reading the listening line of {what}"))?;
    Ok(line)
}

/// The server: `blerpc serve --workers`, or the raw TCP echo workers of the `tcp` variant.
pub(super) struct ServerProc {
    /// `blerpc serve` (whose workers are its children), or every echo worker; stopped when
    /// dropped.
    pub(super) procs: Vec<Reaped>,
    /// The identity seed file (removed when the server is dropped).
    pub(super) key: Option<PathBuf>,
    pub(super) addr: SocketAddr,
    pub(super) path: String,
    pub(super) identity: Option<String>,
    pub(super) pids: Vec<u32>,
}

/// Starts `command` (stdout piped, stderr inherited) and waits for its first stdout line.
fn spawn_ready(mut command: std::process::Command, what: &str) -> anyhow::Result<(Reaped, String)> {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot start {what}"))?;
    let mut proc = Reaped(child);
    let line = first_line(&mut proc, what)?;
    Ok((proc, line))
}

impl ServerProc {
    pub(super) fn start(
        workers: usize,
        max_connections: usize,
        read_buffer: usize,
    ) -> anyhow::Result<Self> {
        let key = std::env::temp_dir().join(format!("blerpc-scale-{}.key", std::process::id()));
        blerpc::identity::store(&key, &blerpc::identity::generate(), true)?;
        // The server is `blerpc serve` itself: the bench binary runs the CLI's serve code.
        let mut child = crate::process::serve_command()?;
        child
            .args(["--listen", "ws://127.0.0.1:0/blerpc"])
            .arg("--identity")
            .arg(&key)
            .args(["--workers", &workers.to_string()])
            .args(["--max-connections", &max_connections.to_string()])
            // The load generators open thousands of connections a second from each address.
            .args(["--max-connection-rate", "0"])
            // The ping variant's connections speak WebSocket only (never bleRPC setup), and
            // the rounds hold them for minutes: no setup deadline for this test.
            .args(["--setup-timeout", "86400"])
            // A storm of 100,000 genuine upgrades in a few seconds keeps more than the default
            // 256 handshakes in progress per worker on 2 loaded cores; at the default the
            // oldest are dropped for newcomers (the silent-socket defence), which resets
            // genuine clients here. Sized for the storm, as a capacity deployment would be.
            .args(["--max-handshakes", "8192"])
            .args(["--backlog", "65535"])
            .args(["--read-buffer", &read_buffer.to_string()])
            .args(["--flash-size", "4096"]);
        let (proc, line) = spawn_ready(child, "the server")?;
        // listening ws://127.0.0.1:PORT/blerpc identity HEX [workers PID,PID,...]
        let words: Vec<&str> = line.split_whitespace().collect();
        let (Some(&"listening"), Some(url), Some(&"identity"), Some(identity)) =
            (words.first(), words.get(1), words.get(2), words.get(3))
        else {
            bail!("the server did not start: {line:?}");
        };
        let rest = url
            .strip_prefix("ws://")
            .ok_or_else(|| anyhow!("unexpected server URL {url}"))?;
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let addr: SocketAddr = authority.parse()?;
        let mut pids = vec![proc.0.id()];
        if let (Some(&"workers"), Some(list)) = (words.get(4), words.get(5)) {
            for p in list.split(',') {
                pids.push(p.parse()?);
            }
        }
        Ok(ServerProc {
            procs: vec![proc],
            key: Some(key),
            addr,
            path: if path.is_empty() {
                "/".into()
            } else {
                path.into()
            },
            identity: (*identity != "none").then(|| identity.to_string()),
            pids,
        })
    }

    /// `workers` raw TCP echo processes on one port (the first picks it, SO_REUSEPORT).
    pub(super) fn start_echo(workers: usize) -> anyhow::Result<Self> {
        let mut procs = Vec::new();
        let mut port = 0u16;
        for _ in 0..workers.max(1) {
            let child = crate::process::command(&["scale-echo", &port.to_string()])?;
            let (proc, line) = spawn_ready(child, "an echo worker")?;
            procs.push(proc);
            port = line
                .strip_prefix("listening ")
                .and_then(|p| p.trim().parse().ok())
                .ok_or_else(|| anyhow!("the echo worker did not start: {line:?}"))?;
        }
        let pids = procs.iter().map(|p| p.0.id()).collect();
        Ok(ServerProc {
            procs,
            key: None,
            addr: SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port),
            path: "/".into(),
            identity: None,
            pids,
        })
    }

    pub(super) fn rss(&self) -> u64 {
        self.pids
            .iter()
            .filter_map(|&p| crate::process::rss_bytes(p).ok())
            .sum()
    }

    pub(super) fn cpu(&self) -> f64 {
        self.pids
            .iter()
            .filter_map(|&p| crate::process::cpu_seconds(p).ok())
            .sum()
    }

    pub(super) fn check_alive(&mut self) -> anyhow::Result<()> {
        for proc in &mut self.procs {
            if let Ok(Some(status)) = proc.0.try_wait() {
                bail!("the server exited: {status}");
            }
        }
        Ok(())
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        if let Some(key) = &self.key {
            let _ = std::fs::remove_file(key);
        }
    }
}

/// The load-generator processes and their event stream.
pub(super) struct Clients {
    pub(super) procs: Vec<(Reaped, std::process::ChildStdin)>,
    pub(super) events: mpsc::Receiver<(usize, anyhow::Result<Event>)>,
    /// Connections each process holds at the last progress report.
    pub(super) opened: Vec<usize>,
    /// Connections wanted over all processes (the bar's length).
    pub(super) wanted: usize,
}

impl Clients {
    pub(super) fn start(specs: Vec<ClientSpec>, wanted: usize) -> anyhow::Result<Clients> {
        let (tx, events) = mpsc::channel();
        let mut procs = Vec::new();
        let n = specs.len();
        for spec in specs {
            let index = spec.index;
            let mut child =
                crate::process::command(&["scale-client", &serde_json::to_string(&spec)?])?
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::inherit())
                    .spawn()
                    .context("cannot start a load-generator process")?;
            let stdout = child.stdout.take().context("client stdout")?;
            let stdin = child.stdin.take().context("client stdin")?;
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let event = line
                        .map_err(anyhow::Error::from)
                        .and_then(|l| serde_json::from_str::<Event>(&l).map_err(Into::into));
                    let failed = event.is_err();
                    if tx.send((index, event)).is_err() || failed {
                        return;
                    }
                }
                let _ = tx.send((index, Err(anyhow!("client {index} exited"))));
            });
            procs.push((Reaped(child), stdin));
        }
        let mut clients = Clients {
            procs,
            events,
            opened: vec![0; n],
            wanted,
        };
        clients.collect(&(0..n).collect::<Vec<_>>(), Duration::from_secs(30), |e| {
            matches!(e, Event::Ready { .. })
        })?;
        Ok(clients)
    }

    pub(super) fn send(&mut self, index: usize, command: &Command) -> anyhow::Result<()> {
        let (_, stdin) = self
            .procs
            .get_mut(index)
            .ok_or_else(|| anyhow!("no client {index}"))?;
        writeln!(stdin, "{}", serde_json::to_string(command)?)?;
        stdin.flush()?;
        Ok(())
    }

    pub(super) fn pids(&self) -> Vec<u32> {
        self.procs.iter().map(|(p, _)| p.0.id()).collect()
    }

    pub(super) fn rss(&self) -> u64 {
        self.pids()
            .into_iter()
            .filter_map(|p| crate::process::rss_bytes(p).ok())
            .sum()
    }

    pub(super) fn cpu(&self) -> f64 {
        self.pids()
            .into_iter()
            .filter_map(|p| crate::process::cpu_seconds(p).ok())
            .sum()
    }

    /// Waits for one event matching `done` from each of `from`, showing progress on stderr.
    pub(super) fn collect(
        &mut self,
        from: &[usize],
        limit: Duration,
        done: impl Fn(&Event) -> bool,
    ) -> anyhow::Result<Vec<(usize, Event)>> {
        let deadline = Instant::now() + limit;
        let mut got: Vec<(usize, Event)> = Vec::new();
        let mut last_shown = Instant::now();
        let mut bar: Option<Steps> = None;
        while got.len() < from.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!("the load generators did not answer within {limit:?}");
            }
            let (index, event) = match self.events.recv_timeout(left.min(Duration::from_secs(1))) {
                Ok(x) => x,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => bail!("the load generators exited"),
            };
            let event = event?;
            if let Event::Progress { opened } = event {
                if let Some(o) = self.opened.get_mut(index) {
                    *o = opened;
                }
                let open = self.opened.iter().sum::<usize>();
                let steps = bar.get_or_insert_with(|| Steps::new("scale:  ", self.wanted as u64));
                steps.phase("connections open");
                steps.set(open as u64);
                if !steps.is_bar() && last_shown.elapsed() >= Duration::from_secs(1) {
                    last_shown = Instant::now();
                    steps.line(&format!("scale:   {open} connections open"));
                }
                continue;
            }
            if from.contains(&index) && done(&event) {
                if let Event::Opened { opened, .. } = &event
                    && let Some(o) = self.opened.get_mut(index)
                {
                    *o = *opened;
                }
                got.push((index, event));
            }
        }
        if let Some(steps) = bar {
            let open = self.opened.iter().sum::<usize>();
            steps.finish(&format!(" {open} connections open"));
        }
        Ok(got)
    }

    pub(super) fn quit(mut self) {
        for i in 0..self.procs.len() {
            let _ = self.send(i, &Command::Quit);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for (p, _) in &mut self.procs {
            while matches!(p.0.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // Reaped kills any still running.
    }
}
