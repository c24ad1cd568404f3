//! `blerpc-bench soak`: many encrypted connections doing mixed calls and streams against one
//! `blerpc serve` process for a while, with reconnect churn and a low rate of hostile peers,
//! every answer checked against its request.
//!
//! Each client connection loops over a random mix: `echo` (a random message, the reply must be
//! the same), `counter_stream` (N items, each `seq` in order with `value = 10 × seq`),
//! `counter_upload` (N items, the reply must count N); with probability `--churn` per operation
//! it closes and reconnects (setup and key exchange again). Beside them a low-rate hostile mix
//! runs (silent sockets, random bytes, a key-exchange flood). Beside the TCP clients, `--ble`
//! clients run the same mix over simulated BLE links (`blerpc-sim`, CI 15 ms, each to a demo
//! server in this process) with faults: packets lost on air (`--ble-loss`, retransmitted) and a
//! forced disconnect after a random lifetime (`--ble-life`, ±50 %); an operation the disconnect
//! cuts is counted as a fault, then the client reconnects. The server's RSS is sampled every
//! 2 s; the run prints its slope over the second half (a leak shows as a steady climb).
//!
//! ```text
//! blerpc-bench soak --quick                        # 200 connections, 20 s (cargo test)
//! blerpc-bench soak --connections 10000 --duration 1800 --json docs/benchmarks/soak.json
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use blerpc::client::PinPolicy;
use blerpc::link::connect::{ConnectOptions, connect};
use blerpc::link::url::LinkUrl;
use blerpc::{Client, ClientConfig};
use blerpc_demo::pb;
use clap::Args;
use futures_util::StreamExt as _;
use prost::Message as _;
use rand_core::{RngCore as _, SeedableRng as _};
use serde::Serialize;
use tokio::sync::watch;

use crate::hostile::attacks::{self, Attack, Tally};
use crate::hostile::server::{Server, ServerOptions};

/// `blerpc-bench soak` options.
#[derive(Clone, Debug, Args)]
pub struct SoakArgs {
    /// The short profile (`cargo test`): 200 connections for 20 s.
    #[arg(long)]
    pub quick: bool,
    /// Client connections at once. Default 2,000 (200 with --quick).
    #[arg(long, value_name = "N")]
    pub connections: Option<usize>,
    /// Seconds to run. Default 300 (20 with --quick).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Probability per operation that a client reconnects.
    #[arg(long, value_name = "P", default_value_t = 0.02)]
    pub churn: f64,
    /// Milliseconds a client waits between operations (at random, up to this).
    #[arg(long, value_name = "MS", default_value_t = 200)]
    pub think_ms: u64,
    /// Clients over simulated BLE links with faults. Default 20 (10 with --quick).
    #[arg(long, value_name = "N")]
    pub ble: Option<usize>,
    /// Probability that a simulated BLE packet is lost on air (retransmitted in a later event).
    #[arg(long, value_name = "P", default_value_t = 0.02)]
    pub ble_loss: f64,
    /// Mean seconds a simulated BLE connection lives before it is dropped (each one ±50 %).
    /// Default 60 (8 with --quick).
    #[arg(long, value_name = "SECS")]
    pub ble_life: Option<f64>,
    /// Write the results as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
}

/// The results.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SoakReport {
    /// Client connections at once.
    pub connections: usize,
    /// Seconds run.
    pub duration_s: f64,
    /// Operations that succeeded, by kind.
    pub ok: BTreeMap<String, u64>,
    /// Answers that did not match their request (must be 0).
    pub wrong: u64,
    /// Failed operations and connections, by cause.
    pub errors: BTreeMap<String, u64>,
    /// Connections made (first ones and reconnects).
    pub connects: u64,
    /// Server RSS samples, MiB, every 2 s.
    pub rss_mib: Vec<f64>,
    /// The RSS slope over the second half of the run, MiB per minute.
    pub rss_slope_mib_per_min: f64,
    /// Hostile connections opened beside the clients.
    pub hostile_opened: u64,
    /// Clients over simulated BLE links.
    pub ble_clients: usize,
    /// Simulated BLE connections made (first ones and reconnects after a fault).
    pub ble_connects: u64,
    /// Operations cut by an injected BLE disconnect, by kind (expected; not errors).
    pub faults: BTreeMap<String, u64>,
}

#[derive(Default)]
struct Counts {
    ok: Mutex<BTreeMap<&'static str, u64>>,
    errors: Mutex<BTreeMap<String, u64>>,
    faults: Mutex<BTreeMap<String, u64>>,
    wrong: AtomicU64,
    connects: AtomicU64,
    ble_connects: AtomicU64,
}

impl Counts {
    fn ok(&self, kind: &'static str) {
        if let Ok(mut m) = self.ok.lock() {
            *m.entry(kind).or_insert(0) += 1;
        }
    }
    fn error(&self, what: &str, e: impl std::fmt::Display) {
        // The cause without addresses or numbers that would make every line its own key.
        let cause: String = format!("{what}: {e}")
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .take(120)
            .collect();
        if let Ok(mut m) = self.errors.lock() {
            *m.entry(cause).or_insert(0) += 1;
        }
    }
    fn fault(&self, what: &str) {
        if let Ok(mut m) = self.faults.lock() {
            *m.entry(what.to_string()).or_insert(0) += 1;
        }
    }
    fn wrong(&self, what: &str) {
        self.wrong.fetch_add(1, Ordering::Relaxed);
        self.error("wrong answer", what);
    }
}

/// Runs the soak; `Ok(false)` if an answer was wrong or an operation failed.
pub fn run(args: &SoakArgs) -> anyhow::Result<bool> {
    let report = run_report(args)?;
    println!(
        "soak: {} encrypted connections for {:.0} s against blerpc serve (tcp), churn {:.0} %, \
         with a low-rate hostile mix beside them",
        report.connections,
        report.duration_s,
        args.churn * 100.0
    );
    let mut t = crate::table::Table::new(["operation", "ok"]).align(1, crate::table::Align::Right);
    for (k, v) in &report.ok {
        t.row([k.clone(), v.to_string()]);
    }
    t.row(["connections made".to_string(), report.connects.to_string()]);
    t.row(["wrong answers".to_string(), report.wrong.to_string()]);
    print!("{}", t.plain(""));
    for (cause, n) in &report.errors {
        println!("error ×{n}: {cause}");
    }
    if report.ble_clients > 0 {
        let cut: u64 = report.faults.values().sum();
        println!(
            "simulated BLE: {} clients (loss {:.0} %, a forced disconnect every ~{:.0} s): {} \
             connections made, {cut} operations cut by a disconnect (expected)",
            report.ble_clients,
            args.ble_loss * 100.0,
            ble_life(args),
            report.ble_connects
        );
    }
    let first = report.rss_mib.first().copied().unwrap_or(0.0);
    let last = report.rss_mib.last().copied().unwrap_or(0.0);
    let peak = report.rss_mib.iter().copied().fold(0.0, f64::max);
    println!(
        "server RSS: {first:.1} MiB at the start, {peak:.1} peak, {last:.1} at the end; slope over \
         the second half {:+.3} MiB/min ({} samples, every 2 s)",
        report.rss_slope_mib_per_min,
        report.rss_mib.len()
    );
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(report.wrong == 0 && report.errors.is_empty())
}

fn ble_life(args: &SoakArgs) -> f64 {
    args.ble_life
        .unwrap_or(if args.quick { 8.0 } else { 60.0 })
        .max(1.0)
}

/// Runs the soak and returns its results.
pub fn run_report(args: &SoakArgs) -> anyhow::Result<SoakReport> {
    let connections = args
        .connections
        .unwrap_or(if args.quick { 200 } else { 2_000 });
    let duration =
        Duration::from_secs_f64(
            args.duration
                .unwrap_or(if args.quick { 20.0 } else { 300.0 }),
        );
    let (nofile, _) = blerpc::process::raise_nofile_limit().context("the open-file limit")?;
    anyhow::ensure!(
        (nofile as usize) > connections + 512,
        "{connections} connections need an open-file limit above {}; this process may open \
         {nofile} (ulimit -n): pass a smaller --connections",
        connections + 512
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(soak(args, connections, duration))
}

async fn soak(
    args: &SoakArgs,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<SoakReport> {
    let dir = std::env::temp_dir().join(format!("blerpc-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let key = dir.join("identity.key");
    blerpc::identity::store(&key, &blerpc::identity::generate(), true)?;
    let mut server = Server::start(&ServerOptions {
        listen: "tcp://127.0.0.1:0",
        key: &key,
        tls: None,
        setup_timeout: Duration::from_secs(10),
        container_timeout: Duration::from_secs(5),
        dir: &dir,
        extra: &[
            "--max-connections",
            &(connections + 1024).to_string(),
            "--max-connection-rate",
            "0",
        ],
    })?;
    let address: LinkUrl = server.url.parse()?;
    let counts = Arc::new(Counts::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    let ble_clients = args.ble.unwrap_or(if args.quick { 10 } else { 20 });
    anyhow::ensure!(
        (0.0..1.0).contains(&args.ble_loss),
        "--ble-loss {} must be in [0, 1)",
        args.ble_loss
    );
    for n in 0..connections + ble_clients {
        let dial = if n < connections {
            Dial::Tcp {
                address: address.clone(),
                identity: server.identity,
            }
        } else {
            let params = blerpc_sim::LinkParams {
                loss: args.ble_loss,
                ..Default::default()
            };
            params.validate().context("the simulated BLE link")?;
            Dial::Ble {
                params,
                life: Duration::from_secs_f64(ble_life(args)),
            }
        };
        let client = Soaker {
            dial,
            link: Mutex::new(None),
            counts: counts.clone(),
            churn: args.churn.clamp(0.0, 1.0),
            think: Duration::from_millis(args.think_ms.max(1)),
            seed: n as u64,
        };
        let mut stop = stop_rx.clone();
        tasks.spawn(async move {
            tokio::select! {
                () = client.run() => {}
                _ = stop.wait_for(|s| *s) => {}
            }
        });
        if n % 100 == 99 {
            // Connect at a pace the listen backlog takes.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // The hostile mix: a few silent sockets, some random bytes, one key-exchange flooder.
    let hostile = Arc::new(Tally::default());
    for (attack, sockets) in [
        (Attack::Silent, 50),
        (Attack::RandomBytes, 40),
        (Attack::KxFlood, 50),
    ] {
        tasks.spawn(attacks::run(
            attack,
            server.addr,
            Arc::default(),
            attack.sockets(sockets, 0, 0),
            hostile.clone(),
            stop_rx.clone(),
        ));
    }
    let start = Instant::now();
    let mut rss = Vec::new();
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    while start.elapsed() < duration {
        tokio::time::sleep(Duration::from_secs(2)).await;
        server.check_alive()?;
        rss.push(server.rss() as f64 / (1 << 20) as f64);
        let line = format!(
            "soak: {:.0}/{:.0} s, server {:.1} MiB",
            start.elapsed().as_secs_f64(),
            duration.as_secs_f64(),
            rss.last().copied().unwrap_or(0.0)
        );
        // On a terminal one line rewritten in place; in a log a line every 10 s.
        if terminal {
            eprint!("\r{line}");
        } else if rss.len() % 5 == 0 {
            eprintln!("{line}");
        }
    }
    if terminal {
        eprintln!();
    }
    let _ = stop_tx.send(true);
    while tasks.join_next().await.is_some() {}
    server.check_alive()?;
    let _ = std::fs::remove_dir_all(&dir);
    let half = rss.len() / 2;
    let ok = counts
        .ok
        .lock()
        .map(|m| m.iter().map(|(k, v)| (k.to_string(), *v)).collect())
        .unwrap_or_default();
    let errors = counts.errors.lock().map(|m| m.clone()).unwrap_or_default();
    let faults = counts.faults.lock().map(|m| m.clone()).unwrap_or_default();
    Ok(SoakReport {
        connections,
        duration_s: duration.as_secs_f64(),
        ok,
        wrong: counts.wrong.load(Ordering::Relaxed),
        errors,
        connects: counts.connects.load(Ordering::Relaxed),
        rss_slope_mib_per_min: slope(rss.get(half..).unwrap_or(&[]), 2.0) * 60.0,
        rss_mib: rss,
        hostile_opened: hostile.opened.load(Ordering::Relaxed),
        ble_clients,
        ble_connects: counts.ble_connects.load(Ordering::Relaxed),
        faults,
    })
}

/// Least-squares slope of samples `interval_s` apart, per second.
fn slope(samples: &[f64], interval_s: f64) -> f64 {
    let n = samples.len() as f64;
    if samples.len() < 2 {
        return 0.0;
    }
    let mean_x = (n - 1.0) / 2.0 * interval_s;
    let mean_y = samples.iter().sum::<f64>() / n;
    let (mut num, mut den) = (0.0, 0.0);
    for (i, y) in samples.iter().enumerate() {
        let dx = i as f64 * interval_s - mean_x;
        num += dx * (y - mean_y);
        den += dx * dx;
    }
    if den == 0.0 { 0.0 } else { num / den }
}

/// Where a soak client connects.
enum Dial {
    /// The `blerpc serve` process.
    Tcp {
        address: LinkUrl,
        identity: [u8; 32],
    },
    /// A new simulated BLE link to a demo server in this process, dropped after about `life`.
    Ble {
        params: blerpc_sim::LinkParams,
        life: Duration,
    },
}

/// One client connection's loop.
struct Soaker {
    dial: Dial,
    /// The simulated link in use and when it is dropped.
    link: Mutex<Option<(blerpc_sim::Monitor, Duration)>>,
    counts: Arc<Counts>,
    churn: f64,
    think: Duration,
    seed: u64,
}

/// One operation's bound.
const OP_LIMIT: Duration = Duration::from_secs(20);

impl Soaker {
    async fn connect(&self, rng: &mut rand_chacha::ChaCha8Rng) -> Option<Client> {
        let connecting = async {
            match &self.dial {
                Dial::Tcp { address, identity } => {
                    let config = ClientConfig {
                        pinning: PinPolicy::Trust(*identity),
                        ..Default::default()
                    };
                    connect(address, &ConnectOptions::default(), config)
                        .await
                        .map_err(|e| format!("{:#}", anyhow::Error::new(e)))
                }
                Dial::Ble { params, life } => {
                    let (server, key) =
                        blerpc_demo::server::demo_server().map_err(|e| format!("{e:#}"))?;
                    // ±50 % around the mean, drawn per connection.
                    let life = life.mul_f64(0.5 + (rng.next_u32() as f64 / u32::MAX as f64));
                    let params = blerpc_sim::LinkParams {
                        seed: rng.next_u64(),
                        disconnect_at: Some(life),
                        ..*params
                    };
                    let (central, peripheral) =
                        blerpc_sim::pair(params).map_err(|e| e.to_string())?;
                    let monitor = central.monitor();
                    tokio::spawn(async move { server.serve_link(peripheral).await });
                    let client = Client::connect(central, blerpc_demo::server::client_config(key))
                        .await
                        .map_err(|e| e.to_string())?;
                    if let Ok(mut l) = self.link.lock() {
                        *l = Some((monitor, life));
                    }
                    self.counts.ble_connects.fetch_add(1, Ordering::Relaxed);
                    Ok(client)
                }
            }
        };
        match tokio::time::timeout(OP_LIMIT, connecting).await {
            Ok(Ok(c)) => {
                self.counts.connects.fetch_add(1, Ordering::Relaxed);
                Some(c)
            }
            Ok(Err(e)) => {
                self.error("connect", e);
                None
            }
            Err(_) => {
                self.counts.error("connect", "timed out");
                None
            }
        }
    }

    /// Counts a failed operation: a fault if the simulated link it ran on was dropped as
    /// scheduled (an error that is not a timeout, at or after the drop), else an error.
    fn error(&self, what: &str, e: impl std::fmt::Display) {
        let cut = self.link.lock().ok().is_some_and(|l| {
            l.as_ref().is_some_and(|(monitor, life)| {
                monitor.connected_for() + Duration::from_millis(50) >= *life
            })
        });
        if cut {
            self.counts.fault(what);
        } else {
            self.counts.error(what, e);
        }
    }

    async fn run(self) {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.seed);
        let mut client = None;
        loop {
            let pause = rng.next_u64() % self.think.as_millis().max(1) as u64;
            tokio::time::sleep(Duration::from_millis(pause)).await;
            let c = match client.take() {
                Some(c) => c,
                None => match self.connect(&mut rng).await {
                    Some(c) => c,
                    None => {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        continue;
                    }
                },
            };
            let roll = rng.next_u32();
            let n = 1 + (roll >> 8) % 20;
            let done = match roll % 3 {
                0 => self.echo(&c, &mut rng).await,
                1 => self.stream(&c, n).await,
                _ => self.upload(&c, n).await,
            };
            let reconnect = (rng.next_u32() as f64 / u32::MAX as f64) < self.churn;
            if done && !reconnect {
                client = Some(c);
            } else {
                c.close().await;
            }
        }
    }

    async fn echo(&self, c: &Client, rng: &mut rand_chacha::ChaCha8Rng) -> bool {
        let len = (rng.next_u32() % 200) as usize;
        let message: String = (0..len)
            .map(|_| char::from(b'a' + (rng.next_u32() % 26) as u8))
            .collect();
        let request = pb::EchoRequest {
            message: message.clone(),
        };
        match tokio::time::timeout(OP_LIMIT, c.call("echo", request.encode_to_vec())).await {
            Ok(Ok(reply)) => match pb::EchoResponse::decode(reply.as_slice()) {
                Ok(r) if r.message == message => {
                    self.counts.ok("echo");
                    true
                }
                _ => {
                    self.counts.wrong("echo");
                    false
                }
            },
            Ok(Err(e)) => {
                self.error("echo", e);
                false
            }
            Err(_) => {
                self.counts.error("echo", "timed out");
                false
            }
        }
    }

    async fn stream(&self, c: &Client, n: u32) -> bool {
        let request = pb::CounterStreamRequest { count: n };
        let work = async {
            let mut items = c
                .server_stream("counter_stream", request.encode_to_vec())
                .await
                .map_err(|e| e.to_string())?;
            let mut seq = 0u32;
            while let Some(item) = items.next().await {
                let item = item.map_err(|e| e.to_string())?;
                let r = pb::CounterStreamResponse::decode(item.as_slice())
                    .map_err(|_| "wrong answer".to_string())?;
                if r.seq != seq || r.value != (seq as i32) * 10 {
                    return Err("wrong answer".to_string());
                }
                seq += 1;
            }
            if seq == n {
                Ok(())
            } else {
                Err("wrong answer".to_string())
            }
        };
        self.finish("counter_stream", tokio::time::timeout(OP_LIMIT, work).await)
    }

    async fn upload(&self, c: &Client, n: u32) -> bool {
        let work = async {
            let mut up = c
                .client_stream("counter_upload")
                .await
                .map_err(|e| e.to_string())?;
            for seq in 0..n {
                let item = pb::CounterUploadRequest {
                    seq,
                    value: seq as i32,
                };
                up.send(item.encode_to_vec())
                    .await
                    .map_err(|e| e.to_string())?;
            }
            let reply = up.finish().await.map_err(|e| e.to_string())?;
            match pb::CounterUploadResponse::decode(reply.as_slice()) {
                Ok(r) if r.received_count == n => Ok(()),
                _ => Err("wrong answer".to_string()),
            }
        };
        self.finish("counter_upload", tokio::time::timeout(OP_LIMIT, work).await)
    }

    fn finish(
        &self,
        kind: &'static str,
        outcome: Result<Result<(), String>, tokio::time::error::Elapsed>,
    ) -> bool {
        match outcome {
            Ok(Ok(())) => {
                self.counts.ok(kind);
                true
            }
            Ok(Err(e)) if e == "wrong answer" => {
                self.counts.wrong(kind);
                false
            }
            Ok(Err(e)) => {
                self.error(kind, e);
                false
            }
            Err(_) => {
                self.counts.error(kind, "timed out");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_fits_a_line() {
        let climb: Vec<f64> = (0..10).map(|i| 5.0 + 0.5 * i as f64).collect();
        assert!((slope(&climb, 2.0) - 0.25).abs() < 1e-9);
        assert_eq!(slope(&[3.0; 8], 2.0), 0.0);
        assert_eq!(slope(&[1.0], 2.0), 0.0);
    }
}
