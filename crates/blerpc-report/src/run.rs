//! The run: the mix's calls one after another for the duration, every call timed, a lost
//! connection reconnected (its reason and the time it took recorded), the device's
//! diagnostics read before and after.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use blerpc::Client;
use blerpc::blerpc_proto::connection::CallError;
use blerpc::diagnostics::DeviceDiagnostics;
use blerpc_demo::pb::{BlerpcClient, DataWriteRequest, EchoRequest, FlashReadRequest};
use tokio::time::Instant;

use crate::mix::{CallType, Mix};
use crate::schema::{
    DeviceBeforeAfter, Environment, Known, Latency, LinkFacts, Reconnect, Report, RunFacts, SCHEMA,
    Second, Throughput,
};

/// How a run goes.
#[derive(Clone, Debug)]
pub struct Options {
    /// The calls and their weights.
    pub mix: Mix,
    /// How long to keep calling.
    pub duration: Duration,
    /// Losses of the connection the run reconnects after; one more ends the run (the report
    /// is still written). Default 100.
    pub max_reconnects: u32,
    /// Calls at most: the run ends there if the duration has not (each call's sample is kept
    /// until the report is written: 24 bytes each). Default 1,000,000.
    pub max_calls: u64,
    /// Wait before each reconnect attempt. Default 500 ms.
    pub reconnect_backoff: Duration,
    /// Give up reconnecting after this long without a connection (the run ends there).
    /// Default 30 s.
    pub reconnect_give_up: Duration,
    /// The host and what the person running it said (see [`crate::host`]).
    pub environment: Environment,
    /// The URL, the link's kind and its TLS mode; the rest is read from the connection.
    pub url: String,
    /// The link's kind (`tcp`, `ble`, …).
    pub kind: String,
    /// How TLS was verified, or why there is none.
    pub tls: Known<String>,
}

impl Options {
    /// The default mix for `duration`, on `url` of `kind`, with `environment`.
    pub fn new(url: &str, kind: &str, duration: Duration, environment: Environment) -> Self {
        Options {
            mix: Mix::default(),
            duration,
            max_reconnects: 100,
            max_calls: 1_000_000,
            reconnect_backoff: Duration::from_millis(500),
            reconnect_give_up: Duration::from_secs(30),
            environment,
            url: url.to_string(),
            kind: kind.to_string(),
            tls: Known::missing("no TLS on this link"),
        }
    }
}

/// Where the run is, for a progress bar.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    /// Time into the run.
    pub elapsed: Duration,
    /// The duration asked for.
    pub total: Duration,
    /// Calls so far.
    pub calls: u64,
    /// Failed calls so far.
    pub failed: u64,
    /// Reconnects so far.
    pub reconnects: u32,
}

/// A run that could not start.
#[derive(Debug, thiserror::Error)]
#[error("connecting to {url} for the report: {reason}")]
pub struct RunError {
    /// The URL.
    pub url: String,
    /// What the connection attempt said.
    pub reason: String,
}

/// One call's outcome.
struct Sample {
    kind: CallType,
    /// Seconds into the run when it ended.
    at: f64,
    /// Its latency in ms, or its failure class.
    outcome: Result<f64, String>,
}

/// Runs `options` against the device `connect` reaches (each call of `connect` opens a new
/// connection, and must itself be bounded in time: `blerpc report` bounds it by `--timeout`),
/// reporting progress to `progress` about every 100 ms of the run.
pub async fn run<C, F>(
    mut connect: C,
    options: &Options,
    mut progress: impl FnMut(&Progress),
) -> Result<Report, RunError>
where
    C: FnMut() -> F,
    F: Future<Output = Result<Client, String>>,
{
    let started_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let client = connect().await.map_err(|reason| RunError {
        url: options.url.clone(),
        reason,
    })?;
    let link = link_facts(&client, options);
    let before = diagnostics(&client).await;
    let mut client = BlerpcClient::new(client);
    let cycle = options.mix.cycle();
    let start = Instant::now();
    let end = start + options.duration;
    let mut samples: Vec<Sample> = Vec::new();
    let mut reconnects: Vec<Reconnect> = Vec::new();
    let mut failed = 0u64;
    let mut shown = start;
    let mut next = cycle.iter().copied().cycle();
    'calls: while Instant::now() < end && (samples.len() as u64) < options.max_calls {
        let Some(kind) = next.next() else { break };
        let t0 = Instant::now();
        let result = call(&client, kind).await;
        let at = Instant::now().duration_since(start).as_secs_f64();
        let outcome = match result {
            Ok(()) => Ok(Instant::now().duration_since(t0).as_secs_f64() * 1e3),
            Err(failure) => Err(failure),
        };
        let lost = match &outcome {
            Err(f) if f.class == "link_lost" => Some(f.detail.clone()),
            _ => None,
        };
        samples.push(Sample {
            kind,
            at,
            outcome: outcome.map_err(|f| {
                failed += 1;
                f.class
            }),
        });
        if let Some(reason) = lost {
            if reconnects.len() >= options.max_reconnects as usize {
                reconnects.push(Reconnect {
                    at_s: at,
                    reason,
                    reconnected_after_ms: Known::missing(format!(
                        "the run ends after {} reconnects (the limit)",
                        options.max_reconnects
                    )),
                });
                break 'calls;
            }
            let lost_at = Instant::now();
            let give_up = lost_at + options.reconnect_give_up;
            let mut last_error = String::new();
            let back = loop {
                if Instant::now() >= end || Instant::now() >= give_up {
                    break None;
                }
                tokio::time::sleep(options.reconnect_backoff).await;
                match connect().await {
                    Ok(c) => break Some(c),
                    Err(e) => last_error = e,
                }
            };
            match back {
                Some(c) => {
                    client = BlerpcClient::new(c);
                    reconnects.push(Reconnect {
                        at_s: at,
                        reason,
                        reconnected_after_ms: Known::Value(
                            Instant::now().duration_since(lost_at).as_secs_f64() * 1e3,
                        ),
                    });
                }
                None => {
                    let why = if Instant::now() >= end {
                        "the run ended before a connection came back".to_string()
                    } else {
                        format!(
                            "no connection within {:?}: {last_error}",
                            options.reconnect_give_up
                        )
                    };
                    reconnects.push(Reconnect {
                        at_s: at,
                        reason,
                        reconnected_after_ms: Known::missing(why),
                    });
                    break 'calls;
                }
            }
        }
        if Instant::now().duration_since(shown) >= Duration::from_millis(100) {
            shown = Instant::now();
            progress(&Progress {
                elapsed: shown.duration_since(start),
                total: options.duration,
                calls: samples.len() as u64,
                failed,
                reconnects: u32::try_from(reconnects.len()).unwrap_or(u32::MAX),
            });
        }
    }
    let elapsed = Instant::now().duration_since(start).as_secs_f64();
    let after = diagnostics(client.inner()).await;
    client.inner().close().await;
    Ok(assemble(
        options,
        started_unix_ms,
        link,
        DeviceBeforeAfter { before, after },
        &samples,
        elapsed,
        reconnects,
    ))
}

/// A call that failed, by class, and what it said.
struct Failure {
    class: String,
    detail: String,
}

/// Makes one call of `kind` and checks its answer.
async fn call(client: &BlerpcClient, kind: CallType) -> Result<(), Failure> {
    let wrong = |what: &str| Failure {
        class: format!("wrong_answer:{what}"),
        detail: format!("{what} answered something else than was asked"),
    };
    match kind {
        CallType::Echo => {
            let r = client
                .echo(EchoRequest {
                    message: "hello".into(),
                })
                .await
                .map_err(classify)?;
            if r.message != "hello" {
                return Err(wrong("echo"));
            }
        }
        CallType::FlashRead8k | CallType::FlashRead1 => {
            let length = if kind == CallType::FlashRead8k {
                8192
            } else {
                1
            };
            let r = client
                .flash_read(FlashReadRequest { address: 0, length })
                .await
                .map_err(classify)?;
            if r.data.len() != length as usize {
                return Err(wrong("flash_read"));
            }
        }
        CallType::DataWrite200 => {
            let data: Vec<u8> = (0..200u32).map(|i| (i % 256) as u8).collect();
            let r = client
                .data_write(DataWriteRequest { data: data.into() })
                .await
                .map_err(classify)?;
            if r.length != 200 {
                return Err(wrong("data_write"));
            }
        }
    }
    Ok(())
}

/// The failure class of an error.
fn classify(e: blerpc::Error) -> Failure {
    let class = match e.call_error() {
        Some(CallError::Timeout) => "timeout".to_string(),
        Some(CallError::Busy { .. }) => "busy".to_string(),
        Some(CallError::Peer(code)) => format!("peer_error:{}", code.as_str()),
        _ if e.is_disconnected() => "link_lost".to_string(),
        _ if matches!(e, blerpc::Error::Decode(_)) => "decode".to_string(),
        _ => "other".to_string(),
    };
    Failure {
        class,
        detail: e.to_string(),
    }
}

/// The device's diagnostics, or every field missing with why asking failed.
async fn diagnostics(client: &Client) -> DeviceDiagnostics {
    match client.diagnostics().await {
        Ok(d) => d,
        Err(e) => DeviceDiagnostics::unavailable(&format!("asking failed: {e}")),
    }
}

/// The link as the client sees it.
fn link_facts(client: &Client, options: &Options) -> LinkFacts {
    let info = client.info();
    LinkFacts {
        url: options.url.clone(),
        kind: options.kind.clone(),
        tls: options.tls.clone(),
        encrypted: info.encrypted,
        peer_identity: match info.peer_identity {
            Some(key) => Known::Value(blerpc::known_keys::to_hex(&key)),
            None => Known::missing("the session is not encrypted"),
        },
        att_mtu: u32::try_from(info.att_mtu).unwrap_or(u32::MAX),
        conn_interval_us: Known::missing(if options.kind == "ble" {
            "host BLE APIs do not give it: see device.before.conn_interval_us"
        } else {
            "not a BLE link"
        }),
    }
}

/// The report from the samples.
fn assemble(
    options: &Options,
    started_unix_ms: u64,
    link: LinkFacts,
    device: DeviceBeforeAfter,
    samples: &[Sample],
    elapsed: f64,
    reconnects: Vec<Reconnect>,
) -> Report {
    let mut latency = BTreeMap::new();
    let ok_ms = |filter: &dyn Fn(&Sample) -> bool| -> Vec<f64> {
        let mut v: Vec<f64> = samples
            .iter()
            .filter(|s| filter(s))
            .filter_map(|s| s.outcome.as_ref().ok().copied())
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    for kind in CallType::ALL {
        if options.mix.0.iter().any(|(k, _)| *k == kind) {
            latency.insert(
                kind.name().to_string(),
                summary(&ok_ms(&|s| s.kind == kind)),
            );
        }
    }
    latency.insert("all".to_string(), summary(&ok_ms(&|_| true)));
    let mut failures: BTreeMap<String, u64> = BTreeMap::new();
    let (mut up, mut down) = (0u64, 0u64);
    for s in samples {
        match &s.outcome {
            Ok(_) => {
                let (u, d) = s.kind.payload();
                up += u;
                down += d;
            }
            Err(class) => *failures.entry(class.clone()).or_default() += 1,
        }
    }
    let ok = samples.iter().filter(|s| s.outcome.is_ok()).count() as u64;
    let per_s = |n: f64| if elapsed > 0.0 { n / elapsed } else { 0.0 };
    // One pass: each sample into its second (the latencies of the successes, the failures).
    let mut seconds: Vec<(Vec<f64>, u32)> = vec![(Vec::new(), 0); elapsed.ceil() as usize];
    for s in samples {
        if let Some((ms, failed)) = seconds.get_mut(s.at as usize) {
            match s.outcome {
                Ok(latency) => ms.push(latency),
                Err(_) => *failed += 1,
            }
        }
    }
    let timeline = seconds
        .into_iter()
        .zip(0u32..)
        .map(|((mut ms, failed), t)| {
            ms.sort_by(f64::total_cmp);
            Second {
                t_s: t,
                ok: ms.len() as u32,
                failed,
                p50_ms: if ms.is_empty() {
                    Known::missing("no call succeeded in this second")
                } else {
                    Known::Value(quantile(&ms, 0.5))
                },
            }
        })
        .collect();
    Report {
        schema: SCHEMA.to_string(),
        tool: concat!("blerpc-report ", env!("CARGO_PKG_VERSION")).to_string(),
        started_unix_ms,
        environment: options.environment.clone(),
        link,
        device,
        run: RunFacts {
            mix: options.mix.clone(),
            duration_s: options.duration.as_secs_f64(),
            elapsed_s: elapsed,
            calls: samples.len() as u64,
            ok,
            failed: samples.len() as u64 - ok,
        },
        latency,
        throughput: Throughput {
            calls_per_s: per_s(ok as f64),
            up_bytes_per_s: per_s(up as f64),
            down_bytes_per_s: per_s(down as f64),
        },
        failures,
        reconnects,
        timeline,
    }
}

/// The latency summary of `sorted` milliseconds.
fn summary(sorted: &[f64]) -> Latency {
    let n = sorted.len();
    Latency {
        count: n as u64,
        p50_ms: quantile(sorted, 0.5),
        p95_ms: quantile(sorted, 0.95),
        p99_ms: quantile(sorted, 0.99),
        max_ms: sorted.last().copied().unwrap_or(0.0),
        mean_ms: if n == 0 {
            0.0
        } else {
            sorted.iter().sum::<f64>() / n as f64
        },
    }
}

/// The `rate` quantile of `sorted`, interpolated at `rate × (n − 1)` (as the lab's tables);
/// 0 for none.
pub fn quantile(sorted: &[f64], rate: f64) -> f64 {
    let Some(last) = sorted.len().checked_sub(1) else {
        return 0.0;
    };
    let pos = rate.clamp(0.0, 1.0) * last as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    match (sorted.get(lo), sorted.get(hi)) {
        (Some(a), Some(b)) => a + (b - a) * (pos - lo as f64),
        _ => 0.0,
    }
}
