//! `blerpc gateway`: devices dial in (or are reached over BLE), backends call them over HTTP
//! (see the `blerpc-gateway` crate).
//!
//! Prints one line per listener to stdout once ready, for scripts and tests:
//!
//! ```text
//! devices tcp://127.0.0.1:40731
//! http http://127.0.0.1:8080
//! fleet gw-a          (with --nats: the gateway's name in the fleet)
//! worker gw-a-w0 http://127.0.0.1:40733 pid 4242   (with --workers and --nats: each worker)
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use blerpc::link::guard::GuardConfig;
use blerpc::link::tcp::TcpOptions;
use blerpc::link::tls::TlsServerConfig;
use blerpc_gateway::config::{DEFAULT_HTTP_OFFENCE_COST, DEFAULT_HTTP_RATE, default_http_guard};
use blerpc_gateway::{Admission, Gateway, GatewayConfig};
use blerpc_schema::Schema;
use clap::Args;
use serde::{Deserialize, Serialize};

use blerpc::link::Acceptor;
use blerpc::link::listen::{ListenOptions, Listener, OnAcceptor};
use blerpc::link::url::LinkUrl;
use blerpc::process::shutdown_signal;

use crate::links::listen_error;
use crate::serve::{connection_rate, off_or_seconds};

mod workers;

/// `blerpc gateway` options (serialised whole to each worker of `--workers`).
#[derive(Clone, Debug, PartialEq, Args, Serialize, Deserialize)]
pub struct GatewayArgs {
    /// Where devices connect: tcp://HOST:PORT, tls://HOST:PORT, ws://HOST:PORT[/PATH],
    /// wss://HOST:PORT[/PATH] (repeatable). Port 0 picks a free port; the `devices` lines show
    /// them.
    #[arg(long = "devices", value_name = "URL")]
    pub devices: Vec<String>,
    /// Where the HTTP API, the dashboard and /metrics listen.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub http: SocketAddr,
    /// Serve HTTPS: the certificate chain (PEM).
    #[arg(long, value_name = "FILE", requires = "http_tls_key")]
    pub http_tls_cert: Option<PathBuf>,
    /// Serve HTTPS: the private key (PEM).
    #[arg(long, value_name = "FILE", requires = "http_tls_cert")]
    pub http_tls_key: Option<PathBuf>,
    /// Certificate chain (PEM) of tls:// and wss:// device listeners.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM) of tls:// and wss:// device listeners.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The allow-list: a JSON object of device name → identity key hex (64 digits). Only
    /// these devices are admitted (with --enroll: the file newcomers are recorded in).
    #[arg(long, value_name = "FILE")]
    pub known_devices: Option<PathBuf>,
    /// Admit every device that completes the key exchange and record it in --known-devices
    /// (default $XDG_CONFIG_HOME/blerpc/known_devices.json).
    #[arg(long)]
    pub enroll: bool,
    /// Admit devices that connect without encryption (refused by default).
    #[arg(long)]
    pub allow_plaintext: bool,
    /// The service schema: a .proto file or an encoded descriptor set. Default: the demo
    /// service.
    #[arg(long, value_name = "FILE")]
    pub schema: Option<PathBuf>,
    /// The service's full name in --schema (needed when it defines several).
    #[arg(long, value_name = "NAME", requires = "schema")]
    pub service: Option<String>,
    /// Bearer tokens for the HTTP API, one per line (blank lines and lines starting with # are
    /// skipped). Without it the API is open: only for loopback.
    #[arg(long, value_name = "FILE")]
    pub tokens: Option<PathBuf>,
    /// The base URL devices dial for relayed links (ws://HOST:PORT or wss://...). Default:
    /// the --http address.
    #[arg(long, value_name = "URL")]
    pub relay_url: Option<String>,
    /// Calls in flight to one device (1 to 8; above 4 each device's connection keeps a larger
    /// call table); more wait in its queue.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub max_in_flight: usize,
    /// Calls waiting for one device; more are refused with 429.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_queued: usize,
    /// A call's deadline when the request gives none (Blerpc-Deadline-Ms), in ms.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub default_deadline_ms: u64,
    /// The longest deadline a request may ask for, in ms.
    #[arg(long, value_name = "MS", default_value_t = 300_000)]
    pub max_deadline_ms: u64,
    /// Seconds a device connection has to finish setup and the key exchange.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub setup_timeout: f64,
    /// Device connections in setup at once; more are closed at once.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub max_pending_setups: usize,
    /// Devices the gateway keeps records of.
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    pub max_devices: usize,
    /// Relayed links open at once.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_relays: usize,
    /// New device connections one IP address may open per second, in bursts of
    /// --connection-burst (devices behind one NAT share an address). 0: no limit.
    #[arg(long, value_name = "N", default_value_t = 1000.0)]
    pub max_connection_rate: f64,
    /// New device connections one IP address may open at once.
    #[arg(long, value_name = "N", default_value_t = 2000.0)]
    pub connection_burst: f64,
    /// Seconds an address that ran its rate dry is refused. 0: no penalty.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub penalty: f64,
    /// Keep this BLE peripheral connected (name or address; repeatable; needs the
    /// ble-central feature).
    #[arg(long, value_name = "NAME|ADDRESS")]
    pub ble: Vec<String>,
    /// Hold devices in N worker processes sharing the device ports (SO_REUSEPORT; Unix), each
    /// on one thread and with its own open-file limit, behind one HTTP API that routes each
    /// device's calls to its worker. For more devices than one process can hold. With --nats,
    /// each worker joins the fleet as NAME-wK (its API on a port of its own at the --http
    /// address) and the front as NAME, routing through the fleet.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub workers: usize,
    /// With --workers and --nats: how often one worker that dies is started again within 10
    /// minutes (each 1 s after its exit); past that it stays down and its devices stay on the
    /// others. 0: never. Without --nats a worker that dies stops the gateway.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub worker_restarts: usize,
    /// Ask each connected device that announces the diagnostics extension for its diagnostics
    /// every this many seconds (its link report, GET /v1/devices/{id}/report, and the fleet's
    /// link figures in /metrics); each ask is one call, made only while the device is idle
    /// (a busy device is asked a second later). 0: never.
    #[arg(long, value_name = "SECS", default_value_t = 300.0)]
    pub diagnostics_every: f64,
    /// The first ask comes at a random moment within this many seconds of a device connecting
    /// (devices reconnecting together are not all asked at once).
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    pub diagnostics_spread: f64,
    /// A connection to the HTTP API must send a complete request head within this many seconds,
    /// from when it connects and between requests on a kept connection; then it is closed.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub http_header_timeout: f64,
    /// A request body read whole (a call's JSON) must arrive within this many seconds of the
    /// handler starting to read it; then the call is answered 408 and the connection closed.
    /// Uploads are bounded by their call's deadline instead.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub http_body_timeout: f64,
    /// HTTP connections open at once; more are closed at accept.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub http_max_connections: usize,
    /// HTTP connections one IP address may hold open; more are closed at accept.
    #[arg(long, value_name = "N", default_value_t = 1_000)]
    pub http_max_per_address: usize,
    /// New HTTP connections one IP address may open per second, in bursts of
    /// --http-connection-burst; beyond it the address is refused for --http-penalty (on Linux
    /// its connection attempts are dropped in the kernel). 0: no limit.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_HTTP_RATE.per_second)]
    pub http_max_connection_rate: f64,
    /// New HTTP connections one IP address may open at once.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_HTTP_RATE.burst)]
    pub http_connection_burst: f64,
    /// What an HTTP protocol error (a request head too large, malformed or not sent in time, a
    /// body too large or too slow, a failed TLS handshake) counts against its address's
    /// --http-max-connection-rate, in connections.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_HTTP_OFFENCE_COST)]
    pub http_offence_cost: f64,
    /// Seconds an address that ran its HTTP rate dry is refused. 0: no penalty.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub http_penalty: f64,
    /// Event streams (GET /v1/events, the dashboard) open at once; more are answered 503.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_event_streams: usize,
    /// Join a fleet of gateways on NATS (nats://HOST:PORT, several comma-separated; JetStream
    /// on): any gateway of the fleet answers for every device, forwarding over NATS. NATS sees
    /// what HTTP calls carry: use --nats-tls-ca and credentials beyond loopback.
    #[arg(long, value_name = "URL")]
    pub nats: Option<String>,
    /// This gateway's name in the fleet: unique, of letters, digits, `-` and `_`. Default: the
    /// host name and the --http port.
    #[arg(long, value_name = "NAME", requires = "nats")]
    pub nats_name: Option<String>,
    /// The prefix of the fleet's subjects and KV buckets.
    #[arg(long, value_name = "PREFIX", default_value = "blerpc")]
    pub nats_prefix: String,
    /// A NATS credentials file (JWT and nkey seed).
    #[arg(long, value_name = "FILE", requires = "nats")]
    pub nats_creds: Option<PathBuf>,
    /// A file holding an nkey seed (SU...) to authenticate to NATS.
    #[arg(
        long,
        value_name = "FILE",
        requires = "nats",
        conflicts_with = "nats_creds"
    )]
    pub nats_nkey: Option<PathBuf>,
    /// The CA (PEM) that signed the NATS servers' certificates; TLS is then required.
    #[arg(long, value_name = "FILE", requires = "nats")]
    pub nats_tls_ca: Option<PathBuf>,
    /// Replicas of the fleet's KV buckets when this gateway creates them (3 on a 3-node
    /// cluster).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub nats_replicas: usize,
    /// Seconds a gateway forwarding a request waits for the holder to acknowledge it; past
    /// it, 504 forward_timeout saying the call did not start there.
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    pub nats_accept_timeout: f64,
    /// Requests from other gateways this one answers at once; more are answered 429.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub nats_max_forwarded: usize,
    /// Runtime threads of this process (of the front with --workers; each worker runs on
    /// one). 1: a single-threaded runtime, no hand-offs between threads (the lowest latency
    /// per call). Default: one per CPU.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
    /// Internal: run as a worker of `--workers`: the options, the worker's index and the
    /// internal token come from the parent on stdin, not from the command line.
    #[arg(long, hide = true)]
    pub worker: bool,
    /// Internal: the subcommand that runs a gateway in this executable, for the workers
    /// (`gateway` in `blerpc`; the benchmarks' binary embeds it under another name).
    #[arg(long, value_name = "NAME", hide = true, default_value = "gateway")]
    pub worker_subcommand: String,
}

/// Runs `blerpc gateway` on its runtime: one thread for a worker (which takes its options from
/// its parent on stdin first), `--threads` otherwise (default one per CPU).
pub fn run_blocking(args: &GatewayArgs) -> anyhow::Result<()> {
    let _ = blerpc::process::raise_nofile_limit();
    if args.worker {
        let worker: workers::GatewayWorker = blerpc::process::workers::read_config()?;
        return blerpc::process::runtime(Some(1))?.block_on(workers::run_worker(worker));
    }
    let runtime = blerpc::process::runtime(args.threads.map(usize::from))?;
    if args.workers > 1 {
        return runtime.block_on(workers::run(args));
    }
    runtime.block_on(run(args))
}

fn tokens(path: &PathBuf) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--tokens {}: cannot read it", path.display()))?;
    let tokens: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    if tokens.is_empty() {
        bail!("--tokens {}: the file has no token", path.display());
    }
    if let Some(short) = tokens.iter().find(|t| t.len() < 16) {
        bail!(
            "--tokens {}: a token of {} characters is too short to resist guessing (use 16 or more)",
            path.display(),
            short.len()
        );
    }
    Ok(tokens)
}

fn default_known_devices() -> PathBuf {
    blerpc::known_keys::KnownKeysFile::default_path().with_file_name("known_devices.json")
}

/// The gateway's configuration from the command line.
pub fn config(args: &GatewayArgs) -> anyhow::Result<(GatewayConfig, Schema, GuardConfig)> {
    let admission = match (&args.known_devices, args.enroll) {
        (Some(p), false) => Admission::AllowList(p.clone()),
        (Some(p), true) => Admission::Enroll(p.clone()),
        (None, true) => Admission::Enroll(default_known_devices()),
        (None, false) => bail!(
            "say who may connect: --known-devices FILE (an allow-list of device keys) or --enroll (admit and record every device)"
        ),
    };
    let schema = match &args.schema {
        Some(path) => Schema::load(path, args.service.as_deref())?,
        None => Schema::demo(),
    };
    if !(args.setup_timeout.is_finite() && args.setup_timeout > 0.0) {
        bail!("--setup-timeout must be a positive number of seconds");
    }
    let tokens = match &args.tokens {
        Some(p) => tokens(p)?,
        None => Vec::new(),
    };
    let config = GatewayConfig {
        admission,
        allow_plaintext: args.allow_plaintext,
        setup_timeout: Duration::from_secs_f64(args.setup_timeout),
        max_in_flight: args.max_in_flight,
        max_queued: args.max_queued,
        default_deadline: Duration::from_millis(args.default_deadline_ms),
        max_deadline: Duration::from_millis(args.max_deadline_ms),
        max_devices: args.max_devices,
        max_pending_setups: args.max_pending_setups.max(1),
        max_relays: args.max_relays,
        relay_base: args.relay_url.clone(),
        tokens,
        http_header_timeout: crate::serve::seconds(
            "--http-header-timeout",
            args.http_header_timeout,
        )?,
        http_body_timeout: crate::serve::seconds("--http-body-timeout", args.http_body_timeout)?,
        max_http_connections: args.http_max_connections.max(1),
        max_http_connections_per_address: args.http_max_per_address.max(1),
        max_event_streams: args.max_event_streams,
        diagnostics_every: off_or_seconds("--diagnostics-every", args.diagnostics_every)?,
        diagnostics_spread: off_or_seconds("--diagnostics-spread", args.diagnostics_spread)?
            .unwrap_or_default(),
        http_guard: GuardConfig {
            rate: connection_rate(
                ("--http-max-connection-rate", args.http_max_connection_rate),
                ("--http-connection-burst", args.http_connection_burst),
            )?,
            penalty: off_or_seconds("--http-penalty", args.http_penalty)?.unwrap_or_default(),
            offence_cost: crate::serve::offence_cost(
                "--http-offence-cost",
                args.http_offence_cost,
            )?,
            ..default_http_guard()
        },
        ..GatewayConfig::default()
    };
    let guard = GuardConfig {
        rate: connection_rate(
            ("--max-connection-rate", args.max_connection_rate),
            ("--connection-burst", args.connection_burst),
        )?,
        penalty: off_or_seconds("--penalty", args.penalty)?.unwrap_or_default(),
        ..GuardConfig::default()
    };
    Ok((config, schema, guard))
}

/// Serves devices from an acceptor until Ctrl-C or SIGTERM.
struct ServeDevices(Gateway);

impl OnAcceptor for ServeDevices {
    type Output = std::io::Result<()>;
    async fn run<A: Acceptor>(self, acceptor: A) -> std::io::Result<()> {
        self.0.serve_devices(acceptor, shutdown_signal()).await
    }
}

/// Binds every `--devices` listener for `gateway` and serves it on a task of its own (with
/// `reuse_port`: sharing the port with other workers); returns the bound URLs.
pub(crate) async fn bind_devices(
    args: &GatewayArgs,
    gateway: &Gateway,
    reuse_port: bool,
) -> anyhow::Result<Vec<LinkUrl>> {
    let device_tls = match (&args.tls_cert, &args.tls_key) {
        (Some(c), Some(k)) => Some(TlsServerConfig::from_pem_files(c, k)?),
        _ => None,
    };
    let mut urls = Vec::new();
    for url in &args.devices {
        let parsed: LinkUrl = url.parse().with_context(|| format!("--devices {url}"))?;
        if !parsed.is_ip() {
            bail!("--devices {url}: devices connect over tcp://, tls://, ws:// or wss://");
        }
        let listener = Listener::bind(
            &parsed,
            &ListenOptions {
                tls: device_tls.clone(),
                tcp: TcpOptions {
                    metrics: Some(gateway.metrics().server.clone()),
                    reuse_port,
                    listen_backlog: 4096,
                    ..TcpOptions::default()
                },
                ..ListenOptions::default()
            },
        )
        .await
        .map_err(listen_error)?;
        urls.push(listener.url());
        let gateway = gateway.clone();
        tokio::spawn(async move {
            match listener.with_acceptor(ServeDevices(gateway)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::error!("a device listener stopped: {e}"),
                Err(e) => tracing::error!("a device listener stopped: {e}"),
            }
        });
    }
    Ok(urls)
}

/// The HTTP API's listener on `addr`, with a listen backlog of 4,096 (as the device ports): a
/// burst of connections waits to be accepted rather than having its handshakes dropped and
/// retried seconds later.
pub(super) fn bind_http(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(4096)
}

/// Runs one gateway process until Ctrl-C or SIGTERM.
async fn run(args: &GatewayArgs) -> anyhow::Result<()> {
    let (config, schema, guard) = config(args)?;
    if args.devices.is_empty() && args.ble.is_empty() {
        bail!("give at least one --devices URL (or --ble NAME) for devices to connect to");
    }
    let bound = Bound::new(args, config, schema, guard).await?;
    bound.warn_if_open();
    let mut lines: Vec<String> = bind_devices(args, &bound.gateway, false)
        .await?
        .into_iter()
        .map(|u| format!("devices {u}"))
        .collect();
    for name in &args.ble {
        let (gateway, name) = (bound.gateway.clone(), name.clone());
        tokio::spawn(async move {
            if let Err(e) = keep_ble(gateway, name).await {
                tracing::error!("{e:#}");
            }
        });
    }
    lines.push(format!("http {}", bound.url()));
    if let Some(f) = &bound.fleet {
        lines.push(format!("fleet {}", f.node()));
    }
    // Installed before the lines that say the gateway is ready.
    let shutdown = shutdown_signal();
    print_lines(&lines)?;
    bound.serve(shutdown).await
}

/// Writes `lines` to stdout and flushes: what says a gateway is ready.
pub(crate) fn print_lines(lines: &[String]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    for l in lines {
        writeln!(out, "{l}").context("cannot write to stdout")?;
    }
    out.flush().context("cannot write to stdout")
}

/// A gateway with its HTTP port bound and, with `--nats`, in its fleet: what a single gateway,
/// each worker of `--workers` and the front of `--workers --nats` serve.
pub(crate) struct Bound {
    /// The gateway.
    pub gateway: Gateway,
    /// Its membership of the `--nats` fleet.
    pub fleet: Option<blerpc_gateway::nats::Fleet>,
    http: tokio::net::TcpListener,
    addr: SocketAddr,
    tls: Option<TlsServerConfig>,
}

impl Bound {
    /// Binds `--http` (with `--http-tls-cert`: HTTPS), makes the gateway of `config` (its relay
    /// base the HTTP address unless `--relay-url` gives one) and joins the `--nats` fleet.
    pub async fn new(
        args: &GatewayArgs,
        mut config: GatewayConfig,
        schema: Schema,
        guard: GuardConfig,
    ) -> anyhow::Result<Bound> {
        let http =
            bind_http(args.http).with_context(|| format!("--http {}: cannot listen", args.http))?;
        let addr = http.local_addr()?;
        let tls = match (&args.http_tls_cert, &args.http_tls_key) {
            (Some(c), Some(k)) => Some(TlsServerConfig::from_pem_files(c, k)?),
            _ => None,
        };
        if config.relay_base.is_none() {
            let ws = if tls.is_some() { "wss" } else { "ws" };
            config.relay_base = Some(format!("{ws}://{addr}"));
        }
        let gateway = Gateway::with_schema(config, schema, guard)?;
        let fleet = match nats_config(args, addr)? {
            Some(config) => Some(
                blerpc_gateway::nats::Fleet::join(gateway.clone(), config)
                    .await
                    .context("--nats")?,
            ),
            None => None,
        };
        Ok(Bound {
            gateway,
            fleet,
            http,
            addr,
            tls,
        })
    }

    /// `https` with `--http-tls-cert`, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// The HTTP API's URL: `http://ADDR` or `https://ADDR`.
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme(), self.addr)
    }

    /// The HTTP API's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Warns if the API is open (no `--tokens`) beyond loopback.
    pub fn warn_if_open(&self) {
        if self.gateway.config().tokens.is_empty() && !self.addr.ip().is_loopback() {
            eprintln!(
                "blerpc: warning: the HTTP API on {} has no --tokens: anyone who reaches it can call every device",
                self.addr
            );
        }
    }

    /// Serves the HTTP API (routing through the fleet, if in one) until `shutdown`, then
    /// leaves the fleet.
    pub async fn serve(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let router = match &self.fleet {
            Some(f) => blerpc_gateway::http::router_with(self.gateway.clone(), f.routing()),
            None => blerpc_gateway::http::router(self.gateway.clone()),
        };
        let served = blerpc_gateway::http::serve_router(
            router,
            &self.gateway,
            self.http,
            self.tls.map(|t| t.rustls().clone()),
            shutdown,
        )
        .await;
        if let Some(f) = self.fleet {
            f.leave().await;
        }
        served.context("the HTTP server failed")
    }
}

/// The fleet `--nats` joins, if given; the gateway's name defaults to the host name and the
/// HTTP port.
pub(crate) fn nats_config(
    args: &GatewayArgs,
    http: SocketAddr,
) -> anyhow::Result<Option<blerpc_gateway::nats::NatsConfig>> {
    let Some(url) = &args.nats else {
        return Ok(None);
    };
    let name = match &args.nats_name {
        Some(n) => n.clone(),
        None => {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().replace('.', "-"))
                .unwrap_or_else(|_| "gateway".to_string());
            format!("{host}-{}", http.port())
        }
    };
    let mut config = blerpc_gateway::nats::NatsConfig::new(url, &name);
    config.prefix = args.nats_prefix.clone();
    config.credentials = args.nats_creds.clone();
    config.tls_ca = args.nats_tls_ca.clone();
    config.replicas = args.nats_replicas;
    config.limits.accept_timeout =
        crate::serve::seconds("--nats-accept-timeout", args.nats_accept_timeout)?;
    config.limits.max_forwarded = args.nats_max_forwarded;
    if let Some(path) = &args.nats_nkey {
        let seed = std::fs::read_to_string(path)
            .with_context(|| format!("--nats-nkey {}: cannot read it", path.display()))?;
        config.nkey = Some(seed.trim().to_string());
    }
    Ok(Some(config))
}

#[cfg(feature = "ble-central")]
async fn keep_ble(gateway: Gateway, name: String) -> anyhow::Result<()> {
    use blerpc::link::ble::btleplug::BleCentralOptions;
    use blerpc::link::ble::central::BleCentralLink;
    let options = BleCentralOptions::for_peripheral(Some(&name));
    gateway
        .keep_connected(
            &name,
            move || BleCentralLink::connect(options.clone()),
            blerpc_gateway::devices::default_backoff(),
            shutdown_signal(),
        )
        .await;
    Ok(())
}

#[cfg(not(feature = "ble-central"))]
async fn keep_ble(_: Gateway, name: String) -> anyhow::Result<()> {
    bail!(
        "--ble {name}: this blerpc was built without ble-central; rebuild with `cargo build -p blerpc-cli --features ble-central`"
    )
}
