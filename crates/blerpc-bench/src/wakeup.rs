//! `wakeup`: how a loopback round trip between two processes responds to CPU work added on the
//! answering side. It explains what `blerpc-bench loopback`'s small-payload ratios measure.
//!
//! ```text
//! cargo run --release -p blerpc-bench -- wakeup [--samples 3000] [--reps 6] [--spins 0,5,10,20]
//! taskset -c 0 cargo run --release -p blerpc-bench -- wakeup       # both processes on one CPU
//! ```
//!
//! A client process and a server process (this binary again, as a hidden role) exchange 64-byte
//! messages over TCP on 127.0.0.1 with `TCP_NODELAY` and blocking sockets: the client writes a
//! message carrying a spin time, the server busy-waits that long and echoes it, the client times
//! the round trip. Spin values are interleaved within every repetition; each row is the median
//! over repetitions of the per-repetition median round trip. If the round trip were CPU time
//! only, each row would be the first one plus its spin; on a virtual machine whose idle vCPUs
//! halt, most of a round trip is the wake-up of the other vCPU and a few microseconds of work
//! can hide in it (or cost more than they take).
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};

use crate::stats::median;

/// Bytes per message (the loopback matrix's small payload).
const MESSAGE: usize = 64;

/// The longest spin accepted, in microseconds.
const MAX_SPIN_US: u32 = 10_000;

/// How long the client waits for one echo before it gives up.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Round trips against CPU work added on the answering side.
#[derive(clap::Args, Debug)]
pub struct WakeupArgs {
    /// Round trips per spin value and repetition.
    #[arg(long, default_value_t = 3000)]
    samples: usize,
    /// Interleaved repetitions.
    #[arg(long, default_value_t = 6)]
    reps: usize,
    /// Busy-wait before each echo, in microseconds.
    #[arg(long, value_delimiter = ',', default_value = "0,5,10,20")]
    spins: Vec<u32>,
}

/// Runs `blerpc-bench wakeup`.
pub fn run(args: &WakeupArgs) -> Result<bool> {
    ensure!(
        args.samples > 0 && args.reps > 0,
        "--samples and --reps must be at least 1"
    );
    ensure!(
        !args.spins.is_empty() && args.spins.iter().all(|s| *s <= MAX_SPIN_US),
        "--spins: one or more values of at most {MAX_SPIN_US} µs"
    );
    let mut child = crate::process::command(&["wakeup-server"])?
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the server process")?;
    let result = run_client(args, &mut child);
    let _ = child.kill();
    let _ = child.wait();
    result.map(|()| true)
}

fn run_client(args: &WakeupArgs, child: &mut std::process::Child) -> Result<()> {
    let out = child.stdout.take().context("no stdout from the server")?;
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line)?;
    let port: u16 = line
        .trim()
        .parse()
        .with_context(|| format!("server said {line:?}"))?;
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    eprintln!(
        "wakeup: {} spins × {} reps × {} round trips of {MESSAGE} B",
        args.spins.len(),
        args.reps,
        args.samples
    );
    let mut medians: Vec<Vec<f64>> = vec![Vec::new(); args.spins.len()];
    let started = Instant::now();
    for rep in 0..args.reps {
        for (i, spin) in args.spins.iter().enumerate() {
            let mut samples = Vec::with_capacity(args.samples);
            let mut msg = [0u8; MESSAGE];
            msg[..4].copy_from_slice(&spin.to_le_bytes());
            let mut back = [0u8; MESSAGE];
            for _ in 0..args.samples {
                let t = Instant::now();
                stream.write_all(&msg)?;
                stream.read_exact(&mut back)?;
                samples.push(t.elapsed().as_secs_f64() * 1e6);
                if back != msg {
                    bail!("the echo differs from the message");
                }
            }
            let m = median(&samples);
            eprintln!(
                "[{:>5.1}s] rep {}/{}  spin {:>3} µs  p50 {:.1} µs",
                started.elapsed().as_secs_f64(),
                rep + 1,
                args.reps,
                spin,
                m
            );
            medians[i].push(m);
        }
    }
    println!();
    println!(
        "Loopback TCP round trip of {MESSAGE} B between two processes, with a busy-wait before \
         each echo (median of {} reps × {} round trips)",
        args.reps, args.samples
    );
    println!();
    println!("| spin | p50 | p50 − p50 without spin | added ÷ spin |");
    println!("| ---: | ---: | ---: | ---: |");
    let rows: Vec<f64> = medians.iter().map(|m| median(m)).collect();
    let base = args.spins.iter().position(|s| *s == 0).map(|i| rows[i]);
    for (spin, p50) in args.spins.iter().zip(&rows) {
        let (added, ratio) = match base {
            Some(b) if *spin > 0 => (
                format!("{:+.1} µs", p50 - b),
                format!("{:.2}", (p50 - b) / f64::from(*spin)),
            ),
            Some(_) => ("—".into(), "—".into()),
            None => ("(no spin 0 row)".into(), "—".into()),
        };
        println!("| {spin} µs | {p50:.1} µs | {added} | {ratio} |");
    }
    Ok(())
}

/// The server role: echoes every message after busy-waiting the spin it carries.
pub fn serve() -> Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    println!("{}", listener.local_addr()?.port());
    std::io::stdout().flush()?;
    let (mut stream, _) = listener.accept()?;
    stream.set_nodelay(true)?;
    let mut msg = [0u8; MESSAGE];
    loop {
        if stream.read_exact(&mut msg).is_err() {
            return Ok(());
        }
        let mut spin = [0u8; 4];
        spin.copy_from_slice(&msg[..4]);
        let spin = Duration::from_micros(u64::from(u32::from_le_bytes(spin).min(MAX_SPIN_US)));
        let t = Instant::now();
        while t.elapsed() < spin {
            std::hint::spin_loop();
        }
        stream.write_all(&msg)?;
    }
}
