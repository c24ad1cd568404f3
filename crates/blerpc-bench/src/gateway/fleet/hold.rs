//! `blerpc-bench gateway --hold-devices N`: how many dialled-in encrypted devices two gateways
//! of a fleet hold on this machine. N simulated devices (each a real `blerpc` server with an
//! identity of its own, on its own TCP connection; device `i` dials gateway `i % 2`) connect
//! to two gateways on one nats-server, each gateway `--workers W --nats` with W sized for its
//! half (the open-file limit is 20,000 per process). Measured while they connect and once they
//! all have: the connect rate; the memory per device on each side (the gateways' processes,
//! the simulators', nats-server's, the kernel's, and the machine's as a whole from
//! `MemAvailable`); the kernel's sockets (`/proc/net/sockstat`) and the descriptors; the CPU
//! time per device's connect (key exchange, setup, presence) on each side; and then a sample
//! of devices called through each gateway (half of each answered locally, half forwarded over
//! NATS), every answer checked.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::super::scale::{self, DeviceKeys, PER_WORKER, Plan, Tally};
use super::super::{GatewayArgs, TOKEN, procs};
use crate::table::Table;

/// Devices called through each gateway once all are connected.
const SAMPLE: usize = 10_000;

/// One side's resources with every device connected, over what it used before they came.
#[derive(Debug, Serialize)]
pub struct Side {
    /// What it is: `gateways`, `simulators`, `nats-server`, `kernel` or `machine`.
    pub name: &'static str,
    /// Processes.
    pub processes: usize,
    /// Bytes before the devices (RSS; the kernel: slab and socket buffers; the machine: total
    /// minus available).
    pub bytes_before: u64,
    /// Bytes with every device connected.
    pub bytes_after: u64,
    /// CPU seconds spent while the devices connected (not measured for the kernel and the
    /// machine: 0).
    pub connect_cpu_seconds: f64,
}

impl Side {
    /// (after − before) / devices.
    fn per_device(&self, devices: usize) -> f64 {
        self.bytes_after.saturating_sub(self.bytes_before) as f64 / devices.max(1) as f64
    }
}

/// The hold part's result.
#[derive(Debug, Serialize)]
pub struct HoldReport {
    /// Devices asked for.
    pub devices: usize,
    /// Worker processes per gateway.
    pub workers: usize,
    /// Simulator processes.
    pub simulators: usize,
    /// Seconds until the fleet (both gateways' listing) held every device.
    pub connect_seconds: f64,
    /// Devices connected per second, over the whole connect.
    pub connect_rate: f64,
    /// Each side's memory and CPU.
    pub sides: Vec<Side>,
    /// TCP sockets in use with every device connected (`/proc/net/sockstat`).
    pub tcp_sockets: u64,
    /// Open descriptors of the gateways' processes together.
    pub gateway_descriptors: usize,
    /// The most descriptors one gateway process held.
    pub max_descriptors_per_process: usize,
    /// The sample's calls through gateway A.
    pub through_a: Tally,
    /// The sample's calls through gateway B.
    pub through_b: Tally,
}

/// `/proc/meminfo` field `key` in bytes.
fn meminfo(key: &str) -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// The kernel's memory that grows with sockets: slab (socket structures, dentries of socket
/// inodes) and TCP buffers.
fn kernel_bytes() -> u64 {
    meminfo("Slab") + sockstat().1 * 4096
}

/// Memory in use on the machine as a whole.
fn machine_bytes() -> u64 {
    meminfo("MemTotal").saturating_sub(meminfo("MemAvailable"))
}

/// TCP sockets in use and TCP buffer pages, from `/proc/net/sockstat`.
fn sockstat() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/net/sockstat").unwrap_or_default();
    let tcp = text
        .lines()
        .find_map(|l| l.strip_prefix("TCP: "))
        .unwrap_or("");
    let field = |name: &str| {
        let mut words = tcp.split_whitespace();
        while let Some(w) = words.next() {
            if w == name {
                return words
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
        0
    };
    (field("inuse"), field("mem"))
}

/// Open descriptors of `pid`.
fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// RSS and CPU seconds of a set of processes.
fn usage(pids: &[u32]) -> (u64, f64) {
    pids.iter().fold((0, 0.0), |(rss, cpu), &p| {
        (
            rss + crate::process::rss_bytes(p).unwrap_or(0),
            cpu + procs::own_cpu(p),
        )
    })
}

/// Runs the part with `devices` devices.
pub fn run(args: &GatewayArgs, dir: &Path, devices: usize) -> anyhow::Result<HoldReport> {
    let half = devices.div_ceil(2);
    // Room for SO_REUSEPORT's uneven share: a worker past 20,000 descriptors refuses devices.
    let workers = (half * 11 / 10).div_ceil(PER_WORKER).max(1);
    let own = dir.join("hold");
    std::fs::create_dir_all(&own)?;
    std::fs::write(own.join("tokens"), format!("{TOKEN}\n"))?;
    let keys = DeviceKeys::derive(devices, &own)?;
    let ids = Arc::new(keys.ids.clone());
    let (nats, url) = super::nats_server(&own)?;
    let workers_arg = workers.to_string();
    let mut options = scale::GATEWAY_AT_SCALE.to_vec();
    if workers > 1 {
        options.extend(["--workers", &workers_arg]);
    }
    let a = super::member(&own, &url, "gw-a", Some(&keys.allow), &options, None)?;
    let b = super::member(&own, &url, "gw-b", Some(&keys.allow), &options, None)?;
    let gateway_pids = || [procs::tree(a.proc.pid()), procs::tree(b.proc.pid())].concat();
    // Settle (every worker joined and loaded the allow-list), then the baseline.
    std::thread::sleep(Duration::from_secs(3));
    let (gw_before, gw_cpu_before) = usage(&gateway_pids());
    let (nats_before, nats_cpu_before) = usage(&[nats.pid()]);
    let (kernel_before, machine_before) = (kernel_bytes(), machine_bytes());
    let started = Instant::now();
    let simulators = keys.simulators(
        &[
            super::failover::addr(&a.devices)?,
            super::failover::addr(&b.devices)?,
        ],
        false,
    )?;
    let sim_pids: Vec<u32> = simulators.iter().map(procs::Proc::pid).collect();
    eprintln!(
        "gateway hold: {devices} devices from {} simulators, 2 gateways of {workers} worker(s)",
        sim_pids.len()
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let limit = Duration::from_secs(120 + devices as u64 / 500);
    let mut held = 0;
    let mut shown = Instant::now();
    while held < devices {
        anyhow::ensure!(
            started.elapsed() < limit,
            "only {held} of {devices} devices held within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
        held = rt.block_on(scale::connected(a.http)).unwrap_or(held);
        if shown.elapsed() >= Duration::from_secs(5) || held >= devices {
            shown = Instant::now();
            eprintln!(
                "gateway hold: {held} of {devices} held ({:.0} s), machine {:.1} GiB in use, \
                 {} TCP sockets",
                started.elapsed().as_secs_f64(),
                machine_bytes() as f64 / f64::from(1 << 30),
                sockstat().0
            );
        }
    }
    let connect_seconds = started.elapsed().as_secs_f64();
    // Settle: the last presence writes, allocators returning what setups borrowed.
    std::thread::sleep(Duration::from_secs(5));
    let gateway_pids = gateway_pids();
    let (gw_after, gw_cpu_after) = usage(&gateway_pids);
    let (sim_after, sim_cpu) = usage(&sim_pids);
    let (nats_after, nats_cpu_after) = usage(&[nats.pid()]);
    let per_process: Vec<usize> = gateway_pids.iter().map(|&p| descriptors(p)).collect();
    let tcp_sockets = sockstat().0;
    let sides = vec![
        Side {
            name: "gateways",
            processes: gateway_pids.len(),
            bytes_before: gw_before,
            bytes_after: gw_after,
            connect_cpu_seconds: gw_cpu_after - gw_cpu_before,
        },
        Side {
            name: "simulators",
            processes: sim_pids.len(),
            bytes_before: 0,
            bytes_after: sim_after,
            connect_cpu_seconds: sim_cpu,
        },
        Side {
            name: "nats-server",
            processes: 1,
            bytes_before: nats_before,
            bytes_after: nats_after,
            connect_cpu_seconds: nats_cpu_after - nats_cpu_before,
        },
        Side {
            name: "kernel",
            processes: 0,
            bytes_before: kernel_before,
            bytes_after: kernel_bytes(),
            connect_cpu_seconds: 0.0,
        },
        Side {
            name: "machine",
            processes: 0,
            bytes_before: machine_before,
            bytes_after: machine_bytes(),
            connect_cpu_seconds: 0.0,
        },
    ];
    // A sample spread over every simulator; each gateway answers half of it itself and
    // forwards the other half over NATS.
    let sample: Arc<Vec<String>> = Arc::new(
        ids.iter()
            .step_by((devices / SAMPLE).max(1))
            .take(SAMPLE)
            .cloned()
            .collect(),
    );
    let concurrency = args.concurrency.max(1);
    eprintln!(
        "gateway hold: calling {} devices through each gateway",
        sample.len()
    );
    let through_a = rt.block_on(scale::calls(
        &[a.http],
        sample.clone(),
        concurrency,
        Plan::Each,
    ))?;
    let through_b = rt.block_on(scale::calls(&[b.http], sample, concurrency, Plan::Each))?;
    drop(simulators);
    Ok(HoldReport {
        devices,
        workers,
        simulators: sim_pids.len(),
        connect_seconds,
        connect_rate: devices as f64 / connect_seconds,
        sides,
        tcp_sockets,
        gateway_descriptors: per_process.iter().sum(),
        max_descriptors_per_process: per_process.iter().copied().max().unwrap_or(0),
        through_a,
        through_b,
    })
}

/// Prints the part; `true` if every device was held and every sampled call answered right.
pub fn print(r: &HoldReport) -> bool {
    println!(
        "gateway hold: {} devices across 2 gateways ({} worker(s) each) from {} simulators, \
         held after {:.1} s ({:.0} devices/s)",
        r.devices, r.workers, r.simulators, r.connect_seconds, r.connect_rate
    );
    let mut t = Table::new([
        "side",
        "processes",
        "MiB before",
        "MiB after",
        "KiB per device",
        "connect CPU s",
        "CPU µs per device",
    ]);
    let mib = |b: u64| format!("{:.0}", b as f64 / f64::from(1 << 20));
    for s in &r.sides {
        let cpu = s.connect_cpu_seconds > 0.0;
        t.row([
            s.name.to_string(),
            if s.processes > 0 {
                s.processes.to_string()
            } else {
                "—".into()
            },
            mib(s.bytes_before),
            mib(s.bytes_after),
            format!("{:.2}", s.per_device(r.devices) / 1024.0),
            if cpu {
                format!("{:.1}", s.connect_cpu_seconds)
            } else {
                "—".into()
            },
            if cpu {
                format!("{:.0}", s.connect_cpu_seconds * 1e6 / r.devices as f64)
            } else {
                "—".into()
            },
        ]);
    }
    print!("{}", t.plain(""));
    println!(
        "TCP sockets in use {}; gateway descriptors {} (at most {} in one process)",
        r.tcp_sockets, r.gateway_descriptors, r.max_descriptors_per_process
    );
    let mut ok = true;
    for (name, tally) in [("A", &r.through_a), ("B", &r.through_b)] {
        println!(
            "sample through {name}: {} answered, failed: {}, wrong: {}",
            tally.ok,
            tally.failures_text(),
            tally.wrong
        );
        ok &= tally.failed() == 0 && tally.wrong == 0;
    }
    ok
}
