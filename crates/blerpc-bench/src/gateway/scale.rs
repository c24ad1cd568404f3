//! The gateway at scale: N dialled-in encrypted devices on one box, calls to random ones.
//!
//! Each device has an identity of its own (seeds derived from its index and a per-run salt);
//! the gateway admits exactly them (an allow-list of N keys). The devices are simulated by
//! `blerpc-bench role gateway-devices` processes, each holding up to 12,500 of them (every one a
//! real `blerpc` server on its own TCP connection, one shared demo service), each from a
//! 127.0.2.x source address of its own; the gateway runs `--workers W` processes (the open-file
//! limit is 20,000 per process). Measured: the time until every device is connected, the
//! gateway's memory (the RSS of the front and its workers after the devices connected, over the
//! RSS before, per device; target ≤ 16 KiB), and `--concurrency` HTTP callers on keep-alive
//! connections calling `echo` on random devices for `--call-seconds`: calls/s, p50, p99, errors.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use blerpc::Server;
use blerpc::link::tcp::{TcpLink, TcpOptions};
use rand_core::SeedableRng as _;
use serde::{Deserialize, Serialize};

use super::{GatewayArgs, TOKEN, callers, procs};
use crate::stats::quantile;
use crate::table::Table;

/// Devices one simulator process holds.
pub(crate) const PER_SIMULATOR: usize = 12_500;
/// Devices each simulator brings up per second.
const RATE: u64 = 1000;
/// Devices one gateway worker is sized for.
pub(crate) const PER_WORKER: usize = 15_000;

/// What the scale part measured.
#[derive(Debug, Serialize)]
pub struct ScaleReport {
    /// Devices asked for.
    pub devices: usize,
    /// Devices connected at the end of the connect phase.
    pub connected: usize,
    /// Gateway processes (front and workers).
    pub gateway_processes: usize,
    /// Seconds until every device was connected.
    pub connect_seconds: f64,
    /// Gateway RSS before the devices (bytes, all its processes).
    pub rss_before: u64,
    /// Gateway RSS with every device connected.
    pub rss_after: u64,
    /// (after − before) / devices.
    pub bytes_per_device: f64,
    /// Calls made to random devices.
    pub calls: usize,
    /// Calls that failed.
    pub call_errors: usize,
    /// The first failure, if any.
    pub first_error: Option<String>,
    /// Calls per second.
    pub calls_per_second: f64,
    /// Latency p50 (ms).
    pub p50_ms: f64,
    /// Latency p99 (ms).
    pub p99_ms: f64,
}

/// One simulator process's task.
#[derive(Debug, Serialize, Deserialize)]
pub struct SimSpec {
    /// The first device index.
    pub first: u64,
    /// Devices to hold.
    pub count: usize,
    /// The source address of every connection.
    pub source: Ipv4Addr,
    /// The gateways' device listeners: device `i` dials `gateways[i % len]` first and, when
    /// that fails or its connection ends, the next one at once (as `blerpc serve --dial A,B`
    /// does), waiting (capped exponential backoff with jitter) only after a whole round failed.
    pub gateways: Vec<SocketAddr>,
    /// The per-run salt of the identity seeds (hex).
    pub salt: String,
    /// Print `ran MESSAGE` for every `echo` whose message starts with `dur-` (the durable
    /// part counts how often each call ran on a device).
    #[serde(default)]
    pub witness: bool,
}

/// The demo service, printing `ran MESSAGE` before it runs an `echo` of a durable call.
struct Witness<D>(D);

/// The message of an `EchoRequest` (field 1, a string shorter than 128 bytes).
fn echo_message(request: &[u8]) -> Option<&str> {
    match request {
        [0x0a, len, rest @ ..] if usize::from(*len) == rest.len() => std::str::from_utf8(rest).ok(),
        _ => None,
    }
}

impl<D: blerpc::server::Dispatch> blerpc::server::Dispatch for Witness<D> {
    fn kind(&self, name: &str) -> Option<blerpc::server::CallKind> {
        self.0.kind(name)
    }
    fn unary(
        &self,
        name: &str,
        request: bytes::Bytes,
    ) -> blerpc::server::BoxFuture<Result<Vec<u8>, blerpc::server::Status>> {
        if name == "echo"
            && let Some(m) = echo_message(&request).filter(|m| m.starts_with("dur-"))
        {
            println!("ran {m}");
        }
        self.0.unary(name, request)
    }
    fn server_stream(
        &self,
        name: &str,
        request: bytes::Bytes,
    ) -> blerpc::server::BoxStream<Result<Vec<u8>, blerpc::server::Status>> {
        self.0.server_stream(name, request)
    }
    fn client_stream(
        &self,
        name: &str,
        items: blerpc::server::BoxStream<bytes::Bytes>,
    ) -> blerpc::server::BoxFuture<Result<Vec<u8>, blerpc::server::Status>> {
        self.0.client_stream(name, items)
    }
}

/// Device `i`'s identity seed: its index and the run's salt.
pub fn seed(salt: &[u8; 24], i: u64) -> [u8; 32] {
    let mut s = [0u8; 32];
    s[..8].copy_from_slice(&i.to_le_bytes());
    s[8..].copy_from_slice(salt);
    s
}

fn parse_salt(hex_salt: &str) -> anyhow::Result<[u8; 24]> {
    hex::decode(hex_salt)?
        .try_into()
        .map_err(|_| anyhow::anyhow!("the salt is not 24 bytes"))
}

/// `blerpc-bench role gateway-devices SPEC`: holds `count` devices, each a server with its
/// own identity on its own connection to the gateway; prints `connected N` as they come up
/// and `done N failed F` once all have tried; then holds them until killed.
pub fn run_simulator(spec: &str) -> anyhow::Result<bool> {
    let spec: SimSpec = serde_json::from_str(spec).context("the simulator spec")?;
    let salt = parse_salt(&spec.salt)?;
    let _ =
        nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, 20_000, 20_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let service = blerpc_demo::DemoService::new(
            blerpc_demo::FlashImage::synthetic(4096),
            blerpc_demo::DemoLimits::default(),
        );
        let demo = blerpc_demo::pb::BlerpcServer::new(service);
        let dispatch: Arc<dyn blerpc::server::Dispatch> = if spec.witness {
            Arc::new(Witness(demo))
        } else {
            Arc::new(demo)
        };
        anyhow::ensure!(
            !spec.gateways.is_empty(),
            "the simulator spec names no gateway"
        );
        let gateways: Arc<[SocketAddr]> = spec.gateways.clone().into();
        let connected = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicUsize::new(0));
        for (n, i) in (spec.first..spec.first + spec.count as u64).enumerate() {
            let mut config = blerpc::ServerConfig {
                identity: Some(seed(&salt, i)),
                ..blerpc::ServerConfig::default()
            };
            // A gateway that takes long over 100,000 key exchanges is not a hostile one.
            config.peripheral.setup_timeout = Some(Duration::from_secs(120));
            let server = Server::new(dispatch.clone(), config)?;
            let (connected, failed) = (connected.clone(), failed.clone());
            let (source, gateways) = (spec.source, gateways.clone());
            // Like `blerpc serve --dial A,B`: connect, serve; after a failure or a close try
            // the next gateway at once, and wait (capped exponential backoff with jitter) only
            // once every gateway failed in a row.
            tokio::spawn(async move {
                let mut backoff = blerpc::backoff::Backoff::new(
                    Duration::from_millis(500),
                    Duration::from_secs(5),
                );
                let mut first = true;
                let mut at = i as usize % gateways.len();
                let mut failures = 0;
                loop {
                    let link = match crate::scale::client::connect_from(source, gateways[at]).await
                    {
                        Ok(stream) => TcpLink::from_stream(stream, &TcpOptions::default()),
                        Err(e) => Err(e),
                    };
                    match link {
                        Ok(link) => {
                            if first {
                                connected.fetch_add(1, Ordering::Relaxed);
                                first = false;
                            }
                            failures = 0;
                            let _ = server.serve_link(link).await;
                        }
                        Err(_) => {
                            failures += 1;
                            if first && failures == gateways.len() {
                                failed.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    at = (at + 1) % gateways.len();
                    if failures > 0 && failures % gateways.len() == 0 {
                        tokio::time::sleep(backoff.next_wait()).await;
                    } else if failures == 0 {
                        // A connection that ended: straight to the next gateway, jittered a
                        // little so that a dead gateway's devices do not all arrive at once.
                        let jitter = rand_core::RngCore::next_u32(&mut rand_core::OsRng) % 200;
                        tokio::time::sleep(Duration::from_millis(u64::from(jitter))).await;
                    }
                }
            });
            // Devices come up at RATE per second from each simulator, as a fleet whose gateway
            // restarted would (each device's backoff spreads them too).
            if n % 8 == 7 {
                tokio::time::sleep(Duration::from_millis(8 * 1000 / RATE)).await;
            }
        }
        let started = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let (c, f) = (
                connected.load(Ordering::Relaxed),
                failed.load(Ordering::Relaxed),
            );
            println!("connected {c}");
            if c + f >= spec.count || started.elapsed() > Duration::from_secs(600) {
                println!("done {c} failed {f}");
                break;
            }
        }
        std::future::pending::<()>().await;
        anyhow::Ok(true)
    })
}

/// The RSS of `pid` and every process below it (bytes).
pub(crate) fn tree_rss(pid: u32) -> u64 {
    procs::tree(pid)
        .into_iter()
        .map(|p| crate::process::rss_bytes(p).unwrap_or(0))
        .sum()
}

/// `blerpc_gateway_devices_connected` from the gateway's metrics.
pub(crate) async fn connected(http: SocketAddr) -> anyhow::Result<usize> {
    use http_body_util::BodyExt as _;
    let stream = tokio::net::TcpStream::connect(http).await?;
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let request = hyper::Request::get("/metrics")
        .header("host", http.to_string())
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))?;
    let body = send
        .send_request(request)
        .await?
        .into_body()
        .collect()
        .await?;
    let text = String::from_utf8_lossy(&body.to_bytes()).into_owned();
    let n = text
        .lines()
        .find_map(|l| l.strip_prefix("blerpc_gateway_devices_connected "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    Ok(n as usize)
}

/// Runs the scale part.
pub fn run(args: &GatewayArgs, dir: &Path) -> anyhow::Result<ScaleReport> {
    let n = if args.quick && args.devices == 0 {
        300
    } else {
        args.devices
    };
    let call_seconds = if args.quick {
        3
    } else {
        args.call_seconds.max(1)
    };
    let workers = args
        .workers
        .unwrap_or_else(|| n.div_ceil(PER_WORKER))
        .max(1);
    let keys = DeviceKeys::derive(n, dir)?;
    let tokens = dir.join("tokens");
    let workers_arg = workers.to_string();
    let mut options = vec![
        "--tokens",
        tokens.to_str().context("temp path")?,
        "--workers",
        &workers_arg,
    ];
    options.extend(GATEWAY_AT_SCALE);
    let gw = procs::gateway(dir, Some(&keys.allow), &options)?;
    let gateway_processes = workers + usize::from(workers > 1);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Settle, then the baseline.
    std::thread::sleep(Duration::from_secs(2));
    let rss_before = tree_rss(gw.proc.pid());
    let devices_addr: SocketAddr = gw
        .devices
        .strip_prefix("tcp://")
        .context("the gateway's device URL")?
        .parse()?;
    let started = Instant::now();
    let simulators = keys.simulators(&[devices_addr], false)?;
    let sims = simulators.len();
    eprintln!("gateway scale: {n} devices from {sims} simulators, {workers} gateway workers");
    let mut all = 0;
    let limit = Duration::from_secs(60 + n as u64 / 500);
    while started.elapsed() < limit {
        std::thread::sleep(Duration::from_secs(1));
        all = rt.block_on(connected(gw.http)).unwrap_or(all);
        eprintln!(
            "gateway scale: {all} of {n} devices connected ({:.0} s)",
            started.elapsed().as_secs_f64()
        );
        if all >= n {
            break;
        }
    }
    let connect_seconds = started.elapsed().as_secs_f64();
    if all < n {
        bail!("only {all} of {n} devices connected within {limit:?}");
    }
    std::thread::sleep(Duration::from_secs(3));
    let rss_after = tree_rss(gw.proc.pid());
    eprintln!("gateway scale: calling random devices for {call_seconds} s");
    let tally = rt.block_on(calls(
        &[gw.http],
        Arc::new(keys.ids),
        args.concurrency.max(1),
        Plan::Random(Duration::from_secs(call_seconds)),
    ))?;
    let (latencies, errors, first_error) = (&tally.latencies, tally.failed(), tally.first_failure);
    drop(simulators);
    drop(gw);
    let calls = latencies.len() + errors;
    Ok(ScaleReport {
        devices: n,
        connected: all,
        gateway_processes,
        connect_seconds,
        rss_before,
        rss_after,
        bytes_per_device: rss_after.saturating_sub(rss_before) as f64 / n as f64,
        calls,
        call_errors: errors,
        first_error,
        calls_per_second: latencies.len() as f64 / call_seconds as f64,
        p50_ms: quantile(latencies, 0.5),
        p99_ms: quantile(latencies, 0.99),
    })
}

/// The options a gateway holding many devices runs with: no connection-rate penalty (the
/// simulators dial from few addresses), room for many setups at once.
pub(crate) const GATEWAY_AT_SCALE: [&str; 8] = [
    "--max-connection-rate",
    "0",
    "--max-pending-setups",
    "16384",
    "--setup-timeout",
    "60",
    "--max-queued",
    "1024",
];

/// N devices' identities: the salt of their seeds, their ids (public keys, hex) and the
/// allow-list file naming them.
pub(crate) struct DeviceKeys {
    salt: [u8; 24],
    /// Device `i`'s id.
    pub(crate) ids: Vec<String>,
    /// The allow-list (`--known-devices`).
    pub(crate) allow: std::path::PathBuf,
}

impl DeviceKeys {
    /// Derives `n` identities and writes their allow-list into `dir`.
    pub(crate) fn derive(n: usize, dir: &Path) -> anyhow::Result<DeviceKeys> {
        let mut salt = [0u8; 24];
        rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut salt);
        eprintln!("gateway: deriving {n} device keys");
        let mut allow = std::collections::BTreeMap::new();
        let mut ids = Vec::with_capacity(n);
        for i in 0..n as u64 {
            let id = hex::encode(blerpc::identity::public_key(&seed(&salt, i))?);
            allow.insert(format!("d{i}"), id.clone());
            ids.push(id);
        }
        let path = dir.join(format!("allow-{n}.json"));
        std::fs::write(&path, serde_json::to_string(&allow)?)?;
        Ok(DeviceKeys {
            salt,
            ids,
            allow: path,
        })
    }

    /// Starts simulator processes holding every device, [`PER_SIMULATOR`] each, each from a
    /// 127.0.2.x source address of its own, dialling `gateways` (device `i` first the
    /// `i % len`-th); `witness`: they print `ran MESSAGE` for durable calls.
    pub(crate) fn simulators(
        &self,
        gateways: &[SocketAddr],
        witness: bool,
    ) -> anyhow::Result<Vec<procs::Proc>> {
        let n = self.ids.len();
        let mut simulators = Vec::new();
        for k in 0..n.div_ceil(PER_SIMULATOR) {
            let spec = SimSpec {
                first: (k * PER_SIMULATOR) as u64,
                count: PER_SIMULATOR.min(n - k * PER_SIMULATOR),
                source: Ipv4Addr::new(127, 0, 2, k as u8 + 1),
                gateways: gateways.to_vec(),
                salt: hex::encode(self.salt),
                witness,
            };
            let mut cmd =
                crate::process::command(&["gateway-devices", &serde_json::to_string(&spec)?])?;
            // Every device's server logs its own closes: only errors, or the log is the
            // bottleneck.
            cmd.env("RUST_LOG", "error");
            simulators.push(procs::Proc::spawn(cmd, "device simulator")?);
        }
        Ok(simulators)
    }
}

/// What a set of HTTP callers saw.
#[derive(Debug, Default, Serialize)]
pub struct Tally {
    /// Latencies of the calls answered right (ms, sorted).
    #[serde(skip)]
    pub latencies: Vec<f64>,
    /// Calls answered right.
    pub ok: usize,
    /// Failed calls by what they were answered: `HTTP 503 not_connected`… (the status and
    /// the problem's kind, from its `type`), or `transport` (no answer).
    pub failures: BTreeMap<String, usize>,
    /// Calls answered 200 with another call's answer (must be 0).
    pub wrong: usize,
    /// The first failure's answer, for people.
    pub first_failure: Option<String>,
    /// The devices whose calls failed.
    #[serde(skip)]
    pub failed_ids: Vec<String>,
}

impl Tally {
    /// The failures by kind, `3 HTTP 503 not_connected, 1 transport`, or `none`.
    pub fn failures_text(&self) -> String {
        if self.failures.is_empty() {
            return "none".to_string();
        }
        self.failures
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Failed calls of every kind.
    pub fn failed(&self) -> usize {
        self.failures.values().sum::<usize>() + self.wrong
    }

    /// Adds `other`'s calls to these.
    pub(crate) fn merge(&mut self, other: Tally) {
        self.latencies.extend(other.latencies);
        self.ok += other.ok;
        for (k, n) in other.failures {
            *self.failures.entry(k).or_default() += n;
        }
        self.wrong += other.wrong;
        self.failed_ids.extend(other.failed_ids);
        if self.first_failure.is_none() {
            self.first_failure = other.first_failure;
        }
    }

    /// One `echo` of a message of its own through `caller` to `id`, counted.
    async fn call(&mut self, caller: &mut Option<callers::Caller>, http: SocketAddr, id: &str) {
        let failed = self.failed();
        self.call_once(caller, http, id).await;
        if self.failed() > failed {
            self.failed_ids.push(id.to_string());
        }
    }

    async fn call_once(
        &mut self,
        caller: &mut Option<callers::Caller>,
        http: SocketAddr,
        id: &str,
    ) {
        if caller.is_none() {
            *caller = callers::http(http, "", TOKEN).await.ok();
        }
        let Some(c) = caller.as_mut() else {
            *self.failures.entry("transport".into()).or_default() += 1;
            return;
        };
        // A message of its own per call, so that a wrong answer cannot pass.
        let body = format!(r#"{{"message":"c{}-{}"}}"#, self.ok, self.failed());
        let path = format!("/v1/devices/{id}/calls/echo");
        match c.request(hyper::Method::POST, &path, &[], &body).await {
            Ok((200, answer, took)) if answer == body.as_bytes() => {
                self.ok += 1;
                self.latencies.push(took.as_secs_f64() * 1e3);
            }
            Ok((200, answer, _)) => {
                self.wrong += 1;
                self.first_failure
                    .get_or_insert_with(|| format!("wrong answer {answer:?} to {body}"));
            }
            Ok((status, answer, _)) => {
                let code = serde_json::from_slice::<serde_json::Value>(&answer)
                    .ok()
                    .and_then(|v| Some(v.get("type")?.as_str()?.rsplit(':').next()?.to_string()))
                    .unwrap_or_else(|| "no problem type".into());
                *self
                    .failures
                    .entry(format!("HTTP {status} {code}"))
                    .or_default() += 1;
                self.first_failure.get_or_insert_with(|| {
                    format!("HTTP {status}: {}", String::from_utf8_lossy(&answer))
                });
            }
            Err(e) => {
                *self.failures.entry("transport".into()).or_default() += 1;
                self.first_failure.get_or_insert_with(|| e.to_string());
                *caller = None;
            }
        }
    }
}

/// Which devices callers call.
#[derive(Clone)]
pub(crate) enum Plan {
    /// Random devices until this much time has passed.
    Random(Duration),
    /// Random devices until the flag is set.
    RandomUntil(Arc<std::sync::atomic::AtomicBool>),
    /// Every device once (split among the callers).
    Each,
}

/// `concurrency` HTTP callers on keep-alive connections, caller `t` through gateway
/// `gateways[t % len]`, each calling `echo` on the devices of `ids` as `plan` says.
pub(crate) async fn calls(
    gateways: &[SocketAddr],
    ids: Arc<Vec<String>>,
    concurrency: usize,
    plan: Plan,
) -> anyhow::Result<Tally> {
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..concurrency {
        let ids = ids.clone();
        let http = gateways[t % gateways.len()];
        let plan = plan.clone();
        tasks.spawn(async move {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(t as u64);
            let mut tally = Tally::default();
            let mut caller = None;
            match plan {
                Plan::Random(duration) => {
                    while started.elapsed() < duration {
                        let i = rand_core::RngCore::next_u64(&mut rng) % ids.len() as u64;
                        tally.call(&mut caller, http, &ids[i as usize]).await;
                    }
                }
                Plan::RandomUntil(stop) => {
                    while !stop.load(Ordering::Relaxed) {
                        let i = rand_core::RngCore::next_u64(&mut rng) % ids.len() as u64;
                        tally.call(&mut caller, http, &ids[i as usize]).await;
                    }
                }
                Plan::Each => {
                    for id in ids.iter().skip(t).step_by(concurrency) {
                        tally.call(&mut caller, http, id).await;
                    }
                }
            }
            tally
        });
    }
    let mut all = Tally::default();
    while let Some(r) = tasks.join_next().await {
        all.merge(r?);
    }
    all.latencies.sort_by(f64::total_cmp);
    Ok(all)
}

/// Prints the scale table; `false` if a target was missed.
pub fn print(r: &ScaleReport) -> bool {
    println!(
        "gateway scale: {} dialled-in encrypted devices, {} gateway processes",
        r.devices, r.gateway_processes
    );
    let per_device_kib = r.bytes_per_device / 1024.0;
    let mut t = Table::new(["measure", "value", "target", "met"]);
    let ok_mem = per_device_kib <= 16.0;
    let ok_calls = r.call_errors == 0;
    t.row([
        "devices connected".to_string(),
        format!(
            "{} of {} in {:.1} s",
            r.connected, r.devices, r.connect_seconds
        ),
        "all".into(),
        if r.connected == r.devices {
            "yes"
        } else {
            "NO"
        }
        .into(),
    ]);
    t.row([
        "gateway RSS".to_string(),
        format!(
            "{:.1} → {:.1} MiB",
            r.rss_before as f64 / 1048576.0,
            r.rss_after as f64 / 1048576.0
        ),
        "—".into(),
        "—".into(),
    ]);
    t.row([
        "gateway memory per device".to_string(),
        format!("{per_device_kib:.2} KiB"),
        "≤ 16 KiB".into(),
        if ok_mem { "yes" } else { "NO" }.into(),
    ]);
    t.row([
        "calls to random devices".to_string(),
        format!(
            "{} ({:.0}/s), {} errors",
            r.calls, r.calls_per_second, r.call_errors
        ),
        "0 errors".into(),
        if ok_calls { "yes" } else { "NO" }.into(),
    ]);
    t.row([
        "call latency p50 / p99".to_string(),
        format!("{:.2} / {:.2} ms", r.p50_ms, r.p99_ms),
        "—".into(),
        "—".into(),
    ]);
    print!("{}", t.plain(""));
    if let Some(e) = &r.first_error {
        println!("first call error: {e}");
    }
    ok_mem && ok_calls && r.connected == r.devices
}
