//! `blerpc-bench gateway --failover-devices N`: N dialled-in encrypted devices across two
//! gateways of a fleet (device `i` dials gateway `i % 2` first, the other after a loss, as
//! `blerpc serve --dial A,B` does), then gateway A is SIGKILLed while callers keep calling
//! random devices through B. Measured: how long until a sample of A's devices (2,000, called
//! again and again from the kill on) have all answered through B (target ≤ 10 s), until B's
//! fleet holds every device again, and until every device has answered a call through B (a
//! sweep of all of them, as long as calling every device takes here); the calls that failed
//! meanwhile by what they were answered, and the wrong answers (every call carries a message
//! of its own; target 0). Each gateway runs enough worker processes to hold every device alone
//! (15,000 each: the open-file limit is 20,000 per process).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::Serialize;

use super::super::scale::{self, DeviceKeys, PER_WORKER, Plan, Tally};
use super::super::{GatewayArgs, TOKEN};
use crate::table::Table;

/// The failover part's result.
#[derive(Debug, Serialize)]
pub struct FailoverReport {
    /// Devices.
    pub devices: usize,
    /// Worker processes per gateway.
    pub workers: usize,
    /// Seconds until every device was connected at first.
    pub connect_seconds: f64,
    /// Every device called once through B before the kill (all must answer).
    pub before: Tally,
    /// Seconds from the SIGKILL until B's fleet held every device again.
    pub reconnected_seconds: f64,
    /// Devices of A's (the ones that had to move) sampled to time their return.
    pub sampled: usize,
    /// Seconds from the SIGKILL until every sampled device of A's had answered a call through
    /// B (called again and again from the kill on: the target's measure).
    pub sampled_seconds: f64,
    /// Seconds from the SIGKILL until every device had answered a call through B (the sweeps
    /// of all of them, which take as long as calling every device takes here).
    pub reachable_seconds: f64,
    /// Random calls through B from the SIGKILL until every device was reachable.
    pub during: Tally,
    /// The sample's calls through B after the kill, until each had answered.
    pub sample: Tally,
    /// The sweeps of every device through B after the kill, until every one answered.
    pub sweeps: Tally,
}

/// Calls each of `ids` through `http`, round after round (the ones that failed, after a short
/// pause), until every one has answered; every call counted. An error once `deadline` has
/// passed with some still unanswered.
async fn until_answered(
    http: SocketAddr,
    ids: Arc<Vec<String>>,
    concurrency: usize,
    deadline: Instant,
) -> anyhow::Result<Tally> {
    let mut all = Tally::default();
    let mut remaining = ids;
    while !remaining.is_empty() {
        anyhow::ensure!(
            Instant::now() < deadline,
            "{} devices did not answer through B in time",
            remaining.len()
        );
        let mut round = scale::calls(&[http], remaining, concurrency, Plan::Each).await?;
        remaining = Arc::new(std::mem::take(&mut round.failed_ids));
        all.merge(round);
        if !remaining.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(all)
}

/// A's devices called again and again after the kill, to time their return.
const SAMPLE: usize = 2000;

/// The `HOST:PORT` of a gateway's `tcp://` device URL.
pub(crate) fn addr(url: &str) -> anyhow::Result<SocketAddr> {
    url.strip_prefix("tcp://")
        .context("the gateway's device URL")?
        .parse()
        .context("the gateway's device URL")
}

/// Runs the part with `devices` devices.
pub fn run(args: &GatewayArgs, dir: &Path, devices: usize) -> anyhow::Result<FailoverReport> {
    let workers = devices.div_ceil(PER_WORKER).max(1);
    let own = dir.join("failover");
    std::fs::create_dir_all(&own)?;
    std::fs::write(own.join("tokens"), format!("{TOKEN}\n"))?;
    let keys = DeviceKeys::derive(devices, &own)?;
    let ids = Arc::new(keys.ids.clone());
    let (_nats, url) = super::nats_server(&own)?;
    let workers_arg = workers.to_string();
    let mut options = scale::GATEWAY_AT_SCALE.to_vec();
    if workers > 1 {
        options.extend(["--workers", &workers_arg]);
    }
    let mut a = super::member(&own, &url, "gw-a", Some(&keys.allow), &options, None)?;
    let b = super::member(&own, &url, "gw-b", Some(&keys.allow), &options, None)?;
    let simulators = keys.simulators(&[addr(&a.devices)?, addr(&b.devices)?], false)?;
    eprintln!("gateway failover: {devices} devices, 2 gateways of {workers} worker(s)");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let connect_seconds = super::throughput::wait_connected(&rt, &[b.http], devices)?;
    eprintln!("gateway failover: all connected in {connect_seconds:.1} s; calling each through B");
    let concurrency = args.concurrency.max(1);
    let before = rt.block_on(scale::calls(
        &[b.http],
        ids.clone(),
        concurrency,
        Plan::Each,
    ))?;
    eprintln!("gateway failover: SIGKILL gateway A");
    let (
        reconnected_seconds,
        (sampled, sample, sampled_seconds),
        reachable_seconds,
        during,
        sweeps,
    ) = rt.block_on(async {
        let killed = Instant::now();
        a.proc.kill();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (http, random, plan) = (b.http, ids.clone(), Plan::RandomUntil(stop.clone()));
        let calling =
            tokio::spawn(
                async move { scale::calls(&[http], random, concurrency / 2 + 1, plan).await },
            );
        let limit = Duration::from_secs(60 + devices as u64 / 1000);
        // A's devices (device i dialled gateway i % 2 first), a sample of them called until
        // each has answered.
        let sample: Arc<Vec<String>> =
            Arc::new(ids.iter().step_by(2).take(SAMPLE).cloned().collect());
        let sampled = sample.len();
        let deadline = killed + limit;
        let sample = until_answered(b.http, sample, concurrency, deadline).await?;
        let sampled_seconds = killed.elapsed().as_secs_f64();
        eprintln!("gateway failover: {sampled} of A's devices answered by {sampled_seconds:.2} s");
        let mut reconnected = None;
        while killed.elapsed() < limit {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if scale::connected(b.http).await.unwrap_or(0) >= devices {
                reconnected = Some(killed.elapsed().as_secs_f64());
                break;
            }
        }
        let reconnected = reconnected
            .with_context(|| format!("B did not hold all {devices} devices within {limit:?}"))?;
        eprintln!("gateway failover: B holds every device after {reconnected:.2} s");
        let sweeps = until_answered(b.http, ids.clone(), concurrency, deadline).await?;
        let reachable = killed.elapsed().as_secs_f64();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let during = calling.await??;
        anyhow::Ok((
            reconnected,
            (sampled, sample, sampled_seconds),
            reachable,
            during,
            sweeps,
        ))
    })?;
    drop(simulators);
    Ok(FailoverReport {
        devices,
        workers,
        connect_seconds,
        before,
        reconnected_seconds,
        sampled,
        sampled_seconds,
        sample,
        reachable_seconds,
        during,
        sweeps,
    })
}

/// Prints the part; `true` if every device was reachable within 10 s with no wrong answer.
pub fn print(r: &FailoverReport) -> bool {
    println!(
        "gateway failover: {} devices across 2 gateways ({} worker(s) each), connected in {:.1} \
         s; gateway A SIGKILLed",
        r.devices, r.workers, r.connect_seconds
    );
    let wrong = r.before.wrong + r.during.wrong + r.sample.wrong + r.sweeps.wrong;
    let reachable = r.sampled_seconds <= 10.0;
    let mut t = Table::new(["measure", "value", "target", "met"]);
    t.row([
        "every device through B before".into(),
        format!("{} answered, {} failed", r.before.ok, r.before.failed()),
        "all".into(),
        if r.before.failed() == 0 { "yes" } else { "NO" }.into(),
    ]);
    t.row([
        "B holds every device again".into(),
        format!("{:.2} s after the kill", r.reconnected_seconds),
        "—".into(),
        "—".into(),
    ]);
    t.row([
        format!("{} of A's devices answered through B", r.sampled),
        format!("{:.2} s after the kill", r.sampled_seconds),
        "≤ 10 s".into(),
        if reachable { "yes" } else { "NO" }.into(),
    ]);
    t.row([
        "every device answered through B".into(),
        format!(
            "{:.2} s after the kill (a sweep of all)",
            r.reachable_seconds
        ),
        "—".into(),
        "—".into(),
    ]);
    // A failure says why when the gateway answered it with a problem of a known kind.
    let unexplained = |t: &Tally| {
        t.failures
            .iter()
            .filter(|(k, _)| *k == "transport" || k.ends_with("no problem type"))
            .map(|(_, n)| n)
            .sum::<usize>()
    };
    let explained = unexplained(&r.during) + unexplained(&r.sample) + unexplained(&r.sweeps) == 0;
    t.row([
        "random calls meanwhile".into(),
        format!(
            "{} answered; failed: {}",
            r.during.ok,
            r.during.failures_text()
        ),
        "each failure says why".into(),
        if explained { "yes" } else { "NO" }.into(),
    ]);
    t.row([
        "sweeps after".into(),
        format!(
            "{} answered; failed: {}",
            r.sweeps.ok,
            r.sweeps.failures_text()
        ),
        "—".into(),
        "—".into(),
    ]);
    t.row([
        "wrong answers".into(),
        wrong.to_string(),
        "0".into(),
        if wrong == 0 { "yes" } else { "NO" }.into(),
    ]);
    print!("{}", t.plain(""));
    reachable && explained && wrong == 0 && r.before.failed() == 0
}
