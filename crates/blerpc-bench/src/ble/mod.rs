//! `blerpc-bench ble`: the reference functional tests and benchmarks (`benchmarks.md` §1) on
//! the simulated BLE link for each platform profile, or over any real link with `--connect`,
//! with the published figure, the ratio, and the link's physical limit beside each result.
//!
//! Each simulated profile runs on its own single-threaded tokio runtime with a paused clock:
//! the link's connection events, packet times and host delays are virtual time, so minutes of
//! link time take seconds of real time, and a run is deterministic for a seed. The sequence per
//! profile follows the published method: connect (TIMEOUT, CAPABILITIES, key exchange, server
//! key pinned), the 12 functional tests, a wait until 5.5 s after connect (the figures were
//! taken after the peripheral's interval update), then the six benchmarks, each `--reps`
//! times (mean reported). The physical limit is the same benchmark on the same link with full
//! connection events (the whole interval as event budget, no OS caps or delays).

mod plot;
mod report;

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use crate::reference::{self, BENCHMARKS, BenchResult};
use anyhow::{Context as _, anyhow, bail};
use blerpc::Client;
use blerpc_demo::functional::{self, TESTS, TestResult};
use blerpc_demo::pb;
use blerpc_demo::progress::Steps;
use blerpc_sim::profile::{self, Profile};
use blerpc_sim::{LinkParams, LinkStats, Phy};
use clap::Args;

pub use report::{render_comparison, render_profile, result_json, to_json};

/// `blerpc-bench ble` options.
#[derive(Debug, Args, Clone)]
pub struct BleArgs {
    /// Profiles to simulate (comma-separated): macos, ios, android, web, nrf54l15. Default: all.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub profile: Vec<String>,
    /// The connection interval the peripheral asks for, in ms (the published figures: 15).
    #[arg(long, value_name = "MS", default_value_t = 15.0)]
    pub ci_ms: f64,
    /// The ATT MTU (the published figures: 247).
    #[arg(long, value_name = "BYTES", default_value_t = 247)]
    pub mtu: usize,
    /// The PHY (1M or 2M); default: each profile's own (2M for all five).
    #[arg(long, value_name = "PHY")]
    pub phy: Option<Phy>,
    /// Probability that a packet is lost on air (retransmitted later), 0 ≤ p < 1.
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub loss: f64,
    /// Times each benchmark runs; the table shows the mean (1 = the reference's single run).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub reps: u32,
    /// Start the benchmarks this long after connect (ms), after the functional tests.
    #[arg(long, value_name = "MS", default_value_t = 5500)]
    pub wait_ms: u64,
    /// Seed of the simulated links' RNG (host delays, loss).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Run the suite over this real link instead (tcp://, tls://, ws://, wss://, serial://,
    /// ble://) against a `blerpc serve` (or any bleRPC peripheral with the demo service).
    #[arg(long, value_name = "URL")]
    pub connect: Option<String>,
    /// With --connect: accept only this identity (64 hex digits).
    #[arg(long, value_name = "HEX", requires = "connect")]
    pub trust_key: Option<String>,
    /// With --connect: pin identities in this known-keys file (default file if neither this,
    /// --trust-key nor --no-pin is given).
    #[arg(long, value_name = "FILE", requires = "connect")]
    pub known_keys: Option<PathBuf>,
    /// With --connect: accept any identity.
    #[arg(long, requires = "connect")]
    pub no_pin: bool,
    /// With --connect to tls:// or wss://: trust the CA in this PEM file.
    #[arg(long, value_name = "FILE", requires = "connect")]
    pub tls_ca: Option<PathBuf>,
    /// With --connect: serial baud rate.
    #[arg(long, value_name = "N", requires = "connect")]
    pub baud: Option<u32>,
    /// With --connect: the platform whose published figures go beside the results.
    #[arg(long, value_name = "NAME", default_value = "macos")]
    pub compare: String,
    /// Write machine-readable results to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Draw the per-platform comparison as an SVG chart to this file.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
}

impl Default for BleArgs {
    fn default() -> Self {
        BleArgs {
            profile: Vec::new(),
            ci_ms: 15.0,
            mtu: 247,
            phy: None,
            loss: 0.0,
            reps: 10,
            wait_ms: 5500,
            seed: 1,
            connect: None,
            trust_key: None,
            known_keys: None,
            no_pin: false,
            tls_ca: None,
            baud: None,
            compare: "macos".into(),
            json: None,
            plot: None,
        }
    }
}

/// The most repetitions `--reps` accepts.
pub const MAX_REPS: u32 = 1000;

/// One profile's (or one real link's) run.
#[derive(Debug)]
pub struct ProfileRun {
    /// The profile's short name (`macos`), or `link` for --connect.
    pub name: String,
    /// What the publication calls the platform, or the URL.
    pub label: String,
    /// The simulated link's parameters (`None` for a real link).
    pub link: Option<LinkParams>,
    /// Which platform's published figures to compare with.
    pub compare: Option<String>,
    /// When the peripheral's interval took effect, after connect.
    pub interval_updated_after: Option<Duration>,
    /// The interval in force when the benchmarks started.
    pub interval_at_benchmarks: Option<Duration>,
    /// The 12 functional tests.
    pub functional: Vec<TestResult>,
    /// The benchmarks (mean over reps).
    pub benchmarks: Vec<(&'static str, Result<BenchResult, String>)>,
    /// The same benchmarks with full connection events (the physical limit).
    pub limit: Vec<(&'static str, Result<BenchResult, String>)>,
    /// RPC calls made (functional tests, benchmarks with warm-ups, the limit run).
    pub calls: u64,
    /// Real (wall) time of the whole run.
    pub real: Duration,
    /// Host CPU time of the whole run (the thread's CPU clock; wall time for a real link).
    pub cpu: Duration,
    /// Link time the run covered (virtual on the simulated link).
    pub link_time: Duration,
    /// The link's counters.
    pub stats: Option<LinkStats>,
    /// Why the run could not complete (connect failed, ...).
    pub error: Option<String>,
}

impl ProfileRun {
    fn new(name: &str, label: &str) -> Self {
        ProfileRun {
            name: name.into(),
            label: label.into(),
            link: None,
            compare: None,
            interval_updated_after: None,
            interval_at_benchmarks: None,
            functional: Vec::new(),
            benchmarks: Vec::new(),
            limit: Vec::new(),
            calls: 0,
            real: Duration::ZERO,
            cpu: Duration::ZERO,
            link_time: Duration::ZERO,
            stats: None,
            error: None,
        }
    }

    /// Functional tests passed.
    pub fn passed(&self) -> usize {
        self.functional.iter().filter(|t| t.passed()).count()
    }

    /// Every functional test and benchmark ran and passed.
    pub fn ok(&self) -> bool {
        self.error.is_none()
            && self.passed() == TESTS.len()
            && self.benchmarks.len() == BENCHMARKS.len()
            && self.benchmarks.iter().all(|(_, r)| r.is_ok())
    }

    /// Host CPU time per RPC call (client, server, link model together).
    pub fn host_time_per_call(&self) -> Option<Duration> {
        (self.calls > 0).then(|| self.cpu / u32::try_from(self.calls).unwrap_or(u32::MAX))
    }
}

/// RPC calls one benchmark run makes (with its warm-up).
fn calls_of(r: &BenchResult) -> u64 {
    let per_rep = match r.per {
        reference::Per::Call => u64::from(r.count) + 1,
        reference::Per::Item => 1,
    };
    per_rep * u64::from(r.reps)
}

/// Steps of one profile: the functional tests, the benchmarks and the limit run.
const PROFILE_STEPS: usize = TESTS.len() + 2 * BENCHMARKS.len();

/// The link for `profile` with the command line's interval, MTU, PHY, loss and seed.
pub fn link_for(profile: &Profile, args: &BleArgs) -> anyhow::Result<LinkParams> {
    if !(args.ci_ms.is_finite() && args.ci_ms > 0.0) {
        bail!("--ci-ms {} is not a positive interval", args.ci_ms);
    }
    let ci = Duration::from_secs_f64(args.ci_ms / 1000.0);
    let mut p = profile.link_params(ci, args.mtu);
    if let Some(phy) = args.phy {
        p.phy = phy;
    }
    p.loss = args.loss;
    p.seed = args.seed;
    p.validate().context("invalid link parameters")?;
    Ok(p)
}

/// The demo server on the peripheral end of a new simulated link with `params`, and a client
/// on the central end that pins its key.
pub async fn sim_client(
    params: LinkParams,
) -> anyhow::Result<(pb::BlerpcClient, blerpc_sim::Monitor)> {
    let (server, key) = blerpc_demo::server::demo_server()?;
    let (central, peripheral) = blerpc_sim::pair(params)?;
    let monitor = central.monitor();
    tokio::spawn(async move { server.serve_link(peripheral).await });
    let client = Client::connect(central, blerpc_demo::server::client_config(key))
        .await
        .context("connecting over the simulated link")?;
    Ok((pb::BlerpcClient::new(client), monitor))
}

async fn functional_with_progress(c: &pb::BlerpcClient, steps: &Steps) -> Vec<TestResult> {
    steps.phase("functional tests");
    let mut out = Vec::new();
    for name in TESTS {
        let r = functional::run_one(c, name).await;
        steps.step(r.passed());
        out.push(r);
    }
    out
}

async fn benchmarks_with_progress(
    c: &pb::BlerpcClient,
    reps: u32,
    steps: &Steps,
    phase: &str,
) -> Vec<(&'static str, Result<BenchResult, String>)> {
    steps.phase(phase);
    reference::run_all_reps_with(c, reps, |_, ok| steps.step(ok)).await
}

/// CPU time of the calling thread (the simulated runs are single-threaded, so this is all the
/// host work of a run); wall time where the platform has no thread clock.
#[derive(Debug, Clone, Copy)]
struct CpuClock {
    wall: std::time::Instant,
    #[cfg(unix)]
    cpu: Option<Duration>,
}

impl CpuClock {
    fn start() -> Self {
        CpuClock {
            wall: std::time::Instant::now(),
            #[cfg(unix)]
            cpu: thread_cpu(),
        }
    }
    fn elapsed(&self) -> Duration {
        #[cfg(unix)]
        if let (Some(a), Some(b)) = (self.cpu, thread_cpu()) {
            return b.saturating_sub(a);
        }
        self.wall.elapsed()
    }
}

#[cfg(unix)]
fn thread_cpu() -> Option<Duration> {
    use nix::time::{ClockId, clock_gettime};
    let t = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).ok()?;
    Some(Duration::new(
        u64::try_from(t.tv_sec()).ok()?,
        u32::try_from(t.tv_nsec()).ok()?,
    ))
}

/// A single-threaded tokio runtime with its clock paused: link time is virtual.
pub(crate) fn paused_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .context("cannot start a tokio runtime")
}

/// Runs one profile on the simulated link.
pub fn run_profile(profile: &Profile, steps: &Steps, args: &BleArgs) -> anyhow::Result<ProfileRun> {
    let params = link_for(profile, args)?;
    let mut run = ProfileRun::new(profile.name, profile.label);
    run.link = Some(params);
    run.compare = profile.published.then(|| profile.name.to_string());
    let reps = args.reps.clamp(1, MAX_REPS);
    let wait = Duration::from_millis(args.wait_ms);
    let real = std::time::Instant::now();
    let rt = paused_runtime()?;
    let cpu = CpuClock::start();
    rt.block_on(async {
        let t0 = tokio::time::Instant::now();
        let (c, monitor) = match sim_client(params).await {
            Ok(x) => x,
            Err(e) => {
                run.error = Some(format!("{e:#}"));
                return;
            }
        };
        run.functional = functional_with_progress(&c, steps).await;
        tokio::time::sleep(wait.saturating_sub(monitor.connected_for())).await;
        run.interval_at_benchmarks = Some(monitor.interval_now());
        run.interval_updated_after = monitor.interval_updated_after();
        run.benchmarks = benchmarks_with_progress(&c, reps, steps, "benchmarks").await;
        c.inner().close().await;
        run.stats = Some(monitor.stats());
        // The physical limit: the same link with full events, after the interval update.
        let full = LinkParams {
            initial_interval: None,
            ..params.full_event()
        };
        match sim_client(full).await {
            Ok((c, _)) => {
                run.limit = benchmarks_with_progress(&c, 1, steps, "limit").await;
                c.inner().close().await;
            }
            Err(e) => run.error = Some(format!("limit run: {e:#}")),
        }
        run.link_time = t0.elapsed();
    });
    run.cpu = cpu.elapsed();
    run.real = real.elapsed();
    run.calls = TESTS.len() as u64
        + run
            .benchmarks
            .iter()
            .chain(&run.limit)
            .filter_map(|(_, r)| r.as_ref().ok())
            .map(calls_of)
            .sum::<u64>();
    Ok(run)
}

/// Connects to `url` as `blerpc call --connect URL` would with the same options: pinned by
/// --trust-key, --known-keys (trust on first use, the default file) or not at all (--no-pin);
/// TLS trust from --tls-ca; the bearer token from $BLERPC_TOKEN; bounded by 10 s.
async fn connect_to(url: &str, args: &BleArgs) -> anyhow::Result<Client> {
    use blerpc::client::PinPolicy;
    use blerpc::known_keys::{KnownKeysFile, parse_key};
    use blerpc::link::connect::{ConnectOptions, connect};
    let url: blerpc::link::url::LinkUrl = url.parse()?;
    let pinning = match (&args.trust_key, args.no_pin) {
        (Some(hex), _) => PinPolicy::Trust(
            parse_key(hex).ok_or_else(|| anyhow!("--trust-key must be 64 hex digits"))?,
        ),
        (None, true) => PinPolicy::NoPin,
        (None, false) => PinPolicy::KnownKeys(KnownKeysFile::new(
            args.known_keys
                .clone()
                .unwrap_or_else(KnownKeysFile::default_path),
        )),
    };
    let config = blerpc::ClientConfig {
        pinning,
        ..Default::default()
    };
    let options = ConnectOptions {
        tls: args
            .tls_ca
            .as_ref()
            .map(blerpc::link::tls::TlsClientConfig::with_ca_file)
            .transpose()?,
        baud_rate: args.baud,
        bearer: std::env::var("BLERPC_TOKEN").ok(),
        ..ConnectOptions::default()
    };
    let limit = Duration::from_secs(10);
    Ok(tokio::time::timeout(limit, connect(&url, &options, config))
        .await
        .map_err(|_| anyhow!("connecting to {url} timed out after {limit:?}"))??)
}

/// Runs the suite over a real link (`--connect`).
pub fn run_connect(url: &str, args: &BleArgs, steps: &Steps) -> anyhow::Result<ProfileRun> {
    let connecting = connect_to(url, args);
    let mut run = ProfileRun::new("link", url);
    run.compare = Some(args.compare.clone());
    let reps = args.reps.clamp(1, MAX_REPS);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start a tokio runtime")?;
    let real = std::time::Instant::now();
    rt.block_on(async {
        let client = match connecting.await {
            Ok(c) => c,
            Err(e) => {
                run.error = Some(format!("{e:#}"));
                return;
            }
        };
        let c = pb::BlerpcClient::new(client);
        run.functional = functional_with_progress(&c, steps).await;
        run.benchmarks = benchmarks_with_progress(&c, reps, steps, "benchmarks").await;
        c.inner().close().await;
    });
    run.real = real.elapsed();
    run.cpu = run.real;
    run.link_time = run.real;
    run.calls = TESTS.len() as u64
        + run
            .benchmarks
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .map(calls_of)
            .sum::<u64>();
    // On a BLE link, the model's full-event limit for the interval, MTU and PHY given.
    if url.starts_with("ble://") {
        let nrf = profile::NRF54L15;
        steps.phase("limit (the link model)");
        let limit = run_profile(
            &nrf,
            steps,
            &BleArgs {
                reps: 1,
                ..args.clone()
            },
        )?;
        run.limit = limit.limit;
        run.link = limit.link;
    }
    Ok(run)
}

/// The profiles `--profile` names (all by default).
pub fn selected_profiles(names: &[String]) -> anyhow::Result<Vec<Profile>> {
    if names.is_empty() {
        return Ok(profile::ALL.to_vec());
    }
    names
        .iter()
        .map(|n| {
            profile::by_name(n).ok_or_else(|| {
                anyhow!(
                    "unknown profile `{n}`: expected {}",
                    profile::ALL.map(|p| p.name).join(", ")
                )
            })
        })
        .collect()
}

/// Checks the options before anything runs (so a mistake is one line, not a half-run suite).
pub fn validate(args: &BleArgs) -> anyhow::Result<()> {
    if args.reps == 0 || args.reps > MAX_REPS {
        bail!("--reps {} is outside 1 ..= {MAX_REPS}", args.reps);
    }
    if args.connect.is_none() {
        for p in selected_profiles(&args.profile)? {
            link_for(&p, args)?;
        }
    }
    Ok(())
}

/// Runs the suite for the selected profiles (or the real link), printing progress on stderr;
/// returns the runs.
pub fn run_suite(args: &BleArgs) -> anyhow::Result<Vec<ProfileRun>> {
    if args.reps == 0 || args.reps > MAX_REPS {
        bail!("--reps {} is outside 1 ..= {MAX_REPS}", args.reps);
    }
    if let Some(url) = &args.connect {
        // Over BLE, the link model's limit is a whole profile run after the real one.
        let model = if url.starts_with("ble://") {
            PROFILE_STEPS
        } else {
            0
        };
        let steps = Steps::new(
            format!("  {url}"),
            (TESTS.len() + BENCHMARKS.len() + model) as u64,
        );
        let run = run_connect(url, args, &steps)?;
        steps.finish(&format!(
            "{}/{} PASS in {:.1} s",
            run.passed(),
            TESTS.len(),
            run.real.as_secs_f64()
        ));
        return Ok(vec![run]);
    }
    let profiles = selected_profiles(&args.profile)?;
    let mut runs = Vec::new();
    for (i, p) in profiles.iter().enumerate() {
        let prefix = format!("  [{}/{}] {:<9}", i + 1, profiles.len(), p.name);
        let steps = Steps::new(prefix, PROFILE_STEPS as u64);
        let run = run_profile(p, &steps, args)?;
        steps.finish(&format!(
            "{}/{} PASS, {:.1} s of link time in {:.2} s",
            run.passed(),
            TESTS.len(),
            run.link_time.as_secs_f64(),
            run.real.as_secs_f64()
        ));
        runs.push(run);
    }
    Ok(runs)
}

/// Prints the tables, writes `--json` and `--plot`; returns whether everything passed.
pub fn report(runs: &[ProfileRun], args: &BleArgs) -> anyhow::Result<bool> {
    let mut out = std::io::stdout().lock();
    for r in runs {
        writeln!(out, "\n{}", render_profile(r)).context("cannot write to stdout")?;
    }
    if runs.len() > 1 {
        writeln!(out, "\n{}", render_comparison(runs))?;
    }
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&to_json(runs, args))?;
        std::fs::write(path, json + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
        writeln!(out, "results written to {}", path.display())?;
    }
    if let Some(path) = &args.plot {
        std::fs::write(path, plot::svg(runs))
            .with_context(|| format!("cannot write {}", path.display()))?;
        writeln!(out, "plot written to {}", path.display())?;
    }
    Ok(runs.iter().all(ProfileRun::ok))
}

/// Runs `blerpc-bench ble`.
pub fn run(args: &BleArgs) -> anyhow::Result<bool> {
    validate(args)?;
    eprintln!(
        "blerpc-bench ble: the 12 reference functional tests and 6 benchmarks, E2E encryption on, \
         server key pinned"
    );
    let runs = run_suite(args)?;
    report(&runs, args)
}
