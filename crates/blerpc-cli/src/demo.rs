//! `blerpc demo`: a server and a client in one process over every link this build has, the
//! twelve reference functional tests on each, and a PASS/FAIL table
//! ([`blerpc_demo::links`]).

use std::io::Write as _;
use std::time::Duration;

use anyhow::Context as _;
use blerpc_demo::links::{self, LinkRun};
use clap::Args;

/// `blerpc demo` options.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Run only these links (comma-separated): mem, tcp, tls, ws, serial.
    #[arg(long, value_delimiter = ',', value_name = "LINKS")]
    pub links: Vec<String>,
    /// Seconds allowed for each link (connect plus all twelve tests).
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub timeout: u64,
}

/// Runs `blerpc demo`; `Ok(false)` if any test failed.
pub async fn run(args: &DemoArgs) -> anyhow::Result<bool> {
    let selected = links::select_links(&args.links).context("--links")?;
    eprintln!(
        "blerpc demo: the 12 reference functional tests over {} (encrypted, identity pinned)",
        selected.join(", ")
    );
    let limit = Duration::from_secs(args.timeout.max(1));
    let runs: Vec<LinkRun> = links::run_links(&selected, limit, async |_| ())
        .await?
        .into_iter()
        .map(|(run, _)| run)
        .collect();
    let ok = runs.iter().all(LinkRun::ok);
    let mut out = std::io::stdout().lock();
    writeln!(out, "\n{}\n{}", links::render(&runs), links::verdict(ok))
        .context("cannot write to stdout")?;
    Ok(ok)
}
