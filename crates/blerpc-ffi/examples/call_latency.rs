//! The Rust baseline of the bindings' per-call figures (`tools/bindings/bench.sh`): unary
//! `echo` calls to a running `blerpc serve`, each timed alone, printed as one JSON line per row
//! with the median and the 90th percentile.
//!
//! ```text
//! cargo run --release -p blerpc-ffi --example call_latency -- URL KEY [CALLS] [WARMUP]
//! ```
//!
//! Rows (each on its own connection, set up as the bindings do: the key pinned, encrypted):
//!
//! | row | what |
//! |---|---|
//! | `rust` | [`blerpc::Client::call`] in a loop on a one-worker runtime, the caller a task beside the connection's task on the same thread (no wake crosses threads) |
//! | `rust, caller thread` | the same client, the calls made from another thread (`Handle::block_on`): each answer wakes the caller across threads, as for an app calling from its UI or event-loop thread, and as for every binding |
//! | `rust, blerpc-ffi API, caller thread` | the same through this crate's exported Rust API ([`blerpc_ffi::connect`], [`blerpc_ffi::Connection::call`]): what a binding runs, without the FFI |

use std::time::Instant;

use anyhow::{Context as _, Result, bail, ensure};
use blerpc::Client;
use blerpc::link::connect::{ConnectOptions as LinkOptions, connect as connect_url};
use blerpc_ffi::ConnectOptions;

/// `EchoRequest { message: "hello" }`; the response is the same bytes.
const ECHO: &[u8] = b"\x0a\x05hello";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (url, key) = match (args.first(), args.get(1)) {
        (Some(url), Some(key)) => (url.clone(), key.clone()),
        _ => bail!("usage: call_latency URL KEY [CALLS] [WARMUP]"),
    };
    let calls: usize = args.get(2).map_or(Ok(3000), |s| s.parse())?;
    let warmup: usize = args.get(3).map_or(Ok(300), |s| s.parse())?;
    ensure!(calls > 0, "CALLS must be at least 1");
    let key = blerpc::known_keys::parse_key(&key)
        .with_context(|| format!("{key:?} is not 64 hex digits"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let link_url = url.parse().context("the URL")?;
    let config = blerpc_demo::server::client_config(key);

    // Caller and connection task on the runtime's one worker.
    let client = rt.block_on(connect_url(
        &link_url,
        &LinkOptions::default(),
        config.clone(),
    ))?;
    let times = rt.block_on(rt.spawn(async move {
        let mut times = Vec::with_capacity(calls);
        for i in 0..warmup + calls {
            let t = Instant::now();
            let reply = client.call("echo", ECHO.to_vec()).await?;
            record(&mut times, i >= warmup, t, &reply)?;
        }
        client.close().await;
        anyhow::Ok(times)
    }))??;
    report("rust", times);

    // The caller on this thread, the connection task on the worker.
    let client: Client = rt.block_on(connect_url(&link_url, &LinkOptions::default(), config))?;
    let mut times = Vec::with_capacity(calls);
    for i in 0..warmup + calls {
        let t = Instant::now();
        let reply = rt.handle().block_on(client.call("echo", ECHO.to_vec()))?;
        record(&mut times, i >= warmup, t, &reply)?;
    }
    rt.block_on(client.close());
    report("rust, caller thread", times);

    // What a binding runs, without the FFI: blerpc-ffi's own runtime and API.
    let options = ConnectOptions {
        trust_key: Some(blerpc::known_keys::to_hex(&key)),
        ..Default::default()
    };
    let conn = rt.handle().block_on(blerpc_ffi::connect(url, options))?;
    let mut times = Vec::with_capacity(calls);
    for i in 0..warmup + calls {
        let t = Instant::now();
        let reply = rt
            .handle()
            .block_on(conn.call("echo".into(), ECHO.to_vec(), None))?;
        record(&mut times, i >= warmup, t, &reply)?;
    }
    rt.handle().block_on(conn.disconnect());
    report("rust, blerpc-ffi API, caller thread", times);
    Ok(())
}

/// Keeps the time since `start` (in ns) if `timed`, after checking the echo.
fn record(times: &mut Vec<u64>, timed: bool, start: Instant, reply: &[u8]) -> Result<()> {
    let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    ensure!(reply == ECHO, "echo answered {reply:02x?}");
    if timed {
        times.push(ns);
    }
    Ok(())
}

/// Prints the row as one JSON line: median and 90th percentile in µs.
fn report(row: &str, mut times: Vec<u64>) {
    times.sort_unstable();
    let at = |q: f64| {
        // The index is within 0..len: q is at most 0.9.
        let i = ((times.len() as f64 - 1.0) * q).round() as usize;
        times.get(i).copied().unwrap_or(0) as f64 / 1000.0
    };
    println!(
        "{{\"row\": \"{row}\", \"p50_us\": {:.2}, \"p90_us\": {:.2}, \"calls\": {}}}",
        at(0.5),
        at(0.9),
        times.len()
    );
}
