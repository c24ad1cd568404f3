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
const PER_SIMULATOR: usize = 12_500;
/// Devices each simulator brings up per second.
const RATE: u64 = 1000;
/// Devices one gateway worker is sized for.
const PER_WORKER: usize = 15_000;

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
    /// The gateway's device listener.
    pub gateway: SocketAddr,
    /// The per-run salt of the identity seeds (hex).
    pub salt: String,
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
        let dispatch: Arc<dyn blerpc::server::Dispatch> =
            Arc::new(blerpc_demo::pb::BlerpcServer::new(service));
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
            let (source, gateway) = (spec.source, spec.gateway);
            // Like `blerpc serve --dial`: connect, serve, and after a failure or a close wait
            // (capped exponential backoff with jitter) and dial again.
            tokio::spawn(async move {
                let mut backoff = blerpc::backoff::Backoff::new(
                    Duration::from_millis(500),
                    Duration::from_secs(5),
                );
                let mut first = true;
                loop {
                    let link = match crate::scale::client::connect_from(source, gateway).await {
                        Ok(stream) => TcpLink::from_stream(stream, &TcpOptions::default()),
                        Err(e) => Err(e),
                    };
                    match link {
                        Ok(link) => {
                            if first {
                                connected.fetch_add(1, Ordering::Relaxed);
                                first = false;
                            }
                            let _ = server.serve_link(link).await;
                        }
                        Err(_) if first => {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) => {}
                    }
                    tokio::time::sleep(backoff.next_wait()).await;
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
fn tree_rss(pid: u32) -> u64 {
    let mut total = crate::process::rss_bytes(pid).unwrap_or(0);
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    for c in children
        .split_whitespace()
        .filter_map(|c| c.parse::<u32>().ok())
    {
        total += tree_rss(c);
    }
    total
}

/// `blerpc_gateway_devices_connected` from the gateway's metrics.
async fn connected(http: SocketAddr) -> anyhow::Result<usize> {
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
    let mut salt = [0u8; 24];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut salt);
    eprintln!("gateway scale: deriving {n} device keys");
    let mut allow = std::collections::BTreeMap::new();
    for i in 0..n as u64 {
        let public = blerpc::identity::public_key(&seed(&salt, i))?;
        allow.insert(format!("d{i}"), hex::encode(public));
    }
    let known = dir.join("allow.json");
    std::fs::write(&known, serde_json::to_string(&allow)?)?;
    let ids: Vec<String> = (0..n).map(|i| allow[&format!("d{i}")].clone()).collect();
    drop(allow);
    let tokens = dir.join("tokens");
    let workers_arg = workers.to_string();
    let gw = procs::gateway(
        dir,
        Some(&known),
        &[
            "--tokens",
            tokens.to_str().context("temp path")?,
            "--workers",
            &workers_arg,
            "--max-connection-rate",
            "0",
            "--max-pending-setups",
            "16384",
            "--setup-timeout",
            "60",
            "--max-queued",
            "1024",
        ],
    )?;
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
    let sims = n.div_ceil(PER_SIMULATOR);
    let mut simulators = Vec::new();
    let started = Instant::now();
    for k in 0..sims {
        let first = (k * PER_SIMULATOR) as u64;
        let count = PER_SIMULATOR.min(n - k * PER_SIMULATOR);
        let spec = SimSpec {
            first,
            count,
            source: Ipv4Addr::new(127, 0, 2, k as u8 + 1),
            gateway: devices_addr,
            salt: hex::encode(salt),
        };
        let mut cmd =
            crate::process::command(&["gateway-devices", &serde_json::to_string(&spec)?])?;
        // Every device's server logs its own closes: only errors, or the log is the bottleneck.
        cmd.env("RUST_LOG", "error");
        simulators.push(procs::Proc::spawn(cmd, "device simulator")?);
    }
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
    let (latencies, errors, first_error) = rt.block_on(random_calls(
        gw.http,
        Arc::new(ids),
        args.concurrency.max(1),
        Duration::from_secs(call_seconds),
    ))?;
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
        p50_ms: quantile(&latencies, 0.5),
        p99_ms: quantile(&latencies, 0.99),
    })
}

async fn random_calls(
    http: SocketAddr,
    ids: Arc<Vec<String>>,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<(Vec<f64>, usize, Option<String>)> {
    let end = Instant::now() + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..concurrency {
        let ids = ids.clone();
        tasks.spawn(async move {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(t as u64);
            let (mut ms, mut errors, mut first) = (Vec::new(), 0usize, None);
            let mut caller = None;
            while Instant::now() < end {
                let id = &ids[(rand_core::RngCore::next_u64(&mut rng) % ids.len() as u64) as usize];
                if caller.is_none() {
                    caller = callers::http(http, "", TOKEN).await.ok();
                }
                let Some(c) = caller.as_mut() else {
                    errors += 1;
                    continue;
                };
                c.set_device(id);
                match c.echo("random").await {
                    Ok(d) => ms.push(d.as_secs_f64() * 1e3),
                    Err(e) => {
                        errors += 1;
                        first.get_or_insert(e.to_string());
                        caller = None;
                    }
                }
            }
            (ms, errors, first)
        });
    }
    let (mut all, mut errors, mut first) = (Vec::new(), 0, None);
    while let Some(r) = tasks.join_next().await {
        let (ms, e, f) = r?;
        all.extend(ms);
        errors += e;
        if first.is_none() {
            first = f;
        }
    }
    all.sort_by(f64::total_cmp);
    Ok((all, errors, first))
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
