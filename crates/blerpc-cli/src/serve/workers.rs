//! `blerpc serve --workers N`: N worker processes share one port with `SO_REUSEPORT`.
//!
//! ```text
//! parent: reserve the port (a bound, never listening SO_REUSEPORT socket), pick the identity
//!   ├── worker 1: blerpc serve --listen <url with the port> --worker   (seed in hex on stdin)
//!   ├── ...                                                            each prints `listening`
//!   └── worker N
//! parent prints: listening <url> identity <hex|none> workers <pid>,<pid>,...
//! ```
//!
//! The kernel spreads incoming connections over the listening workers by a hash of the
//! connection's addresses, so each worker has its own accept queue, event loop and open-file
//! limit. The parent stops the workers (SIGTERM, then SIGKILL after a grace period) on Ctrl-C or
//! SIGTERM, and stops all of them if one dies. Workers exit with the parent (`PR_SET_PDEATHSIG`).

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{SocketAddr, ToSocketAddrs as _};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use blerpc::known_keys::to_hex;
use blerpc::link::url::LinkUrl;

use super::{ServeArgs, load_announced};

/// How long a worker may take to print its `listening` line.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the workers get to shut down gracefully before they are killed.
const STOP_GRACE: Duration = Duration::from_secs(8);

/// Reads the identity seed a worker gets from its parent: 64 hex digits, or `none`.
pub(super) fn read_seed(args: &ServeArgs) -> anyhow::Result<Option<[u8; 32]>> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("worker: reading the identity from stdin")?;
    let line = line.trim();
    if line == "none" {
        if !args.plaintext {
            bail!("worker: no identity given, and --plaintext is not set");
        }
        return Ok(None);
    }
    let bytes = hex::decode(line).context("worker: the identity on stdin is not hex")?;
    let seed: [u8; 32] = bytes
        .try_into()
        .map_err(|_| anyhow!("worker: the identity on stdin is not 32 bytes"))?;
    Ok(Some(seed))
}

/// Reserves `url`'s port (the port the kernel picks for 0) for workers to share: the
/// reserving socket (keep it while the workers run) and the URL with the port.
#[cfg(unix)]
pub(crate) fn reserve_url(url: &LinkUrl) -> anyhow::Result<(socket2::Socket, LinkUrl)> {
    let addr = url
        .authority()
        .ok_or_else(|| anyhow!("{url} is not a tcp://, tls://, ws:// or wss:// address"))?
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {url}"))?
        .next()
        .ok_or_else(|| anyhow!("{url} resolves to no address"))?;
    let reserved = reserve_port(addr)?;
    let port = reserved
        .local_addr()?
        .as_socket()
        .map(|a| a.port())
        .ok_or_else(|| anyhow!("the reserved socket has no port"))?;
    Ok((reserved, url.with_port(port)))
}

#[cfg(not(unix))]
pub(crate) fn reserve_url(_: &LinkUrl) -> anyhow::Result<(std::net::TcpListener, LinkUrl)> {
    bail!("--workers needs SO_REUSEPORT (Unix only)")
}

/// Binds `addr` with SO_REUSEADDR and SO_REUSEPORT without listening: the port is ours, the
/// workers bind it too, and this socket never receives a connection.
#[cfg(unix)]
fn reserve_port(addr: SocketAddr) -> anyhow::Result<socket2::Socket> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket
        .bind(&addr.into())
        .with_context(|| format!("cannot bind {addr}"))?;
    Ok(socket)
}

#[cfg(not(unix))]
fn reserve_port(_: SocketAddr) -> anyhow::Result<std::net::TcpListener> {
    bail!("--workers needs SO_REUSEPORT (Unix only)")
}

/// The worker's command line: the parent's options, the fixed port, `--worker`.
fn worker_command(args: &ServeArgs, url: &LinkUrl) -> anyhow::Result<Command> {
    let exe = std::env::current_exe().context("cannot find the blerpc executable")?;
    let mut c = Command::new(exe);
    c.arg("serve")
        .arg("--listen")
        .arg(url.to_string())
        .arg("--worker")
        .arg("--max-connections")
        .arg(args.max_connections.to_string())
        .arg("--backlog")
        .arg(args.backlog.to_string())
        .arg("--read-buffer")
        .arg(args.read_buffer.to_string())
        .arg("--max-connection-rate")
        .arg(args.max_connection_rate.to_string())
        .arg("--connection-burst")
        .arg(args.connection_burst.to_string())
        .arg("--penalty")
        .arg(args.penalty.to_string())
        .arg("--probation")
        .arg(args.probation.to_string())
        .arg("--probation-keep")
        .arg(args.probation_keep.to_string())
        .arg("--max-penalty")
        .arg(args.max_penalty.to_string())
        .arg("--offence-cost")
        .arg(args.offence_cost.to_string())
        .arg("--setup-timeout")
        .arg(args.setup_timeout.to_string())
        .arg("--setup-spread")
        .arg(args.setup_spread.to_string())
        .arg("--container-timeout")
        .arg(args.container_timeout.to_string())
        .arg("--keepalive")
        .arg(args.keepalive.to_string())
        .arg("--ws-ping")
        .arg(args.ws_ping.to_string())
        .arg("--ws-pong-timeout")
        .arg(args.ws_pong_timeout.to_string())
        .arg("--max-handshakes")
        .arg(args.max_handshakes.to_string());
    if let Some(n) = args.max_unproven_per_address {
        c.arg("--max-unproven-per-address").arg(n.to_string());
    }
    if let Some(n) = args.max_connections_per_address {
        c.arg("--max-connections-per-address").arg(n.to_string());
    }
    if let Some(n) = args.threads {
        c.arg("--threads").arg(n.to_string());
    }
    if args.plaintext {
        c.arg("--plaintext");
    }
    if args.classic_containers {
        c.arg("--classic-containers");
    }
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        c.arg("--tls-cert").arg(cert).arg("--tls-key").arg(key);
    }
    match &args.flash_image {
        Some(image) => c.arg("--flash-image").arg(image),
        None => c.arg("--flash-size").arg(args.flash_size.to_string()),
    };
    if let Some(r) = &args.readable {
        c.arg("--readable").arg(format!("{}..{}", r.start, r.end));
    }
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    Ok(c)
}

struct Worker {
    child: Child,
    /// Kept open so a late write by the worker never meets a closed pipe.
    _stdout: BufReader<ChildStdout>,
}

/// Starts one worker and waits for its `listening` line.
fn start_worker(args: &ServeArgs, url: &LinkUrl, seed: &str) -> anyhow::Result<Worker> {
    let mut child = worker_command(args, url)?
        .spawn()
        .context("cannot start a worker")?;
    let started = (|| {
        let mut stdin = child.stdin.take().context("worker stdin")?;
        writeln!(stdin, "{seed}").context("cannot hand the identity to a worker")?;
        drop(stdin);
        let mut stdout = BufReader::new(child.stdout.take().context("worker stdout")?);
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .context("reading a worker's first line")?;
        if !line.starts_with("listening ") {
            bail!("a worker failed to start (see its error above)");
        }
        Ok(stdout)
    })();
    match started {
        Ok(stdout) => Ok(Worker {
            child,
            _stdout: stdout,
        }),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(e)
        }
    }
}

/// Stops every worker: SIGTERM, then SIGKILL after [`STOP_GRACE`].
fn stop(workers: &mut [Worker]) {
    stop_children(workers.iter_mut().map(|w| &mut w.child).collect());
}

/// Stops child processes: SIGTERM, then SIGKILL after [`STOP_GRACE`] (also `blerpc gateway
/// --workers`).
pub(crate) fn stop_children(mut children: Vec<&mut Child>) {
    for c in children.iter_mut() {
        if matches!(c.try_wait(), Ok(None)) {
            let _ = crate::os::terminate(c.id());
        }
    }
    let deadline = Instant::now() + STOP_GRACE;
    for c in children.iter_mut() {
        loop {
            match c.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

/// Runs the parent of `--workers N`.
pub(super) async fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let url: LinkUrl = args
        .listen
        .as_deref()
        .context("--workers needs --listen")?
        .parse()?;
    if !url.is_ip() {
        bail!("--workers needs a tcp://, tls://, ws:// or wss:// address");
    }
    let (reserved, url) = reserve_url(&url)?;
    let seed = load_announced(args)?;
    let seed_line = seed.map_or_else(|| "none".to_string(), hex::encode);
    let public = seed
        .map(|s| blerpc::identity::public_key(&s))
        .transpose()?
        .map_or_else(|| "none".to_string(), |k| to_hex(&k));
    let started = Instant::now();
    let mut workers: Vec<Worker> = Vec::with_capacity(args.workers);
    for _ in 0..args.workers {
        // Spawned from this (the main) thread: PR_SET_PDEATHSIG follows the spawning thread.
        match start_worker(args, &url, &seed_line) {
            Ok(w) => workers.push(w),
            Err(e) => {
                stop(&mut workers);
                return Err(e);
            }
        }
        if started.elapsed() > START_TIMEOUT {
            stop(&mut workers);
            bail!("workers took longer than {START_TIMEOUT:?} to start");
        }
    }
    let pids: Vec<String> = workers.iter().map(|w| w.child.id().to_string()).collect();
    {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "listening {url} identity {public} workers {}",
            pids.join(",")
        )
        .and_then(|()| out.flush())
        .context("cannot write to stdout")?;
    }
    let shutdown = super::shutdown_signal();
    tokio::pin!(shutdown);
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let result = loop {
        tokio::select! {
            () = &mut shutdown => break Ok(()),
            _ = tick.tick() => {
                if let Some(pid) = workers
                    .iter_mut()
                    .find_map(|w| (!matches!(w.child.try_wait(), Ok(None))).then(|| w.child.id()))
                {
                    break Err(anyhow!("worker {pid} exited; stopping the others"));
                }
            }
        }
    };
    stop(&mut workers);
    drop(reserved);
    result
}
