//! `blerpc-bench loopback`: the loopback DATA→ACK matrix of benchmarks.md §2, reproduced.
//!
//! The server runs in a **separate process** (this executable, spawned with the hidden
//! `--server-process` flag; see the `server` submodule) on 127.0.0.1, the client in this one,
//! each on a current-thread tokio runtime. The matrix: {TCP, TLS 1.3 with a locally generated RSA-2048
//! certificate the client verifies against its CA} × payloads {0 B, 64 B, 1 KiB, 64 KiB}, one
//! client, plus a load row of 20 clients with 64 B. Every row runs four ways:
//!
//! - bleRPC with E2E encryption (the default), unary `data_write` whose response is an
//!   acknowledgement of the length received (never an echo of the data);
//! - bleRPC without E2E encryption;
//! - the bare baseline (the `bare` submodule): plain tokio TCP or tokio-rustls, a
//!   length-prefixed DATA frame and a 4-byte ACK, served by the same server process;
//! - the bare baseline sealed: each DATA and ACK sealed with AES-128-GCM as a bleRPC session
//!   seals a message, and nothing else: the cipher's cost on the round trip, the least any
//!   E2E-encrypted exchange pays (a reference for the E2E rows, not a protocol).
//!
//! Each client connects (TCP connect, TLS handshake, bleRPC setup and first call timed apart),
//! sends one warm-up call, then times every round trip. The variants of a row run back to
//! back in a rotating order, and the whole matrix repeats `--reps` times; the tables show the
//! medians across repetitions, the published figure beside each row, and blerpc/bare ratios
//! (median of the per-repetition ratios). Then the target lines, PASS or MISS.
//!
//! A payload bleRPC cannot carry in one message (classic bleRPC stops at 65,535 bytes) is
//! reported as "not supported: …" with the error the client gave, never with made-up figures.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, anyhow, bail};
use blerpc::link::tls::TlsClientConfig;
use blerpc_demo::progress::Steps;
use clap::{Args, ValueEnum};

mod bare;
mod grpc;
mod measure;
mod plot;
mod report;
pub(crate) mod server;
mod summary;

pub use measure::{Transport, Variant};
pub use report::{Report, Row, RowKey, SetupRow, TargetCheck};
pub use summary::Summary;

use measure::Target;
use report::{Collector, Targets};
use server::ServerProcess;

/// The variants of a run without `--variants`: every one.
const DEFAULT_VARIANTS: &str = "e2e,plain,bare,bare-aead,grpc";

/// `blerpc-bench loopback` options.
#[derive(Debug, Args)]
pub struct LoopbackArgs {
    /// Timed messages per single-client row, after one warm-up call [default: 5000; --quick: 200].
    #[arg(long, value_name = "N")]
    pub messages: Option<usize>,
    /// Interleaved repetitions of the whole matrix; the tables show medians [default: 3;
    /// --quick: 1].
    #[arg(long, value_name = "N")]
    pub reps: Option<usize>,
    /// Clients of the load row (64 B); 0 leaves the load row out.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub clients: usize,
    /// Messages of the load row, in total over its clients [default: 10000; --quick: 400].
    #[arg(long, value_name = "N")]
    pub load_messages: Option<usize>,
    /// Payload sizes, comma-separated: bytes, or with a K / KiB suffix.
    #[arg(long, value_delimiter = ',', value_parser = parse_size, value_name = "SIZES",
          default_value = "0,64,1K,64K")]
    pub payloads: Vec<usize>,
    /// Payload sizes of the pipelined rows (one client, `--window` calls in flight on its one
    /// connection), comma-separated; `--window 1` leaves these rows out.
    #[arg(long, value_delimiter = ',', value_parser = parse_size, value_name = "SIZES",
          default_value = "64K")]
    pub pipelined: Vec<usize>,
    /// Calls in flight on the pipelined rows' one connection (bleRPC's default limit of calls
    /// in flight is 4); 1 leaves the pipelined rows out.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub window: usize,
    /// Transports, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "tcp,tls")]
    pub transports: Vec<TransportArg>,
    /// Variants, comma-separated (the ratios need `bare`, `plain` for the E2E cost, and
    /// `bare-aead` for the cipher's own share).
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_VARIANTS)]
    pub variants: Vec<VariantArg>,
    /// bleRPC clients do not announce the long-container extension, so every message travels
    /// in classic containers of at most 244 bytes (as on BLE at MTU 247): for comparing with
    /// the default, where TCP and TLS carry 16 KiB containers.
    #[arg(long)]
    pub classic_containers: bool,
    /// The bleRPC clients' setup order (`blerpc call --setup-pipelining`), for comparing the
    /// setup rows. Default: the link's, key-exchange (TIMEOUT, CAPABILITIES and step 1 in one
    /// flight).
    #[arg(long, value_name = "MODE")]
    pub setup_pipelining: Option<blerpc_cli::call::PipeliningArg>,
    /// Pin the client process to CPU `CLIENT` and the server process to CPU `SERVER` (Linux).
    /// Unpinned, the scheduler sometimes runs both on one CPU, where a round trip skips the
    /// cross-CPU wake-up and takes a fraction of the time: a repetition's p50 then depends on
    /// where the scheduler put the processes. Pinned, every run pays the same wake-up.
    #[arg(long, value_name = "CLIENT,SERVER", value_parser = parse_cpus)]
    pub pin_cpus: Option<(usize, usize)>,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also draw the one-call-at-a-time ratios (bleRPC E2E, plain and the bare + AES-GCM
    /// baseline over the bare echo, per transport and payload, with the targets) as an SVG
    /// chart to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// A small run for CI: 200 messages per row, 1 repetition, 400 load messages (explicit
    /// options still win).
    #[arg(long)]
    pub quick: bool,
}

/// A transport on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    /// Plain TCP.
    Tcp,
    /// TLS 1.3 with an RSA-2048 certificate.
    Tls,
}

impl From<TransportArg> for Transport {
    fn from(t: TransportArg) -> Transport {
        match t {
            TransportArg::Tcp => Transport::Tcp,
            TransportArg::Tls => Transport::Tls,
        }
    }
}

/// A variant on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum VariantArg {
    /// bleRPC with E2E encryption.
    E2e,
    /// bleRPC without E2E encryption.
    Plain,
    /// The bare baseline.
    Bare,
    /// The bare baseline with every DATA and ACK sealed with AES-128-GCM.
    BareAead,
    /// gRPC with tonic at its defaults.
    Grpc,
}

impl From<VariantArg> for Variant {
    fn from(v: VariantArg) -> Variant {
        match v {
            VariantArg::E2e => Variant::BlerpcE2e,
            VariantArg::Plain => Variant::BlerpcPlain,
            VariantArg::Bare => Variant::Bare,
            VariantArg::BareAead => Variant::BareAead,
            VariantArg::Grpc => Variant::Grpc,
        }
    }
}

/// Parses `--pin-cpus`: two different CPU numbers, `0,1`.
fn parse_cpus(s: &str) -> Result<(usize, usize), String> {
    let parse = |t: &str| {
        t.trim()
            .parse::<usize>()
            .ok()
            .filter(|&n| n < 1024)
            .ok_or_else(|| format!("{t:?} is not a CPU number (0–1023)"))
    };
    let (a, b) = s
        .split_once(',')
        .ok_or_else(|| format!("{s:?}: expected CLIENT,SERVER, e.g. 0,1"))?;
    let (a, b) = (parse(a)?, parse(b)?);
    if a == b {
        return Err(format!(
            "client and server on the same CPU ({a}) is not what pinning is for"
        ));
    }
    Ok((a, b))
}

/// Pins the process (or thread) `pid` (0: the calling thread, whose later threads inherit it) to
/// `cpu`.
#[cfg(target_os = "linux")]
fn pin_to_cpu(pid: i32, cpu: usize) -> anyhow::Result<()> {
    use nix::sched::{CpuSet, sched_setaffinity};
    let mut set = CpuSet::new();
    set.set(cpu)
        .with_context(|| format!("CPU {cpu} is out of range"))?;
    sched_setaffinity(nix::unistd::Pid::from_raw(pid), &set)
        .with_context(|| format!("cannot pin to CPU {cpu}"))
}

/// Pinning is Linux only.
#[cfg(not(target_os = "linux"))]
fn pin_to_cpu(_pid: i32, _cpu: usize) -> anyhow::Result<()> {
    bail!("--pin-cpus is supported on Linux only")
}

/// Parses `64`, `1K`, `1KiB`, `64k`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (digits, unit) = match lower
        .strip_suffix("kib")
        .or_else(|| lower.strip_suffix('k'))
    {
        Some(d) => (d.trim().to_string(), 1024),
        None => (
            lower.strip_suffix('b').unwrap_or(&lower).trim().to_string(),
            1,
        ),
    };
    let n: usize = digits
        .parse()
        .map_err(|_| format!("`{t}` is not a size (bytes, or e.g. 1K, 64KiB)"))?;
    n.checked_mul(unit)
        .filter(|&b| b <= bare::MAX_FRAME)
        .ok_or_else(|| format!("`{t}` is too large (at most 16 MiB)"))
}

/// The resolved plan.
#[derive(Clone, Debug)]
struct Plan {
    messages: usize,
    reps: usize,
    clients: usize,
    load_messages: usize,
    payloads: Vec<usize>,
    pipelined: Vec<usize>,
    window: usize,
    transports: Vec<Transport>,
    variants: Vec<Variant>,
}

impl Plan {
    fn from_args(args: &LoopbackArgs) -> anyhow::Result<Plan> {
        let pick = |v: Option<usize>, quick: usize, full: usize| {
            v.unwrap_or(if args.quick { quick } else { full })
        };
        let plan = Plan {
            messages: pick(args.messages, 200, 5000),
            reps: pick(args.reps, 1, 3),
            clients: args.clients,
            load_messages: pick(args.load_messages, 400, 10_000),
            payloads: dedup(args.payloads.clone()),
            pipelined: if args.window > 1 {
                dedup(args.pipelined.clone())
            } else {
                Vec::new()
            },
            window: args.window,
            transports: dedup(args.transports.iter().map(|&t| t.into()).collect()),
            variants: Variant::ALL
                .into_iter()
                .filter(|v| args.variants.iter().any(|&a| Variant::from(a) == *v))
                .collect(),
        };
        if plan.messages == 0 || plan.messages > 10_000_000 {
            bail!("--messages must be between 1 and 10,000,000");
        }
        if plan.reps == 0 || plan.reps > 100 {
            bail!("--reps must be between 1 and 100");
        }
        if plan.window == 0 || plan.window > 64 {
            bail!("--window must be between 1 and 64");
        }
        if plan.clients > 1000 {
            bail!("--clients is at most 1,000");
        }
        if plan.clients > 0 && plan.load_messages < plan.clients {
            bail!("--load-messages must be at least --clients");
        }
        if plan.payloads.is_empty() || plan.transports.is_empty() || plan.variants.is_empty() {
            bail!("--payloads, --transports and --variants must not be empty");
        }
        Ok(plan)
    }

    /// Every run of one repetition, in order: each row's variants back to back, in an
    /// order that rotates with the repetition.
    fn runs(&self, rep: usize) -> Vec<report::RowKey> {
        let mut order = self.variants.clone();
        let n = order.len();
        order.rotate_left(rep % n);
        let mut runs = Vec::new();
        for &transport in &self.transports {
            let mut rows: Vec<(usize, usize, usize)> =
                self.payloads.iter().map(|&p| (1, 1, p)).collect();
            rows.extend(self.pipelined.iter().map(|&p| (1, self.window, p)));
            if self.clients > 0 {
                rows.push((self.clients, 1, 64));
            }
            for (clients, window, payload) in rows {
                for &variant in &order {
                    runs.push(report::RowKey {
                        transport,
                        clients,
                        window,
                        payload,
                        variant,
                    });
                }
            }
        }
        runs
    }

    fn messages_for(&self, key: &report::RowKey) -> usize {
        if key.clients > 1 {
            self.load_messages
        } else {
            self.messages
        }
    }
}

fn dedup<T: PartialEq>(v: Vec<T>) -> Vec<T> {
    let mut out = Vec::with_capacity(v.len());
    for x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// Progress on stderr: one rewritten line on a terminal, one line per run otherwise.
fn run_label(rep: usize, reps: usize, key: &report::RowKey) -> String {
    format!(
        "rep {}/{reps}  {} {:>6}  {:>2} client{}{}  {}",
        rep + 1,
        key.transport.label(),
        report::size(key.payload),
        key.clients,
        if key.clients == 1 { " " } else { "s" },
        if key.window > 1 {
            format!(" ({} in flight)", key.window)
        } else {
            String::new()
        },
        key.variant.label()
    )
}

/// Runs the matrix against a running server process and collects the report.
async fn measure_all(plan: Plan, target: Target, command: String) -> Report {
    let (plan, target) = (&plan, &target);
    let mut collector = Collector::new(plan.reps);
    let total: usize = (0..plan.reps).map(|r| plan.runs(r).len()).sum();
    let steps = Steps::new("loopback", total as u64);
    let started = Instant::now();
    let payloads: Vec<(usize, Arc<Vec<u8>>)> = plan
        .payloads
        .iter()
        .chain(&plan.pipelined)
        .chain(std::iter::once(&64))
        .map(|&p| (p, Arc::new((0..p).map(|i| (i % 251) as u8).collect())))
        .collect();
    let mut done = 0;
    for rep in 0..plan.reps {
        for key in plan.runs(rep) {
            let label = run_label(rep, plan.reps, &key);
            let messages = plan.messages_for(&key);
            steps.phase(&label);
            let Some(payload) = payloads.iter().find(|(p, _)| *p == key.payload) else {
                continue;
            };
            // The count beside the bar, about 50 times a run: not per message, which the
            // timed loop would pay for.
            let every = (messages / 50).max(1);
            let tick = |n: usize| {
                if steps.is_bar() && n.is_multiple_of(every) {
                    steps.phase(&format!("{label}  {n}/{messages}"));
                }
            };
            let result = measure::run(
                target,
                key.transport,
                key.variant,
                &payload.1,
                key.clients,
                key.window,
                messages,
                &tick,
            )
            .await;
            done += 1;
            let outcome = if let Some(why) = &result.unsupported {
                format!("not supported: {why}")
            } else if let Some(e) = &result.first_error {
                format!("FAILED: {e}")
            } else {
                let s = Summary::from_nanos(&result.latencies_ns, result.wall_s);
                format!(
                    "p50 {:.4} ms  {} msg/s",
                    s.p50_ms,
                    report::thousands(s.msg_per_s, 0)
                )
            };
            steps.step(result.first_error.is_none());
            steps.line(&format!(
                "[{done:>3}/{total} {:>5.1}s] {label}  {outcome}",
                started.elapsed().as_secs_f64()
            ));
            collector.add(rep, key, result);
        }
    }
    steps.finish(&format!(
        "{done} runs in {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    let report = Report {
        command,
        messages: plan.messages,
        load_messages: plan.load_messages,
        load_clients: plan.clients,
        reps: plan.reps,
        release_build: !cfg!(debug_assertions),
        rows: Vec::new(),
        setup: Vec::new(),
        targets: Vec::new(),
        errors: 0,
    };
    collector.finish(report, &Targets::default())
}

fn parse_identity(hex_key: &str) -> anyhow::Result<[u8; 32]> {
    let bytes = hex::decode(hex_key).context("the server's identity is not hex")?;
    bytes
        .try_into()
        .map_err(|_| anyhow!("the server's identity is not 32 bytes"))
}

/// Runs `blerpc-bench loopback`; `Ok(false)` if any run had errors (targets are only shown).
pub fn run(args: &LoopbackArgs) -> anyhow::Result<bool> {
    let plan = Plan::from_args(args)?;
    let command = std::iter::once("blerpc".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");
    eprintln!(
        "blerpc-bench loopback: {} × {} × {} variant{}, {} messages per row{}, {} rep{}; \
         generating an RSA-2048 certificate",
        plan.transports
            .iter()
            .map(|t| t.label())
            .collect::<Vec<_>>()
            .join("/"),
        plan.payloads
            .iter()
            .map(|&p| report::size(p))
            .collect::<Vec<_>>()
            .join(", "),
        plan.variants.len(),
        if plan.variants.len() == 1 { "" } else { "s" },
        plan.messages,
        if plan.clients > 0 {
            format!(
                " (+ {} clients × 64 B, {} messages)",
                plan.clients, plan.load_messages
            )
        } else {
            String::new()
        },
        plan.reps,
        if plan.reps == 1 { "" } else { "s" }
    );
    let pki = blerpc::link::local_ca::LocalPki::generate_with(&rcgen::PKCS_RSA_SHA256)
        .context("cannot generate the RSA-2048 certificate")?;
    let server = ServerProcess::spawn(&pki.cert_pem, &pki.key_pem)?;
    if let Some((client_cpu, server_cpu)) = args.pin_cpus {
        // This thread runs the measurement (a current-thread runtime built below); the server
        // process's runtime runs on its main thread, whose id is the process id.
        pin_to_cpu(0, client_cpu)?;
        pin_to_cpu(server.pid(), server_cpu)?;
        println!("pinned: client on CPU {client_cpu}, server on CPU {server_cpu} (--pin-cpus)");
    }
    let target = Target {
        identity: parse_identity(&server.endpoints.identity)?,
        endpoints: server.endpoints.clone(),
        tls: TlsClientConfig::with_ca_pem(pki.ca_pem.as_bytes())?,
        ca_pem: pki.ca_pem.clone(),
        long_containers: !args.classic_containers,
        setup_pipelining: args.setup_pipelining.map(Into::into),
    };
    if let Some(mode) = args.setup_pipelining {
        println!("bleRPC setup order: {mode:?} (--setup-pipelining)");
    }
    if args.classic_containers {
        println!("bleRPC containers: classic (at most 244 bytes; --classic-containers)");
    } else {
        println!("bleRPC containers: long-container extension (up to 16 KiB on TCP and TLS)");
    }
    // The measurement runs as a task, not as the `block_on` future itself: waking that future
    // from another task costs an eventfd write and an extra epoll_wait per wake-up, which is
    // runtime overhead rather than what is measured (it would hit bleRPC's two wake-ups per
    // call, one for the call's start and one for its response, and not the bare client's).
    let report = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(async move { tokio::spawn(measure_all(plan, target, command)).await })
        .map_err(|e| anyhow!("the measurement task failed: {e}"))?;
    drop(server);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", report.render()).context("cannot write to stdout")?;
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, json + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.svg {
        match plot::svg(&report, &Targets::default()) {
            Some(svg) => std::fs::write(path, svg)
                .with_context(|| format!("cannot write {}", path.display()))?,
            None => eprintln!(
                "no chart written to {}: the run has no ratio to draw (it needs the bare variant)",
                path.display()
            ),
        }
    }
    Ok(report.errors == 0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("0").unwrap(), 0);
        assert_eq!(parse_size("64").unwrap(), 64);
        assert_eq!(parse_size("64B").unwrap(), 64);
        assert_eq!(parse_size("1K").unwrap(), 1024);
        assert_eq!(parse_size("64KiB").unwrap(), 65_536);
        assert!(parse_size("x").is_err());
        assert!(parse_size("1000000K").is_err());
    }

    #[test]
    fn cpu_pairs_parse() {
        assert_eq!(parse_cpus("0,1").unwrap(), (0, 1));
        assert_eq!(parse_cpus(" 3 , 2 ").unwrap(), (3, 2));
        assert!(parse_cpus("1").unwrap_err().contains("CLIENT,SERVER"));
        assert!(parse_cpus("1,1").unwrap_err().contains("same CPU"));
        assert!(parse_cpus("0,x").is_err());
        assert!(parse_cpus("0,5000").is_err());
    }

    #[test]
    fn the_variants_rotate_between_repetitions() {
        let plan = Plan {
            messages: 1,
            reps: 5,
            clients: 20,
            load_messages: 20,
            payloads: vec![0, 64],
            pipelined: vec![65_536],
            window: 4,
            transports: vec![Transport::Tcp],
            variants: Variant::ALL.to_vec(),
        };
        let first: Vec<Variant> = (0..5).map(|r| plan.runs(r)[0].variant).collect();
        assert_eq!(first, Variant::ALL);
        // Two payloads, the pipelined row and the load row, five variants each.
        assert_eq!(plan.runs(0).len(), 20);
        assert_eq!(plan.runs(0)[10].window, 4);
        assert_eq!(plan.runs(0)[15].clients, 20);
    }
}
