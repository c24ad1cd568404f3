//! `serial`: the serial link's framing (CRC-16/CCITT-FALSE, COBS, delimiters) per PDU size,
//! encode and decode, through the link's own functions (`blerpc::link::serial`), printed as a
//! table. Each cell is the median over `--reps` repetitions of the mean over a batch.
//!
//! ```text
//! cargo run --release -p blerpc-bench -- serial [--reps 7] [--sizes 20,244,1024]
//! ```

use std::hint::black_box;
use std::time::Instant;

use anyhow::{Result, ensure};
use blerpc::link::serial::{Deframer, crc16, encode_frame};

use crate::stats::median;

/// `blerpc-bench serial` options.
#[derive(clap::Args, Debug)]
pub struct SerialArgs {
    /// Repetitions; each cell is their median.
    #[arg(long, default_value_t = 7)]
    pub reps: usize,
    /// PDU sizes in bytes.
    #[arg(long, value_delimiter = ',', default_value = "20,244,1024")]
    pub sizes: Vec<usize>,
    /// Bytes of PDUs per batch.
    #[arg(long, default_value_t = 16 << 20)]
    pub batch_bytes: usize,
}

/// A PDU of `len` bytes with zeros in it (COBS has work to do) and a varied rest.
fn pdu(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| if i % 17 == 0 { 0 } else { (i * 31 + 7) as u8 })
        .collect()
}

/// Runs `blerpc-bench serial`.
pub fn run(args: &SerialArgs) -> Result<bool> {
    ensure!(args.reps > 0, "--reps must be at least 1");
    ensure!(
        args.sizes.iter().all(|s| (1..=4096).contains(s)),
        "--sizes must be between 1 and 4096 bytes"
    );
    println!(
        "serial framing: CRC-16 + COBS + delimiters, {} sizes, {} reps, ~{} MiB per batch",
        args.sizes.len(),
        args.reps,
        args.batch_bytes >> 20
    );
    println!();
    println!("| PDU | crc16 ns | encode ns | decode ns | encode MB/s | decode MB/s |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: |");
    for &size in &args.sizes {
        let data = pdu(size);
        let count = (args.batch_bytes / size).max(16);
        let mut frame = Vec::new();
        encode_frame(&data, &mut frame);
        let mut deframer = Deframer::new(size);
        let (mut crc, mut enc, mut dec) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..args.reps {
            let t = Instant::now();
            for _ in 0..count {
                black_box(crc16(black_box(&data)));
            }
            crc.push(t.elapsed().as_nanos() as f64 / count as f64);
            let mut out = Vec::with_capacity(frame.len());
            let t = Instant::now();
            for _ in 0..count {
                out.clear();
                encode_frame(black_box(&data), &mut out);
                black_box(&out);
            }
            enc.push(t.elapsed().as_nanos() as f64 / count as f64);
            ensure!(out == frame, "encoding is not deterministic");
            let t = Instant::now();
            for _ in 0..count {
                let (used, outcome) = deframer.push(black_box(&frame));
                ensure!(
                    used == frame.len() && matches!(outcome, Some(Ok(()))),
                    "a frame did not decode"
                );
                black_box(deframer.pdu());
            }
            dec.push(t.elapsed().as_nanos() as f64 / count as f64);
            ensure!(deframer.pdu() == data, "decoding lost bytes");
        }
        let (c, e, d) = (median(&crc), median(&enc), median(&dec));
        println!(
            "| {size} B | {c:.0} | {e:.0} | {d:.0} | {:.0} | {:.0} |",
            size as f64 * 1e3 / e,
            size as f64 * 1e3 / d
        );
    }
    Ok(true)
}
