//! `blerpc report`: a field report of a real link (`blerpc_report`), and `blerpc report
//! compare` of two.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use blerpc_report::schema::{Environment, Known};
use blerpc_report::{Mix, Options};
use clap::{Args, Subcommand};

use crate::call::ConnectArgs;

/// `blerpc report` options.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ReportArgs {
    /// `compare A.json B.json` instead of a run.
    #[command(subcommand)]
    pub compare: Option<ReportCommand>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub connect: Option<ConnectArgs>,
    /// Seconds to run the mix.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub duration: f64,
    /// The calls and their weights, KIND:WEIGHT,… (kinds: echo, flash_read_8k, flash_read_1,
    /// data_write_200). Default: the published benchmark's counts.
    #[arg(long, value_name = "MIX")]
    pub mix: Option<String>,
    /// The directory to write report.json, report.md and the plots into.
    #[arg(long, value_name = "DIR", default_value = "blerpc-report")]
    pub out: PathBuf,
    /// Losses of the connection to reconnect after before the run ends.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub max_reconnects: u32,
    /// The device's board (the tool cannot see it).
    #[arg(long, value_name = "TEXT")]
    pub board: Option<String>,
    /// The access point, for a Wi-Fi link.
    #[arg(long, value_name = "TEXT")]
    pub access_point: Option<String>,
    /// The distance to the device.
    #[arg(long, value_name = "TEXT")]
    pub distance: Option<String>,
    /// Anything else worth recording (the BLE adapter, walls, interference).
    #[arg(long, value_name = "TEXT")]
    pub note: Option<String>,
}

/// `blerpc report` subcommands.
#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// Two reports side by side with ratios (B / A), what differs in their environments first.
    Compare {
        /// The first report (report.json).
        a: PathBuf,
        /// The second.
        b: PathBuf,
    },
}

/// Runs the report (or the comparison) and prints the summary.
pub async fn run(args: &ReportArgs) -> anyhow::Result<()> {
    if let Some(ReportCommand::Compare { a, b }) = &args.compare {
        let a = blerpc_report::read(a)?;
        let b = blerpc_report::read(b)?;
        println!("{}", blerpc_report::compare::markdown(&a, &b));
        return Ok(());
    }
    let connect = args
        .connect
        .as_ref()
        .ok_or_else(|| anyhow!("--connect URL is needed for a report (or: report compare A B)"))?;
    let duration = Duration::try_from_secs_f64(args.duration)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            anyhow!(
                "--duration {} is not a positive number of seconds",
                args.duration
            )
        })?;
    let kind = connect
        .connect
        .split_once("://")
        .map_or("unknown", |(scheme, _)| scheme)
        .to_string();
    let adapter = if kind == "ble" {
        blerpc_report::host::ble_adapter()
    } else {
        Known::missing(format!("not a BLE link ({kind})"))
    };
    let environment = Environment::for_host(
        adapter,
        args.board.clone(),
        args.access_point.clone(),
        args.distance.clone(),
        args.note.clone(),
    );
    let mut options = Options::new(&connect.connect, &kind, duration, environment);
    if let Some(mix) = &args.mix {
        options.mix = mix.parse::<Mix>()?;
    }
    options.max_reconnects = args.max_reconnects;
    options.tls = match kind.as_str() {
        "tls" | "wss" if connect.tls_cert_pin.is_some() => {
            Known::Value("the server certificate pinned (--tls-cert-pin)".into())
        }
        "tls" | "wss" if connect.tls_ca.is_some() => {
            Known::Value("verified against the CA of --tls-ca".into())
        }
        "tls" | "wss" => Known::Value("verified against the system's roots".into()),
        other => Known::missing(format!("no TLS on this link ({other})")),
    };
    let bar = indicatif::ProgressBar::new(duration.as_millis() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let report = blerpc_report::run(
        || async { connect.open().await.map_err(|e| format!("{e:#}")) },
        &options,
        |p| {
            bar.set_position(p.elapsed.as_millis() as u64);
            bar.set_message(format!(
                "{} calls, {} failed, {} reconnects",
                p.calls, p.failed, p.reconnects
            ));
        },
    )
    .await?;
    bar.finish_and_clear();
    let written = blerpc_report::write(&report, &args.out)
        .with_context(|| format!("writing the report into {}", args.out.display()))?;
    println!("{}", blerpc_report::markdown::summary(&report));
    for path in written {
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
