//! `blerpc diagnostics`: a peripheral's diagnostics (`docs/protocol.md` "Diagnostics"), each
//! field its value or the reason it is missing, as a table or as JSON.

use anyhow::Context as _;
use blerpc::diagnostics::DeviceDiagnostics;
use clap::Args;

use crate::call::ConnectArgs;

/// `blerpc diagnostics` options.
#[derive(Debug, Args)]
pub struct DiagnosticsArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub connect: ConnectArgs,
    /// Print JSON (each field its value or `{"unavailable": "why"}`) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Connects, asks, prints.
pub async fn run(args: &DiagnosticsArgs) -> anyhow::Result<()> {
    let client = args.connect.open().await?;
    let diagnostics = client
        .diagnostics()
        .await
        .with_context(|| format!("asking {} for its diagnostics", args.connect.connect))?;
    client.close().await;
    println!("{}", render(&diagnostics, args.json)?);
    Ok(())
}

/// The diagnostics as the command prints them.
pub fn render(d: &DeviceDiagnostics, json: bool) -> anyhow::Result<String> {
    if json {
        return Ok(serde_json::to_string_pretty(d)?);
    }
    let rows = d.rows();
    let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let mut out = format!(
        "| {:width$} | value |\n|{}|---|",
        "field",
        "-".repeat(width + 2)
    );
    for (name, value) in rows {
        out.push_str(&format!("\n| {name:width$} | {value} |"));
    }
    Ok(out)
}
