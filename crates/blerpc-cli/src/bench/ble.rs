//! `blerpc bench ble` (being built: see issue 4).

use clap::Args;

/// `blerpc bench ble` options.
#[derive(Debug, Args)]
pub struct BleArgs {}

/// Runs `blerpc bench ble`.
pub fn run(_args: &BleArgs) -> anyhow::Result<bool> {
    anyhow::bail!("blerpc bench ble is not built yet")
}

/// Runs the full default suite.
pub fn run_full_suite() -> anyhow::Result<bool> {
    anyhow::bail!("blerpc bench is not built yet")
}
