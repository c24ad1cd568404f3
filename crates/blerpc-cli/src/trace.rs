//! `--verbose`: the runtime's `tracing` events on stderr.
//!
//! `-v` shows connection events and every link PDU (target `blerpc::pdu`, hex); `-vv` everything
//! down to `trace`. `RUST_LOG` (e.g. `RUST_LOG=blerpc=debug`) overrides both.

use tracing_subscriber::EnvFilter;

/// Installs the stderr subscriber for `verbosity` (the number of `-v`).
pub fn init(verbosity: u8) {
    let default = match verbosity {
        0 => "warn",
        1 => "warn,blerpc=debug,blerpc::pdu=trace,blerpc_cli=debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(verbosity > 0)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
