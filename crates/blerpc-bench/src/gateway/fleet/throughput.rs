//! `blerpc-bench gateway --gateways N`: calls per second through N gateways of a fleet against
//! one, on the same machine. Each configuration runs on a fresh nats-server with the same
//! devices (`--fleet-devices`, simulated, device `i` dialling gateway `i % N`) and the same
//! HTTP callers (`--concurrency`, caller `t` on gateway `t % N`, random devices: with N
//! gateways, (N − 1)/N of the calls are forwarded over NATS). Each gateway is kept to a CPU of
//! its own (`taskset`, gateway `k` on CPU `k % CPUs`), so one gateway has one CPU and N have N:
//! the machine split the same way. The devices, the callers and nats-server are not kept to a
//! CPU and share the machine with the gateways; the CPU time of each is measured (CPU seconds
//! per second of calls), which says what limits the figure. Two derived figures say how far
//! the machine and the gateways are from the target: this machine's ceiling (its CPUs over
//! one gateway's whole CPU per call, callers and devices included: what N gateways could give
//! if forwarding cost nothing) and the ratio by gateway CPU per call (what N gateways would
//! give each on a CPU of its own with nothing else there).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::Serialize;

use super::super::scale::{self, DeviceKeys, Plan};
use super::super::{GatewayArgs, procs};
use crate::stats::{median, quantile};
use crate::table::Table;

/// One configuration in one run.
#[derive(Debug, Clone, Serialize)]
pub struct ThroughputSample {
    /// The run (1-based).
    pub run: usize,
    /// Gateways.
    pub gateways: usize,
    /// Calls answered right per second.
    pub calls_per_second: f64,
    /// Latency p50, ms.
    pub p50_ms: f64,
    /// Latency p99, ms.
    pub p99_ms: f64,
    /// Failed calls (must be 0).
    pub failed: usize,
    /// The first failure.
    pub first_failure: Option<String>,
    /// CPU seconds per wall second while calling: the gateways together.
    pub cpu_gateways: f64,
    /// … nats-server.
    pub cpu_nats: f64,
    /// … the device simulators.
    pub cpu_devices: f64,
    /// … the callers (this process).
    pub cpu_callers: f64,
}

/// The throughput part's result.
#[derive(Debug, Serialize)]
pub struct ThroughputReport {
    /// Gateways compared with one.
    pub gateways: usize,
    /// Devices.
    pub devices: usize,
    /// Concurrent callers.
    pub concurrency: usize,
    /// Seconds of calls per configuration per run.
    pub seconds: u64,
    /// CPUs of the machine.
    pub cpus: usize,
    /// Every run's samples.
    pub samples: Vec<ThroughputSample>,
    /// Median over the runs of N gateways' calls/s over one's in the same run.
    pub ratio: f64,
    /// The gateways' CPU per call, µs (median over the runs): one gateway.
    pub gateway_us_per_call_1: f64,
    /// … N gateways ((N − 1)/N of the calls forwarded).
    pub gateway_us_per_call_n: f64,
    /// N gateways over one if each gateway had a CPU to itself and nothing else: N over one
    /// by gateway CPU per call (what forwarding costs the fleet's gateways).
    pub ratio_by_gateway_cpu: f64,
    /// The most N gateways could give over one on this machine if forwarding cost nothing:
    /// its CPUs over one gateway's CPU per call for everything (callers, devices, gateway),
    /// against one gateway's calls/s.
    pub ceiling_here: f64,
}

/// The CPU seconds this process (the callers) has used, its children left out.
fn own_cpu() -> f64 {
    procs::own_cpu(std::process::id())
}

/// Runs the part: `--runs` runs, each measuring 1 and N gateways in rotating order.
pub fn run(args: &GatewayArgs, dir: &Path) -> anyhow::Result<ThroughputReport> {
    let n = args.gateways.max(2);
    let devices = args.fleet_devices.max(1);
    let seconds = args.call_seconds.max(1);
    let runs = args.runs.max(1);
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let keys = DeviceKeys::derive(devices, dir)?;
    let ids = Arc::new(keys.ids.clone());
    let mut samples = Vec::new();
    for run in 0..runs {
        let order = if run % 2 == 0 { [1, n] } else { [n, 1] };
        for gateways in order {
            eprintln!(
                "gateway throughput: run {} of {runs}, {gateways} gateway(s)",
                run + 1
            );
            let own = dir.join(format!("throughput-{run}-{gateways}"));
            std::fs::create_dir_all(&own)?;
            std::fs::write(own.join("tokens"), format!("{}\n", super::super::TOKEN))?;
            let (nats, url) = super::nats_server(&own)?;
            let mut members = Vec::new();
            let mut options = scale::GATEWAY_AT_SCALE.to_vec();
            options.extend(args.fleet_gateway_arg.iter().map(String::as_str));
            for k in 0..gateways {
                members.push(super::member(
                    &own,
                    &url,
                    &format!("gw-{k}"),
                    Some(&keys.allow),
                    &options,
                    Some(k % cpus),
                )?);
            }
            let http: Vec<SocketAddr> = members.iter().map(|m| m.http).collect();
            let device_ports: Vec<SocketAddr> = members
                .iter()
                .map(|m| {
                    m.devices
                        .strip_prefix("tcp://")
                        .context("the gateway's device URL")?
                        .parse()
                        .context("the gateway's device URL")
                })
                .collect::<anyhow::Result<_>>()?;
            let simulators = keys.simulators(&device_ports, false)?;
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            wait_connected(&rt, &http, devices)?;
            // Every gateway's directory learns where each device is: call each once through
            // every gateway before the clock starts.
            for gw in &http {
                let warm = rt.block_on(scale::calls(
                    &[*gw],
                    ids.clone(),
                    args.concurrency.max(1),
                    Plan::Each,
                ))?;
                anyhow::ensure!(
                    warm.failed() == 0,
                    "warming up through {gw}: {} calls failed ({:?})",
                    warm.failed(),
                    warm.first_failure
                );
            }
            let cpu = |pids: &[u32]| pids.iter().map(|p| procs::tree_cpu(*p)).sum::<f64>();
            let gw_pids: Vec<u32> = members.iter().map(|m| m.proc.pid()).collect();
            let sim_pids: Vec<u32> = simulators.iter().map(procs::Proc::pid).collect();
            let before = (
                cpu(&gw_pids),
                cpu(&[nats.pid()]),
                cpu(&sim_pids),
                own_cpu(),
                Instant::now(),
            );
            let tally = rt.block_on(scale::calls(
                &http,
                ids.clone(),
                args.concurrency.max(1),
                Plan::Random(Duration::from_secs(seconds)),
            ))?;
            let wall = before.4.elapsed().as_secs_f64();
            let sample = ThroughputSample {
                run: run + 1,
                gateways,
                calls_per_second: tally.ok as f64 / wall,
                p50_ms: quantile(&tally.latencies, 0.5),
                p99_ms: quantile(&tally.latencies, 0.99),
                failed: tally.failed(),
                first_failure: tally.first_failure.clone(),
                cpu_gateways: (cpu(&gw_pids) - before.0) / wall,
                cpu_nats: (cpu(&[nats.pid()]) - before.1) / wall,
                cpu_devices: (cpu(&sim_pids) - before.2) / wall,
                cpu_callers: (own_cpu() - before.3) / wall,
            };
            eprintln!(
                "gateway throughput: {gateways} gateway(s): {:.0} calls/s",
                sample.calls_per_second
            );
            samples.push(sample);
            drop(simulators);
            drop(members);
            drop(nats);
            let _ = std::fs::remove_dir_all(&own);
        }
    }
    let per_run = |run: usize, g: usize| {
        samples
            .iter()
            .find(|s| s.run == run && s.gateways == g)
            .map(|s| s.calls_per_second)
    };
    let ratios: Vec<f64> = (1..=runs)
        .filter_map(|r| Some(per_run(r, n)? / per_run(r, 1)?))
        .collect();
    let per_call = |g: usize, cpu: fn(&ThroughputSample) -> f64| {
        let each: Vec<f64> = samples
            .iter()
            .filter(|s| s.gateways == g && s.calls_per_second > 0.0)
            .map(|s| cpu(s) / s.calls_per_second * 1e6)
            .collect();
        median(&each)
    };
    let gateway_us_per_call_1 = per_call(1, |s| s.cpu_gateways);
    let gateway_us_per_call_n = per_call(n, |s| s.cpu_gateways);
    let all_us_per_call_1 = per_call(1, |s| {
        s.cpu_gateways + s.cpu_nats + s.cpu_devices + s.cpu_callers
    });
    let calls_1 = median(
        &samples
            .iter()
            .filter(|s| s.gateways == 1)
            .map(|s| s.calls_per_second)
            .collect::<Vec<_>>(),
    );
    let ratio_by_gateway_cpu = (n as f64 / gateway_us_per_call_n) / (1.0 / gateway_us_per_call_1);
    let ceiling_here = (cpus as f64 / all_us_per_call_1 * 1e6) / calls_1;
    Ok(ThroughputReport {
        gateways: n,
        devices,
        concurrency: args.concurrency.max(1),
        seconds,
        cpus,
        samples,
        ratio: median(&ratios),
        gateway_us_per_call_1,
        gateway_us_per_call_n,
        ratio_by_gateway_cpu,
        ceiling_here,
    })
}

/// Waits until the fleet holds `devices` devices, as the first gateway of `http` that answers
/// reports them (a fleet gateway's `/metrics` sums every live node's).
pub(crate) fn wait_connected(
    rt: &tokio::runtime::Runtime,
    http: &[SocketAddr],
    devices: usize,
) -> anyhow::Result<f64> {
    let started = Instant::now();
    let limit = Duration::from_secs(60 + devices as u64 / 500);
    let mut all = 0;
    while started.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(250));
        all = http
            .iter()
            .find_map(|h| rt.block_on(scale::connected(*h)).ok())
            .unwrap_or(0);
        if all >= devices {
            return Ok(started.elapsed().as_secs_f64());
        }
    }
    anyhow::bail!("only {all} of {devices} devices connected within {limit:?}")
}

/// Prints the part; `true` if its target (N gateways ≥ 1.6 × one) was met and no call failed.
pub fn print(r: &ThroughputReport) -> bool {
    println!(
        "gateway throughput: {} devices, {} HTTP callers on random devices for {} s; each \
         gateway kept to a CPU of its own ({} CPUs); CPU columns: CPU seconds per second",
        r.devices, r.concurrency, r.seconds, r.cpus
    );
    let mut t = Table::new([
        "run",
        "gateways",
        "calls/s",
        "p50 ms",
        "p99 ms",
        "failed",
        "CPU gateways",
        "CPU nats",
        "CPU devices",
        "CPU callers",
    ]);
    for s in &r.samples {
        t.row([
            s.run.to_string(),
            s.gateways.to_string(),
            format!("{:.0}", s.calls_per_second),
            format!("{:.3}", s.p50_ms),
            format!("{:.3}", s.p99_ms),
            s.failed.to_string(),
            format!("{:.2}", s.cpu_gateways),
            format!("{:.2}", s.cpu_nats),
            format!("{:.2}", s.cpu_devices),
            format!("{:.2}", s.cpu_callers),
        ]);
    }
    print!("{}", t.plain(""));
    let failed: usize = r.samples.iter().map(|s| s.failed).sum();
    let met = r.ratio >= 1.6;
    let mut t = Table::new(["figure (median over runs)", "value", "target", "met"]);
    t.row([
        format!("calls/s, {} gateways over 1", r.gateways),
        format!("{:.2}×", r.ratio),
        "≥ 1.6×".into(),
        if met { "yes" } else { "NO" }.into(),
    ]);
    t.row([
        "… if forwarding cost nothing (this machine's ceiling)".to_string(),
        format!("{:.2}×", r.ceiling_here),
        String::new(),
        String::new(),
    ]);
    t.row([
        format!(
            "… by gateway CPU per call ({:.1} µs with 1, {:.1} µs with {})",
            r.gateway_us_per_call_1, r.gateway_us_per_call_n, r.gateways
        ),
        format!("{:.2}×", r.ratio_by_gateway_cpu),
        String::new(),
        String::new(),
    ]);
    t.row([
        "failed calls".into(),
        failed.to_string(),
        "0".into(),
        if failed == 0 { "yes" } else { "NO" }.into(),
    ]);
    print!("{}", t.plain(""));
    if let Some(f) = r.samples.iter().find_map(|s| s.first_failure.as_ref()) {
        println!("first failure: {f}");
    }
    met && failed == 0
}
