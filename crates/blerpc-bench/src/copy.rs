//! `copy`: large byte copies with one `copy_from_slice` (glibc `memcpy`) against
//! `blerpc_proto::buf::copy_bytes`, at several distances between destination and source modulo
//! 4 KiB, measured side by side and printed as a table.
//!
//! ```text
//! cargo run --release -p blerpc-bench -- copy [--reps 5] [--sizes 4096,65536,1048576]
//! ```
//!
//! Where a CPU's `rep movsb` is slow with the destination 1 to 63 bytes past the source modulo
//! 4 KiB (AMD Zen with glibc up to at least 2.36), the `memcpy` column is many times the
//! `copy_bytes` one at distances 16 and 48 and equal elsewhere. Each cell is the median over
//! `--reps` interleaved repetitions of the mean time of a batch of copies.
use std::hint::black_box;
use std::time::Instant;

use anyhow::{Result, ensure};
use blerpc_proto::buf::copy_bytes;

use crate::stats::median;

/// Large copies, `memcpy` against `copy_bytes`.
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
    println!("| size | dst − src mod 4 KiB | memcpy | copy_bytes | memcpy / copy_bytes |");
    println!("| ---: | ---: | ---: | ---: | ---: |");
    for &size in &args.sizes {
        // One arena per size: the source at a page boundary, the destination a whole number of
        // pages further on plus the distance.
        let gap = size.div_ceil(4096) * 4096 + 4096;
        let mut arena = vec![0u8; gap + size + 4096 + 4096];
        let start = 4096 - (arena.as_ptr() as usize % 4096);
        for (i, b) in arena.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        let copies = (args.batch_bytes / size).max(1);
        for &distance in &args.distances {
            let mut plain = Vec::with_capacity(args.reps);
            let mut ours = Vec::with_capacity(args.reps);
            for _ in 0..args.reps {
                plain.push(batch(
                    &mut arena,
                    start,
                    gap + distance,
                    size,
                    copies,
                    false,
                )?);
                ours.push(batch(
                    &mut arena,
                    start,
                    gap + distance,
                    size,
                    copies,
                    true,
                )?);
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

/// Mean ns per copy of `copies` copies of `size` bytes from `arena[start..]` to
/// `arena[start + offset..]`, checked once afterwards.
fn batch(
    arena: &mut [u8],
    start: usize,
    offset: usize,
    size: usize,
    copies: usize,
    chunked: bool,
) -> Result<f64> {
    let (src, dst) = arena.split_at_mut(start + offset);
    let src = &src[start..start + size];
    let dst = &mut dst[..size];
    let t = Instant::now();
    for _ in 0..copies {
        if chunked {
            black_box(copy_bytes(black_box(&mut *dst), black_box(src)));
        } else {
            black_box(&mut *dst).copy_from_slice(black_box(src));
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / copies as f64;
    ensure!(dst == src, "the copy of {size} bytes lost bytes");
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
