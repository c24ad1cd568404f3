//! `blerpc bench`: the benchmark suites.
//!
//! - [`ble`]: `blerpc bench ble`, the reference functional tests and benchmarks on the simulated
//!   BLE link for every platform profile (or over a real link with `--connect`), with the
//!   published figures beside each result.
//! - [`loopback`]: `blerpc bench loopback`, the loopback DATA→ACK matrix over TCP and TLS
//!   against bare baselines, server and client in separate processes.
//! - [`scale`]: `blerpc bench scale`, many concurrent WebSocket connections against
//!   `blerpc serve --listen ws://…`.
//!
//! `blerpc bench` without a suite runs the full default suite (every BLE profile, then the
//! link suites of `blerpc demo`) with a progress display.

use clap::{Args, Subcommand};

pub mod ble;
pub mod loopback;
pub mod scale;

/// `s` as SVG text: `&`, `<` and `>` escaped (the charts' labels).
pub(crate) fn svg_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `blerpc bench` options.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The suite to run; without one, every BLE profile and then the link suites.
    #[command(subcommand)]
    pub suite: Option<Suite>,
}

/// A benchmark suite.
#[derive(Debug, Subcommand)]
pub enum Suite {
    /// The reference functional tests and benchmarks on the simulated BLE link (every platform
    /// profile) or, with --connect, over any real link.
    Ble(Box<ble::BleArgs>),
    /// The loopback DATA→ACK matrix (TCP, TLS) against bare baselines, in separate processes.
    Loopback(Box<loopback::LoopbackArgs>),
    /// Many concurrent WebSocket connections against `blerpc serve --listen ws://…`.
    Scale(Box<scale::ScaleArgs>),
}

/// Runs `blerpc bench`; `Ok(false)` if a check failed (a functional test, an error count).
pub fn run(args: &BenchArgs) -> anyhow::Result<bool> {
    match &args.suite {
        Some(Suite::Ble(a)) => ble::run(a),
        Some(Suite::Loopback(a)) => loopback::run(a),
        Some(Suite::Scale(a)) => scale::run(a),
        None => ble::run_full_suite(),
    }
}
