//! `blerpc-bench pipeline`: calls in flight on the simulated BLE link. How many calls a second
//! a central gets from one peripheral with 1, 2, 4 and 8 calls in flight (`echo` and a 200-byte
//! `data_write`), per platform profile and connection interval, against this project's
//! peripheral and against the two reference peripherals' behaviour (`shared/spec/wire.md`):
//!
//! | peripheral | what it is here |
//! |---|---|
//! | `blerpc` | the runtime's server as `blerpc serve` configures it ([`ServerConfig::default`]), holding as many requests as its connection can ([`blerpc::server::SLOTS`], 8; the default holds 4 and answers a fifth BUSY): handlers run concurrently |
//! | `firmware` | the firmware's connection (`firmware/service`: fixed buffers, one reassembly slot, requests answered inline, one at a time) on the simulated link ([`firmware`]) |
//! | `reference-c` | the same server running one handler at a time and holding at most 2 requests (the C firmware's work queue and double buffer: a third gets BUSY) |
//! | `reference-python` | the same server holding up to 256 requests, handlers concurrent (the Python peripheral runs each on a thread of its own) |
//!
//! Every handler takes `--service-us` of (virtual) time before it answers, for all three alike:
//! what a request costs the device (decrypting, the handler, encrypting). The reference
//! peripherals are modelled by that time, their concurrency and their request limit, nothing
//! else. Each case runs on its own paused-clock runtime (virtual time) for `--seconds` of link
//! time at the profile's interval from the start (no interval update), after one warm-up call,
//! `--runs` times; the row is the run with the median calls/s (runs differ a little: the order
//! of tasks woken at one instant varies between processes). The ratio divides a row's calls/s
//! by the same peripheral's, profile's and interval's with one call in flight, in the same run.
//!
//! ```
//! use blerpc_bench::pipeline::{PipelineArgs, run_cases};
//!
//! let args = PipelineArgs {
//!     profile: vec!["macos".into()],
//!     ci_ms: vec![15.0],
//!     in_flight: vec![1, 2],
//!     peripheral: vec!["blerpc".into()],
//!     workload: vec!["echo".into()],
//!     runs: 1,
//!     seconds: 1.0,
//!     ..PipelineArgs::default()
//! };
//! let rows = run_cases(&args)?;
//! assert_eq!(rows.len(), 2);
//! assert!(rows.iter().all(|r| r.failed == 0 && r.calls > 0));
//! # anyhow::Ok(())
//! ```

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use blerpc::client::PinPolicy;
use blerpc::server::{BoxFuture, BoxStream, Bytes, CallKind, Dispatch, Status};
use blerpc::{Client, ClientConfig, Server, ServerConfig};
use blerpc_demo::progress::Steps;
use blerpc_demo::{DemoService, pb};
use blerpc_sim::LinkParams;
use blerpc_sim::profile::Profile;
use clap::Args;
use futures_util::future::join_all;
use serde_json::json;
use tokio::sync::Mutex;

use crate::ble::selected_profiles;
use crate::table::{Align, Table};

pub mod cancel;
pub mod firmware;
pub mod streams;

/// The most calls in flight the runtime's central can be configured to keep
/// ([`blerpc::client::MAX_CALLS_IN_FLIGHT`]); a case above the default 4 configures it so.
pub const MAX_IN_FLIGHT: usize = blerpc::client::MAX_CALLS_IN_FLIGHT;

/// The most runs of a case `--runs` accepts.
pub const MAX_RUNS: u32 = 101;

/// The longest run `--seconds` accepts (virtual time).
pub const MAX_SECONDS: f64 = 600.0;

/// `blerpc-bench pipeline` options.
#[derive(Debug, Args, Clone)]
pub struct PipelineArgs {
    /// Profiles to simulate (comma-separated): macos, ios, android, web, nrf54l15. Default: all.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub profile: Vec<String>,
    /// Connection intervals in ms (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "MS", default_values_t = [15.0, 30.0])]
    pub ci_ms: Vec<f64>,
    /// Calls in flight (comma-separated), each at most the central's 8.
    #[arg(long, value_delimiter = ',', value_name = "N", default_values_t = [1, 2, 4, 8])]
    pub in_flight: Vec<usize>,
    /// Peripherals (comma-separated): blerpc, firmware, reference-c, reference-python.
    #[arg(long, value_delimiter = ',', value_name = "NAMES",
          default_values_t = ["blerpc".to_string(), "firmware".into(), "reference-c".into(),
                              "reference-python".into()])]
    pub peripheral: Vec<String>,
    /// Workloads (comma-separated): echo, data_write (200 bytes).
    #[arg(long, value_delimiter = ',', value_name = "NAMES",
          default_values_t = ["echo".to_string(), "data_write".into()])]
    pub workload: Vec<String>,
    /// Runs of each case; the row is the median's.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub runs: u32,
    /// Link time each case runs for (virtual seconds).
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    pub seconds: f64,
    /// The ATT MTU.
    #[arg(long, value_name = "BYTES", default_value_t = 247)]
    pub mtu: usize,
    /// What each request costs the peripheral before it answers (virtual µs), for every
    /// peripheral alike.
    #[arg(long, value_name = "US", default_value_t = 500)]
    pub service_us: u64,
    /// Seed of the simulated links' RNG (host delays).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Write machine-readable results to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

impl Default for PipelineArgs {
    fn default() -> Self {
        PipelineArgs {
            profile: Vec::new(),
            ci_ms: vec![15.0, 30.0],
            in_flight: vec![1, 2, 4, 8],
            peripheral: vec![
                "blerpc".into(),
                "firmware".into(),
                "reference-c".into(),
                "reference-python".into(),
            ],
            workload: vec!["echo".into(), "data_write".into()],
            runs: 3,
            seconds: 10.0,
            mtu: 247,
            service_us: 500,
            seed: 1,
            json: None,
        }
    }
}

/// A peripheral's request limit (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peripheral {
    /// The runtime's server as `blerpc serve` configures it.
    Blerpc,
    /// The firmware's connection, answering inline.
    Firmware,
    /// At most 2 requests held: the C firmware's double buffer.
    ReferenceC,
    /// A thread per request: up to 256 held.
    ReferencePython,
}

impl Peripheral {
    /// Its name on the command line and in the results.
    pub fn name(self) -> &'static str {
        match self {
            Peripheral::Blerpc => "blerpc",
            Peripheral::Firmware => "firmware",
            Peripheral::ReferenceC => "reference-c",
            Peripheral::ReferencePython => "reference-python",
        }
    }

    fn parse(name: &str) -> anyhow::Result<Self> {
        Ok(match name {
            "blerpc" => Peripheral::Blerpc,
            "firmware" => Peripheral::Firmware,
            "reference-c" => Peripheral::ReferenceC,
            "reference-python" => Peripheral::ReferencePython,
            _ => {
                bail!("unknown peripheral `{name}`: expected blerpc, reference-c, reference-python")
            }
        })
    }

    /// The demo service as this peripheral runs it, each request taking `service`.
    fn dispatch(self, service: Duration) -> Paced<impl Dispatch> {
        Paced {
            inner: pb::BlerpcServer::new(DemoService::default()),
            service,
            serial: (self == Peripheral::ReferenceC).then(|| Arc::new(Mutex::new(()))),
        }
    }

    /// The server configuration that stands for it.
    fn config(self) -> ServerConfig {
        let mut config = ServerConfig {
            identity: Some(blerpc::identity::generate()),
            ..ServerConfig::default()
        };
        match self {
            Peripheral::Blerpc => config.peripheral.max_pending_requests = blerpc::server::SLOTS,
            Peripheral::Firmware => {}
            Peripheral::ReferenceC => config.peripheral.max_pending_requests = 2,
            Peripheral::ReferencePython => config.peripheral.max_pending_requests = 256,
        }
        config
    }
}

/// The demo service with a cost per request and, for a peripheral that runs one request at a
/// time, a lock held while a request runs.
struct Paced<D> {
    inner: D,
    service: Duration,
    serial: Option<Arc<Mutex<()>>>,
}

impl<D: Dispatch> Dispatch for Paced<D> {
    fn kind(&self, name: &str) -> Option<CallKind> {
        self.inner.kind(name)
    }
    fn unary(&self, name: &str, request: Bytes) -> BoxFuture<Result<Vec<u8>, Status>> {
        let answer = self.inner.unary(name, request);
        let serial = self.serial.clone();
        let service = self.service;
        Box::pin(async move {
            let _turn = match &serial {
                Some(lock) => Some(lock.lock().await),
                None => None,
            };
            tokio::time::sleep(service).await;
            answer.await
        })
    }
    fn server_stream(&self, name: &str, request: Bytes) -> BoxStream<Result<Vec<u8>, Status>> {
        self.inner.server_stream(name, request)
    }
    fn client_stream(
        &self,
        name: &str,
        items: BoxStream<Bytes>,
    ) -> BoxFuture<Result<Vec<u8>, Status>> {
        self.inner.client_stream(name, items)
    }
    fn sole_upload(&self) -> Option<&'static str> {
        self.inner.sole_upload()
    }
}

/// What a case calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// `echo` of a 4-byte message.
    Echo,
    /// `data_write` of 200 bytes (the reference's `data_write_throughput` payload).
    DataWrite,
}

impl Workload {
    /// Its name on the command line and in the results.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Echo => "echo",
            Workload::DataWrite => "data_write",
        }
    }

    fn parse(name: &str) -> anyhow::Result<Self> {
        Ok(match name {
            "echo" => Workload::Echo,
            "data_write" => Workload::DataWrite,
            _ => bail!("unknown workload `{name}`: expected echo, data_write"),
        })
    }

    /// One call, its answer checked.
    async fn call(self, c: &pb::BlerpcClient) -> Result<(), String> {
        match self {
            Workload::Echo => {
                let r = c
                    .echo(pb::EchoRequest {
                        message: "ping".into(),
                    })
                    .await
                    .map_err(|e| e.to_string())?;
                (r.message == "ping")
                    .then_some(())
                    .ok_or_else(|| format!("echo answered {:?}", r.message))
            }
            Workload::DataWrite => {
                let data: Vec<u8> = (0..200u32).map(|i| (i % 256) as u8).collect();
                let r = c
                    .data_write(pb::DataWriteRequest { data: data.into() })
                    .await
                    .map_err(|e| e.to_string())?;
                (r.length == 200)
                    .then_some(())
                    .ok_or_else(|| format!("data_write counted {}", r.length))
            }
        }
    }
}

/// One case's result.
#[derive(Debug, Clone)]
pub struct Row {
    /// The platform profile.
    pub profile: &'static str,
    /// The connection interval.
    pub interval: Duration,
    /// The peripheral.
    pub peripheral: Peripheral,
    /// The workload.
    pub workload: Workload,
    /// Calls in flight.
    pub in_flight: usize,
    /// Calls answered (and checked) in the run.
    pub calls: u64,
    /// Calls that failed (BUSY past the retries, a timeout, a wrong answer), in every run of
    /// the case.
    pub failed: u64,
    /// Link time from the first call to the last answer.
    pub elapsed: Duration,
    /// Connection events that carried data during the run.
    pub events: u64,
    /// Link-layer packets with data, both ways, during the run.
    pub packets: u64,
    /// Containers the central sent during the run (a BUSY retry sends its request again).
    pub requests: u64,
    /// The first failure's text.
    pub error: Option<String>,
}

impl Row {
    /// Calls answered per second of link time.
    pub fn calls_per_s(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 { self.calls as f64 / s } else { 0.0 }
    }
}

/// Checks the options (so a mistake is one line, not a half-run table).
pub fn validate(args: &PipelineArgs) -> anyhow::Result<()> {
    if !(args.seconds.is_finite() && args.seconds > 0.0 && args.seconds <= MAX_SECONDS) {
        bail!("--seconds {} is outside (0, {MAX_SECONDS}]", args.seconds);
    }
    if args.runs == 0 || args.runs > MAX_RUNS {
        bail!("--runs {} is outside 1 ..= {MAX_RUNS}", args.runs);
    }
    for &n in &args.in_flight {
        if n == 0 || n > MAX_IN_FLIGHT {
            bail!("--in-flight {n} is outside 1 ..= {MAX_IN_FLIGHT} (the central's call slots)");
        }
    }
    for &ci in &args.ci_ms {
        if !(ci.is_finite() && ci > 0.0) {
            bail!("--ci-ms {ci} is not a positive interval");
        }
    }
    for p in &args.peripheral {
        Peripheral::parse(p)?;
    }
    for w in &args.workload {
        Workload::parse(w)?;
    }
    for p in selected_profiles(&args.profile)? {
        link(&p, args.ci_ms.first().copied().unwrap_or(15.0), args)?;
    }
    Ok(())
}

fn link(profile: &Profile, ci_ms: f64, args: &PipelineArgs) -> anyhow::Result<LinkParams> {
    let mut p = profile.link_params(Duration::from_secs_f64(ci_ms / 1000.0), args.mtu);
    p.initial_interval = None;
    p.seed = args.seed;
    p.validate().context("invalid link parameters")?;
    Ok(p)
}

/// Runs every case (profiles × intervals × peripherals × workloads × calls in flight), with a
/// progress line per case on stderr.
pub fn run_cases(args: &PipelineArgs) -> anyhow::Result<Vec<Row>> {
    validate(args)?;
    let profiles = selected_profiles(&args.profile)?;
    let peripherals = args
        .peripheral
        .iter()
        .map(|p| Peripheral::parse(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let workloads = args
        .workload
        .iter()
        .map(|w| Workload::parse(w))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let total = profiles.len()
        * args.ci_ms.len()
        * peripherals.len()
        * workloads.len()
        * args.in_flight.len();
    let steps = Steps::new("pipeline", total as u64);
    let mut rows = Vec::with_capacity(total);
    for profile in &profiles {
        for &ci in &args.ci_ms {
            let params = link(profile, ci, args)?;
            steps.phase(&format!("{} at {ci} ms", profile.name));
            for &peripheral in &peripherals {
                for &workload in &workloads {
                    for &n in &args.in_flight {
                        let case = Case {
                            params,
                            peripheral,
                            workload,
                            in_flight: n,
                            seconds: args.seconds,
                            service: Duration::from_micros(args.service_us),
                        };
                        let mut runs = (0..args.runs)
                            .map(|_| run_case(profile, case))
                            .collect::<anyhow::Result<Vec<_>>>()?;
                        // Every run's failures count, not only the median's.
                        let failed = runs.iter().map(|r| r.failed).sum();
                        let error = runs.iter().find_map(|r| r.error.clone());
                        runs.sort_by(|a, b| a.calls_per_s().total_cmp(&b.calls_per_s()));
                        let mut row = runs.swap_remove(runs.len() / 2);
                        row.failed = failed;
                        row.error = error;
                        steps.step(row.failed == 0);
                        rows.push(row);
                    }
                }
            }
        }
    }
    Ok(rows)
}

/// One case's settings.
#[derive(Debug, Clone, Copy)]
struct Case {
    params: LinkParams,
    peripheral: Peripheral,
    workload: Workload,
    in_flight: usize,
    seconds: f64,
    service: Duration,
}

/// One case on its own paused-clock runtime.
fn run_case(profile: &Profile, case: Case) -> anyhow::Result<Row> {
    let Case {
        params,
        peripheral,
        workload,
        in_flight,
        seconds,
        service,
    } = case;
    let rt = crate::ble::paused_runtime()?;
    rt.block_on(async {
        let (central, link) = blerpc_sim::pair(params)?;
        let monitor = central.monitor();
        let key = if peripheral == Peripheral::Firmware {
            tokio::spawn(firmware::serve(link, service));
            firmware::identity_public()?
        } else {
            let server = Server::new(peripheral.dispatch(service), peripheral.config())?;
            let key = server
                .identity_public()
                .context("the server has no identity")?;
            tokio::spawn(async move { server.serve_link(link).await });
            key
        };
        let mut config = ClientConfig {
            pinning: PinPolicy::Trust(key),
            ..ClientConfig::default()
        };
        config.central.max_calls_in_flight = in_flight.max(config.central.max_calls_in_flight);
        let client = Client::connect(central, config)
            .await
            .context("connecting over the simulated link")?;
        let c = pb::BlerpcClient::new(client);
        workload
            .call(&c)
            .await
            .map_err(|e| anyhow::anyhow!("warm-up call: {e}"))?;
        let before = monitor.stats();
        let start = tokio::time::Instant::now();
        let end = start + Duration::from_secs_f64(seconds);
        let calls = Cell::new(0u64);
        let failed = Cell::new(0u64);
        let error = Cell::new(None::<String>);
        let worker = || async {
            while tokio::time::Instant::now() < end {
                match workload.call(&c).await {
                    Ok(()) => calls.set(calls.get() + 1),
                    Err(e) => {
                        failed.set(failed.get() + 1);
                        let first = error.take().unwrap_or(e);
                        error.set(Some(first));
                    }
                }
            }
        };
        join_all((0..in_flight).map(|_| worker())).await;
        let elapsed = start.elapsed();
        let after = monitor.stats();
        c.inner().close().await;
        Ok(Row {
            profile: profile.name,
            interval: params.conn_interval,
            peripheral,
            workload,
            in_flight,
            calls: calls.get(),
            failed: failed.get(),
            elapsed,
            events: after.events - before.events,
            packets: after.packets.iter().sum::<u64>() - before.packets.iter().sum::<u64>(),
            requests: after.containers[0] - before.containers[0],
            error: error.take(),
        })
    })
}

/// The same profile, interval, peripheral and workload with one call in flight.
fn baseline<'a>(rows: &'a [Row], row: &Row) -> Option<&'a Row> {
    rows.iter().find(|b| {
        b.in_flight == 1
            && b.profile == row.profile
            && b.interval == row.interval
            && b.peripheral == row.peripheral
            && b.workload == row.workload
    })
}

/// The results as a table: calls/s, the ratio to one in flight, packets per connection event
/// and containers sent per call (above 1: BUSY retries).
pub fn render(rows: &[Row]) -> String {
    let mut t = Table::new([
        "profile",
        "CI",
        "peripheral",
        "workload",
        "in flight",
        "calls/s",
        "× 1 in flight",
        "packets/event",
        "sent/call",
        "failed",
    ]);
    for i in 5..10 {
        t = t.align(i, Align::Right);
    }
    for r in rows {
        let ratio = baseline(rows, r)
            .map(|b| b.calls_per_s())
            .filter(|b| *b > 0.0)
            .map_or("—".into(), |b| format!("{:.2}", r.calls_per_s() / b));
        t.row([
            r.profile.to_string(),
            format!("{} ms", r.interval.as_secs_f64() * 1000.0),
            r.peripheral.name().into(),
            r.workload.name().into(),
            r.in_flight.to_string(),
            format!("{:.1}", r.calls_per_s()),
            ratio,
            per(r.packets, r.events),
            per(r.requests, r.calls + r.failed),
            r.failed.to_string(),
        ]);
    }
    t.plain("")
}

fn per(a: u64, b: u64) -> String {
    if b == 0 {
        "—".into()
    } else {
        format!("{:.2}", a as f64 / b as f64)
    }
}

/// The results for machines.
pub fn to_json(rows: &[Row], args: &PipelineArgs) -> serde_json::Value {
    json!({
        "suite": "pipeline",
        "seconds": args.seconds,
        "runs": args.runs,
        "mtu": args.mtu,
        "seed": args.seed,
        "service_us": args.service_us,
        "rows": rows.iter().map(|r| json!({
            "profile": r.profile,
            "interval_ms": r.interval.as_secs_f64() * 1000.0,
            "peripheral": r.peripheral.name(),
            "workload": r.workload.name(),
            "in_flight": r.in_flight,
            "calls": r.calls,
            "failed": r.failed,
            "elapsed_s": r.elapsed.as_secs_f64(),
            "calls_per_s": r.calls_per_s(),
            "ratio_to_one": baseline(rows, r).map(|b| r.calls_per_s() / b.calls_per_s()),
            "events": r.events,
            "packets": r.packets,
            "requests_sent": r.requests,
            "error": r.error,
        })).collect::<Vec<_>>(),
    })
}

/// `blerpc-bench pipeline`: runs the cases, prints the table, writes `--json`. `false` when a
/// call failed.
pub fn run(args: &PipelineArgs) -> anyhow::Result<bool> {
    let rows = run_cases(args)?;
    println!("{}", render(&rows));
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&to_json(&rows, args))?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    for r in rows.iter().filter(|r| r.failed > 0) {
        eprintln!(
            "{} {} {} {} in flight: {} failed, first: {}",
            r.profile,
            r.peripheral.name(),
            r.workload.name(),
            r.in_flight,
            r.failed,
            r.error.as_deref().unwrap_or("?")
        );
    }
    Ok(rows.iter().all(|r| r.failed == 0))
}
