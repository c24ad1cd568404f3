//! `blerpc-bench scale`: many concurrent WebSocket connections against `blerpc serve --listen
//! ws://… --workers N`, measured the way the published SOCKET-MANAGER scale test measures them
//! (`benchmarks.md` §3), with true latency percentiles, memory, CPU and errors beside.
//!
//! ```text
//! controller (this process)
//!   ├── blerpc serve --workers W   (W processes on one port, SO_REUSEPORT)
//!   └── blerpc-bench role scale-client {...}  × K  (≈10,000 connections each, one 127.0.0.x
//!                                                    source address each, single-threaded)
//! per run (one connection count, one variant):
//!   baseline: 1 connection, pure latency (none idle)
//!   storm:    every client opens its share at once (a window of connections in flight each)
//!   settle:   idle buffers released; server RSS after − before = memory of the connections
//!   pure:     the same single-connection latency with N idle
//!   rounds:   every client pings all its connections and waits for every pong, repeatedly
//! ```
//!
//! Runs are interleaved (repetition, then connection count, then variant) and the tables show
//! medians over repetitions. The open-file limit (20,000 here, not raisable) is why both ends
//! are several processes.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Args;
use serde::Serialize;

pub mod client;
pub mod echo;
pub mod kernel;
mod procs;
pub mod report;
pub mod rounds;
pub mod stats;
mod wire;

use client::{ClientSpec, Command, Event, Variant};
use procs::{Clients, ServerProc};
use stats::{Tail, Theirs};

/// `blerpc-bench scale` options.
#[derive(Debug, Args)]
pub struct ScaleArgs {
    /// Connection counts to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "10000,50000,100000")]
    pub connections: Vec<usize>,
    /// Variants: ping (RFC 6455 ping/pong frames), echo (an encrypted bleRPC echo call, each
    /// connection with its own session) and tcp (the baseline: raw TCP echo, no WebSocket).
    #[arg(long, value_delimiter = ',', default_value = "ping,echo,tcp")]
    pub variants: Vec<Variant>,
    /// Repetitions of every (connections, variant) run, interleaved; tables show medians.
    #[arg(long, default_value_t = 3)]
    pub repetitions: usize,
    /// Length of the rounds phase per run, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Most rounds per client process per run.
    #[arg(long, default_value_t = 100_000)]
    pub max_rounds: u64,
    /// Pure-latency samples (each measured with none idle and with all idle).
    #[arg(long, default_value_t = 10_000)]
    pub pings: usize,
    /// Pause between pure-latency samples in µs (the published tool: one every 1 ms).
    #[arg(long, default_value_t = 1000)]
    pub ping_interval_us: u64,
    /// Pure-latency samples back to back (same as --ping-interval-us 0).
    #[arg(long)]
    pub back_to_back: bool,
    /// Connections per load-generator process (the published setup: 10,000).
    #[arg(long, default_value_t = 10_000)]
    pub per_client: usize,
    /// Server worker processes; default: enough for the largest count under the open-file
    /// limit (at least 2).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Connections each client process opens at once during the storm (64 opened 100,000 the
    /// fastest of 16 to 512 on the machine of docs/benchmarks/scale.md).
    #[arg(long, default_value_t = 64)]
    pub window: usize,
    /// Payload bytes of a ping, or of an echo message.
    #[arg(long, default_value_t = 100)]
    pub payload: usize,
    /// The WebSocket read buffer per connection in bytes, on the server (`serve
    /// --read-buffer`) and the echo variant's clients. 1 KiB holds four containers; the link's
    /// default, 4 KiB, costs an idle server connection 3 KB more.
    #[arg(long, default_value_t = 1024)]
    pub server_read_buffer: usize,
    /// Bound of every single step (connect, upgrade, setup, one exchange), in ms.
    #[arg(long, default_value_t = 30_000)]
    pub timeout_ms: u64,
    /// The echo variant's setup order (`blerpc call --setup-pipelining`). Default: the
    /// WebSocket link's, key-exchange (TIMEOUT, CAPABILITIES and step 1 in one flight).
    #[arg(long, value_name = "MODE")]
    pub setup_pipelining: Option<blerpc_cli::call::PipeliningArg>,
    /// The CI profile: 3,000 connections over 2 server workers and 2 client processes, 1
    /// repetition, short phases (well under a minute for both variants).
    #[arg(long)]
    pub quick: bool,
    /// Write every run and the summary as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a plot of the summary (SVG).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

impl ScaleArgs {
    /// Applies `--quick` and `--back-to-back`.
    fn profile(&mut self) {
        if self.quick {
            self.connections = vec![3000];
            self.repetitions = 1;
            self.duration = 2.0;
            self.pings = 1000;
            self.ping_interval_us = 0;
            self.per_client = 1500;
            self.workers = Some(self.workers.unwrap_or(2));
            self.window = self.window.min(64);
        }
        if self.back_to_back {
            self.ping_interval_us = 0;
        }
    }
}

/// One run's results.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    /// Repetition (from 1).
    pub repetition: usize,
    /// Connections wanted.
    pub connections: usize,
    /// Variant.
    pub variant: &'static str,
    /// Server worker processes.
    pub workers: usize,
    /// Client processes.
    pub clients: usize,
    /// Connections established.
    pub established: usize,
    /// Storm: wall time to establish all, s.
    pub storm_s: f64,
    /// Storm: connections per second.
    pub conn_per_s: f64,
    /// Storm: upgrade latency, their figures (ms).
    pub upgrade: Theirs,
    /// Storm: upgrade latency tail (ms).
    pub upgrade_tail: Tail,
    /// Echo: bleRPC setup (TIMEOUT, CAPABILITIES, key exchange) latency, their figures (ms).
    pub setup: Option<Theirs>,
    /// Echo: setup latency tail (ms).
    pub setup_tail: Option<Tail>,
    /// Pure latency with no other connection, their figures (ms).
    pub pure_alone: Theirs,
    /// Its tail (ms).
    pub pure_alone_tail: Tail,
    /// Pure latency with every other connection idle, their figures (ms).
    pub pure_idle: Theirs,
    /// Its tail (ms).
    pub pure_idle_tail: Tail,
    /// Rounds done (all client processes).
    pub rounds: usize,
    /// Round metric `floor(round ms) / connections` over all rounds, their figures (ms).
    pub round_metric: Theirs,
    /// True per-message latency during rounds (ms).
    pub round_tail: Tail,
    /// Messages per second during rounds (all processes).
    pub round_msgs_per_s: f64,
    /// Server RSS before the storm (bytes, all processes).
    pub server_rss_before: u64,
    /// Server RSS with the connections open and idle (bytes).
    pub server_rss_after: u64,
    /// Server RSS after the rounds (bytes).
    pub server_rss_rounds: u64,
    /// (after − before) / established, bytes.
    pub server_bytes_per_conn: f64,
    /// Client RSS with the connections open and idle (bytes, all processes).
    pub client_rss: u64,
    /// CPU seconds during the storm: server, clients.
    pub storm_cpu: (f64, f64),
    /// CPU seconds during the rounds: server, clients.
    pub rounds_cpu: (f64, f64),
    /// Errors: storm (connections not established), pure-latency exchanges, round exchanges.
    pub errors: (usize, usize, usize),
    /// The first error seen, if any.
    pub first_error: Option<String>,
}

impl Run {
    /// All errors.
    pub fn error_count(&self) -> usize {
        self.errors.0 + self.errors.1 + self.errors.2
    }
}

/// Runs `blerpc-bench scale`; `Ok(false)` if any run had errors.
pub fn run(args: &ScaleArgs) -> anyhow::Result<bool> {
    let mut args = clone_args(args);
    args.profile();
    if args.connections.is_empty() || args.variants.is_empty() {
        bail!("nothing to run: give --connections and --variants");
    }
    let (nofile, hard) =
        blerpc::process::raise_nofile_limit().context("reading the open-file limit")?;
    // Sockets, plus a margin for the runtime's own descriptors.
    let capacity = usize::try_from(hard.min(nofile))
        .unwrap_or(usize::MAX)
        .saturating_sub(128);
    if capacity < 100 {
        bail!("the open-file limit ({nofile}) is too small for a scale test");
    }
    let per_client = args.per_client.clamp(1, capacity);
    let largest = args.connections.iter().copied().max().unwrap_or(0);
    // The kernel spreads connections over workers by hash: leave 15 % headroom.
    let workers = args
        .workers
        .unwrap_or_else(|| (largest * 115 / 100).div_ceil(capacity).max(2))
        .max(1);
    let clients_max = largest.div_ceil(per_client);
    if clients_max > 240 {
        bail!(
            "{largest} connections need {clients_max} client processes; at most 240 source addresses"
        );
    }
    eprintln!(
        "scale: open-file limit {nofile} per process; {workers} server workers, up to {clients_max} client processes of {per_client} connections"
    );
    for change in kernel::apply(&kernel::wants(largest, per_client)) {
        match &change.error {
            None if change.old != change.new => {
                eprintln!("kernel: {} {} → {}", change.name, change.old, change.new)
            }
            None => eprintln!("kernel: {} {} (enough, unchanged)", change.name, change.old),
            Some(e) => eprintln!("kernel: could not change {}: {e}; continuing", change.name),
        }
    }
    let mut runs = Vec::new();
    let started = Instant::now();
    for repetition in 1..=args.repetitions.max(1) {
        for &connections in &args.connections {
            for &variant in &args.variants {
                eprintln!(
                    "scale: repetition {repetition}/{}: {connections} connections, {} ({:.0} s so far)",
                    args.repetitions.max(1),
                    variant.name(),
                    started.elapsed().as_secs_f64()
                );
                let run = run_one(
                    &args,
                    repetition,
                    connections,
                    variant,
                    workers,
                    per_client,
                    capacity,
                )
                .with_context(|| format!("{connections} connections, {}", variant.name()))?;
                if let Some(e) = &run.first_error {
                    eprintln!("scale: {} errors; first: {e}", run.error_count());
                }
                runs.push(run);
            }
        }
    }
    let summary = report::summarise(&runs);
    let mut out = std::io::stdout().lock();
    report::print(&mut out, &args, &summary, workers)?;
    if let Some(path) = &args.json {
        let json = serde_json::json!({
            "settings": {
                "connections": args.connections,
                "variants": args.variants.iter().map(|v| v.name()).collect::<Vec<_>>(),
                "repetitions": args.repetitions,
                "duration_s": args.duration,
                "pings": args.pings,
                "ping_interval_us": args.ping_interval_us,
                "per_client": per_client,
                "workers": workers,
                "window": args.window,
                "payload": args.payload,
                "server_read_buffer": args.server_read_buffer,
                "setup_pipelining": args.setup_pipelining,
            },
            "runs": runs,
            "summary": summary,
        });
        std::fs::write(path, serde_json::to_string_pretty(&json)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("scale: wrote {}", path.display());
    }
    if let Some(path) = &args.svg {
        std::fs::write(path, report::svg(&summary))
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("scale: wrote {}", path.display());
    }
    Ok(runs
        .iter()
        .all(|r| r.error_count() == 0 && r.established == r.connections))
}

fn clone_args(a: &ScaleArgs) -> ScaleArgs {
    ScaleArgs {
        connections: a.connections.clone(),
        variants: a.variants.clone(),
        repetitions: a.repetitions,
        duration: a.duration,
        max_rounds: a.max_rounds,
        pings: a.pings,
        ping_interval_us: a.ping_interval_us,
        back_to_back: a.back_to_back,
        per_client: a.per_client,
        workers: a.workers,
        window: a.window,
        payload: a.payload,
        server_read_buffer: a.server_read_buffer,
        timeout_ms: a.timeout_ms,
        setup_pipelining: a.setup_pipelining,
        quick: a.quick,
        json: a.json.clone(),
        svg: a.svg.clone(),
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// One run: fresh server and clients, baseline, storm, settle, pure latency, rounds.
#[allow(clippy::too_many_arguments)]
fn run_one(
    args: &ScaleArgs,
    repetition: usize,
    connections: usize,
    variant: Variant,
    workers: usize,
    per_client: usize,
    capacity: usize,
) -> anyhow::Result<Run> {
    let mut server = match variant {
        Variant::Tcp => ServerProc::start_echo(workers)?,
        Variant::Ping | Variant::Echo => {
            ServerProc::start(workers, capacity, args.server_read_buffer)?
        }
    };
    std::thread::sleep(Duration::from_millis(300));
    let client_count = connections.div_ceil(per_client).max(1);
    let specs: Vec<ClientSpec> = (0..client_count)
        .map(|index| ClientSpec {
            index,
            server: server.addr,
            path: server.path.clone(),
            source: Ipv4Addr::new(127, 0, 0, 10 + index as u8),
            variant,
            window: args.window,
            payload: args.payload,
            identity: server.identity.clone(),
            timeout_ms: args.timeout_ms,
            read_buffer: args.server_read_buffer,
            setup_pipelining: args.setup_pipelining,
        })
        .collect();
    let targets: Vec<usize> = (0..client_count)
        .map(|i| connections / client_count + usize::from(i < connections % client_count))
        .collect();
    let mut clients = Clients::start(specs, connections)?;
    let step = Duration::from_millis(args.timeout_ms);
    let long = step * 4 + Duration::from_secs(600);
    let server_rss_before = server.rss();

    // Baseline: one connection, nothing else open.
    clients.send(0, &Command::Open { target: 1 })?;
    let first = clients.collect(&[0], long, |e| matches!(e, Event::Opened { .. }))?;
    let mut storm_errors = 0;
    let mut first_error = None;
    let mut upgrade_ns = Vec::new();
    let mut setup_ns = Vec::new();
    for (_, e) in first {
        if let Event::Opened {
            errors,
            upgrade_ns: u,
            setup_ns: s,
            first_error: f,
            ..
        } = e
        {
            storm_errors += errors;
            upgrade_ns.extend(u);
            setup_ns.extend(s);
            first_error = first_error.or(f);
        }
    }
    let pure = |clients: &mut Clients| -> anyhow::Result<(Vec<u64>, usize)> {
        clients.send(
            0,
            &Command::Pure {
                count: args.pings,
                interval_us: args.ping_interval_us,
            },
        )?;
        let limit = step + Duration::from_micros(args.ping_interval_us) * args.pings as u32 * 2;
        let got = clients.collect(&[0], limit + Duration::from_secs(60), |e| {
            matches!(e, Event::Pure { .. })
        })?;
        Ok(got
            .into_iter()
            .find_map(|(_, e)| match e {
                Event::Pure { samples_ns, errors } => Some((samples_ns, errors)),
                _ => None,
            })
            .unwrap_or_default())
    };
    let (alone, alone_errors) = pure(&mut clients)?;

    // The storm.
    let (server_cpu0, client_cpu0) = (server.cpu(), clients.cpu());
    let storm_start = Instant::now();
    for (i, &target) in targets.iter().enumerate() {
        clients.send(i, &Command::Open { target })?;
    }
    let all: Vec<usize> = (0..client_count).collect();
    let opened = clients.collect(&all, long, |e| matches!(e, Event::Opened { .. }))?;
    let storm_s = storm_start.elapsed().as_secs_f64();
    let storm_cpu = (server.cpu() - server_cpu0, clients.cpu() - client_cpu0);
    let mut established = 0;
    for (_, e) in opened {
        if let Event::Opened {
            opened,
            errors,
            upgrade_ns: u,
            setup_ns: s,
            first_error: f,
            ..
        } = e
        {
            established += opened;
            storm_errors += errors;
            upgrade_ns.extend(u);
            setup_ns.extend(s);
            first_error = first_error.or(f);
        }
    }
    eprintln!(
        "scale:   {established} of {connections} open in {storm_s:.2} s ({storm_errors} errors)"
    );
    server.check_alive()?;

    // Let idle connections release their buffers (the server's idle_release is 1 s).
    std::thread::sleep(Duration::from_millis(2500));
    let server_rss_after = server.rss();
    let client_rss = clients.rss();
    let (idle, idle_errors) = pure(&mut clients)?;

    // Rounds.
    let (server_cpu1, client_cpu1) = (server.cpu(), clients.cpu());
    let duration_ms = (args.duration * 1000.0) as u64;
    let rounds_start = Instant::now();
    for i in 0..client_count {
        clients.send(
            i,
            &Command::Rounds {
                duration_ms,
                max_rounds: args.max_rounds,
            },
        )?;
    }
    let results = clients.collect(&all, long + Duration::from_millis(duration_ms), |e| {
        matches!(e, Event::Rounds { .. })
    })?;
    let rounds_wall = rounds_start.elapsed().as_secs_f64();
    let rounds_cpu = (server.cpu() - server_cpu1, clients.cpu() - client_cpu1);
    let server_rss_rounds = server.rss();
    let mut histogram = client::new_histogram();
    let mut metric = Vec::new();
    let mut round_errors = 0;
    let mut messages = 0u64;
    for (_, e) in results {
        if let Event::Rounds {
            connections: n,
            round_ns,
            histogram: pairs,
            errors,
            first_error: f,
        } = e
        {
            round_errors += errors;
            first_error = first_error.or(f);
            for (value, count) in pairs {
                let _ = histogram.record_n(value.max(1), count);
            }
            messages += (n * round_ns.len()) as u64;
            // Their metric: floor(round wall ms) / connections in the round.
            metric.extend(
                round_ns
                    .iter()
                    .map(|&r| (r / 1_000_000) as f64 / n.max(1) as f64),
            );
        }
    }
    server.check_alive()?;
    clients.quit();
    drop(server);

    let per = |v: &[u64]| Theirs::of(&v.iter().map(|&x| ms(x)).collect::<Vec<_>>());
    Ok(Run {
        repetition,
        connections,
        variant: variant.name(),
        workers,
        clients: client_count,
        established,
        storm_s,
        conn_per_s: established as f64 / storm_s.max(1e-9),
        upgrade: per(&upgrade_ns),
        upgrade_tail: Tail::of_ns(&upgrade_ns),
        setup: (!setup_ns.is_empty()).then(|| per(&setup_ns)),
        setup_tail: (!setup_ns.is_empty()).then(|| Tail::of_ns(&setup_ns)),
        pure_alone: per(&alone),
        pure_alone_tail: Tail::of_ns(&alone),
        pure_idle: per(&idle),
        pure_idle_tail: Tail::of_ns(&idle),
        rounds: metric.len(),
        round_metric: Theirs::of(&metric),
        round_tail: Tail::of(&histogram),
        round_msgs_per_s: messages as f64 / rounds_wall.max(1e-9),
        server_rss_before,
        server_rss_after,
        server_rss_rounds,
        server_bytes_per_conn: server_rss_after.saturating_sub(server_rss_before) as f64
            / established.max(1) as f64,
        client_rss,
        storm_cpu,
        rounds_cpu,
        errors: (
            storm_errors.max(connections.saturating_sub(established)),
            alone_errors + idle_errors,
            round_errors,
        ),
        first_error,
    })
}
