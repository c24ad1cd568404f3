//! The `blerpc` binary: parses the command line and dispatches to a subcommand module of
//! [`blerpc_cli`].

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// bleRPC command-line tool.
#[derive(Debug, Parser)]
#[command(name = "blerpc", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Dissect captured bleRPC PDUs: containers, control payloads, reassembled commands.
    #[command(
        long_about = blerpc_cli::decode::LONG_ABOUT,
        after_long_help = blerpc_cli::decode::AFTER_LONG_HELP
    )]
    Decode(blerpc_cli::decode::DecodeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Decode(args) => blerpc_cli::decode::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("blerpc: {e:#}");
            ExitCode::from(2)
        }
    }
}
