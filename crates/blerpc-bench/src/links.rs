//! `blerpc-bench links`: the 12 reference functional tests and the 6 reference benchmarks over
//! every link of this build (in-memory, TCP, TLS with a local CA the client verifies,
//! WebSocket, serial over a pseudo-terminal), server and client in this process, the
//! connection encrypted and the server's key pinned, as `blerpc demo` sets them up. The BLE
//! figure published for macOS/bleak at CI 15 ms stands beside each benchmark for scale (a
//! local link is not BLE: the column shows how far the protocol is from being the bottleneck).

use std::io::Write as _;
use std::time::Duration;

use anyhow::Context as _;
use blerpc_demo::links::{self as demo, LinkRun};
use clap::Args;

use crate::reference::{self, BENCHMARKS, BenchResult};
use crate::table::{Align, Table};

/// `blerpc-bench links` options.
#[derive(Debug, Args, Clone)]
pub struct LinksArgs {
    /// Only these links (comma-separated): mem, tcp, tls, ws, serial.
    #[arg(long, value_delimiter = ',', value_name = "LINKS")]
    pub links: Vec<String>,
    /// Times each benchmark runs per link; the table shows the mean.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub reps: u32,
    /// Seconds allowed for each link (connect, the tests and the benchmarks).
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    pub timeout: u64,
}

impl Default for LinksArgs {
    fn default() -> Self {
        LinksArgs {
            links: Vec::new(),
            reps: 3,
            timeout: 120,
        }
    }
}

/// One link's benchmark results, by benchmark name.
pub type Benchmarks = Vec<(&'static str, Result<BenchResult, String>)>;

/// Runs the tests and the benchmarks over each selected link.
pub async fn run_all(args: &LinksArgs) -> anyhow::Result<Vec<(LinkRun, Benchmarks)>> {
    let links = demo::select_links(&args.links)?;
    let reps = args.reps.clamp(1, crate::ble::MAX_REPS);
    let limit = Duration::from_secs(args.timeout.max(1));
    let runs = demo::run_links(&links, limit, async |c| {
        reference::run_all_reps(c, reps).await
    })
    .await?;
    Ok(runs
        .into_iter()
        .map(|(run, benchmarks)| (run, benchmarks.unwrap_or_default()))
        .collect())
}

/// `true` if every link ran, passed its tests and completed every benchmark.
pub fn all_ok(runs: &[(LinkRun, Benchmarks)]) -> bool {
    runs.iter().all(|(run, benchmarks)| {
        run.ok()
            && benchmarks.len() == BENCHMARKS.len()
            && benchmarks.iter().all(|(_, r)| r.is_ok())
    })
}

/// The benchmarks per link: ms per call or per item, then KB/s for the throughput ones, with
/// the published BLE figure (macOS/bleak, CI 15 ms) for scale.
pub fn render_benchmarks(runs: &[(LinkRun, Benchmarks)], reps: u32) -> String {
    let mut out = format!(
        "reference benchmarks per link (mean of {reps}; BLE published = macOS/bleak at CI 15 ms)\n"
    );
    let mut table = Table::new(
        std::iter::once("benchmark".to_string())
            .chain(runs.iter().map(|(r, _)| r.link.to_string()))
            .chain(["BLE published".to_string()]),
    );
    for i in 1..=runs.len() + 1 {
        table = table.align(i, Align::Right);
    }
    let find = |benchmarks: &Benchmarks, name: &str| {
        benchmarks
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, r)| r.clone())
    };
    for name in BENCHMARKS {
        let mut row = vec![format!("{name} ({})", reference::per(name).unit())];
        for (_, benchmarks) in runs {
            row.push(match find(benchmarks, name) {
                Some(Ok(b)) => reference::num(b.ms),
                Some(Err(e)) => format!("FAILED: {e}"),
                None => "-".into(),
            });
        }
        row.push(
            reference::published_one("macos", name).map_or("-".into(), |p| reference::num(p.ms)),
        );
        table.row(row);
    }
    for name in BENCHMARKS
        .into_iter()
        .filter(|n| reference::is_throughput(n))
    {
        let mut row = vec![format!("{name} (KB/s)")];
        for (_, benchmarks) in runs {
            row.push(match find(benchmarks, name) {
                Some(Ok(b)) => b.kb_per_s.map_or("-".into(), reference::num),
                _ => "-".into(),
            });
        }
        row.push(
            reference::published_one("macos", name)
                .and_then(|p| p.kb_per_s)
                .map_or("-".into(), reference::num),
        );
        table.row(row);
    }
    out.push_str(&table.plain(""));
    out
}

/// Every link's tests and benchmarks as JSON.
pub fn to_json(runs: &[(LinkRun, Benchmarks)], reps: u32) -> serde_json::Value {
    let links: Vec<serde_json::Value> = runs
        .iter()
        .map(|(run, benchmarks)| {
            let benchmarks: serde_json::Map<String, serde_json::Value> = benchmarks
                .iter()
                .map(|(name, r)| {
                    let v = match r {
                        Ok(b) => crate::ble::result_json(b),
                        Err(e) => serde_json::json!({ "error": e }),
                    };
                    ((*name).to_string(), v)
                })
                .collect();
            serde_json::json!({
                "link": run.link,
                "address": run.address,
                "connect_ms": run.connect.as_secs_f64() * 1000.0,
                "functional": run.results.iter().map(|t| serde_json::json!({
                    "name": t.name,
                    "pass": t.passed(),
                    "error": t.outcome.as_ref().err(),
                    "ms": t.elapsed.as_secs_f64() * 1000.0,
                })).collect::<Vec<_>>(),
                "benchmarks": benchmarks,
                "error": run.error,
            })
        })
        .collect();
    serde_json::json!({ "suite": "links", "reps": reps, "links": links, "ok": all_ok(runs) })
}

/// Prints the tests' table and the benchmarks' table; returns whether everything passed.
pub fn report(runs: &[(LinkRun, Benchmarks)], reps: u32) -> anyhow::Result<bool> {
    let ok = all_ok(runs);
    let tests: Vec<LinkRun> = runs.iter().map(|(r, _)| r.clone()).collect();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "\n{}\n{}\n{}",
        demo::render(&tests),
        render_benchmarks(runs, reps),
        demo::verdict(ok)
    )
    .context("cannot write to stdout")?;
    Ok(ok)
}

/// Runs `blerpc-bench links`.
pub fn run(args: &LinksArgs) -> anyhow::Result<bool> {
    eprintln!(
        "blerpc-bench links: the 12 reference functional tests and 6 benchmarks ({} runs each) \
         per link, encrypted, identity pinned",
        args.reps
    );
    let runs = runtime()?.block_on(run_all(args))?;
    report(&runs, args.reps)
}

/// The multi-threaded runtime the link suites run on.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start a tokio runtime")
}
