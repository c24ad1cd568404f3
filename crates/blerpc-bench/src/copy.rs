//! `copy`: large byte copies into a `Vec` with one `extend_from_slice` (glibc `memcpy`) against
//! the core's `Buffer::try_extend` (what the runtime copies received messages with), at several
//! distances between destination and source modulo 4 KiB, measured side by side and printed as
//! a table.
//!
//! ```text
//! cargo run --release -p blerpc-bench -- copy [--reps 5] [--sizes 4096,65536,1048576]
//! ```
//!
//! Where a CPU's `rep movsb` is slow with the destination 1 to 63 bytes past the source modulo
//! 4 KiB (AMD Zen with glibc up to at least 2.36), the `memcpy` column is many times the
//! `try_extend` one at distances 16 and 48 (16 is where a fresh buffer of a message's size lands)
//! and equal elsewhere; on other CPUs the piecewise copy may cost a little. Each cell is the
//! median over `--reps` interleaved repetitions of the mean time of a batch of copies.
use std::hint::black_box;
use std::time::Instant;

use anyhow::{Result, ensure};
use blerpc_proto::buf::Buffer as _;

use crate::stats::median;

/// Large copies, `memcpy` against the core's `Buffer::try_extend`.
#[derive(clap::Args, Debug)]
pub struct CopyArgs {
    /// Interleaved repetitions.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Copy sizes in bytes.
    #[arg(long, value_delimiter = ',', default_value = "4096,65536,1048576")]
    sizes: Vec<usize>,
    /// Distances (destination − source) modulo 4 KiB.
    #[arg(long, value_delimiter = ',', default_value = "0,16,48,64,100,2048")]
    distances: Vec<usize>,
    /// Bytes copied per batch (the batch's copy count is this divided by the size, at least 1).
    #[arg(long, default_value_t = 64 << 20)]
    batch_bytes: usize,
}

/// Runs `blerpc-bench copy`.
pub fn run(args: &CopyArgs) -> Result<bool> {
    ensure!(args.reps > 0, "--reps must be at least 1");
    ensure!(
        args.distances.iter().all(|d| *d < 4096),
        "--distances are taken modulo 4096: give values below 4096"
    );
    ensure!(
        args.sizes.iter().all(|s| (1..=64 << 20).contains(s)),
        "--sizes must be between 1 byte and 64 MiB"
    );
    println!(
        "copy: {} sizes × {} distances, {} reps, ~{} MiB per batch",
        args.sizes.len(),
        args.distances.len(),
        args.reps,
        args.batch_bytes >> 20
    );
    println!();
    println!("| size | dst − src mod 4 KiB | memcpy | try_extend | memcpy / try_extend |");
    println!("| ---: | ---: | ---: | ---: | ---: |");
    for &size in &args.sizes {
        // One destination per size (its address fixed once it has its capacity), and one
        // arena the source is placed in so that the destination lies `distance` bytes past it
        // modulo 4 KiB.
        let mut dst: Vec<u8> = Vec::with_capacity(size);
        let arena: Vec<u8> = (0..size + 8192).map(|i| (i % 251) as u8).collect();
        let copies = (args.batch_bytes / size).max(1);
        for &distance in &args.distances {
            let at = (dst.as_ptr() as usize)
                .wrapping_sub(distance)
                .wrapping_sub(arena.as_ptr() as usize)
                % 4096;
            let src = &arena[at..at + size];
            let mut plain = Vec::with_capacity(args.reps);
            let mut ours = Vec::with_capacity(args.reps);
            for _ in 0..args.reps {
                plain.push(batch(&mut dst, src, copies, false)?);
                ours.push(batch(&mut dst, src, copies, true)?);
            }
            let (p, o) = (median(&plain), median(&ours));
            println!(
                "| {} | {distance} | {} | {} | {:.2}× |",
                human(size),
                us(p),
                us(o),
                p / o
            );
        }
    }
    Ok(true)
}

/// Mean ns per copy of `copies` copies of `src` into the emptied `dst`, checked once afterwards.
fn batch(dst: &mut Vec<u8>, src: &[u8], copies: usize, ours: bool) -> Result<f64> {
    let t = Instant::now();
    for _ in 0..copies {
        dst.clear();
        if ours {
            black_box(&mut *dst).try_extend(black_box(src))?;
        } else {
            black_box(&mut *dst).extend_from_slice(black_box(src));
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / copies as f64;
    ensure!(
        dst.as_slice() == src,
        "the copy of {} bytes lost bytes",
        src.len()
    );
    Ok(ns)
}

fn us(ns: f64) -> String {
    format!("{:.2} µs", ns / 1000.0)
}

fn human(size: usize) -> String {
    match size {
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{} MiB", s >> 20),
        s if s >= 1024 && s % 1024 == 0 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    }
}
