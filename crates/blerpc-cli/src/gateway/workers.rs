//! `blerpc gateway --workers N`: N worker gateways share the device ports (`SO_REUSEPORT`,
//! [`blerpc::process::workers`]) and a front serves the public HTTP API, routing each device's
//! requests to the worker that holds it.
//!
//! ```text
//! parent: reserve the device ports, bind the HTTP port (and, with --nats, join the fleet)
//!   ├── worker 0: blerpc gateway --worker   stdin: the parent's GatewayArgs (ports fixed,
//!   ├── ...                                        its HTTP address and relay URL, its fleet
//!   │                                              name), its index and the internal token;
//!   │                                              prints `worker http ADDR`
//!   └── worker N-1
//! parent prints: devices <url> … and http http://ADDR (with --nats: fleet NAME and a
//! `worker NAME URL pid PID` line per worker), then serves the front
//! ```
//!
//! Each worker gets the parent's own [`GatewayArgs`] as one JSON value on its stdin, changed
//! only where a worker's part differs (its device URLs at the reserved ports, `--worker` set,
//! and as below). Workers run on one thread each (the workers are the parallelism) and exit
//! with the parent.
//!
//! How the front routes depends on `--nats`:
//!
//! - without it, the front's directory is its own (`blerpc_gateway::cluster`): each worker
//!   serves its HTTP API on loopback with an internal token, the front follows each one's typed
//!   presence stream over HTTP (`blerpc_gateway::routing::claims`), and relays go through the
//!   front (`/w{index}/v1/relay/…`). If a worker dies the parent stops the others and exits.
//! - with it, every process is a gateway of the NATS fleet: worker `k` joins as
//!   `{name}-w{k}` and holds the devices that dial into it, serving its API (and its devices'
//!   relays) on a port of its own at the `--http` address; the front joins as `{name}`, holds
//!   no device, and routes every request through the fleet's routing as any gateway of the
//!   fleet does. A worker that dies leaves the fleet; its devices redial the shared port and
//!   land on the others, so the front goes on serving while one worker lives.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use blerpc::link::url::LinkUrl;
use blerpc::process::workers::{self, WorkerError, Workers};
use blerpc_gateway::cluster::Front;
use serde::{Deserialize, Serialize};

use super::{Bound, GatewayArgs};

/// How long the workers may take, in all, to print their first lines.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long after a worker's exit it is started again (`--worker-restarts`).
const RESTART_DELAY: Duration = Duration::from_secs(1);

/// The window `--worker-restarts` counts one worker's restarts in.
const RESTART_WINDOW: Duration = Duration::from_secs(600);

/// Each worker's restarts within the last [`RESTART_WINDOW`], against a limit.
struct Restarts {
    limit: usize,
    at: std::collections::HashMap<usize, Vec<std::time::Instant>>,
}

impl Restarts {
    fn new(limit: usize) -> Restarts {
        Restarts {
            limit,
            at: std::collections::HashMap::new(),
        }
    }

    /// Whether worker `index` may be started again at `now` (counted if so).
    fn allow(&mut self, index: usize, now: std::time::Instant) -> bool {
        let times = self.at.entry(index).or_default();
        times.retain(|t| now.duration_since(*t) < RESTART_WINDOW);
        if times.len() >= self.limit {
            return false;
        }
        times.push(now);
        true
    }
}

/// What worker `index` gets on its stdin.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct GatewayWorker {
    /// The parent's options, with the worker's device URLs, HTTP address, relay URL and (in a
    /// fleet) name.
    pub args: GatewayArgs,
    /// Which worker this is (its relay path at the front is `/w{index}`).
    pub index: usize,
    /// The token the front calls the worker's HTTP API with; `None` in a fleet, where the
    /// worker's API is a gateway's like any other (the backends' `--tokens`).
    pub token: Option<String>,
}

impl GatewayWorker {
    /// `args` for worker `index`: the device listeners at `devices` (the reserved ports).
    fn args(args: &GatewayArgs, devices: &[LinkUrl]) -> GatewayArgs {
        let mut args = args.clone();
        args.devices = devices.iter().map(LinkUrl::to_string).collect();
        args.worker = true;
        args
    }

    /// What worker `index` of `args` gets behind a front of its own (no `--nats`): its HTTP API
    /// on a loopback port of its own, relays through the front at `front`.
    pub fn new(
        args: &GatewayArgs,
        index: usize,
        devices: &[LinkUrl],
        front: SocketAddr,
        token: &str,
    ) -> GatewayWorker {
        let mut args = GatewayWorker::args(args, devices);
        args.http = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        args.relay_url = Some(format!("ws://{front}/w{index}"));
        GatewayWorker {
            args,
            index,
            token: Some(token.to_string()),
        }
    }

    /// What worker `index` of `args` gets in a NATS fleet whose front is `fleet_name` at
    /// `front`: the name `{fleet_name}-w{index}`, and its HTTP API (and relay URL) on a port of
    /// its own at the front's address.
    pub fn in_fleet(
        args: &GatewayArgs,
        index: usize,
        devices: &[LinkUrl],
        front: SocketAddr,
        fleet_name: &str,
    ) -> GatewayWorker {
        let mut args = GatewayWorker::args(args, devices);
        args.http = SocketAddr::new(front.ip(), 0);
        args.nats_name = Some(format!("{fleet_name}-w{index}"));
        GatewayWorker {
            args,
            index,
            token: None,
        }
    }
}

/// Refuses what `--workers` cannot do with these options.
fn check(args: &GatewayArgs) -> anyhow::Result<()> {
    if args.devices.is_empty() {
        anyhow::bail!("--workers needs --devices URL (the workers share the device ports)");
    }
    if !args.ble.is_empty() {
        anyhow::bail!("--ble peripherals are held by one process: use it without --workers");
    }
    if args.nats.is_some() {
        if args.relay_url.is_some() {
            anyhow::bail!(
                "--relay-url with --workers and --nats: each worker's devices dial that worker's                  own HTTP port (at the --http address) for relayed links, so one base URL cannot                  serve them; drop --relay-url, or run one process per --relay-url"
            );
        }
    } else if args.http_tls_cert.is_some() {
        anyhow::bail!(
            "--http-tls-cert with --workers is supported with --nats only: terminate TLS in front of the gateway, or run one process"
        );
    }
    Ok(())
}

/// Runs the parent of `--workers N`.
pub(super) async fn run(args: &GatewayArgs) -> anyhow::Result<()> {
    check(args)?;
    let (config, schema, guard) = super::config(args)?;
    // Every device URL at a fixed port the workers share.
    let mut reserved = Vec::new();
    let mut urls = Vec::new();
    for url in &args.devices {
        let parsed: LinkUrl = url.parse().with_context(|| format!("--devices {url}"))?;
        let (socket, url) = workers::reserve(&parsed)?;
        urls.push(url);
        reserved.push(socket);
    }
    let devices: Vec<String> = urls.iter().map(|u| format!("devices {u}")).collect();
    let result = if args.nats.is_some() {
        // The front: a gateway of the fleet that holds no device.
        let front = Bound::new(args, config, schema, guard).await?;
        front.warn_if_open();
        fleet_front(args, &urls, devices, front).await
    } else {
        http_front(args, &urls, devices, config).await
    };
    drop(reserved);
    result
}

/// The workers' first line: `worker http ADDR`.
fn worker_http(line: &str) -> Result<SocketAddr, ()> {
    line.strip_prefix("worker http ")
        .and_then(|a| a.parse::<SocketAddr>().ok())
        .ok_or(())
}

/// The front of `--workers` without `--nats`: a directory of its own over the workers'
/// internal HTTP APIs.
async fn http_front(
    args: &GatewayArgs,
    urls: &[LinkUrl],
    mut lines: Vec<String>,
    config: blerpc_gateway::GatewayConfig,
) -> anyhow::Result<()> {
    let http = super::bind_http(args.http)
        .with_context(|| format!("--http {}: cannot listen", args.http))?;
    let http_addr = http.local_addr()?;
    let internal = {
        let mut b = [0u8; 32];
        rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut b);
        hex::encode(b)
    };
    let (mut started, addrs) = Workers::start(
        args.workers,
        |_| workers::this_program([args.worker_subcommand.as_str(), "--worker"]),
        |k| GatewayWorker::new(args, k, urls, http_addr, &internal),
        |_, line| worker_http(line),
        START_TIMEOUT,
    )?;
    let front = Front::new(addrs, internal, config.tokens.clone());
    // Installed before the lines that say the gateway is ready.
    let shutdown = blerpc::process::shutdown_signal();
    lines.push(format!("http http://{http_addr}"));
    super::print_lines(&lines)?;
    // The front's HTTP face has the limits the options give (the workers' are on loopback).
    let limits = blerpc_gateway::http::listener::HttpLimits::of(&config);
    let mut serving = tokio::spawn(front.serve(http, limits, shutdown));
    let result = started
        .watch(async {
            let _ = (&mut serving).await;
        })
        .await;
    started.stop();
    result.map_err(|e| anyhow!("gateway {e}; the other workers were stopped"))
}

/// The front of `--workers --nats`: a gateway of the fleet holding no device, which routes
/// through the fleet to the workers (and to every other gateway of the fleet).
async fn fleet_front(
    args: &GatewayArgs,
    urls: &[LinkUrl],
    mut lines: Vec<String>,
    front: Bound,
) -> anyhow::Result<()> {
    let Some(name) = front.fleet.as_ref().map(|f| f.node().to_string()) else {
        anyhow::bail!("--workers with --nats: the front has not joined the fleet");
    };
    let scheme = front.scheme();
    let (mut started, addrs) = Workers::start(
        args.workers,
        |_| workers::this_program([args.worker_subcommand.as_str(), "--worker"]),
        |k| GatewayWorker::in_fleet(args, k, urls, front.addr(), &name),
        |_, line| worker_http(line),
        START_TIMEOUT,
    )?;
    // Installed before the lines that say the gateway is ready.
    let shutdown = blerpc::process::shutdown_signal();
    lines.push(format!("http {}", front.url()));
    lines.push(format!("fleet {name}"));
    for (k, (addr, pid)) in addrs.iter().zip(started.pids()).enumerate() {
        lines.push(format!("worker {name}-w{k} {scheme}://{addr} pid {pid}"));
    }
    super::print_lines(&lines)?;
    let front_addr = front.addr();
    let mut serving = tokio::spawn(front.serve(shutdown));
    let mut served = None;
    let mut restarts = Restarts::new(args.worker_restarts);
    let watched = loop {
        let watched = started
            .watch(async {
                served = Some((&mut serving).await);
            })
            .await;
        let (index, e) = match watched {
            Err(e @ WorkerError::Exited { index, .. }) => (index, e),
            other => break other,
        };
        // The fleet moves a dead worker's devices to the others meanwhile.
        if !restarts.allow(index, std::time::Instant::now()) {
            if started.pids().is_empty() {
                break Err(e);
            }
            tracing::error!(
                "gateway {e}, its restarts used up ({} in {RESTART_WINDOW:?}); its devices stay on the other {} workers",
                args.worker_restarts,
                started.pids().len()
            );
            continue;
        }
        tracing::error!("gateway {e}; starting it again in {RESTART_DELAY:?}");
        tokio::time::sleep(RESTART_DELAY).await;
        let again = started.restart(
            index,
            |_| workers::this_program([args.worker_subcommand.as_str(), "--worker"]),
            |k| GatewayWorker::in_fleet(args, k, urls, front_addr, &name),
            |_, line| worker_http(line),
            START_TIMEOUT,
        );
        match again {
            Ok(addr) => {
                let pid = started.pids().last().copied().unwrap_or_default();
                super::print_lines(&[format!(
                    "worker {name}-w{index} {scheme}://{addr} pid {pid} restarted"
                )])?;
            }
            Err(e) => tracing::error!("gateway worker {index} did not start again: {e}"),
        }
    };
    started.stop();
    watched.map_err(|e| anyhow!("gateway {e}"))?;
    match served {
        Some(Ok(served)) => served,
        Some(Err(e)) => Err(anyhow!("the front stopped: {e}")),
        None => Ok(()),
    }
}

/// Runs one worker: a whole gateway on the shared device ports. Behind a front of its own, its
/// HTTP API is on loopback for the front (which follows its devices through the API's presence
/// stream); in a fleet it is one of the fleet's gateways.
pub(super) async fn run_worker(worker: GatewayWorker) -> anyhow::Result<()> {
    let GatewayWorker { args, index, token } = worker;
    let (mut config, schema, guard) = super::config(&args)?;
    if let Some(token) = token {
        // Behind the HTTP front: its API is on loopback, called only by the front with this
        // token. The front guards the backends' addresses; here every call comes from the
        // front's one address, which a backend's errors must not get penalized.
        config.tokens = vec![token];
        config.http_guard = blerpc::link::guard::GuardConfig {
            rate: None,
            penalty: Duration::ZERO,
            ..config.http_guard
        };
    }
    let bound = Bound::new(&args, config, schema, guard).await?;
    super::bind_devices(&args, &bound.gateway, true).await?;
    let shutdown = blerpc::process::shutdown_signal();
    super::print_lines(&[format!("worker http {}", bound.addr())])?;
    tracing::debug!("gateway worker {index} on {}", bound.addr());
    bound.serve(shutdown).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use clap::Parser as _;

    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        gateway: GatewayArgs,
    }

    /// Each worker has its own count of restarts, which the window forgets; 0 allows none.
    #[test]
    fn restarts_are_counted_per_worker_within_the_window() {
        let t0 = std::time::Instant::now();
        let mut r = Restarts::new(2);
        assert!(r.allow(0, t0));
        assert!(r.allow(0, t0 + Duration::from_secs(1)));
        assert!(!r.allow(0, t0 + Duration::from_secs(2)));
        assert!(r.allow(1, t0 + Duration::from_secs(2)));
        assert!(r.allow(0, t0 + RESTART_WINDOW + Duration::from_secs(1)));
        assert!(!Restarts::new(0).allow(0, t0));
    }

    /// A worker gets every option as the parent parsed it, changed only where its part
    /// differs: the same value serialised, not a list of flags.
    #[test]
    fn a_worker_gets_the_parents_options() {
        let parent = Cli::try_parse_from([
            "gateway",
            "--devices",
            "tcp://127.0.0.1:0",
            "--devices",
            "ws://127.0.0.1:0/d",
            "--enroll",
            "--tokens",
            "/t",
            "--max-queued",
            "9",
            "--penalty",
            "0.5",
            "--workers",
            "2",
        ])
        .unwrap()
        .gateway;
        let devices: Vec<LinkUrl> = ["tcp://127.0.0.1:7001", "ws://127.0.0.1:7002/d"]
            .iter()
            .map(|u| u.parse().unwrap())
            .collect();
        let front: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let sent = GatewayWorker::new(&parent, 1, &devices, front, "k".repeat(64).as_str());
        let json = serde_json::to_string(&sent).unwrap();
        let got: GatewayWorker = serde_json::from_str(&json).unwrap();
        let mut want = parent.clone();
        want.devices = vec![
            "tcp://127.0.0.1:7001".into(),
            "ws://127.0.0.1:7002/d".into(),
        ];
        want.http = "127.0.0.1:0".parse().unwrap();
        want.relay_url = Some("ws://127.0.0.1:8080/w1".into());
        want.worker = true;
        assert_eq!(got.args, want);
        assert_eq!((got.index, got.token.map(|t| t.len())), (1, Some(64)));
    }

    /// In a fleet a worker is a gateway of its own: named after the front, its API on the
    /// front's address, its relays on its own port, the backends' tokens.
    #[test]
    fn a_fleet_worker_is_named_after_the_front_and_serves_its_own_api() {
        let parent = Cli::try_parse_from([
            "gateway",
            "--devices",
            "tcp://0.0.0.0:0",
            "--enroll",
            "--nats",
            "nats://127.0.0.1:4222",
            "--workers",
            "2",
        ])
        .unwrap()
        .gateway;
        let devices: Vec<LinkUrl> = vec!["tcp://0.0.0.0:7001".parse().unwrap()];
        let front: SocketAddr = "10.0.0.5:8080".parse().unwrap();
        let got = GatewayWorker::in_fleet(&parent, 1, &devices, front, "edge");
        assert_eq!(got.args.nats_name.as_deref(), Some("edge-w1"));
        assert_eq!(got.args.http, "10.0.0.5:0".parse().unwrap());
        assert_eq!(got.args.relay_url, None);
        assert_eq!(got.args.devices, ["tcp://0.0.0.0:7001"]);
        assert!(got.args.worker);
        assert_eq!(got.token, None);
    }

    #[test]
    fn combinations_that_cannot_work_are_refused() {
        let refused = |extra: &[&str]| {
            let mut argv = vec![
                "gateway",
                "--devices",
                "tcp://127.0.0.1:0",
                "--workers",
                "2",
            ];
            argv.extend_from_slice(extra);
            check(&Cli::try_parse_from(argv).unwrap().gateway)
                .err()
                .map(|e| e.to_string())
        };
        let nats = ["--nats", "nats://127.0.0.1:4222"];
        assert_eq!(refused(&nats), None);
        let relay = refused(&[&nats[..], &["--relay-url", "ws://h:1"]].concat()).unwrap();
        assert!(relay.contains("--relay-url"), "{relay}");
        let tls = ["--http-tls-cert", "c.pem", "--http-tls-key", "k.pem"];
        assert_eq!(refused(&[&nats[..], &tls[..]].concat()), None);
        assert!(refused(&tls).unwrap().contains("--nats only"));
        assert!(refused(&["--ble", "x"]).unwrap().contains("--ble"));
    }
}
