//! The full suite, `blerpc-bench` without a subcommand: every simulated BLE profile (the
//! reference functional tests, the six benchmarks beside the published figures, the link's
//! physical limit), then every link of this build ([`crate::links`]).

use std::time::Instant;

use crate::ble::{self, BleArgs};
use crate::links::{self, LinksArgs};

/// Runs the full suite; `Ok(false)` if a functional test or a benchmark failed.
pub fn run() -> anyhow::Result<bool> {
    let started = Instant::now();
    let ble_args = BleArgs::default();
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
    println!(
        "\nblerpc-bench: {} in {:.1} s",
        if ok { "all PASS" } else { "FAILURES above" },
        started.elapsed().as_secs_f64()
    );
    Ok(ok)
}
