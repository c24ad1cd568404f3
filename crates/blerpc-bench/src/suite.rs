//! The full suite, `blerpc-bench` without a subcommand: every simulated BLE profile (the
//! reference functional tests, the six benchmarks beside the published figures, the link's
//! physical limit), then every link of this build ([`crate::links`]). The tables go to stdout;
//! everything, as JSON, and the BLE chart go to a results directory.

use std::path::Path;
use std::time::Instant;

use anyhow::Context as _;

use crate::ble::{self, BleArgs};
use crate::links::{self, LinksArgs};

/// The file of the suite's results in the results directory.
pub const RESULTS: &str = "suite.json";
/// The BLE chart in the results directory.
pub const CHART: &str = "ble.svg";

/// Runs the full suite, writing [`RESULTS`] and [`CHART`] into `out` (created if needed);
/// `Ok(false)` if a functional test or a benchmark failed.
pub fn run(out: &Path) -> anyhow::Result<bool> {
    let started = Instant::now();
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create the results directory {}", out.display()))?;
    let ble_args = BleArgs {
        plot: Some(out.join(CHART)),
        ..BleArgs::default()
    };
    eprintln!("blerpc-bench: every BLE profile (simulated), then every link");
    eprintln!(
        "[1/2] BLE profiles: functional tests, benchmarks (mean of {} runs), limits",
        ble_args.reps
    );
    let runs = ble::run_suite(&ble_args)?;
    let ble_ok = ble::report(&runs, &ble_args)?;
    let links_args = LinksArgs::default();
    eprintln!(
        "\n[2/2] links: functional tests, benchmarks (mean of {} runs)",
        links_args.reps
    );
    let link_runs = links::runtime()?.block_on(links::run_all(&links_args))?;
    let links_ok = links::report(&link_runs, links_args.reps)?;
    let ok = ble_ok && links_ok;
    let seconds = started.elapsed().as_secs_f64();
    let results = serde_json::json!({
        "suite": "full",
        "ok": ok,
        "seconds": seconds,
        "ble": ble::to_json(&runs, &ble_args),
        "links": links::to_json(&link_runs, links_args.reps),
    });
    let path = out.join(RESULTS);
    std::fs::write(&path, serde_json::to_string_pretty(&results)? + "\n")
        .with_context(|| format!("cannot write {}", path.display()))?;
    println!(
        "\nblerpc-bench: {} in {seconds:.1} s\nresults written to {} (JSON) and {} (chart)",
        if ok { "all PASS" } else { "FAILURES above" },
        path.display(),
        out.join(CHART).display()
    );
    Ok(ok)
}
