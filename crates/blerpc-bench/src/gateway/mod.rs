//! `blerpc-bench gateway`: what the device gateway costs a backend.
//!
//! **Latency.** A real `blerpc gateway` and a real device (`blerpc serve --dial`, listening on TCP
//! as well) on loopback; the bench calls the device's `echo` one call at a time three ways in the
//! same run: directly (the runtime's central over TCP, encrypted, key pinned: the baseline), over
//! the gateway's HTTP API (JSON), and relayed (the runtime's central over the gateway's link
//! WebSocket, its own key exchange with the device through the gateway). Three modes:
//!
//! - **command** (the targets): each call is a process, as a user or a script makes it: `blerpc
//!   call --connect tcp://DEVICE --trust-key KEY echo …` (direct), a one-shot HTTP client posting
//!   to `/v1/devices/{id}/calls/echo`, and `blerpc call --connect ws://GATEWAY/v1/devices/{id}/link
//!   --trust-key KEY echo …` (relayed); all three from this binary (the CLI's own `call` code), so
//!   they start alike.
//! - **connect** (for the record): in this process, each call from a new connection: the direct
//!   call connects to the device, runs setup and the key exchange and calls; the HTTP call opens
//!   a connection to the gateway and posts (the gateway keeps its own device connection: that is
//!   what it is for); the relayed call opens the link WebSocket (the device dials its relayed
//!   connection back), runs setup and its own key exchange with the device, and calls.
//! - **kept**: every caller keeps its connection and calls again; here the gateway's extra hop
//!   (HTTP, or the WebSocket relay) is all that differs. Any extra hop costs a loopback leg and
//!   a process in the path, so this mode measures that floor too: **spliced**, the direct
//!   central through a bare forwarder ([`splice`]: a process that copies bytes between the
//!   caller's TCP connection and the device's, no parsing).
//!
//! Each run measures every variant of every mode in turn (the order rotates from run to run);
//! the report gives each variant's p50 and p99 per run, and the medians over the runs of p50 and
//! of p50 over the direct p50 of the same run and mode. Targets: command mode, HTTP ≤ 1.5× and
//! relayed ≤ 1.2× direct; kept mode, relayed ≤ 1.1× and HTTP ≤ 1.3× spliced.
//!
//! **Scale** (`--devices N`, see [`scale`]): N dialled-in encrypted devices held by the gateway,
//! its memory per device, and HTTP calls to randomly chosen devices.

pub(crate) mod callers;
pub mod fleet;
pub(crate) mod procs;
pub mod scale;
pub mod splice;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use serde::Serialize;

use crate::stats::{median, quantile};
use crate::table::Table;

/// `blerpc-bench gateway` options.
#[derive(Clone, Debug, Args)]
pub struct GatewayArgs {
    /// Runs (each measures every variant; the order rotates).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Calls per variant per run in the kept-connection mode (after 200 warm-up calls).
    #[arg(long, default_value_t = 3000)]
    pub calls: usize,
    /// Calls per variant per run in the connect mode (each from a new connection).
    #[arg(long, default_value_t = 300)]
    pub fresh_calls: usize,
    /// Calls per variant per run in the command mode (each a process).
    #[arg(long, default_value_t = 100)]
    pub command_calls: usize,
    /// The echoed message's length in bytes (at most 120).
    #[arg(long, default_value_t = 16)]
    pub message: usize,
    /// Also hold this many dialled-in devices and call random ones (0: latency only). The
    /// documented run uses 100,000.
    #[arg(long, default_value_t = 0)]
    pub devices: usize,
    /// Gateway worker processes for the scale part (each holds at most ~15,000 devices: the
    /// open-file limit is 20,000 per process). Default: enough for --devices.
    #[arg(long)]
    pub workers: Option<usize>,
    /// Seconds of random calls in the scale part.
    #[arg(long, default_value_t = 20)]
    pub call_seconds: u64,
    /// Concurrent HTTP callers in the scale part.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// The quick profile (`cargo test`): 1 run of 300 calls, 300 devices, the fleet part.
    #[arg(long)]
    pub quick: bool,
    /// Only these modes (command, connect, kept; repeatable). Default: all three.
    #[arg(long = "mode", value_name = "MODE")]
    pub modes: Vec<String>,
    /// Measure the fleet instead: two gateways on a nats-server, calls forwarded over NATS
    /// ([`fleet`]; `--runs` runs of `--calls` calls per variant).
    #[arg(long)]
    pub fleet: bool,
    /// Runtime threads of the gateway and of the splice in the command, connect and kept
    /// modes (1: single-threaded). Default: one per CPU, as `blerpc gateway`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub gateway_threads: Option<u16>,
    /// An option for every gateway of the fleet parts (repeatable), e.g.
    /// `--fleet-gateway-arg=--nats-max-forwarded=100` to compare a setting side by side.
    #[arg(long, value_name = "ARG", allow_hyphen_values = true)]
    pub fleet_gateway_arg: Vec<String>,
    /// Measure calls/s through this many gateways of a fleet against one ([`fleet::throughput`];
    /// `--runs`, `--call-seconds`, `--concurrency`, `--fleet-devices`). 0: not measured.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub gateways: usize,
    /// Devices in the throughput part.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub fleet_devices: usize,
    /// Measure failover: this many devices across two gateways of a fleet, one SIGKILLed
    /// ([`fleet::failover`]). 0: not measured. The documented run uses 100,000.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub failover_devices: usize,
    /// Measure durable calls: this many to `--durable-devices` offline devices, a gateway
    /// SIGKILLed midway ([`fleet::durable`]). 0: not measured. The documented run uses 10,000.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub durable_calls: usize,
    /// Devices of the durable part.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub durable_devices: usize,
    /// Measure how many devices the fleet holds: this many across two gateways of a fleet,
    /// memory, sockets and CPU per device on each side ([`fleet::hold`]). 0: not measured.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub hold_devices: usize,
    /// Write the results as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// One variant in one run.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// 1-based run.
    pub run: usize,
    /// `command` (a process per call), `connect` (a new connection per call) or `kept` (one
    /// connection for every call).
    pub mode: &'static str,
    /// `direct`, `spliced` (kept mode only), `http` or `relayed`.
    pub variant: &'static str,
    /// Median latency (ms).
    pub p50_ms: f64,
    /// 99th percentile (ms).
    pub p99_ms: f64,
    /// p50 over the same run's direct p50.
    pub p50_vs_direct: f64,
    /// p50 over the same run's spliced p50 (kept mode).
    pub p50_vs_spliced: Option<f64>,
    /// The hop's CPU time per call (µs; kept mode): the gateway's for `http` and `relayed`,
    /// the bare forwarder's for `spliced`, none for `direct`.
    pub hop_cpu_us: Option<f64>,
}

/// The medians over the runs of one mode's variant.
#[derive(Debug, Serialize)]
pub struct Median {
    /// The mode.
    pub mode: &'static str,
    /// The variant.
    pub variant: &'static str,
    /// Median of the p50s (ms).
    pub p50_ms: f64,
    /// Median of the p99s (ms).
    pub p99_ms: f64,
    /// Median of p50 × direct.
    pub p50_vs_direct: f64,
    /// Median of p50 × spliced (kept mode).
    pub p50_vs_spliced: Option<f64>,
    /// Median of the hop's CPU time per call (µs; kept mode).
    pub hop_cpu_us: Option<f64>,
}

/// The whole result.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    /// Calls per variant per run.
    pub calls: usize,
    /// Message bytes.
    pub message: usize,
    /// Every run's samples.
    pub samples: Vec<Sample>,
    /// Medians over the runs, per mode and variant.
    pub medians: Vec<Median>,
    /// The scale part, if run.
    pub scale: Option<scale::ScaleReport>,
    /// The fleet part, if run.
    pub fleet: Option<fleet::FleetReport>,
    /// The fleet's throughput part, if run.
    pub throughput: Option<fleet::throughput::ThroughputReport>,
    /// The fleet's failover part, if run.
    pub failover: Option<fleet::failover::FailoverReport>,
    /// The fleet's durable part, if run.
    pub durable: Option<fleet::durable::DurableReport>,
    /// The fleet's hold part, if run.
    pub hold: Option<fleet::hold::HoldReport>,
}

const MODES: [&str; 3] = ["command", "connect", "kept"];

/// The variants a mode measures: the floor of a hop only where connections are kept.
fn variants(mode: &str) -> &'static [&'static str] {
    if mode == "kept" {
        &["direct", "spliced", "http", "relayed"]
    } else {
        &["direct", "http", "relayed"]
    }
}

/// A mode's target for a variant: (the ratio's base, the bound).
fn target(mode: &str, variant: &str) -> Option<(&'static str, f64)> {
    match (mode, variant) {
        ("command", "http") => Some(("direct", 1.5)),
        ("command", "relayed") => Some(("direct", 1.2)),
        ("kept", "http") => Some(("spliced", 1.3)),
        ("kept", "relayed") => Some(("spliced", 1.1)),
        _ => None,
    }
}
pub(crate) const TOKEN: &str = "gateway-bench-token-0123456789";

/// Runs the suite; `Ok(false)` if a target was missed or a call failed.
pub fn run(args: &GatewayArgs) -> anyhow::Result<bool> {
    let (runs, calls) = if args.quick {
        (1, 300)
    } else {
        (args.runs.max(1), args.calls.max(10))
    };
    anyhow::ensure!(args.message <= 120, "--message is at most 120 bytes");
    let dir = tempdir()?;
    std::fs::write(dir.join("tokens"), format!("{TOKEN}\n"))?;
    let fleet_scale = args.gateways > 0
        || args.failover_devices > 0
        || args.durable_calls > 0
        || args.hold_devices > 0;
    if (args.fleet || fleet_scale) && !args.quick {
        let report = fleet_parts(args, runs, calls, &dir)?;
        let met = print_report(&report);
        if let Some(path) = &args.json {
            std::fs::write(path, serde_json::to_string_pretty(&report)?)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        let _ = std::fs::remove_dir_all(&dir);
        return Ok(met);
    }
    let tokens = dir.join("tokens");
    let threads = args.gateway_threads.map(|n| n.to_string());
    let mut options = vec!["--tokens", tokens.to_str().context("temp path")?];
    if let Some(n) = &threads {
        options.extend(["--threads", n.as_str()]);
    }
    let gw = procs::gateway(&dir, None, &options)?;
    let key_file = dir.join("device.key");
    blerpc::identity::store(&key_file, &blerpc::identity::generate(), true)?;
    let (device, listen, key) = procs::device(&dir, &gw.devices, &key_file)?;
    let (splice, spliced) = splice::start(&listen, args.gateway_threads)?;
    let id = hex::encode(key);
    let modes: Vec<&'static str> = if args.modes.is_empty() {
        MODES.to_vec()
    } else {
        let mut chosen = Vec::new();
        for m in &args.modes {
            let Some(mode) = MODES.iter().find(|k| **k == m.as_str()) else {
                anyhow::bail!("--mode {m}: not one of {}", MODES.join(", "));
            };
            chosen.push(*mode);
        }
        chosen
    };
    let message: String = "m".repeat(args.message);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let fresh = if args.quick {
        30
    } else {
        args.fresh_calls.max(10)
    };
    let samples = rt.block_on(async {
        wait_online(gw.http, &id).await?;
        let mut all = Vec::new();
        for run in 0..runs {
            eprintln!("gateway: run {} of {runs}", run + 1);
            for &mode in &modes {
                let mut lat = std::collections::BTreeMap::new();
                let mut hop_cpu = std::collections::BTreeMap::new();
                let all_variants = variants(mode);
                for k in 0..all_variants.len() {
                    let variant = all_variants[(k + run) % all_variants.len()];
                    let connect = || async {
                        match variant {
                            "direct" => callers::direct(&listen, key).await,
                            "spliced" => callers::direct(&spliced, key).await,
                            "http" => callers::http(gw.http, &id, TOKEN).await,
                            _ => callers::relayed(gw.http, &id, key, TOKEN).await,
                        }
                    };
                    let mut ms = Vec::new();
                    if mode == "command" {
                        let n = if args.quick {
                            10
                        } else {
                            args.command_calls.max(5)
                        };
                        for i in 0..n + 3 {
                            let started = std::time::Instant::now();
                            command_call(variant, gw.http, &listen, &id, &message)?;
                            if i >= 3 {
                                ms.push(started.elapsed().as_secs_f64() * 1e3);
                            }
                        }
                    } else if mode == "kept" {
                        let mut caller = connect().await?;
                        for _ in 0..200 {
                            caller.echo(&message).await?;
                        }
                        let hop = match variant {
                            "direct" => None,
                            "spliced" => Some(splice.pid()),
                            _ => Some(gw.proc.pid()),
                        };
                        let before = hop.map(procs::run_time);
                        for _ in 0..calls {
                            ms.push(caller.echo(&message).await?.as_secs_f64() * 1e3);
                        }
                        if let (Some(pid), Some(before)) = (hop, before) {
                            let spent = procs::run_time(pid) - before;
                            hop_cpu.insert(variant, spent / calls.max(1) as f64 * 1e6);
                        }
                        caller.close().await;
                    } else {
                        for i in 0..fresh + 10 {
                            let started = std::time::Instant::now();
                            let mut caller = connect().await?;
                            caller.echo(&message).await?;
                            let took = started.elapsed().as_secs_f64() * 1e3;
                            caller.close().await;
                            if i >= 10 {
                                ms.push(took);
                            }
                        }
                    }
                    ms.sort_by(f64::total_cmp);
                    lat.insert(variant, ms);
                }
                let direct_p50 = quantile(&lat["direct"], 0.5);
                let spliced_p50 = lat.get("spliced").map(|ms| quantile(ms, 0.5));
                for &v in variants(mode) {
                    let p50 = quantile(&lat[v], 0.5);
                    all.push(Sample {
                        run: run + 1,
                        mode,
                        variant: v,
                        p50_ms: p50,
                        p99_ms: quantile(&lat[v], 0.99),
                        p50_vs_direct: p50 / direct_p50,
                        p50_vs_spliced: spliced_p50.map(|s| p50 / s),
                        hop_cpu_us: hop_cpu.get(v).copied(),
                    });
                }
            }
        }
        anyhow::Ok(all)
    })?;
    let mut medians = Vec::new();
    for &mode in &modes {
        for &v in variants(mode) {
            let of = |f: fn(&Sample) -> Option<f64>| {
                let values: Vec<f64> = samples
                    .iter()
                    .filter(|s| s.variant == v && s.mode == mode)
                    .filter_map(f)
                    .collect();
                (!values.is_empty()).then(|| median(&values))
            };
            medians.push(Median {
                mode,
                variant: v,
                p50_ms: of(|s| Some(s.p50_ms)).unwrap_or(f64::NAN),
                p99_ms: of(|s| Some(s.p99_ms)).unwrap_or(f64::NAN),
                p50_vs_direct: of(|s| Some(s.p50_vs_direct)).unwrap_or(f64::NAN),
                p50_vs_spliced: of(|s| s.p50_vs_spliced),
                hop_cpu_us: of(|s| s.hop_cpu_us),
            });
        }
    }
    drop(splice);
    drop(device);
    drop(gw);
    let scale = if args.devices > 0 || args.quick {
        Some(scale::run(args, &dir)?)
    } else {
        None
    };
    let fleet = if args.quick {
        let quick = GatewayArgs {
            failover_devices: 200,
            durable_calls: 60,
            durable_devices: 12,
            concurrency: 8,
            ..args.clone()
        };
        Some(fleet_parts(&quick, runs, calls, &dir)?)
    } else {
        None
    };
    let report = Report {
        calls,
        message: args.message,
        samples,
        medians,
        scale,
        ..fleet.unwrap_or_default()
    };
    let met = print_report(&report);
    // The quick profile (`cargo test`) checks that everything answered right, not the timings
    // of a shared machine.
    let ok = if args.quick {
        report
            .scale
            .as_ref()
            .is_none_or(|s| s.connected == s.devices && s.call_errors == 0)
            && report.failover.as_ref().is_none_or(|f| {
                f.before.failed() == 0
                    && f.before.wrong + f.during.wrong + f.sample.wrong + f.sweeps.wrong == 0
            })
            && report
                .durable
                .as_ref()
                .is_none_or(|d| d.violation_count == 0)
    } else {
        met
    };
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("gateway: wrote {}", path.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(ok)
}

/// One call as a process (the command mode): `blerpc call` (this binary's `call`) direct or
/// relayed, or the one-shot HTTP client.
fn command_call(
    variant: &str,
    gateway: std::net::SocketAddr,
    device: &str,
    id: &str,
    message: &str,
) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot find the blerpc-bench executable")?;
    let json = format!(r#"{{"message":"{message}"}}"#);
    let mut cmd = std::process::Command::new(exe);
    match variant {
        "http" => {
            cmd.args([
                "role",
                "http-call",
                &gateway.to_string(),
                &format!("/v1/devices/{id}/calls/echo"),
                TOKEN,
                &json,
            ]);
        }
        _ => {
            let url = if variant == "direct" {
                device.to_string()
            } else {
                format!("ws://{gateway}/v1/devices/{id}/link")
            };
            cmd.args([
                "call",
                "--connect",
                &url,
                "--trust-key",
                id,
                "--bearer",
                TOKEN,
            ])
            .args(["echo", &json]);
        }
    }
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .context("cannot run a call process")?;
    let answer = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || answer.trim() != json {
        anyhow::bail!(
            "the {variant} call process failed: {answer} {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// `blerpc-bench role http-call`: one POST on a new connection, the answer on stdout.
pub fn http_call_once(addr: &str, path: &str, token: &str, body: &str) -> anyhow::Result<bool> {
    use http_body_util::BodyExt as _;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (mut send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let request = hyper::Request::post(path)
            .header("host", addr)
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from(
                body.to_string(),
            )))?;
        let response = send.send_request(request).await?;
        let status = response.status();
        let answer = response.into_body().collect().await?.to_bytes();
        println!("{}", String::from_utf8_lossy(&answer));
        Ok(status == 200)
    })
}

pub(crate) async fn wait_online(http: std::net::SocketAddr, id: &str) -> anyhow::Result<()> {
    for _ in 0..300 {
        if let Ok(mut c) = callers::http(http, id, TOKEN).await
            && c.echo("up").await.is_ok()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!("device {id} did not come online at the gateway within 15 s")
}

fn tempdir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("blerpc-gateway-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn print_report(r: &Report) -> bool {
    let mut ok = true;
    if !r.samples.is_empty() {
        println!(
            "gateway: echo of {} bytes on loopback, one call at a time; command: a process per call \
             (`blerpc call`, or a one-shot HTTP client); connect: a new connection per call; kept: {} \
             calls on one connection",
            r.message, r.calls
        );
        let spliced = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.2}"));
        let cpu = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.1}"));
        let mut t = Table::new([
            "run",
            "mode",
            "variant",
            "p50 ms",
            "p99 ms",
            "p50 × direct",
            "p50 × spliced",
            "hop CPU µs",
        ]);
        for s in &r.samples {
            t.row([
                s.run.to_string(),
                s.mode.to_string(),
                s.variant.to_string(),
                format!("{:.3}", s.p50_ms),
                format!("{:.3}", s.p99_ms),
                format!("{:.2}", s.p50_vs_direct),
                spliced(s.p50_vs_spliced),
                cpu(s.hop_cpu_us),
            ]);
        }
        print!("{}", t.plain(""));
        let runs = r.samples.iter().map(|s| s.run).max().unwrap_or(0);
        println!("medians over {runs} runs:");
        let mut t = Table::new([
            "mode",
            "variant",
            "p50 ms",
            "p99 ms",
            "p50 × direct",
            "p50 × spliced",
            "hop CPU µs",
            "target",
            "met",
        ]);
        for m in &r.medians {
            let target = target(m.mode, m.variant);
            let met = target.map(|(base, bound)| {
                let ratio = if base == "spliced" {
                    m.p50_vs_spliced.unwrap_or(f64::INFINITY)
                } else {
                    m.p50_vs_direct
                };
                ratio <= bound
            });
            ok &= met.unwrap_or(true);
            t.row([
                m.mode.to_string(),
                m.variant.to_string(),
                format!("{:.3}", m.p50_ms),
                format!("{:.3}", m.p99_ms),
                format!("{:.2}", m.p50_vs_direct),
                spliced(m.p50_vs_spliced),
                cpu(m.hop_cpu_us),
                target.map_or("—".into(), |(base, t)| format!("≤ {t} × {base}")),
                met.map_or("—".into(), |m| if m { "yes" } else { "NO" }.to_string()),
            ]);
        }
        print!("{}", t.plain(""));
        println!(
            "p50 × direct: the variant's median latency over the direct call's in the same run and \
             mode (direct: the runtime's central over TCP straight to the device, encrypted); \
             p50 × spliced: over the direct central's through a bare TCP forwarder (kept mode); \
             hop CPU µs: the CPU time per call of the process in the middle (the gateway, or the \
             forwarder for spliced), which a busy neighbour disturbs far less than latency"
        );
    }
    if let Some(s) = &r.scale {
        ok &= scale::print(s);
    }
    if let Some(f) = &r.fleet {
        ok &= fleet::print(f);
    }
    if let Some(t) = &r.throughput {
        ok &= fleet::throughput::print(t);
    }
    if let Some(f) = &r.failover {
        ok &= fleet::failover::print(f);
    }
    if let Some(d) = &r.durable {
        ok &= fleet::durable::print(d);
    }
    if let Some(h) = &r.hold {
        ok &= fleet::hold::print(h);
    }
    ok
}

/// The fleet's parts that `args` ask for (all but throughput in the quick profile).
fn fleet_parts(
    args: &GatewayArgs,
    runs: usize,
    calls: usize,
    dir: &std::path::Path,
) -> anyhow::Result<Report> {
    let fleet = if args.fleet || args.quick {
        Some(fleet::run(runs, calls, dir, &args.fleet_gateway_arg)?)
    } else {
        None
    };
    let throughput = (args.gateways > 0)
        .then(|| fleet::throughput::run(args, dir))
        .transpose()?;
    let failover = (args.failover_devices > 0)
        .then(|| fleet::failover::run(args, dir, args.failover_devices))
        .transpose()?;
    let durable = (args.durable_calls > 0)
        .then(|| fleet::durable::run(args, dir))
        .transpose()?;
    let hold = (args.hold_devices > 0)
        .then(|| fleet::hold::run(args, dir, args.hold_devices))
        .transpose()?;
    Ok(Report {
        calls,
        message: args.message,
        fleet,
        throughput,
        failover,
        durable,
        hold,
        ..Report::default()
    })
}
