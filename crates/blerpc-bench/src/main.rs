//! The `blerpc-bench` binary: parses the command line and runs a suite of [`blerpc_bench`].
//! A suite prints its tables on stdout; the exit code is 1 if a check failed (a functional
//! test, an error count), 2 if the suite could not run.

use std::process::ExitCode;

use blerpc_bench::{
    aead, ble, calls, codec, copy, gateway, handshake, hostile, links, loopback, pipeline, process,
    scale, serial, soak, suite, wakeup,
};
use clap::{Parser, Subcommand};

/// The benchmarks of blerpc-rs. Without a subcommand: the full suite (every simulated BLE
/// profile, then every link).
#[derive(Debug, Parser)]
#[command(name = "blerpc-bench", version, about)]
struct Cli {
    /// Show the protocol trace on stderr (-v, -vv); RUST_LOG overrides it.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// The full suite's results directory: suite.json (every result) and ble.svg (the chart).
    #[arg(long, value_name = "DIR", default_value = "bench-results")]
    out: std::path::PathBuf,
    #[command(subcommand)]
    suite: Option<Suite>,
}

#[derive(Debug, Subcommand)]
enum Suite {
    /// The reference functional tests and benchmarks on the simulated BLE link (every platform
    /// profile) or, with --connect, over any real link.
    Ble(Box<ble::BleArgs>),
    /// Calls in flight on the simulated BLE link: calls/s with 1, 2 and 4 in flight per
    /// profile, interval and peripheral.
    Pipeline(Box<pipeline::PipelineArgs>),
    /// The reference functional tests and benchmarks over every link of this build.
    Links(links::LinksArgs),
    /// The loopback DATA→ACK matrix (TCP, TLS) against bare and gRPC baselines.
    Loopback(Box<loopback::LoopbackArgs>),
    /// Many concurrent WebSocket connections against `blerpc serve`.
    Scale(Box<scale::ScaleArgs>),
    /// The codec path and the key exchange against the reference Python library.
    Codec(codec::CodecArgs),
    /// AES-128-GCM seal and open per message size and crypto library.
    Aead(aead::AeadArgs),
    /// The key exchange's primitives per crypto library.
    Handshake(handshake::HandshakeArgs),
    /// CPU per unary call with client and server in one thread.
    Calls(calls::CallsArgs),
    /// How a two-process round trip responds to added work.
    Wakeup(wakeup::WakeupArgs),
    /// Large copies: memcpy against blerpc-proto's copy.
    Copy(copy::CopyArgs),
    /// The serial link's framing per PDU size.
    Serial(serial::SerialArgs),
    /// Hostile peers against a real `blerpc serve` while a legitimate client calls.
    Hostile(Box<hostile::HostileArgs>),
    /// Many encrypted connections doing mixed calls and streams for a while, every answer
    /// checked, with reconnect churn and a hostile mix.
    Soak(Box<soak::SoakArgs>),
    /// The device gateway: HTTP and relayed calls against direct ones, and many dialled-in
    /// devices (--devices N).
    Gateway(Box<gateway::GatewayArgs>),
    /// A child process of a suite.
    #[command(hide = true, subcommand)]
    Role(process::Role),
    /// `blerpc serve` (the scale test's server).
    #[command(hide = true)]
    Serve(Box<blerpc_cli::serve::ServeArgs>),
    /// `blerpc gateway` (the gateway bench's gateway).
    #[command(hide = true)]
    ServeGateway(Box<blerpc_cli::gateway::GatewayArgs>),
    /// `blerpc call` (the gateway bench's command mode).
    #[command(hide = true)]
    Call(Box<blerpc_cli::call::CallArgs>),
}

fn run(suite: Option<Suite>, out: &std::path::Path) -> anyhow::Result<bool> {
    match suite {
        None => suite::run(out),
        Some(Suite::Ble(a)) => ble::run(&a),
        Some(Suite::Pipeline(a)) => pipeline::run(&a),
        Some(Suite::Links(a)) => links::run(&a),
        Some(Suite::Loopback(a)) => loopback::run(&a),
        Some(Suite::Scale(a)) => scale::run(&a),
        Some(Suite::Codec(a)) => codec::run(&a),
        Some(Suite::Aead(a)) => aead::run(&a),
        Some(Suite::Handshake(a)) => handshake::run(&a),
        Some(Suite::Calls(a)) => calls::run(&a),
        Some(Suite::Wakeup(a)) => wakeup::run(&a),
        Some(Suite::Copy(a)) => copy::run(&a),
        Some(Suite::Serial(a)) => serial::run(&a),
        Some(Suite::Hostile(a)) => hostile::run(&a),
        Some(Suite::Soak(a)) => soak::run(&a),
        Some(Suite::Role(role)) => process::run(&role),
        Some(Suite::Serve(a)) => blerpc_cli::serve::run_blocking(&a).map(|()| true),
        Some(Suite::Gateway(a)) => gateway::run(&a),
        Some(Suite::ServeGateway(a)) => blerpc_cli::gateway::run_blocking(&a).map(|()| true),
        Some(Suite::Call(a)) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(blerpc_cli::call::call(&a))
            .map(|()| true),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    blerpc_cli::trace::init(cli.verbose);
    match run(cli.suite, &cli.out) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!(
                "blerpc-bench: {}",
                format!("{e:#}").replace(['\n', '\r'], " ")
            );
            ExitCode::from(2)
        }
    }
}
