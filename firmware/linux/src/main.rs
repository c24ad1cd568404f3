//! The firmware's application and our central on Linux, over HCI H4 on TCP (Bumble's virtual
//! controllers: `python -m bumble.apps.controllers tcp-server:127.0.0.1:P1 tcp-server:127.0.0.1:P2`).
//!
//! ```text
//! blerpc-fw-linux peripheral --hci 127.0.0.1:P1 [--seed HEX]
//!     the firmware's application (blerpc-fw-app) as a board runs it; prints IDENTITY and ADDRESS
//! blerpc-fw-linux central --hci 127.0.0.1:P2 --trust-key HEX
//!     the blerpc runtime's Client over its BLE central link on trouble-host: scans for the
//!     bleRPC service, connects, and runs the reference's 12 functional tests
//! ```
//!
//! `RUST_LOG=info` shows the BLE side (connection, MTU, data length, connection interval).

mod central;
mod hci;
mod peripheral;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use blerpc::client::PinPolicy;
use blerpc::link::ble::central::BleCentralLink;
use blerpc::{Client, ClientConfig};
use blerpc_demo::{functional, pb};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn hex32(s: &str) -> anyhow::Result<[u8; 32]> {
    hex::decode(s)?
        .try_into()
        .map_err(|_| anyhow::anyhow!("expected 32 bytes of hex"))
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let args: Vec<String> = std::env::args().collect();
    let result = match args.get(1).map(String::as_str) {
        Some("peripheral") => run_peripheral(&args),
        Some("central") => run_central(&args),
        _ => Err(anyhow::anyhow!(
            "usage: blerpc-fw-linux peripheral --hci HOST:PORT [--seed HEX] | central --hci HOST:PORT --trust-key HEX [--timeout SECS]"
        )),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run_peripheral(args: &[String]) -> anyhow::Result<bool> {
    let hci = arg(args, "--hci").context("--hci HOST:PORT")?;
    let seed = arg(args, "--seed").map(|s| hex32(&s)).transpose()?;
    peripheral::run(&hci, seed, [0x01, 0x02, 0x03, 0x04, 0x05, 0xC1])?;
    Ok(true)
}

fn run_central(args: &[String]) -> anyhow::Result<bool> {
    let hci = arg(args, "--hci").context("--hci HOST:PORT")?;
    let key =
        hex32(&arg(args, "--trust-key").context("--trust-key HEX (the peripheral's identity)")?)?;
    let timeout = Duration::from_secs(
        arg(args, "--timeout")
            .map(|s| s.parse())
            .transpose()?
            .unwrap_or(30),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let started = Instant::now();
        let gatt = central::TroubleGatt::connect(hci, timeout).await?;
        println!(
            "connected over trouble-host, ATT MTU {}",
            blerpc::link::ble::central::GattClient::att_mtu(&gatt)
        );
        let link = BleCentralLink::new(gatt);
        let config = ClientConfig {
            pinning: PinPolicy::Trust(key),
            ..ClientConfig::default()
        };
        let client = tokio::time::timeout(timeout, Client::connect(link, config))
            .await
            .context("bleRPC setup timed out")?
            .context("bleRPC setup")?;
        println!(
            "bleRPC session up (encrypted, identity pinned) in {:.2} s",
            started.elapsed().as_secs_f64()
        );
        let results = functional::run_all(&pb::BlerpcClient::new(client)).await;
        println!("| test | result | ms |");
        println!("|---|---|---:|");
        let mut failed = 0;
        for r in &results {
            let outcome = match &r.outcome {
                Ok(()) => "pass".to_string(),
                Err(e) => {
                    failed += 1;
                    format!("FAIL: {e}")
                }
            };
            println!("| {} | {} | {} |", r.name, outcome, r.elapsed.as_millis());
        }
        println!("{} passed, {} failed", results.len() - failed, failed);
        Ok(failed == 0 && results.len() == functional::TESTS.len())
    })
}
