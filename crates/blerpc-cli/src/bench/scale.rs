//! `blerpc bench scale` (being built: see issue 5).

use clap::Args;

/// `blerpc bench scale` options.
#[derive(Debug, Args)]
pub struct ScaleArgs {}

/// Runs `blerpc bench scale`.
pub fn run(_args: &ScaleArgs) -> anyhow::Result<bool> {
    anyhow::bail!("blerpc bench scale is not built yet")
}
