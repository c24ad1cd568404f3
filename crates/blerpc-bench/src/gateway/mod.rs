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
//! - **kept** (for the record): every caller keeps its connection and calls again; here the
//!   gateway's extra hop (HTTP, or the WebSocket splice) is all that differs, against one
//!   loopback round trip of ~10 µs.
//!
//! Each run measures every variant of both modes in turn (the order rotates from run to run);
//! the report gives each variant's p50 and p99 per run, and the medians over the runs of p50 and
//! of p50 over the direct p50 of the same run and mode (targets, command mode: HTTP ≤ 1.5×,
//! relayed ≤ 1.2×).
//!
//! **Scale** (`--devices N`, see [`scale`]): N dialled-in encrypted devices held by the gateway,
//! its memory per device, and HTTP calls to randomly chosen devices.

pub(crate) mod callers;
pub mod fleet;
pub(crate) mod procs;
pub mod scale;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use serde::Serialize;

use crate::stats::{median, quantile};
use crate::table::Table;

/// `blerpc-bench gateway` options.
#[derive(Debug, Args)]
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
    /// Measure the fleet instead: two gateways on a nats-server, calls forwarded over NATS
    /// ([`fleet`]; `--runs` runs of `--calls` calls per variant).
    #[arg(long)]
    pub fleet: bool,
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
    /// `direct`, `http` or `relayed`.
    pub variant: &'static str,
    /// Median latency (ms).
    pub p50_ms: f64,
    /// 99th percentile (ms).
    pub p99_ms: f64,
    /// p50 over the same run's direct p50.
    pub p50_vs_direct: f64,
}

/// The whole result.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Calls per variant per run.
    pub calls: usize,
    /// Message bytes.
    pub message: usize,
    /// Every run's samples.
    pub samples: Vec<Sample>,
    /// Medians over the runs, per mode and variant: (mode, variant, p50 ms, p99 ms, p50 × direct).
    pub medians: Vec<(String, String, f64, f64, f64)>,
    /// The scale part, if run.
    pub scale: Option<scale::ScaleReport>,
    /// The fleet part, if run.
    pub fleet: Option<fleet::FleetReport>,
}

const VARIANTS: [&str; 3] = ["direct", "http", "relayed"];
const MODES: [&str; 3] = ["command", "connect", "kept"];
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
    if args.fleet && !args.quick {
        let report = fleet::run(runs, calls, &dir)?;
        let met = fleet::print(&report);
        if let Some(path) = &args.json {
            std::fs::write(path, serde_json::to_string_pretty(&report)?)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        let _ = std::fs::remove_dir_all(&dir);
        return Ok(met);
    }
    let tokens = dir.join("tokens");
    let gw = procs::gateway(
        &dir,
        None,
        &["--tokens", tokens.to_str().context("temp path")?],
    )?;
    let key_file = dir.join("device.key");
    blerpc::identity::store(&key_file, &blerpc::identity::generate(), true)?;
    let (device, listen, key) = procs::device(&dir, &gw.devices, &key_file)?;
    let id = hex::encode(key);
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
            for mode in MODES {
                let mut lat = std::collections::BTreeMap::new();
                for k in 0..VARIANTS.len() {
                    let variant = VARIANTS[(k + run) % VARIANTS.len()];
                    let connect = || async {
                        match variant {
                            "direct" => callers::direct(&listen, key).await,
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
                        for _ in 0..calls {
                            ms.push(caller.echo(&message).await?.as_secs_f64() * 1e3);
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
                for v in VARIANTS {
                    let p50 = quantile(&lat[v], 0.5);
                    all.push(Sample {
                        run: run + 1,
                        mode,
                        variant: v,
                        p50_ms: p50,
                        p99_ms: quantile(&lat[v], 0.99),
                        p50_vs_direct: p50 / direct_p50,
                    });
                }
            }
        }
        anyhow::Ok(all)
    })?;
    let mut medians = Vec::new();
    for mode in MODES {
        for v in VARIANTS {
            let of = |f: fn(&Sample) -> f64| {
                median(
                    &samples
                        .iter()
                        .filter(|s| s.variant == v && s.mode == mode)
                        .map(f)
                        .collect::<Vec<_>>(),
                )
            };
            medians.push((
                mode.to_string(),
                v.to_string(),
                of(|s| s.p50_ms),
                of(|s| s.p99_ms),
                of(|s| s.p50_vs_direct),
            ));
        }
    }
    drop(device);
    drop(gw);
    let scale = if args.devices > 0 || args.quick {
        Some(scale::run(args, &dir)?)
    } else {
        None
    };
    let fleet = if args.quick {
        Some(fleet::run(runs, calls, &dir)?)
    } else {
        None
    };
    let report = Report {
        calls,
        message: args.message,
        samples,
        medians,
        scale,
        fleet,
    };
    let met = print_report(&report);
    // The quick profile (`cargo test`) checks that everything answered right, not the timings
    // of a shared machine.
    let ok = if args.quick {
        report
            .scale
            .as_ref()
            .is_none_or(|s| s.connected == s.devices && s.call_errors == 0)
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
    println!(
        "gateway: echo of {} bytes on loopback, one call at a time; command: a process per call \
         (`blerpc call`, or a one-shot HTTP client); connect: a new connection per call; kept: {} \
         calls on one connection",
        r.message, r.calls
    );
    let mut t = Table::new(["run", "mode", "variant", "p50 ms", "p99 ms", "p50 × direct"]);
    for s in &r.samples {
        t.row([
            s.run.to_string(),
            s.mode.to_string(),
            s.variant.to_string(),
            format!("{:.3}", s.p50_ms),
            format!("{:.3}", s.p99_ms),
            format!("{:.2}", s.p50_vs_direct),
        ]);
    }
    print!("{}", t.plain(""));
    let runs = r.samples.len() / (VARIANTS.len() * MODES.len());
    println!("medians over {runs} runs:");
    let mut t = Table::new([
        "mode",
        "variant",
        "p50 ms",
        "p99 ms",
        "p50 × direct",
        "target",
        "met",
    ]);
    let mut ok = true;
    for (mode, v, p50, p99, ratio) in &r.medians {
        let target = match (mode.as_str(), v.as_str()) {
            ("command", "http") => Some(1.5),
            ("command", "relayed") => Some(1.2),
            _ => None,
        };
        let met = target.map(|t| *ratio <= t);
        ok &= met.unwrap_or(true);
        t.row([
            mode.clone(),
            v.clone(),
            format!("{p50:.3}"),
            format!("{p99:.3}"),
            format!("{ratio:.2}"),
            target.map_or("—".into(), |t| format!("≤ {t}")),
            met.map_or("—".into(), |m| if m { "yes" } else { "NO" }.to_string()),
        ]);
    }
    print!("{}", t.plain(""));
    println!(
        "p50 × direct: the variant's median latency over the direct call's in the same run and \
         mode (direct: the runtime's central over TCP straight to the device, encrypted)"
    );
    if let Some(s) = &r.scale {
        ok &= scale::print(s);
    }
    if let Some(f) = &r.fleet {
        ok &= fleet::print(f);
    }
    ok
}
