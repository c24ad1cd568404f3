//! `blerpc gateway --workers N`: N worker gateways share the device ports (`SO_REUSEPORT`,
//! [`blerpc::process::workers`]) and a front serves the public HTTP API, routing each device's
//! requests to the worker that holds it (`blerpc_gateway::cluster`).
//!
//! ```text
//! parent: reserve the device ports, bind the HTTP port, make an internal token
//!   ├── worker 0: blerpc gateway --worker   stdin: the parent's GatewayArgs (ports fixed,
//!   ├── ...                                        HTTP on loopback, its relay URL), its index
//!   │                                              and the token; prints `worker http ADDR`
//!   └── worker N-1
//! parent prints: devices <url> … and http http://ADDR, then serves the front
//! ```
//!
//! Each worker gets the parent's own [`GatewayArgs`] as one JSON value on its stdin, changed
//! only where a worker's part differs (its device URLs at the reserved ports, its HTTP API on
//! loopback, its relay URL through the front, `--worker` set). The front learns which worker holds
//! which device from each worker's typed presence stream over HTTP
//! (`blerpc_gateway::routing::claims`). Workers run on one thread each
//! (the workers are the parallelism), exit with the parent, and if one dies the parent stops
//! the others and exits.

use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use blerpc::link::url::LinkUrl;
use blerpc::process::workers::{self, Workers};
use blerpc_gateway::cluster::Front;
use serde::{Deserialize, Serialize};

use super::GatewayArgs;

/// How long the workers may take, in all, to print their first lines.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// What worker `index` gets on its stdin.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct GatewayWorker {
    /// The parent's options, with the worker's device URLs, HTTP address and relay URL.
    pub args: GatewayArgs,
    /// Which worker this is (its relay path at the front is `/w{index}`).
    pub index: usize,
    /// The token the front calls the worker's HTTP API with.
    pub token: String,
}

impl GatewayWorker {
    /// What worker `index` of `args` gets: the device listeners at `devices` (the reserved
    /// ports), its HTTP API on a loopback port of its own, relays through the front at `front`.
    pub fn new(
        args: &GatewayArgs,
        index: usize,
        devices: &[LinkUrl],
        front: SocketAddr,
        token: &str,
    ) -> GatewayWorker {
        let mut args = args.clone();
        args.devices = devices.iter().map(LinkUrl::to_string).collect();
        args.http = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        args.relay_url = Some(format!("ws://{front}/w{index}"));
        args.worker = true;
        GatewayWorker {
            args,
            index,
            token: token.to_string(),
        }
    }
}

/// Runs the parent of `--workers N`.
pub(super) async fn run(args: &GatewayArgs) -> anyhow::Result<()> {
    if args.devices.is_empty() {
        anyhow::bail!("--workers needs --devices URL (the workers share the device ports)");
    }
    if !args.ble.is_empty() {
        anyhow::bail!("--ble peripherals are held by one process: use it without --workers");
    }
    if args.nats.is_some() {
        anyhow::bail!(
            "--workers with --nats is not supported yet: on NATS, run N gateway processes, each \
             with --nats and its own --http and --devices ports; they form one fleet"
        );
    }
    if args.http_tls_cert.is_some() {
        anyhow::bail!(
            "--http-tls-cert with --workers is not supported yet: terminate TLS in front of the gateway, or run one process"
        );
    }
    let (config, _, _) = super::config(args)?;
    let http = super::bind_http(args.http)
        .with_context(|| format!("--http {}: cannot listen", args.http))?;
    let http_addr = http.local_addr()?;
    // Every device URL at a fixed port the workers share.
    let mut reserved = Vec::new();
    let mut urls = Vec::new();
    for url in &args.devices {
        let parsed: LinkUrl = url.parse().with_context(|| format!("--devices {url}"))?;
        let (socket, url) = workers::reserve(&parsed)?;
        urls.push(url);
        reserved.push(socket);
    }
    let internal = {
        let mut b = [0u8; 32];
        rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut b);
        hex::encode(b)
    };
    let (mut started, addrs) = Workers::start(
        args.workers,
        |_| workers::this_program([args.worker_subcommand.as_str(), "--worker"]),
        |k| GatewayWorker::new(args, k, &urls, http_addr, &internal),
        |_, line| {
            line.strip_prefix("worker http ")
                .and_then(|a| a.parse::<SocketAddr>().ok())
                .ok_or(())
        },
        START_TIMEOUT,
    )?;
    let front = Front::new(addrs, internal, config.tokens.clone());
    // Installed before the lines that say the gateway is ready.
    let shutdown = blerpc::process::shutdown_signal();
    {
        let mut out = std::io::stdout().lock();
        for u in &urls {
            writeln!(out, "devices {u}")?;
        }
        writeln!(out, "http http://{http_addr}")?;
        out.flush()?;
    }
    // The front's HTTP face has the limits the options give (the workers' are on loopback).
    let limits = blerpc_gateway::http::listener::HttpLimits::of(&config);
    let mut serving = tokio::spawn(front.serve(http, limits, shutdown));
    let result = started
        .watch(async {
            let _ = (&mut serving).await;
        })
        .await;
    started.stop();
    drop(reserved);
    result.map_err(|e| anyhow!("gateway {e}"))
}

/// Runs one worker: a whole gateway on the shared device ports, its HTTP API on loopback for
/// the front (which follows its devices through the API's presence stream).
pub(super) async fn run_worker(worker: GatewayWorker) -> anyhow::Result<()> {
    let GatewayWorker { args, index, token } = worker;
    let (mut config, schema, guard) = super::config(&args)?;
    config.tokens = vec![token];
    let gateway = blerpc_gateway::Gateway::with_schema(config, schema, guard)?;
    let http = tokio::net::TcpListener::bind(args.http).await?;
    let addr = http.local_addr()?;
    super::bind_devices(&args, &gateway, true).await?;
    let shutdown = blerpc::process::shutdown_signal();
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "worker http {addr}")?;
        out.flush()?;
    }
    tracing::debug!("gateway worker {index} on {addr}");
    blerpc_gateway::http::serve(gateway, http, shutdown).await?;
    Ok(())
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
        assert_eq!((got.index, got.token.len()), (1, 64));
    }
}
