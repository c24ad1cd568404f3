//! `blerpc scan`: lists BLE peripherals advertising the bleRPC service (feature `ble-central`).

use clap::Args;

/// `blerpc scan` options.
#[derive(Debug, Args)]
pub struct ScanArgs {
    /// Seconds to scan.
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    pub seconds: u64,
}

/// Runs `blerpc scan`: one line per peripheral, `ADDRESS  RSSI  NAME`, strongest first.
#[cfg(feature = "ble-central")]
pub async fn run(args: &ScanArgs) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let found = blerpc::link::ble::btleplug::scan(std::time::Duration::from_secs(args.seconds))
        .await
        .context("BLE scan failed (is Bluetooth on and may this user use it?)")?;
    if found.is_empty() {
        eprintln!("blerpc: no bleRPC peripheral found in {} s", args.seconds);
    }
    for f in found {
        let rssi = f
            .rssi
            .map_or_else(|| "?".to_string(), |r| format!("{r} dBm"));
        println!(
            "ble://{:<20} {rssi:>8}  {}",
            f.address,
            f.name.unwrap_or_default()
        );
    }
    Ok(())
}

/// Runs `blerpc scan`.
#[cfg(not(feature = "ble-central"))]
pub async fn run(_args: &ScanArgs) -> anyhow::Result<()> {
    anyhow::bail!(
        "blerpc scan needs BLE: this blerpc was built without ble-central; rebuild with `cargo build -p blerpc-cli --features ble-central`"
    )
}
