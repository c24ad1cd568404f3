//! `blerpc serve --workers N`: N worker processes share one port with `SO_REUSEPORT`
//! ([`blerpc::process::workers`]).
//!
//! ```text
//! parent: reserve the port, pick the identity
//!   ├── worker 1: blerpc serve --worker   stdin: the parent's ServeArgs (the port fixed) and seed
//!   ├── ...                               each prints `listening`
//!   └── worker N
//! parent prints: listening <url> identity <hex|none> workers <pid>,<pid>,...
//! ```
//!
//! Each worker gets the parent's own [`ServeArgs`] (with `--listen` at the reserved port and
//! `--worker` set) and the identity seed, as one JSON value on its stdin: every option reaches
//! it as the parent parsed it, and the seed is never on a command line. The parent stops the
//! workers (SIGTERM, then SIGKILL after a grace period) on Ctrl-C or SIGTERM, and stops all of
//! them if one dies; workers exit with the parent (`PR_SET_PDEATHSIG`).

use std::io::Write as _;
use std::time::Duration;

use anyhow::{Context as _, bail};
use blerpc::identity::Seed;
use blerpc::known_keys::to_hex;
use blerpc::link::url::LinkUrl;
use blerpc::process::workers::{self, Workers};
use serde::{Deserialize, Serialize};

use super::{ServeArgs, load_announced};

/// How long the workers may take, in all, to print their `listening` lines.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// What a worker gets on its stdin: the parent's options and the identity.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct ServeWorker {
    /// The parent's options, `--listen` at the reserved port and `--worker` set.
    pub args: ServeArgs,
    /// The identity seed (`None` with `--plaintext`).
    pub seed: Option<Seed>,
}

impl ServeWorker {
    /// What worker processes of `args` get: its options with `listen` at `url` and `worker`
    /// set, and `seed`.
    pub fn new(args: &ServeArgs, url: &LinkUrl, seed: Option<[u8; 32]>) -> ServeWorker {
        let mut args = args.clone();
        args.listen = Some(url.to_string());
        args.worker = true;
        ServeWorker {
            args,
            seed: seed.map(Seed::new),
        }
    }

    /// Reads a worker's configuration from stdin.
    pub fn read() -> anyhow::Result<ServeWorker> {
        let worker: ServeWorker = workers::read_config()?;
        if worker.seed.is_none() && !worker.args.plaintext {
            bail!("worker: no identity given, and --plaintext is not set");
        }
        Ok(worker)
    }
}

/// Runs the parent of `--workers N`.
pub(super) async fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let url: LinkUrl = args
        .listen
        .as_deref()
        .context("--workers needs --listen")?
        .parse()?;
    let (reserved, url) = workers::reserve(&url)?;
    let seed = load_announced(args)?;
    let public = seed
        .map(|s| blerpc::identity::public_key(&s))
        .transpose()?
        .map_or_else(|| "none".to_string(), |k| to_hex(&k));
    let config = ServeWorker::new(args, &url, seed);
    let (mut started, _) = Workers::start(
        args.workers,
        |_| workers::this_program(["serve", "--worker"]),
        |_| &config,
        |_, line| line.starts_with("listening ").then_some(()).ok_or(()),
        START_TIMEOUT,
    )?;
    drop(config);
    let pids: Vec<String> = started.pids().iter().map(u32::to_string).collect();
    // Installed before the line that says the server is ready.
    let shutdown = blerpc::process::shutdown_signal();
    {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "listening {url} identity {public} workers {}",
            pids.join(",")
        )
        .and_then(|()| out.flush())
        .context("cannot write to stdout")?;
    }
    let result = started.watch(shutdown).await;
    started.stop();
    drop(reserved);
    result.map_err(|e| anyhow::anyhow!("{e}; the other workers were stopped"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use clap::Parser as _;

    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    /// A worker gets every option exactly as the parent parsed it, whatever the option: the
    /// configuration is the parsed arguments themselves, serialised, not a list of flags.
    #[test]
    fn a_worker_gets_exactly_the_parents_options() {
        let parent = Cli::try_parse_from([
            "serve",
            "--listen",
            "ws://127.0.0.1:0/x",
            "--workers",
            "3",
            "--threads",
            "2",
            "--readable",
            "0x10..0x20",
            "--max-unproven-per-address",
            "7",
            "--probation-keep",
            "0.3",
            "--classic-containers",
            "--baud",
            "57600",
        ])
        .unwrap()
        .serve;
        let url: LinkUrl = "ws://127.0.0.1:4321/x".parse().unwrap();
        let sent = ServeWorker::new(&parent, &url, Some([9; 32]));
        let json = serde_json::to_string(&sent).unwrap();
        let got: ServeWorker = serde_json::from_str(&json).unwrap();
        let mut want = parent.clone();
        want.listen = Some(url.to_string());
        want.worker = true;
        assert_eq!(got.args, want);
        assert_eq!(got.seed.as_ref().map(Seed::expose), Some(&[9; 32]));
        assert_eq!(got.args.runtime_threads(), 2);
        assert!(!json.contains("--"), "no flag spelled out: {json}");
    }
}
