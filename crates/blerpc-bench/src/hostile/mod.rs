//! `blerpc-bench hostile`: attacks on a real `blerpc serve` process, or on a real `blerpc
//! gateway`'s HTTP port, while a legitimate client keeps calling.
//!
//! For each link (TCP, WebSocket, TLS) a server process starts (this binary's `serve`, the
//! CLI's code, with its metrics endpoint). A baseline phase measures the legitimate client
//! alone; then each attack ([`attacks::Attack`]) runs for a phase while the client calls. The
//! client opens a new connection for every call (connect, setup, key exchange, `echo`, close),
//! as the users who found the server unreachable did, every `--interval-ms`.
//!
//! `--link http` attacks a gateway instead (this binary's `serve-gateway`, one device dialled
//! in): its HTTP attacks ([`attacks::Attack::HTTP`], written in [`http_attacks`]) against its
//! HTTP port, while the legitimate caller posts `echo` to `/v1/devices/{id}/calls/echo`, on a
//! new connection for every call, from 127.0.0.1 (the attackers come from 127.B.0.x, so the
//! per-address cap they run into is not the caller's). The gateway runs with its address
//! guard's limits given explicitly (`--http-max-connection-rate` and the rest, at their
//! defaults; `--http-rate 0` measures without the guard): an attacking address that opens
//! connections too fast, or whose connections end in protocol errors, is penalized and its
//! connection attempts dropped.
//!
//! Per attack it reports the client's calls (all must succeed) with p50/p99 beside the
//! baseline's, the server's RSS (peak during, and after the attack stopped) and CPU, what the
//! attack opened and how many of its sockets the server closed (and how fast), and the
//! server's counters by reason. `--quick` is the profile `cargo test` runs (a few hundred
//! sockets, short deadlines); the default is the documented run (10,000 sockets).
//!
//! ```text
//! blerpc-bench hostile --quick
//! blerpc-bench hostile --json docs/benchmarks/hostile.json
//! blerpc-bench hostile --link http --runs 3 --json docs/benchmarks/hostile-gateway.json
//! ```

pub mod attacks;
pub mod http_attacks;
mod report;
pub(crate) mod server;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use blerpc::client::PinPolicy;
use blerpc::link::connect::{ConnectOptions, connect};
use blerpc::link::url::LinkUrl;
use blerpc::{ClientConfig, link::tls::TlsClientConfig};
use clap::Args;
use serde::Serialize;
use tokio::sync::watch;

use attacks::{Attack, Tally};
use http_attacks::HttpTarget;
use server::{GatewayOptions, Server, ServerOptions};

/// `blerpc-bench hostile` options.
#[derive(Clone, Debug, Args)]
pub struct HostileArgs {
    /// The short profile (what `cargo test` runs): 300 sockets, 3 s phases, 2 s setup and 1 s
    /// container deadlines.
    #[arg(long)]
    pub quick: bool,
    /// Hostile sockets per attack (floods and storms use fewer, busier ones). Default 10,000
    /// against `serve`, 2,000 against the gateway (300 with --quick).
    #[arg(long, value_name = "N")]
    pub sockets: Option<usize>,
    /// Seconds each phase runs. Default 15 (3 with --quick; 2 against the gateway).
    #[arg(long, value_name = "SECS")]
    pub phase: Option<f64>,
    /// The server's setup deadline (`serve --setup-timeout`). Default 10 (2 with --quick).
    #[arg(long, value_name = "SECS")]
    pub setup_timeout: Option<f64>,
    /// The server's container deadline (`serve --container-timeout`). Default 5 (1 with
    /// --quick).
    #[arg(long, value_name = "SECS")]
    pub container_timeout: Option<f64>,
    /// Milliseconds between the legitimate client's calls.
    #[arg(long, value_name = "MS", default_value_t = 50)]
    pub interval_ms: u64,
    /// Only these links (tcp, ws, tls, http; repeatable). Default: tcp, ws and tls (`blerpc
    /// serve`); http attacks a `blerpc gateway`'s HTTP port instead.
    #[arg(long, value_name = "LINK")]
    pub link: Vec<String>,
    /// Only these attacks (by name; repeatable). Default: all of them.
    #[arg(long, value_name = "ATTACK")]
    pub attack: Vec<String>,
    /// Write every phase's results as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
    /// Repeat the whole suite this many times (each run a fresh server per link) and report
    /// each phase's medians over the runs. Default 1.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub runs: usize,
    /// The gateway's request head (and idle keep-alive) and request body deadlines
    /// (`--http-header-timeout`, `--http-body-timeout`). Default 10 (0.5 with --quick).
    #[arg(long, value_name = "SECS")]
    pub header_timeout: Option<f64>,
    /// The gateway's per-address HTTP connection rate (`--http-max-connection-rate`; 0: no
    /// guard, to measure without it). Default: the gateway's (1,000 a second).
    #[arg(long, value_name = "N")]
    pub http_rate: Option<f64>,
    /// One more argument for every `blerpc serve` the suite starts (repeatable), e.g.
    /// `--serve-arg=--penalty=0` to measure without the address penalty.
    #[arg(long, value_name = "ARG", allow_hyphen_values = true)]
    pub serve_arg: Vec<String>,
}

/// The profile a run uses (the options with their defaults filled in).
#[derive(Clone, Debug, Serialize)]
pub struct Profile {
    /// Hostile sockets per attack.
    pub sockets: usize,
    /// Seconds per phase.
    pub phase_s: f64,
    /// The server's setup deadline.
    pub setup_timeout_s: f64,
    /// The server's container deadline.
    pub container_timeout_s: f64,
    /// Milliseconds between legitimate calls.
    pub interval_ms: u64,
    /// The server's TLS / WebSocket handshake slots (`serve --max-handshakes`).
    pub max_handshakes: usize,
    /// Runs of the whole suite.
    pub runs: usize,
    /// The extra `blerpc serve` arguments.
    pub serve_args: Vec<String>,
    /// Hostile sockets per attack against the gateway.
    pub http_sockets: usize,
    /// Seconds per phase against the gateway.
    pub http_phase_s: f64,
    /// The gateway's header (and idle, and body) deadline.
    pub header_timeout_s: f64,
    /// The gateway's connections per address (`--http-max-per-address`).
    pub max_per_address: usize,
    /// The gateway's event streams (`--max-event-streams`).
    pub max_event_streams: usize,
    /// Seconds the gateway is given to settle after an attack stops (`serve`: 1.5).
    pub settle_s: f64,
    /// The gateway's address guard: new connections per second from one address
    /// (`--http-max-connection-rate`; 0: none).
    pub http_rate: f64,
    /// Its burst (`--http-connection-burst`).
    pub http_burst: f64,
    /// What a protocol error costs its address, in connections (`--http-offence-cost`).
    pub http_offence_cost: f64,
    /// Seconds an address that ran its bucket dry is refused (`--http-penalty`).
    pub http_penalty_s: f64,
}

impl Profile {
    /// The phase's length on `link`.
    fn phase_s(&self, link: &str) -> f64 {
        if link == "http" {
            self.http_phase_s
        } else {
            self.phase_s
        }
    }

    /// How long after it opened the server must have closed a hostile connection on `link`:
    /// its deadline and some slack.
    fn deadline_s(&self, link: &str) -> f64 {
        if link == "http" {
            self.header_timeout_s + 1.0
        } else {
            self.setup_timeout_s + 2.0
        }
    }

    /// Hostile sockets `attack` opens.
    fn sockets(&self, attack: Attack) -> usize {
        let n = if attack.is_http() {
            self.http_sockets
        } else {
            self.sockets
        };
        attack.sockets(n, self.max_per_address, self.max_event_streams)
    }
}

impl HostileArgs {
    /// The profile these options give.
    pub fn profile(&self) -> Profile {
        let q = self.quick;
        Profile {
            sockets: self.sockets.unwrap_or(if q { 300 } else { 10_000 }),
            phase_s: self.phase.unwrap_or(if q { 3.0 } else { 15.0 }),
            setup_timeout_s: self.setup_timeout.unwrap_or(if q { 2.0 } else { 10.0 }),
            container_timeout_s: self.container_timeout.unwrap_or(if q { 1.0 } else { 5.0 }),
            interval_ms: self.interval_ms.max(1),
            // Fewer than the attack's sockets, so that the slots fill and the oldest are dropped.
            max_handshakes: if q { 128 } else { 256 },
            runs: self.runs.max(1),
            serve_args: self.serve_arg.clone(),
            http_sockets: self.sockets.unwrap_or(if q { 300 } else { 2_000 }),
            http_phase_s: self.phase.unwrap_or(if q { 2.0 } else { 15.0 }),
            header_timeout_s: self.header_timeout.unwrap_or(if q { 0.5 } else { 10.0 }),
            // Below the attacks' sockets from one address, so that the flood runs into it.
            max_per_address: if q { 100 } else { 1_000 },
            max_event_streams: if q { 32 } else { 256 },
            settle_s: if q { 0.5 } else { 1.5 },
            // The gateway's defaults, given explicitly.
            http_rate: self
                .http_rate
                .unwrap_or(blerpc_gateway::config::DEFAULT_HTTP_RATE.per_second),
            http_burst: blerpc_gateway::config::DEFAULT_HTTP_RATE.burst,
            http_offence_cost: blerpc_gateway::config::DEFAULT_HTTP_OFFENCE_COST,
            http_penalty_s: blerpc_gateway::config::default_http_guard()
                .penalty
                .as_secs_f64(),
        }
    }
}

/// One phase's results.
#[derive(Clone, Debug, Serialize)]
pub struct Phase {
    /// Which run of the suite (from 0).
    pub run: usize,
    /// `tcp`, `ws`, `tls` or `http` (the gateway).
    pub link: String,
    /// The attack, or `none` for the baseline.
    pub attack: String,
    /// Hostile sockets the attack held (or workers, for floods and storms).
    pub sockets: usize,
    /// Legitimate calls made and those that succeeded.
    pub calls: usize,
    /// Legitimate calls that succeeded.
    pub ok: usize,
    /// The first legitimate failure, if any.
    pub first_error: Option<String>,
    /// Connect + setup + key exchange + echo, milliseconds.
    pub p50_ms: f64,
    /// The same, 99th percentile.
    pub p99_ms: f64,
    /// p99 over the baseline phase's p99 on the same link (the target is ≤ 2).
    pub p99_vs_baseline: f64,
    /// The five slowest calls: when each started (seconds into the phase's calling) and its
    /// latency in ms, slowest first (to tell a steady cost from a burst at one moment).
    pub slowest: Vec<(f64, f64)>,
    /// Server RSS before the phase, at its peak during it, and after the attack stopped
    /// (settled), bytes.
    pub rss_before: u64,
    /// Peak RSS during the phase.
    pub rss_peak: u64,
    /// RSS after the attack stopped and the server settled.
    pub rss_after: u64,
    /// Server CPU seconds during the phase.
    pub server_cpu_s: f64,
    /// Connections the attack opened.
    pub opened: u64,
    /// Of those, closed by the server while the attack ran.
    pub closed_by_server: u64,
    /// The longest a hostile connection stayed open before the server closed it, seconds.
    pub max_close_s: f64,
    /// The mean time a hostile connection stayed open before the server closed it, seconds.
    pub mean_close_s: f64,
    /// HTTP attacks: the gateway's answers by status (0: closed without one).
    pub statuses: Vec<(u16, u64)>,
    /// Bytes the attack sent.
    pub attack_bytes: u64,
    /// Connections opened at least the setup deadline + 2 s before the attack stopped (the
    /// ones the server must have closed), and how many of those it closed.
    pub opened_early: usize,
    /// Of `opened_early`, closed by the server.
    pub closed_early: usize,
    /// Of `opened_early`, still open on the attacker's side and ESTABLISHED on the server's
    /// (in `/proc/net/tcp`): connections the server held past its deadline (must be 0).
    pub held_past_deadline: usize,
    /// Of `opened_early`, still open on the attacker's side but not on the server's: the
    /// kernel completed them for the client only (a full listen backlog, or the penalty filter
    /// dropped their final ACK); the server holds nothing for them.
    pub never_completed: usize,
    /// The server's counters that moved during the phase, by reason.
    pub reasons: Vec<(String, u64)>,
    /// Bytes the server logged during the phase (rate-limited `warn` lines).
    pub log_bytes: u64,
    /// Connections the server still served after the attack stopped and it settled.
    pub open_after: u64,
}

/// The whole run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// What it ran with.
    pub profile: Profile,
    /// Every phase of every run.
    pub phases: Vec<Phase>,
    /// Each (link, attack)'s medians over the runs.
    pub medians: Vec<Median>,
    /// What failed (empty when every check passed).
    pub failures: Vec<String>,
}

/// One (link, attack)'s medians over the runs.
#[derive(Clone, Debug, Serialize)]
pub struct Median {
    /// The link (tcp, ws, tls).
    pub link: String,
    /// The attack (`none` for the baseline).
    pub attack: String,
    /// Runs it has.
    pub runs: usize,
    /// Legitimate calls that succeeded, over all runs.
    pub ok: usize,
    /// Legitimate calls made, over all runs.
    pub calls: usize,
    /// The median of the runs' p50 latencies, ms.
    pub p50_ms: f64,
    /// The median of the runs' p99 latencies, ms.
    pub p99_ms: f64,
    /// The median of each run's p99 over its own baseline.
    pub p99_vs_baseline: f64,
    /// The median of each run's peak RSS over the RSS before the phase.
    pub rss_growth: u64,
    /// The median of the server's CPU seconds in the phase.
    pub server_cpu_s: f64,
    /// Whether the median p99 over the baseline is within the target (2×).
    pub target_met: bool,
}

/// The target: a legitimate call's p99 under attack within this many times its baseline.
pub const TARGET: f64 = 2.0;

fn medians(phases: &[Phase]) -> Vec<Median> {
    let mut keys: Vec<(String, String)> = Vec::new();
    for p in phases {
        let key = (p.link.clone(), p.attack.clone());
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys.into_iter()
        .map(|(link, attack)| {
            let of: Vec<&Phase> = phases
                .iter()
                .filter(|p| p.link == link && p.attack == attack)
                .collect();
            let med = |f: &dyn Fn(&Phase) -> f64| {
                let mut v: Vec<f64> = of.iter().map(|p| f(p)).collect();
                v.sort_by(f64::total_cmp);
                crate::stats::quantile(&v, 0.5)
            };
            Median {
                runs: of.len(),
                ok: of.iter().map(|p| p.ok).sum(),
                calls: of.iter().map(|p| p.calls).sum(),
                p50_ms: med(&|p| p.p50_ms),
                p99_ms: med(&|p| p.p99_ms),
                p99_vs_baseline: med(&|p| p.p99_vs_baseline),
                target_met: med(&|p| p.p99_vs_baseline) <= TARGET,
                rss_growth: med(&|p| p.rss_peak.saturating_sub(p.rss_before) as f64) as u64,
                server_cpu_s: med(&|p| p.server_cpu_s),
                link,
                attack,
            }
        })
        .collect()
}

/// Runs the suite; `Ok(false)` if a check failed.
pub fn run(args: &HostileArgs) -> anyhow::Result<bool> {
    let report = run_report(args)?;
    report::print(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    for f in &report.failures {
        println!("FAILED: {f}");
    }
    Ok(report.failures.is_empty())
}

/// Runs the suite and returns its results.
pub fn run_report(args: &HostileArgs) -> anyhow::Result<Report> {
    let profile = args.profile();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run_async(args, profile))
}

async fn run_async(args: &HostileArgs, profile: Profile) -> anyhow::Result<Report> {
    let (nofile, _) =
        blerpc::process::raise_nofile_limit().context("reading the open-file limit")?;
    // The attack's sockets, the client's and some to spare.
    if (nofile as usize) < profile.sockets + 256 {
        anyhow::bail!(
            "{} sockets need an open-file limit of at least {}; this process may open {nofile} \
             (ulimit -n), so pass a smaller --sockets",
            profile.sockets,
            profile.sockets + 256
        );
    }
    let dir = tempfile_dir()?;
    let key = dir.join("identity.key");
    blerpc::identity::store(&key, &blerpc::identity::generate(), true)?;
    let pki = blerpc::link::local_ca::LocalPki::generate()?;
    pki.write_to(&dir)?;
    if let Some(l) = args
        .link
        .iter()
        .find(|l| !["tcp", "ws", "tls", "http"].contains(&l.as_str()))
    {
        anyhow::bail!("no link {l:?}: tcp, ws, tls or http");
    }
    let links: Vec<&str> = ["tcp", "ws", "tls", "http"]
        .into_iter()
        .filter(|l| {
            if args.link.is_empty() {
                *l != "http"
            } else {
                args.link.iter().any(|a| a == l)
            }
        })
        .collect();
    let mut phases = Vec::new();
    let mut failures = Vec::new();
    let handshakes = profile.max_handshakes.to_string();
    let mut extra = vec!["--max-handshakes", &handshakes];
    extra.extend(profile.serve_args.iter().map(String::as_str));
    for run in 0..profile.runs {
        for &link in &links {
            let (mut server, client) = if link == "http" {
                let server = Server::gateway(&GatewayOptions {
                    dir: &dir,
                    header_timeout: Duration::from_secs_f64(profile.header_timeout_s),
                    max_per_address: profile.max_per_address,
                    max_event_streams: profile.max_event_streams,
                    guard: [
                        profile.http_rate,
                        profile.http_burst,
                        profile.http_offence_cost,
                        profile.http_penalty_s,
                    ],
                })
                .await?;
                let client = Legit::Http {
                    gateway: server.addr,
                    device: hex::encode(server.identity),
                };
                (server, client)
            } else {
                let listen = match link {
                    "tcp" => "tcp://127.0.0.1:0",
                    "ws" => "ws://127.0.0.1:0/blerpc",
                    _ => "tls://127.0.0.1:0",
                };
                let server = Server::start(&ServerOptions {
                    listen,
                    key: &key,
                    tls: (link == "tls").then_some(dir.as_path()),
                    setup_timeout: Duration::from_secs_f64(profile.setup_timeout_s),
                    container_timeout: Duration::from_secs_f64(profile.container_timeout_s),
                    dir: &dir,
                    extra: &extra,
                })?;
                let client = Legit::Device {
                    address: server.url.parse()?,
                    options: ConnectOptions {
                        tls: (link == "tls")
                            .then(|| TlsClientConfig::with_ca_pem(pki.ca_pem.as_bytes()))
                            .transpose()?,
                        ..Default::default()
                    },
                    identity: server.identity,
                };
                (server, client)
            };
            eprintln!(
                "hostile: run {} of {}: {link} server at {}",
                run + 1,
                profile.runs,
                server.url
            );
            let mut baseline = phase(&mut server, &client, link, None, &profile).await?;
            baseline.run = run;
            let base_p99 = baseline.p99_ms;
            check(&baseline, &profile, &mut failures);
            phases.push(baseline);
            // On WebSocket and TLS the attack that matters is on their handshake slots: silent
            // sockets; the protocol attacks behind the handshake are the TCP ones.
            let all = if link == "http" {
                Attack::HTTP
            } else {
                Attack::ALL
            };
            let attacks: Vec<Attack> = all
                .into_iter()
                .filter(|a| link == "tcp" || link == "http" || *a == Attack::Silent)
                .filter(|a| args.attack.is_empty() || args.attack.iter().any(|n| n == a.name()))
                .collect();
            for attack in attacks {
                let mut p = phase(&mut server, &client, link, Some(attack), &profile).await?;
                p.run = run;
                p.p99_vs_baseline = if base_p99 > 0.0 {
                    p.p99_ms / base_p99
                } else {
                    0.0
                };
                check(&p, &profile, &mut failures);
                phases.push(p);
            }
            server.check_alive()?;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Report {
        profile,
        medians: medians(&phases),
        phases,
        failures,
    })
}

/// The checks that make a run pass: correctness, not time (timings are reported).
fn check(p: &Phase, profile: &Profile, failures: &mut Vec<String>) {
    let what = format!("{} {}", p.link, p.attack);
    if p.ok != p.calls || p.calls == 0 {
        failures.push(format!(
            "{what}: {} of {} legitimate calls succeeded (first error: {})",
            p.ok,
            p.calls,
            p.first_error.as_deref().unwrap_or("none")
        ));
    }
    let deadline = profile.deadline_s(&p.link);
    let must_close = if p.link == "http" {
        // The event streams the gateway admitted are served for as long as they are read.
        p.attack != "event-streams" && p.attack != "none"
    } else {
        matches!(
            p.attack.as_str(),
            "silent" | "pre-auth-memory" | "slow-container" | "many-tids"
        ) && p.link == "tcp"
    } && profile.phase_s(&p.link) > deadline;
    if must_close && p.held_past_deadline > 0 {
        failures.push(format!(
            "{what} (run {}): the server still held {} hostile connections opened more than \
             their deadline + slack ({deadline:.1} s) before the attack stopped",
            p.run + 1,
            p.held_past_deadline
        ));
    }
    if must_close && p.max_close_s > deadline {
        failures.push(format!(
            "{what}: a hostile connection stayed open {:.1} s (deadline + slack {deadline:.1} s)",
            p.max_close_s
        ));
    }
    if p.link == "http" {
        check_answers(p, &what, failures);
    }
    // Memory: no attack may cost the server more than 64 MiB at its peak (the attacks that
    // took 256 MiB before cost a few), and it must come back within 16 MiB of where it was.
    let grew = p.rss_peak.saturating_sub(p.rss_before);
    if grew > 64 << 20 {
        failures.push(format!("{what}: server RSS grew by {} MiB", grew >> 20));
    }
    if p.rss_after > p.rss_before + (16 << 20) {
        failures.push(format!(
            "{what}: server RSS did not come back: {} MiB after, {} MiB before",
            p.rss_after >> 20,
            p.rss_before >> 20
        ));
    }
}

/// What the gateway must answer each HTTP attack (0: closed without an answer, as when its
/// flood's bytes reset the connection before the answer was read), and checks the answers;
/// besides, as many connections as the address guard refused at accept go unanswered.
fn check_answers(p: &Phase, what: &str, failures: &mut Vec<String>) {
    let due: &[u16] = match p.attack.as_str() {
        "idle-keep-alive" => &[200],
        "event-streams" => &[503],
        "slow-body" => &[408],
        "oversized-head" => &[431, 0],
        "oversized-body" => &[413, 0],
        // Closed unanswered (at the header deadline, or refused at accept).
        "slowloris" | "address-flood" => &[0],
        _ => return,
    };
    let refused_by_guard: u64 = p
        .reasons
        .iter()
        .filter(|(r, _)| r == "refused:rate" || r == "refused:penalized")
        .map(|(_, n)| n)
        .sum();
    let wrong: Vec<String> = p
        .statuses
        .iter()
        .filter(|(s, n)| {
            let unanswered_by_guard = *s == 0 && *n <= refused_by_guard;
            !(due.contains(s) || unanswered_by_guard)
        })
        .map(|(s, n)| format!("{s}×{n}"))
        .collect();
    if !wrong.is_empty() || (p.calls > 0 && p.statuses.is_empty()) {
        failures.push(format!(
            "{what} (run {}): the gateway answered {} where {due:?} was due",
            p.run + 1,
            if wrong.is_empty() {
                "nothing".to_string()
            } else {
                wrong.join(" ")
            }
        ));
    }
}

/// The legitimate client.
#[derive(Clone)]
enum Legit {
    /// A central calling a `blerpc serve`.
    Device {
        address: LinkUrl,
        options: ConnectOptions,
        identity: [u8; 32],
    },
    /// An HTTP caller posting `echo` to a gateway's device.
    Http {
        gateway: std::net::SocketAddr,
        device: String,
    },
}

/// `EchoRequest { message: "hello" }`: field 1, length 5.
const ECHO: &[u8] = &[0x0a, 0x05, b'h', b'e', b'l', b'l', b'o'];
/// One legitimate call's bound.
const CALL_LIMIT: Duration = Duration::from_secs(10);

/// What the legitimate client's calling gave: each successful call's start (seconds into the
/// phase) and latency (ms), the calls made, and the first error.
type Calling = (Vec<(f64, f64)>, usize, Option<String>);

impl Legit {
    /// Calls every `interval` for `duration` on a current-thread runtime of its own: the
    /// latencies of the calls that succeeded, the calls made and the first failure.
    fn run(&self, duration: Duration, interval: Duration) -> anyhow::Result<Calling> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async {
            let (mut latencies, mut calls, mut first_error) = (Vec::new(), 0, None);
            let start = Instant::now();
            let end = start + duration;
            while Instant::now() < end {
                let next = Instant::now() + interval;
                let at = start.elapsed().as_secs_f64();
                calls += 1;
                match self.call().await {
                    Ok(ms) => latencies.push((at, ms)),
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
                tokio::time::sleep_until(next.into()).await;
            }
            Ok((latencies, calls, first_error))
        })
    }

    /// One call on a new connection: its latency, or what failed.
    async fn call(&self) -> Result<f64, String> {
        let start = Instant::now();
        let work = async {
            let (address, options, identity) = match self {
                Legit::Device {
                    address,
                    options,
                    identity,
                } => (address, options, identity),
                Legit::Http { gateway, device } => {
                    let mut caller =
                        crate::gateway::callers::http(*gateway, device, crate::gateway::TOKEN)
                            .await
                            .map_err(|e| format!("{e:#}"))?;
                    caller.echo("hello").await.map_err(|e| format!("{e:#}"))?;
                    return Ok(());
                }
            };
            let config = ClientConfig {
                pinning: PinPolicy::Trust(*identity),
                ..Default::default()
            };
            let client = connect(address, options, config)
                .await
                .map_err(|e| format!("{:#}", anyhow::Error::new(e)))?;
            let reply = client
                .call("echo", ECHO.to_vec())
                .await
                .map_err(|e| e.to_string())?;
            client.close().await;
            if reply != ECHO {
                return Err(format!("wrong echo: {reply:02x?}"));
            }
            Ok(())
        };
        match tokio::time::timeout(CALL_LIMIT, work).await {
            Ok(Ok(())) => Ok(start.elapsed().as_secs_f64() * 1e3),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(format!("no answer within {CALL_LIMIT:?}")),
        }
    }
}

async fn phase(
    server: &mut Server,
    client: &Legit,
    link: &str,
    attack: Option<Attack>,
    profile: &Profile,
) -> anyhow::Result<Phase> {
    let name = attack.map_or("none", Attack::name);
    eprintln!("hostile: {link} {name} …");
    let before = server.counters()?;
    let (rss_before, cpu_before, log_before) = (server.rss(), server.cpu(), server.log_bytes());
    let tally = Arc::new(Tally::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let sockets = attack.map_or(0, |a| profile.sockets(a));
    let http = Arc::new(HttpTarget {
        device: hex::encode(server.identity),
        token: crate::gateway::TOKEN.to_string(),
    });
    let attack_task = attack.map(|a| {
        tokio::spawn(attacks::run(
            a,
            server.addr,
            http,
            sockets,
            tally.clone(),
            stop_rx.clone(),
        ))
    });
    // Let the attack reach its strength before measuring (at most 2 s).
    let ramp = Instant::now();
    while attack.is_some()
        && (tally.opened.load(Ordering::Relaxed) as usize) < sockets
        && ramp.elapsed() < Duration::from_secs(2)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The client runs on a runtime of its own, on its own thread: the attack's tasks share
    // this one and must not delay its calls (they still share the machine's CPUs with it).
    let legit = client.clone();
    let (duration, interval) = (
        Duration::from_secs_f64(profile.phase_s(link)),
        Duration::from_millis(profile.interval_ms),
    );
    let calling = tokio::task::spawn_blocking(move || legit.run(duration, interval));
    let mut rss_peak = rss_before;
    while !calling.is_finished() {
        rss_peak = rss_peak.max(server.rss());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (timed_calls, calls, first_error) = calling.await.context("the legitimate client")??;
    let cutoff = Instant::now() - Duration::from_secs_f64(profile.deadline_s(link));
    let early = tally.opened_before(cutoff);
    // Of the hostile sockets still open that were opened before the cutoff, the ones the
    // server's side still has (the rest it never completed: it holds nothing for them).
    let old = tally.live_before(cutoff);
    let established = attacks::server_side_established(server.addr).unwrap_or_default();
    let held_past_deadline = old.iter().filter(|a| established.contains(a)).count();
    let never_completed = old.len() - held_past_deadline;
    let _ = stop_tx.send(true);
    if let Some(task) = attack_task {
        let _ = task.await;
    }
    let cpu = server.cpu() - cpu_before;
    // The attack's sockets are closed now: let the server notice and give memory back.
    let settle = if link == "http" {
        profile.settle_s
    } else {
        1.5
    };
    tokio::time::sleep(Duration::from_secs_f64(settle)).await;
    let rss_after = server.rss();
    let counters = server.counters()?;
    server.check_alive()?;
    let mut latencies: Vec<f64> = timed_calls.iter().map(|&(_, ms)| ms).collect();
    latencies.sort_by(f64::total_cmp);
    let mut slowest = timed_calls;
    slowest.sort_by(|a, b| b.1.total_cmp(&a.1));
    slowest.truncate(5);
    let closed = tally.closed_by_server.load(Ordering::Relaxed);
    let statuses = tally
        .statuses
        .lock()
        .map(|s| s.iter().map(|(k, v)| (*k, *v)).collect())
        .unwrap_or_default();
    Ok(Phase {
        run: 0,
        link: link.to_string(),
        attack: name.to_string(),
        sockets,
        calls,
        ok: latencies.len(),
        first_error,
        p50_ms: crate::stats::quantile(&latencies, 0.5),
        p99_ms: crate::stats::quantile(&latencies, 0.99),
        p99_vs_baseline: 1.0,
        slowest,
        rss_before,
        rss_peak,
        rss_after,
        server_cpu_s: cpu,
        opened: tally.opened.load(Ordering::Relaxed),
        closed_by_server: closed,
        opened_early: early.0,
        closed_early: early.1,
        held_past_deadline,
        never_completed,
        max_close_s: tally.close_us_max.load(Ordering::Relaxed) as f64 / 1e6,
        mean_close_s: tally.close_us_sum.load(Ordering::Relaxed) as f64
            / 1e6
            / closed.max(1) as f64,
        statuses,
        attack_bytes: tally.sent.load(Ordering::Relaxed),
        reasons: counters.delta(&before),
        log_bytes: server.log_bytes().saturating_sub(log_before),
        open_after: counters.gauge(if link == "http" {
            "blerpc_gateway_http_connections"
        } else {
            "blerpc_connections_open"
        }) as u64,
    })
}

fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("blerpc-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
