//! `blerpc gateway --workers N`: N worker gateways share the device ports (`SO_REUSEPORT`) and
//! a front serves the public HTTP API, routing each device's requests to the worker that holds
//! it (`blerpc_gateway::cluster`).
//!
//! ```text
//! parent: reserve the device ports, bind the HTTP port, make an internal token
//!   ├── worker 0: blerpc gateway --worker 0 --devices <url with the port> --http 127.0.0.1:0 …  (token on stdin)
//!   ├── ...           each prints `worker http ADDR`, then `+ ID` / `- ID` as devices come and go
//!   └── worker N-1
//! parent prints: devices <url> … and http http://ADDR, then serves the front
//! ```
//!
//! Workers run on one thread each (the workers are the parallelism), exit with the parent, and
//! if one dies the parent stops the others and exits.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use blerpc_gateway::cluster::Front;

use blerpc::link::url::LinkUrl;

use super::GatewayArgs;
use crate::serve::workers::{reserve_url, stop_children};

/// The options a worker gets from its parent, besides the device URLs, its HTTP address and
/// its relay URL.
fn passed_on(args: &GatewayArgs) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    let mut opt = |name: &str, value: String| {
        a.push(format!("--{name}"));
        a.push(value);
    };
    if let Some(p) = &args.known_devices {
        opt("known-devices", p.display().to_string());
    }
    if let Some(p) = &args.schema {
        opt("schema", p.display().to_string());
    }
    if let Some(s) = &args.service {
        opt("service", s.clone());
    }
    if let (Some(c), Some(k)) = (&args.tls_cert, &args.tls_key) {
        opt("tls-cert", c.display().to_string());
        opt("tls-key", k.display().to_string());
    }
    opt("max-in-flight", args.max_in_flight.to_string());
    opt("max-queued", args.max_queued.to_string());
    opt("default-deadline-ms", args.default_deadline_ms.to_string());
    opt("max-deadline-ms", args.max_deadline_ms.to_string());
    opt("setup-timeout", args.setup_timeout.to_string());
    opt("max-pending-setups", args.max_pending_setups.to_string());
    opt("max-devices", args.max_devices.to_string());
    opt("max-relays", args.max_relays.to_string());
    opt("max-connection-rate", args.max_connection_rate.to_string());
    opt("connection-burst", args.connection_burst.to_string());
    opt("penalty", args.penalty.to_string());
    if args.enroll {
        a.push("--enroll".into());
    }
    if args.allow_plaintext {
        a.push("--allow-plaintext".into());
    }
    a
}

/// Reads the internal token a worker gets from its parent on stdin.
pub(super) fn read_token() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("worker: reading the internal token from stdin")?;
    let token = line.trim().to_string();
    if token.len() < 32 {
        bail!("worker: no internal token on stdin");
    }
    Ok(token)
}

/// Runs the parent of `--workers N`.
pub(super) async fn run(args: &GatewayArgs) -> anyhow::Result<()> {
    let n = args.workers;
    if args.devices.is_empty() {
        bail!("--workers needs --devices URL (the workers share the device ports)");
    }
    if !args.ble.is_empty() {
        bail!("--ble peripherals are held by one process: use it without --workers");
    }
    if args.http_tls_cert.is_some() {
        bail!(
            "--http-tls-cert with --workers is not supported yet: terminate TLS in front of the gateway, or run one process"
        );
    }
    let (config, _, _) = super::config(args)?;
    let http = tokio::net::TcpListener::bind(args.http)
        .await
        .with_context(|| format!("--http {}: cannot listen", args.http))?;
    let http_addr = http.local_addr()?;
    // Every device URL at a fixed port the workers share.
    let mut reserved = Vec::new();
    let mut urls = Vec::new();
    for url in &args.devices {
        let parsed: LinkUrl = url.parse()?;
        if !parsed.is_ip() {
            bail!("--devices {url}: devices connect over tcp://, tls://, ws:// or wss://");
        }
        let (socket, url) = reserve_url(&parsed)?;
        urls.push(url);
        reserved.push(socket);
    }
    let internal = {
        let mut b = [0u8; 32];
        rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut b);
        hex::encode(b)
    };
    let common = passed_on(args);
    let mut children: Vec<Child> = Vec::new();
    let mut addrs = Vec::new();
    let mut readers = Vec::new();
    for k in 0..n {
        let exe = std::env::current_exe().context("cannot find the blerpc executable")?;
        let mut c = Command::new(exe);
        c.arg(&args.worker_subcommand)
            .args(["--worker", &k.to_string()])
            .args(["--http", "127.0.0.1:0"])
            .args(["--relay-url", &format!("ws://{http_addr}/w{k}")]);
        for u in &urls {
            c.args(["--devices", &u.to_string()]);
        }
        c.args(&common)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // Spawned from this thread: PR_SET_PDEATHSIG follows the spawning thread.
        let mut child = c.spawn().context("cannot start a gateway worker")?;
        let started = (|| {
            let mut stdin = child.stdin.take().context("worker stdin")?;
            writeln!(stdin, "{internal}").context("cannot hand the token to a worker")?;
            drop(stdin);
            let mut out = BufReader::new(child.stdout.take().context("worker stdout")?);
            let mut line = String::new();
            out.read_line(&mut line)
                .context("reading a worker's first line")?;
            let addr: SocketAddr = line
                .trim()
                .strip_prefix("worker http ")
                .ok_or_else(|| anyhow!("gateway worker {k} failed to start (see its error above)"))?
                .parse()?;
            anyhow::Ok((addr, out))
        })();
        match started {
            Ok((addr, out)) => {
                addrs.push(addr);
                readers.push(out);
                children.push(child);
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                stop_children(children.iter_mut().collect());
                return Err(e);
            }
        }
    }
    let front = Front::new(addrs, internal, config.tokens.clone());
    for (k, out) in readers.into_iter().enumerate() {
        let front = front.clone();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if let Some(id) = line.strip_prefix("+ ") {
                    front.device_event(k, id, true);
                } else if let Some(id) = line.strip_prefix("- ") {
                    front.device_event(k, id, false);
                }
            }
        });
    }
    {
        let mut out = std::io::stdout().lock();
        for u in &urls {
            writeln!(out, "devices {u}")?;
        }
        writeln!(out, "http http://{http_addr}")?;
        out.flush()?;
    }
    let serving = tokio::spawn(front.serve(http, crate::serve::shutdown_signal()));
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let result = loop {
        tick.tick().await;
        if serving.is_finished() {
            break Ok(());
        }
        if let Some(pid) = children
            .iter_mut()
            .find_map(|c| (!matches!(c.try_wait(), Ok(None))).then(|| c.id()))
        {
            break Err(anyhow!("gateway worker {pid} exited; stopping the others"));
        }
    };
    stop_children(children.iter_mut().collect());
    drop(reserved);
    result
}

/// Runs one worker: a whole gateway on the shared device ports, its HTTP API on loopback for
/// the front, its device events on stdout.
pub(super) async fn run_worker(args: &GatewayArgs, k: usize) -> anyhow::Result<()> {
    crate::os::die_with_parent();
    let token = read_token()?;
    let (mut config, schema, guard) = super::config(args)?;
    config.tokens = vec![token];
    let gateway = blerpc_gateway::Gateway::with_schema(config, schema, guard)?;
    let mut events = gateway.device_events();
    let http = tokio::net::TcpListener::bind(args.http).await?;
    let addr = http.local_addr()?;
    super::bind_devices(args, &gateway, true).await?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "worker http {addr}")?;
        out.flush()?;
    }
    tokio::spawn(async move {
        let mut out = std::io::stdout();
        while let Some((id, online)) = events.recv().await {
            let sign = if online { '+' } else { '-' };
            if writeln!(out, "{sign} {id}")
                .and_then(|()| out.flush())
                .is_err()
            {
                return;
            }
        }
    });
    tracing::debug!("gateway worker {k} on {addr}");
    blerpc_gateway::http::serve(gateway, http, crate::serve::shutdown_signal()).await?;
    Ok(())
}
