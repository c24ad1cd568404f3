//! `aead`: bleRPC's E2E cipher, AES-128-GCM with an empty AAD, sealed and opened in place
//! through each crypto provider's [`Aead`], per message size, printed as a table.
//!
//! ```text
//! cargo run --release -p blerpc-bench -- aead [--reps 7] [--sizes 100,1024,16384,65536]
//! ```
//!
//! It answers one question the loopback benchmark raises: how much of a 64 KiB E2E call is the
//! cipher itself. A unary call seals the request on the client and opens it on the server (and
//! the same for the response), one after the other on the call's critical path; the bleRPC
//! framing cannot overlap them, because the tag covers the whole sealed command. Each cell is
//! the median over `--reps` interleaved repetitions of the mean time of a batch of operations.
use std::hint::black_box;
use std::time::Instant;

use anyhow::{Result, anyhow, ensure};
use blerpc_proto::crypto::{Aead, CryptoProvider, NONCE_LEN, SessionKey, TAG_LEN};

use crate::stats::median;

/// AES-128-GCM seal and open per provider and size.
#[derive(clap::Args, Debug)]
pub struct AeadArgs {
    /// Interleaved repetitions.
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// Message sizes in bytes.
    #[arg(long, value_delimiter = ',', default_value = "100,1024,16384,65536")]
    sizes: Vec<usize>,
    /// Bytes processed per batch (the batch's operation count is this divided by the size, at
    /// least 16).
    #[arg(long, default_value_t = 32 << 20)]
    batch_bytes: usize,
}

/// One provider's key, behind the trait.
struct Keyed {
    name: &'static str,
    aead: Box<dyn Aead>,
}

fn keyed<P: CryptoProvider + 'static>(name: &'static str, provider: P) -> Result<Keyed>
where
    P::Aead: 'static,
{
    let aead = provider
        .aead(&SessionKey::from_bytes([0x42; 16]))
        .map_err(|e| anyhow!("{name}: {e:?}"))?;
    Ok(Keyed {
        name,
        aead: Box::new(aead),
    })
}

fn providers() -> Result<Vec<Keyed>> {
    #[allow(unused_mut)]
    let mut all = vec![keyed("RustCrypto", blerpc_proto::crypto::RustCrypto)?];
    #[cfg(feature = "ring")]
    all.push(keyed("ring", blerpc_proto::crypto::Ring)?);
    #[cfg(feature = "aws-lc-rs")]
    all.push(keyed("aws-lc-rs", blerpc_proto::crypto::AwsLc)?);
    Ok(all)
}

/// Mean µs per seal and per open over one batch of `count` operations on `buf`.
fn batch(aead: &dyn Aead, buf: &mut [u8], count: usize) -> Result<(f64, f64)> {
    let mut tags = Vec::with_capacity(count);
    let start = Instant::now();
    for i in 0..count {
        let mut nonce = [0u8; NONCE_LEN];
        nonce[..8].copy_from_slice(&(i as u64).to_le_bytes());
        tags.push(
            aead.seal_in_place(&nonce, buf)
                .map_err(|e| anyhow!("seal: {e:?}"))?,
        );
        black_box(&buf);
    }
    let seal = start.elapsed().as_secs_f64() * 1e6 / count as f64;
    // Open in the reverse order: each open undoes the seal with the same nonce, so the buffer
    // ends where it started and every open authenticates for real.
    let start = Instant::now();
    for (i, tag) in tags.iter().enumerate().rev() {
        let mut nonce = [0u8; NONCE_LEN];
        nonce[..8].copy_from_slice(&(i as u64).to_le_bytes());
        let tag: &[u8; TAG_LEN] = tag;
        aead.open_in_place(&nonce, buf, tag)
            .map_err(|e| anyhow!("open: {e:?}"))?;
        black_box(&buf);
    }
    let open = start.elapsed().as_secs_f64() * 1e6 / count as f64;
    Ok((seal, open))
}

/// Runs `blerpc-bench aead`.
pub fn run(args: &AeadArgs) -> Result<bool> {
    ensure!(args.reps > 0, "--reps must be at least 1");
    ensure!(
        args.sizes.iter().all(|s| (1..=16 << 20).contains(s)),
        "--sizes must be between 1 byte and 16 MiB"
    );
    let providers = providers()?;
    println!(
        "aead: AES-128-GCM, empty AAD, in place; {} sizes × {} providers, {} reps, ~{} MiB per batch",
        args.sizes.len(),
        providers.len(),
        args.reps,
        args.batch_bytes >> 20
    );
    println!();
    println!("| size | provider | seal µs | open µs | seal + open µs | GB/s (seal) |");
    println!("| ---: | --- | ---: | ---: | ---: | ---: |");
    for &size in &args.sizes {
        let count = (args.batch_bytes / size).max(16);
        let mut buf: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let original = buf.clone();
        let mut times = vec![(Vec::new(), Vec::new()); providers.len()];
        for _ in 0..args.reps {
            for (p, (seals, opens)) in providers.iter().zip(times.iter_mut()) {
                let (s, o) = batch(p.aead.as_ref(), &mut buf, count)?;
                seals.push(s);
                opens.push(o);
            }
        }
        ensure!(
            buf == original,
            "seal then open did not give the message back"
        );
        for (p, (seals, opens)) in providers.iter().zip(times.iter_mut()) {
            let (s, o) = (median(seals), median(opens));
            println!(
                "| {size} | {} | {s:.3} | {o:.3} | {:.3} | {:.2} |",
                p.name,
                s + o,
                size as f64 / (s * 1e3)
            );
        }
    }
    Ok(true)
}
