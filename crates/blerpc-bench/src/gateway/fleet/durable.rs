//! `blerpc-bench gateway --durable-calls N --durable-devices M`: N durable calls to M devices
//! that are offline (call `k` to device `k % M`, `echo` of `dur-k`, every other one marked
//! idempotent), submitted through both gateways of a fleet; then the devices connect (device
//! `i` to gateway `i % 2` first, the other after a loss), and gateway A is SIGKILLed once half
//! the calls have run. The devices print every durable call they run, so the bench knows how
//! often each ran. Checked, for every call: it ends (no call stays `queued` or `sent`); its
//! state is true to what the device did (`succeeded` ran and its answer is the device's;
//! `outcome_unknown` ran at most once; a call that never ran is not `succeeded`); none ran
//! twice unless idempotent; none is lost (each id's record is there).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use blerpc_gateway::nats::durable::{CallRecord, CallState};
use serde::Serialize;

use super::super::scale::{DeviceKeys, GATEWAY_AT_SCALE};
use super::super::{GatewayArgs, TOKEN, callers, procs};
use crate::table::Table;

/// The durable part's result.
#[derive(Debug, Serialize)]
pub struct DurableReport {
    /// Calls submitted.
    pub calls: usize,
    /// Devices.
    pub devices: usize,
    /// Seconds to submit every call.
    pub submit_seconds: f64,
    /// Calls the devices had run when gateway A was SIGKILLed.
    pub ran_at_kill: usize,
    /// Seconds from the devices' start until every call had ended.
    pub settle_seconds: f64,
    /// Calls by final state and kind (`succeeded (idempotent)`, `outcome_unknown (once)`…).
    pub states: BTreeMap<String, usize>,
    /// Runs on the devices in all (an idempotent call may run more than once).
    pub runs: usize,
    /// Idempotent calls that ran more than once (allowed).
    pub idempotent_reruns: usize,
    /// Calls whose state is not true to what the devices did, or that ran twice without being
    /// idempotent, or whose record is lost (must be 0): the first few, with why.
    pub violations: Vec<String>,
    /// How many there were.
    pub violation_count: usize,
}

/// One submitted call.
struct Submitted {
    device: String,
    id: String,
    idempotent: bool,
}

/// Runs the part.
pub fn run(args: &GatewayArgs, dir: &Path) -> anyhow::Result<DurableReport> {
    let (calls, devices) = (args.durable_calls, args.durable_devices.max(1));
    let own = dir.join("durable");
    std::fs::create_dir_all(&own)?;
    std::fs::write(own.join("tokens"), format!("{TOKEN}\n"))?;
    let keys = DeviceKeys::derive(devices, &own)?;
    let (_nats, url) = super::nats_server(&own)?;
    let mut a = super::member(
        &own,
        &url,
        "gw-a",
        Some(&keys.allow),
        &GATEWAY_AT_SCALE,
        None,
    )?;
    let b = super::member(
        &own,
        &url,
        "gw-b",
        Some(&keys.allow),
        &GATEWAY_AT_SCALE,
        None,
    )?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    eprintln!("gateway durable: submitting {calls} calls to {devices} offline devices");
    let started = Instant::now();
    let submitted = rt.block_on(submit(&[a.http, b.http], &keys.ids, calls))?;
    let submit_seconds = started.elapsed().as_secs_f64();
    let ports = [
        super::failover::addr(&a.devices)?,
        super::failover::addr(&b.devices)?,
    ];
    let mut simulators = keys.simulators(&ports, true)?;
    let started = Instant::now();
    let mut ran: BTreeMap<usize, usize> = BTreeMap::new();
    let mut collect = |sims: &mut Vec<procs::Proc>| {
        for sim in sims.iter_mut() {
            for line in sim.lines_so_far() {
                if let Some(k) = line
                    .strip_prefix("ran dur-")
                    .and_then(|k| k.parse::<usize>().ok())
                {
                    *ran.entry(k).or_default() += 1;
                }
            }
        }
        ran.values().sum::<usize>()
    };
    let limit = Duration::from_secs(120 + calls as u64 / 50);
    let mut ran_at_kill = None;
    let mut settled = None;
    let mut records = BTreeMap::new();
    let mut polled = Instant::now();
    while started.elapsed() < limit {
        // Watch the runs closely until the kill; then poll the records every half second.
        let pause = if ran_at_kill.is_none() { 5 } else { 500 };
        std::thread::sleep(Duration::from_millis(pause));
        let runs = collect(&mut simulators);
        if ran_at_kill.is_none() && runs >= calls / 2 {
            eprintln!("gateway durable: {runs} calls ran; SIGKILL gateway A");
            a.proc.kill();
            ran_at_kill = Some(runs);
        }
        if ran_at_kill.is_some() && polled.elapsed() >= Duration::from_millis(500) {
            polled = Instant::now();
            records = rt.block_on(records_of(b.http, &keys.ids))?;
            let open = records.values().filter(|r| !r.state.is_final()).count();
            eprintln!(
                "gateway durable: {runs} runs, {} of {calls} calls ended ({:.0} s)",
                records.len() - open,
                started.elapsed().as_secs_f64()
            );
            if open == 0 && records.len() >= submitted.len() {
                settled = Some(started.elapsed().as_secs_f64());
                break;
            }
        }
    }
    // Runs still on their way to stdout.
    std::thread::sleep(Duration::from_secs(1));
    let runs = collect(&mut simulators);
    drop(simulators);
    let settle_seconds = settled.with_context(|| {
        format!("the durable calls had not all ended within {limit:?} ({runs} runs)")
    })?;
    let mut states = BTreeMap::new();
    let mut violations = Vec::new();
    let mut idempotent_reruns = 0;
    for (k, call) in submitted.iter().enumerate() {
        let times = ran.get(&k).copied().unwrap_or(0);
        let Some(record) = records.get(&call.id) else {
            violations.push(format!(
                "call {k} ({}) to {}: its record is lost",
                call.id, call.device
            ));
            continue;
        };
        let state = serde_json::to_value(record.state)?;
        let kind = if call.idempotent {
            "idempotent"
        } else {
            "once"
        };
        *states
            .entry(format!("{} ({kind})", state.as_str().unwrap_or("?")))
            .or_default() += 1;
        if times > 1 {
            if call.idempotent {
                idempotent_reruns += 1;
            } else {
                violations.push(format!("call {k}: ran {times} times, not idempotent"));
            }
        }
        let why = match record.state {
            CallState::Succeeded if times == 0 => Some("succeeded, but never ran"),
            CallState::Succeeded
                if record.response
                    != Some(serde_json::json!({ "message": format!("dur-{k}") })) =>
            {
                Some("succeeded with another answer")
            }
            CallState::Queued | CallState::Sent => Some("never ended"),
            CallState::Expired | CallState::Cancelled if times > 0 => {
                Some("ran, but says it did not")
            }
            CallState::OutcomeUnknown if times > 1 && !call.idempotent => {
                Some("ran twice, outcome unknown")
            }
            _ if times as u32 > record.attempts => Some("ran more often than it was sent"),
            _ => None,
        };
        if let Some(why) = why {
            violations.push(format!(
                "call {k} ({}): {why} (state {:?}, ran {times}, sent {})",
                call.id, record.state, record.attempts
            ));
        }
    }
    let violation_count = violations.len();
    violations.truncate(20);
    Ok(DurableReport {
        calls: submitted.len(),
        devices,
        submit_seconds,
        ran_at_kill: ran_at_kill.unwrap_or(0),
        settle_seconds,
        states,
        runs,
        idempotent_reruns,
        violations,
        violation_count,
    })
}

/// Submits `calls` durable calls, 16 at a time through the gateways in turn: each call's
/// device, id and idempotence, in order.
async fn submit(
    gateways: &[SocketAddr],
    ids: &[String],
    calls: usize,
) -> anyhow::Result<Vec<Submitted>> {
    const CALLERS: usize = 16;
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..CALLERS {
        let http = gateways[t % gateways.len()];
        let ids = ids.to_vec();
        tasks.spawn(async move {
            let mut caller = callers::http(http, "", TOKEN).await?;
            let mut out = Vec::new();
            for k in (t..calls).step_by(CALLERS) {
                let device = &ids[k % ids.len()];
                let idempotent = k % 2 == 1;
                let durable = if idempotent {
                    "ttl=900, idempotent"
                } else {
                    "ttl=900"
                };
                let (status, answer, _) = caller
                    .request(
                        hyper::Method::POST,
                        &format!("/v1/devices/{device}/calls/echo"),
                        &[("blerpc-durable", durable)],
                        &format!(r#"{{"message":"dur-{k}"}}"#),
                    )
                    .await?;
                anyhow::ensure!(
                    status == 202,
                    "durable call {k}: HTTP {status}: {}",
                    String::from_utf8_lossy(&answer)
                );
                let record: CallRecord =
                    serde_json::from_slice(&answer).context("a durable call's record")?;
                out.push((
                    k,
                    Submitted {
                        device: device.clone(),
                        id: record.id,
                        idempotent,
                    },
                ));
            }
            anyhow::Ok(out)
        });
    }
    let mut all = Vec::with_capacity(calls);
    while let Some(r) = tasks.join_next().await {
        all.extend(r??);
    }
    all.sort_by_key(|(k, _)| *k);
    Ok(all.into_iter().map(|(_, s)| s).collect())
}

/// Every device's durable calls through `http`, by call id.
async fn records_of(
    http: SocketAddr,
    ids: &[String],
) -> anyhow::Result<BTreeMap<String, CallRecord>> {
    #[derive(serde::Deserialize)]
    struct Listing {
        calls: Vec<CallRecord>,
    }
    let mut caller = callers::http(http, "", TOKEN).await?;
    let mut all = BTreeMap::new();
    for id in ids {
        let (status, answer, _) = caller
            .request(
                hyper::Method::GET,
                &format!("/v1/devices/{id}/durable"),
                &[],
                "",
            )
            .await?;
        anyhow::ensure!(
            status == 200,
            "the durable calls of {id}: HTTP {status}: {}",
            String::from_utf8_lossy(&answer)
        );
        let listing: Listing = serde_json::from_slice(&answer).context("a durable listing")?;
        for record in listing.calls {
            all.insert(record.id.clone(), record);
        }
    }
    Ok(all)
}

/// Prints the part; `true` if every call ended true to what the devices did.
pub fn print(r: &DurableReport) -> bool {
    println!(
        "gateway durable: {} durable calls to {} offline devices (submitted in {:.1} s), the \
         devices then connected to 2 gateways, gateway A SIGKILLed after {} calls ran",
        r.calls, r.devices, r.submit_seconds, r.ran_at_kill
    );
    let mut t = Table::new(["measure", "value", "target", "met"]);
    let states = r
        .states
        .iter()
        .map(|(s, n)| format!("{n} {s}"))
        .collect::<Vec<_>>()
        .join(", ");
    t.row([
        "calls by final state".into(),
        states,
        "every call ended".into(),
        "—".into(),
    ]);
    t.row([
        "every call ended after".into(),
        format!("{:.1} s", r.settle_seconds),
        "—".into(),
        "—".into(),
    ]);
    t.row([
        "runs on the devices".into(),
        format!(
            "{} ({} idempotent calls ran again)",
            r.runs, r.idempotent_reruns
        ),
        "—".into(),
        "—".into(),
    ]);
    t.row([
        "states untrue, runs twice, lost".into(),
        r.violation_count.to_string(),
        "0".into(),
        if r.violation_count == 0 { "yes" } else { "NO" }.into(),
    ]);
    print!("{}", t.plain(""));
    for v in &r.violations {
        println!("violation: {v}");
    }
    r.violation_count == 0
}
