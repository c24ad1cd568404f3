//! `blerpc bench loopback` (being built: see issue 5).

use clap::Args;

/// `blerpc bench loopback` options.
#[derive(Debug, Args)]
pub struct LoopbackArgs {}

/// Runs `blerpc bench loopback`.
pub fn run(_args: &LoopbackArgs) -> anyhow::Result<bool> {
    anyhow::bail!("blerpc bench loopback is not built yet")
}
