//! `blerpc serve`: the demo service as a peripheral on any link.
//!
//! Prints one line to stdout once listening, for scripts and tests:
//!
//! ```text
//! listening tcp://127.0.0.1:40731 identity 3b6a27bc…   (64 hex digits, or `none` with --plaintext)
//! ```

use std::net::SocketAddr;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use blerpc::known_keys::to_hex;
use blerpc::link::tcp::TcpOptions;
use blerpc::link::tls::TlsServerConfig;
use blerpc::metrics::Metrics;
use blerpc::process::shutdown_signal;
use blerpc::server::Dispatch;
use blerpc::{Server, ServerConfig};
use blerpc_demo::{DemoLimits, DemoService, FlashImage, pb};
use clap::Args;
use serde::{Deserialize, Serialize};

use blerpc::link::connect::ConnectOptions;
use blerpc::link::listen::{ListenOptions, Listener};
use blerpc::link::url::LinkUrl;

use blerpc::identity;

use crate::keygen::load_seed_file;
use crate::links::listen_error;

/// `blerpc serve` options (serialised whole to each worker of `--workers`).
#[derive(Clone, Debug, PartialEq, Args, Serialize, Deserialize)]
pub struct ServeArgs {
    /// Where to listen: tcp://HOST:PORT, tls://HOST:PORT, ws://HOST:PORT[/PATH],
    /// wss://HOST:PORT[/PATH], serial:///dev/ttyX, or ble:// (BLE peripheral). Port 0 picks a
    /// free port; the `listening` line shows it. Needed unless --dial is given.
    #[arg(long, value_name = "URL", required_unless_present_any = ["dial", "worker"])]
    pub listen: Option<String>,
    /// Dial out instead of (or as well as) listening: connect to a device gateway at
    /// tcp://, tls://, ws:// or wss:// and serve over that connection, reconnecting with capped
    /// exponential backoff and jitter. Several gateways (repeated, or comma-separated: a
    /// fleet's): after a failure or a close the next is tried. Prints `dialling URL identity
    /// HEX` (the first URL).
    #[arg(
        long,
        value_name = "URL",
        value_delimiter = ',',
        conflicts_with = "workers"
    )]
    pub dial: Vec<String>,
    /// The longest wait between two dial attempts, in seconds (the first is 0.1 s, doubling,
    /// each drawn between half and all of its value).
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    pub dial_backoff_max: f64,
    /// Seconds without traffic after which a --dial tcp:// or tls:// connection is probed (every
    /// as many seconds; closed after 6 unanswered probes), so a gateway cut off is left for the
    /// next one. 0: the runtime's default (60 s, probes every 10 s).
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    pub dial_keepalive: f64,
    /// The CA that signed the gateway's certificate (PEM), for --dial tls:// or wss://.
    #[arg(long, value_name = "FILE", conflicts_with = "dial_tls_cert_pin")]
    pub dial_tls_ca: Option<PathBuf>,
    /// The gateway's own certificate (PEM), pinned, for --dial tls:// or wss://.
    #[arg(long, value_name = "FILE")]
    pub dial_tls_cert_pin: Option<PathBuf>,
    /// The identity seed file (64 hex digits, from `blerpc keygen`). Default: the file
    /// `blerpc keygen` writes by default ($XDG_CONFIG_HOME/blerpc/identity.key) if it exists,
    /// else a new key for this run only, which centrals cannot pin across restarts.
    #[arg(long, value_name = "FILE", conflicts_with = "plaintext")]
    pub identity: Option<PathBuf>,
    /// Serve without encryption (no identity, no key exchange). Centrals must opt in too.
    #[arg(long)]
    pub plaintext: bool,
    /// TLS certificate chain, PEM (for tls:// and wss://).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key, PEM (for tls:// and wss://).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve flash_read from this image file. Default: a synthetic image of --flash-size bytes.
    #[arg(long, value_name = "FILE", conflicts_with = "flash_size")]
    pub flash_image: Option<PathBuf>,
    /// Size of the synthetic flash image in bytes.
    #[arg(long, value_name = "N", default_value_t = 1 << 20)]
    pub flash_size: usize,
    /// The part of flash that flash_read may return, START..END (decimal or 0x hex). Default: all
    /// of it. The server refuses to start if the identity seed lies inside.
    #[arg(long, value_name = "START..END", value_parser = parse_range)]
    pub readable: Option<Range<u32>>,
    /// Serial baud rate (serial:// only).
    #[arg(long, value_name = "N")]
    pub baud: Option<u32>,
    /// Connections served at once (per worker). At the cap a newcomer evicts the oldest
    /// connection that has not completed setup (and the key exchange); with none, it is closed.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_connections: usize,
    /// Connections from one IP address that have not completed setup, at once (per worker).
    /// Default: no limit (at --max-connections, unproven connections are evicted first).
    #[arg(long, value_name = "N")]
    pub max_unproven_per_address: Option<usize>,
    /// Connections from one IP address at once (per worker). Default: no limit (devices behind
    /// one NAT share an address).
    #[arg(long, value_name = "N")]
    pub max_connections_per_address: Option<usize>,
    /// New connections one IP address may open per second (per worker), in bursts of up to
    /// --connection-burst; more are closed at once. 0: no limit.
    #[arg(long, value_name = "N", default_value_t = 100.0)]
    pub max_connection_rate: f64,
    /// New connections one IP address may open at once (per worker) before
    /// --max-connection-rate applies.
    #[arg(long, value_name = "N", default_value_t = 50.0)]
    pub connection_burst: f64,
    /// Seconds an IP address that exceeded --max-connection-rate is refused (on Linux its
    /// connections are dropped in the kernel, before accept). 0: no penalty.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub penalty: f64,
    /// Seconds an IP address stays on probation after its penalty: the kernel keeps only
    /// --probation-keep of its connection attempts, and a new penalty is twice the last (up
    /// to --max-penalty). 0: no probation.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    pub probation: f64,
    /// The share (0 to 1) of an IP address's connection attempts the kernel keeps while it is
    /// on probation (Linux; the rest are retransmitted by the client).
    #[arg(long, value_name = "SHARE", default_value_t = 0.125)]
    pub probation_keep: f64,
    /// Seconds the longest repeated penalty lasts.
    #[arg(long, value_name = "SECS", default_value_t = 160.0)]
    pub max_penalty: f64,
    /// What a connection closed for cause (setup deadline, key-exchange cap, requests before
    /// the key exchange, malformed frame, failed handshake) counts against its address's
    /// --max-connection-rate, in connections.
    #[arg(long, value_name = "N", default_value_t = 10.0)]
    pub offence_cost: f64,
    /// Seconds a connection has to complete setup (and the key exchange unless --plaintext)
    /// before it is closed.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub setup_timeout: f64,
    /// Each connection's setup deadline is --setup-timeout less a random part of up to this
    /// share of it (0 to 0.9), so sockets opened in one burst are not all closed in one instant;
    /// the TLS and WebSocket handshake deadlines (10 s) are spread the same way.
    #[arg(long, value_name = "SHARE", default_value_t = 0.2)]
    pub setup_spread: f64,
    /// TLS / WebSocket handshakes in progress at once (tls://, ws://, wss://); when all are
    /// taken, a newcomer drops the oldest one.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_handshakes: usize,
    /// Seconds a stream link (tcp://, tls://) allows for the rest of a container once the peer
    /// has begun one.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub container_timeout: f64,
    /// Seconds without traffic before TCP keepalive probes a connection (tcp://, tls://,
    /// ws://, wss://; then every 10 s, closed after 6 unanswered). 0: off.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub keepalive: f64,
    /// Seconds between checks for a quiet WebSocket peer (ws://, wss://): one silent for a
    /// whole interval is pinged, so a ping goes out after one to two intervals of silence.
    /// 0: never.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub ws_ping: f64,
    /// Seconds after a WebSocket ping within which some frame must come back, or the
    /// connection is closed as dead.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    pub ws_pong_timeout: f64,
    /// Serve the server's counters (refusals, evictions and closes by reason, connections open)
    /// in the Prometheus text format at http://ADDR/metrics. Not with --workers.
    #[arg(long, value_name = "ADDR", conflicts_with = "workers")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Serve from N processes sharing the port with SO_REUSEPORT (tcp://, tls://, ws://,
    /// wss://; Unix). The kernel spreads connections over them, and each worker has its own
    /// open-file limit. All workers use the same identity.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub workers: usize,
    /// Runtime threads per process (per worker with --workers). Default: 1 per worker when
    /// --workers is above 1 (the workers are the parallelism; one thread each saves the
    /// multi-threaded scheduler's wake-ups and hand-offs), otherwise one per CPU.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
    /// The listen backlog (capped by net.core.somaxconn).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub backlog: u32,
    /// The read buffer per connection in bytes (raised to one container if smaller).
    #[arg(long, value_name = "BYTES", default_value_t = 4096)]
    pub read_buffer: usize,
    /// Do not agree to the long-container extension on `tcp://`, `tls://` and `ws://`
    /// listeners: every client then gets classic containers of at most 244 bytes, as on BLE.
    #[arg(long)]
    pub classic_containers: bool,
    /// Internal: run as one worker of `--workers` (SO_REUSEPORT, exit with the parent): the
    /// options and the identity seed come from the parent on stdin, not from the command line.
    #[arg(long, hide = true)]
    pub worker: bool,
}

impl ServeArgs {
    /// Runtime threads this process runs on (see `--threads`).
    pub fn runtime_threads(&self) -> usize {
        match self.threads {
            Some(n) => usize::from(n),
            None if self.workers > 1 || self.worker => 1,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

fn parse_u32(s: &str) -> Result<u32, String> {
    let s = s.trim();
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("`{s}` is not a number (decimal or 0x hex)"))
}

/// Parses `START..END`.
pub fn parse_range(s: &str) -> Result<Range<u32>, String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("`{s}` is not a range: expected START..END, e.g. 0..0x10000"))?;
    let (a, b) = (parse_u32(a)?, parse_u32(b)?);
    if a > b {
        return Err(format!("range `{s}` ends before it starts"));
    }
    Ok(a..b)
}

/// Builds the demo server `serve` would run: identity, flash image with its readable range
/// (checked not to expose the seed), encryption setting.
pub fn build_server(args: &ServeArgs) -> anyhow::Result<(Server, Option<[u8; 32]>)> {
    build_server_with(args, load_seed(args)?.seed())
}

/// Where the identity comes from.
enum Seed {
    /// `--plaintext`: none.
    None,
    /// `--identity FILE`.
    Given([u8; 32]),
    /// The default file of `blerpc keygen`.
    Default([u8; 32], PathBuf),
    /// A new key for this run.
    New([u8; 32]),
}

impl Seed {
    fn seed(&self) -> Option<[u8; 32]> {
        match self {
            Seed::None => None,
            Seed::Given(s) | Seed::Default(s, _) | Seed::New(s) => Some(*s),
        }
    }
}

/// The seed, saying on stderr where it came from unless `--identity` named it.
fn load_announced(args: &ServeArgs) -> anyhow::Result<Option<[u8; 32]>> {
    let seed = load_seed(args)?;
    match &seed {
        Seed::Default(_, path) => {
            eprintln!("blerpc: identity from {} (`blerpc keygen`)", path.display());
        }
        Seed::New(_) => eprintln!(
            "blerpc: no --identity given and no {}: serving with a new key for this run \
             (create a lasting one with `blerpc keygen`)",
            blerpc::identity::default_path().display()
        ),
        Seed::None | Seed::Given(_) => {}
    }
    Ok(seed.seed())
}

fn load_seed(args: &ServeArgs) -> anyhow::Result<Seed> {
    if args.plaintext {
        return Ok(Seed::None);
    }
    if let Some(path) = &args.identity {
        return Ok(Seed::Given(load_seed_file(path)?));
    }
    let default = identity::default_path();
    if default.exists() {
        return Ok(Seed::Default(load_seed_file(&default)?, default));
    }
    Ok(Seed::New(identity::generate()))
}

fn build_server_with(
    args: &ServeArgs,
    seed: Option<[u8; 32]>,
) -> anyhow::Result<(Server, Option<[u8; 32]>)> {
    let built = build_servers(args, seed)?;
    Ok((built.server, built.public))
}

/// The server `serve` runs, with what a second server on the same service needs.
struct Built {
    server: Server,
    public: Option<[u8; 32]>,
    /// The service, shared by every server of the process.
    dispatch: Arc<dyn Dispatch>,
    config: ServerConfig,
}

fn build_servers(args: &ServeArgs, seed: Option<[u8; 32]>) -> anyhow::Result<Built> {
    let mut flash = match &args.flash_image {
        Some(path) => FlashImage::from_file(path)?,
        None => {
            if args.flash_size > u32::MAX as usize {
                bail!("--flash-size {} is larger than 4 GiB", args.flash_size);
            }
            FlashImage::synthetic(args.flash_size)
        }
    };
    if let Some(range) = &args.readable {
        flash = flash.with_readable(range.clone()).context("--readable")?;
    }
    if let Some(seed) = &seed {
        flash.ensure_not_exposed(seed).context(
            "refusing to start: move the readable range (--readable) away from the key, or use another identity",
        )?;
    }
    seconds("--setup-timeout", args.setup_timeout)?;
    if !(0.0..=0.9).contains(&args.setup_spread) {
        anyhow::bail!(
            "--setup-spread {} must be a share of the setup timeout from 0 to 0.9",
            args.setup_spread
        );
    }
    offence_cost("--offence-cost", args.offence_cost)?;
    if !(args.penalty.is_finite() && args.penalty >= 0.0) {
        anyhow::bail!(
            "--penalty {} must be a number of seconds (0: no penalty)",
            args.penalty
        );
    }
    for (flag, secs) in [
        ("--probation", args.probation),
        ("--max-penalty", args.max_penalty),
    ] {
        if !(secs.is_finite() && secs >= 0.0) {
            anyhow::bail!("{flag} {secs} must be a number of seconds");
        }
    }
    if !(0.0..=1.0).contains(&args.probation_keep) {
        anyhow::bail!(
            "--probation-keep {} must be a share from 0 (keep none) to 1 (keep all)",
            args.probation_keep
        );
    }
    let mut config = ServerConfig {
        identity: seed,
        max_connections: args.max_connections.max(1),
        max_unproven_per_address: args.max_unproven_per_address,
        max_connections_per_address: args.max_connections_per_address,
        connection_rate_per_address: connection_rate(
            ("--max-connection-rate", args.max_connection_rate),
            ("--connection-burst", args.connection_burst),
        )?,
        address_penalty: Duration::from_secs_f64(args.penalty),
        address_probation: Duration::from_secs_f64(args.probation),
        probation_keep: args.probation_keep,
        max_address_penalty: Duration::from_secs_f64(args.max_penalty),
        offence_cost: args.offence_cost,
        setup_deadline_spread: args.setup_spread,
        ..Default::default()
    };
    config.peripheral.require_encryption = !args.plaintext;
    config.peripheral.setup_timeout = Some(Duration::from_secs_f64(args.setup_timeout));
    let service = DemoService::new(flash, DemoLimits::default());
    // The reference's commands and `chat`, a stream both ways (the streams extension).
    let dispatch: Arc<dyn Dispatch> =
        Arc::new(blerpc_demo::chat::WithChat(pb::BlerpcServer::new(service)));
    let server = Server::new(dispatch.clone(), config.clone())
        .context("the server configuration is invalid")?;
    let public = server.identity_public();
    Ok(Built {
        server,
        public,
        dispatch,
        config,
    })
}

/// Runs `blerpc serve` on a runtime of [`ServeArgs::runtime_threads`] threads (the current
/// thread alone for one) until Ctrl-C or SIGTERM. A worker (`--worker`) takes its options and
/// identity from its parent on stdin first.
pub fn run_blocking(args: &ServeArgs) -> anyhow::Result<()> {
    if args.worker {
        let worker = workers::ServeWorker::read()?;
        let seed = worker.seed.as_ref().map(|s| *s.expose());
        return runtime(&worker.args)?.block_on(serve(&worker.args, seed));
    }
    let runtime = runtime(args)?;
    if args.workers > 1 {
        return runtime.block_on(workers::run(args));
    }
    runtime.block_on(async { serve(args, load_announced(args)?).await })
}

/// The runtime `args` asks for: [`ServeArgs::runtime_threads`] threads.
fn runtime(args: &ServeArgs) -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(blerpc::process::runtime(Some(args.runtime_threads()))?)
}

/// Serves with `seed` as the identity until Ctrl-C or SIGTERM.
async fn serve(args: &ServeArgs, seed: Option<[u8; 32]>) -> anyhow::Result<()> {
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsServerConfig::from_pem_files(cert, key)?),
        _ => None,
    };
    // A server holds a socket per connection: use the whole open-file allowance (the soft
    // limit is often 1,024, below --max-connections).
    let _ = blerpc::process::raise_nofile_limit();
    let built = build_servers(args, seed)?;
    let (server, public) = (built.server.clone(), built.public);
    if let Some(addr) = args.metrics {
        serve_metrics(addr, server.metrics()).await?;
    }
    let identity = public.map_or_else(|| "none".to_string(), |k| to_hex(&k));
    // Installed before the lines that say the server is ready.
    let shutdown = shutdown_signal();
    let dialing = if args.dial.is_empty() {
        None
    } else {
        Some(start_dialing(args, &args.dial, built, &identity)?)
    };
    let Some(listen) = &args.listen else {
        shutdown.await;
        if let Some(d) = dialing {
            d.abort();
        }
        return Ok(());
    };
    let url: LinkUrl = listen.parse()?;
    let listener = Listener::bind(
        &url,
        &ListenOptions {
            tls,
            baud_rate: args.baud,
            tcp: TcpOptions {
                reuse_port: args.worker,
                listen_backlog: args.backlog,
                read_buffer_size: args.read_buffer,
                long_containers: !args.classic_containers,
                container_timeout: seconds("--container-timeout", args.container_timeout)?,
                max_handshakes: args.max_handshakes.max(1),
                handshake_timeout_spread: args.setup_spread,
                metrics: Some(server.metrics()),
                keepalive: off_or_seconds("--keepalive", args.keepalive)?,
                ..Default::default()
            },
            ws_ping_interval: off_or_seconds("--ws-ping", args.ws_ping)?,
            ws_pong_timeout: seconds("--ws-pong-timeout", args.ws_pong_timeout)?,
        },
    )
    .await
    .map_err(listen_error)?;
    print_line(&format!("listening {} identity {identity}", listener.url()))?;
    listener
        .serve(&server, shutdown)
        .await
        .map_err(listen_error)
}

fn print_line(line: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .context("cannot write to stdout")
}

/// Starts `--dial URL…` on a task of its own; prints `dialling URL identity HEX`.
fn start_dialing(
    args: &ServeArgs,
    dial: &[String],
    built: Built,
    identity: &str,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let mut urls = Vec::new();
    for text in dial {
        let url: LinkUrl = text.parse().with_context(|| format!("--dial {text}"))?;
        if !url.is_ip() {
            bail!("cannot dial {url}: use tcp://, tls://, ws:// or wss://");
        }
        urls.push(url);
    }
    let tls = crate::links::tls_trust(
        args.dial_tls_ca.as_ref(),
        args.dial_tls_cert_pin.as_ref(),
        None,
    )?;
    let max = seconds("--dial-backoff-max", args.dial_backoff_max)?;
    let first = urls[0].clone();
    let dialer = blerpc_gateway::dial::Dialer {
        urls,
        options: ConnectOptions {
            tls,
            tcp_keepalive: off_or_seconds("--dial-keepalive", args.dial_keepalive)?,
            ..ConnectOptions::default()
        },
        backoff: blerpc::backoff::Backoff::new(Duration::from_millis(100), max),
    };
    print_line(&format!("dialling {first} identity {identity}"))?;
    Ok(tokio::spawn(async move {
        // The gateway and relayed connections count in the same metrics (--metrics).
        let config = ServerConfig {
            metrics: Some(built.server.metrics()),
            ..built.config
        };
        if let Err(e) = dialer
            .run(built.dispatch, config, std::future::pending())
            .await
        {
            tracing::error!("dialling stopped: {e}");
        }
    }))
}

/// `--max-connection-rate`: `None` for 0, else the rate with bursts of twice as many.
/// A per-address connection rate from its flag (`(name, value)`: 0 for no limit) and its
/// burst's.
pub(crate) fn connection_rate(
    (rate_flag, per_second): (&str, f64),
    (burst_flag, burst): (&str, f64),
) -> anyhow::Result<Option<blerpc::server::ConnectionRate>> {
    if !(per_second.is_finite() && per_second >= 0.0) {
        bail!("{rate_flag} {per_second} must be a number of connections per second (0: no limit)");
    }
    if !(burst.is_finite() && burst >= 1.0) {
        bail!("{burst_flag} {burst} must be a number of connections, at least 1");
    }
    Ok((per_second > 0.0).then_some(blerpc::server::ConnectionRate { per_second, burst }))
}

/// What an offence costs its address, in connections; an error naming `flag` unless finite
/// and not negative.
pub(crate) fn offence_cost(flag: &str, value: f64) -> anyhow::Result<f64> {
    if !(value.is_finite() && value >= 0.0) {
        bail!("{flag} {value} must be a number of connections (0: offences cost nothing extra)");
    }
    Ok(value)
}

/// `value` seconds as a duration; an error naming `flag` unless positive and finite.
pub(crate) fn seconds(flag: &str, value: f64) -> anyhow::Result<Duration> {
    if !(value.is_finite() && value > 0.0 && value < 1e9) {
        bail!("{flag} {value} must be a positive number of seconds");
    }
    Ok(Duration::from_secs_f64(value))
}

/// As [`seconds`], with 0 meaning off.
pub(crate) fn off_or_seconds(flag: &str, value: f64) -> anyhow::Result<Option<Duration>> {
    if value == 0.0 {
        return Ok(None);
    }
    if !(value.is_finite() && value > 0.0 && value < 1e9) {
        bail!("{flag} {value} must be a positive number of seconds, or 0 for off");
    }
    Ok(Some(Duration::from_secs_f64(value)))
}

/// Serves `metrics` at `http://addr/metrics` (OpenMetrics text, which Prometheus reads) in the
/// background; fails if `addr` cannot be bound.
async fn serve_metrics(addr: SocketAddr, metrics: Arc<Metrics>) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("--metrics {addr}: cannot listen"))?;
    let bound = listener.local_addr().unwrap_or(addr);
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let text = metrics.render();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    text,
                )
            }
        }),
    );
    eprintln!("blerpc: metrics on http://{bound}/metrics");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!("metrics endpoint stopped: {e}");
        }
    });
    Ok(())
}

pub(crate) mod workers;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn ranges_parse() {
        assert_eq!(parse_range("0..0x10000").unwrap(), 0..0x10000);
        assert_eq!(parse_range("16..32").unwrap(), 16..32);
        assert!(parse_range("32..16").is_err());
        assert!(parse_range("12").is_err());
    }

    #[test]
    fn refuses_a_seed_inside_the_readable_flash() {
        let dir = tempfile::tempdir().unwrap();
        let seed = [0x5a; 32];
        let mut image = vec![0u8; 4096];
        image[1000..1032].copy_from_slice(&seed);
        let flash = dir.path().join("flash.bin");
        std::fs::write(&flash, &image).unwrap();
        let key = dir.path().join("id.key");
        identity::store(&key, &seed, false).unwrap();
        let mut args = ServeArgs {
            listen: Some("tcp://127.0.0.1:0".into()),
            dial: Vec::new(),
            dial_backoff_max: 5.0,
            dial_keepalive: 5.0,
            dial_tls_ca: None,
            dial_tls_cert_pin: None,
            identity: Some(key),
            plaintext: false,
            tls_cert: None,
            tls_key: None,
            flash_image: Some(flash),
            flash_size: 0,
            readable: None,
            baud: None,
            max_connections: 1024,
            max_unproven_per_address: None,
            max_connections_per_address: None,
            max_connection_rate: 100.0,
            connection_burst: 50.0,
            penalty: 10.0,
            probation: 30.0,
            probation_keep: 0.125,
            max_penalty: 160.0,
            offence_cost: 10.0,
            setup_timeout: 10.0,
            setup_spread: 0.2,
            container_timeout: 10.0,
            keepalive: 60.0,
            ws_ping: 60.0,
            ws_pong_timeout: 30.0,
            max_handshakes: 256,
            metrics: None,
            workers: 1,
            threads: None,
            backlog: 1024,
            read_buffer: 4096,
            classic_containers: false,
            worker: false,
        };
        let e = format!("{:#}", build_server(&args).unwrap_err());
        assert!(e.starts_with("refusing to start"), "{e}");
        assert!(e.contains("0x3e8"), "{e}");
        args.readable = Some(2048..4096);
        assert!(build_server(&args).is_ok());
        // Runtime threads: one per CPU alone, one per worker process, or as asked.
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(args.runtime_threads(), cpus);
        args.workers = 6;
        assert_eq!(args.runtime_threads(), 1);
        args.workers = 1;
        args.worker = true;
        assert_eq!(args.runtime_threads(), 1);
        args.threads = Some(3);
        assert_eq!(args.runtime_threads(), 3);
    }
}
