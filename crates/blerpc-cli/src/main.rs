//! The `blerpc` binary: parses the command line and dispatches to a subcommand module of
//! [`blerpc_cli`]. Errors are one line on stderr and a non-zero exit.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// bleRPC command-line tool.
#[derive(Debug, Parser)]
#[command(name = "blerpc", version, about, propagate_version = true)]
struct Cli {
    /// Show the protocol trace on stderr (-v: connections and every PDU; -vv: everything).
    /// RUST_LOG overrides it.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the 12 reference functional tests over every link in one process (server and
    /// client), and print a PASS/FAIL table.
    Demo(blerpc_cli::demo::DemoArgs),
    /// Serve the demo service (echo, flash_read, data_write, counter_stream, counter_upload).
    Serve(Box<blerpc_cli::serve::ServeArgs>),
    /// Run a device gateway: devices dial in (or are reached over BLE), backends call them over
    /// HTTP/JSON or end to end through a relayed link; a dashboard shows them.
    Gateway(Box<blerpc_cli::gateway::GatewayArgs>),
    /// Call a command on a peripheral; the request and the response are JSON.
    Call(blerpc_cli::call::CallArgs),
    /// Upload a central→peripheral stream: one JSON item per line of stdin.
    Upload(blerpc_cli::call::UploadArgs),
    /// Ask a peripheral for its diagnostics: its link as it sees it, uptime, version,
    /// counters; each field its value or the reason it is missing.
    Diagnostics(blerpc_cli::diagnostics::DiagnosticsArgs),
    /// Measure a real link for a field report (a payload mix for a duration, reconnects, the
    /// device's diagnostics, latency percentiles): JSON, Markdown and plots; or `report
    /// compare A.json B.json`.
    Report(Box<blerpc_cli::report::ReportArgs>),
    /// Create an identity seed file and print its public key.
    Keygen(blerpc_cli::keygen::KeygenArgs),
    /// List BLE peripherals advertising the bleRPC service.
    Scan(blerpc_cli::scan::ScanArgs),
    /// Dissect captured bleRPC PDUs: containers, control payloads, reassembled commands.
    #[command(
        long_about = blerpc_cli::decode::LONG_ABOUT,
        after_long_help = blerpc_cli::decode::AFTER_LONG_HELP,
        override_usage = "blerpc decode [OPTIONS] <HEX>...\n       blerpc decode [OPTIONS] --file <FILE> [HEX]..."
    )]
    Decode(blerpc_cli::decode::DecodeArgs),
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn run(command: Command) -> anyhow::Result<ExitCode> {
    let ok = ExitCode::SUCCESS;
    match command {
        Command::Decode(args) => blerpc_cli::decode::run(&args),
        Command::Keygen(args) => blerpc_cli::keygen::run(&args).map(|()| ok),
        Command::Demo(args) => runtime()?.block_on(async {
            let all_passed = blerpc_cli::demo::run(&args).await?;
            Ok(if all_passed { ok } else { ExitCode::from(1) })
        }),
        Command::Serve(args) => blerpc_cli::serve::run_blocking(&args).map(|()| ok),
        Command::Gateway(args) => blerpc_cli::gateway::run_blocking(&args).map(|()| ok),
        Command::Call(args) => runtime()?
            .block_on(blerpc_cli::call::call(&args))
            .map(|()| ok),
        Command::Upload(args) => runtime()?
            .block_on(blerpc_cli::call::upload(&args))
            .map(|()| ok),
        Command::Diagnostics(args) => runtime()?
            .block_on(blerpc_cli::diagnostics::run(&args))
            .map(|()| ok),
        Command::Report(args) => runtime()?
            .block_on(blerpc_cli::report::run(&args))
            .map(|()| ok),
        Command::Scan(args) => runtime()?
            .block_on(blerpc_cli::scan::run(&args))
            .map(|()| ok),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    blerpc_cli::trace::init(cli.verbose);
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            // One line: the context chain, never a backtrace or a debug dump.
            let msg = format!("{e:#}").replace(['\n', '\r'], " ");
            eprintln!("blerpc: {msg}");
            ExitCode::from(2)
        }
    }
}
