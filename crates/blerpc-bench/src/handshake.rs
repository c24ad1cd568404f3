//! `handshake`: the primitives of one bleRPC key exchange, per crypto provider, printed as a
//! table of ns per operation (the codec benchmark's `kx` row is their sum plus the framing).
//!
//! ```text
//! cargo run --release -p blerpc-bench -- handshake [--reps 7]
//! ```
//!
//! One exchange costs each side an X25519 key pair and agreement, the peripheral an Ed25519
//! signature, the central its verification, both the HKDF and an AES key schedule, and two
//! sealed confirmations. Each cell is the median over `--reps` interleaved repetitions of the
//! mean time of a batch of operations on fixed inputs.

use std::hint::black_box;
use std::time::Instant;

use anyhow::{Result, anyhow, ensure};
use blerpc_proto::crypto::{CryptoProvider, IdentitySeed, SessionKey, X25519Secret};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng as _;

use crate::stats::median;
use crate::table::{Align, Table};

/// The key exchange's primitives per provider.
#[derive(clap::Args, Debug)]
pub struct HandshakeArgs {
    /// Interleaved repetitions.
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// Operations per batch.
    #[arg(long, default_value_t = 2000)]
    batch: usize,
}

/// The operations, in the order a handshake meets them.
const OPS: [&str; 6] = [
    "x25519 public key",
    "x25519 agreement",
    "ed25519 sign",
    "ed25519 verify",
    "hkdf session key",
    "aes key schedule",
];

/// Mean ns per operation of each of [`OPS`] over one batch, through `p`.
fn batch<P: CryptoProvider>(p: &P, count: usize) -> Result<[f64; 6]> {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let secret = X25519Secret::random(&mut rng);
    let peer = p.x25519_public(&X25519Secret::random(&mut rng));
    let mine = p.x25519_public(&secret);
    let identity = p
        .load_identity(&IdentitySeed::random(&mut rng))
        .map_err(|e| anyhow!("identity: {e:?}"))?;
    let public = p.identity_public(&identity);
    let msg = [0x5a_u8; 96];
    let sig = p.ed25519_sign(&identity, &msg);
    let shared = p
        .x25519_agree(&secret, &peer)
        .map_err(|e| anyhow!("agree: {e:?}"))?;
    let key = SessionKey::from_bytes([0x42; 16]);
    let time = |f: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
        let start = Instant::now();
        for _ in 0..count {
            f()?;
        }
        Ok(start.elapsed().as_secs_f64() * 1e9 / count as f64)
    };
    Ok([
        time(&mut || {
            black_box(p.x25519_public(black_box(&secret)));
            Ok(())
        })?,
        time(&mut || {
            black_box(
                p.x25519_agree(&secret, black_box(&peer))
                    .map_err(|e| anyhow!("agree: {e:?}"))?,
            );
            Ok(())
        })?,
        time(&mut || {
            black_box(p.ed25519_sign(&identity, black_box(&msg)));
            Ok(())
        })?,
        time(&mut || {
            p.ed25519_verify(&public, black_box(&msg), &sig)
                .map_err(|e| anyhow!("verify: {e:?}"))
        })?,
        time(&mut || {
            black_box(
                p.derive_session_key(&shared, &mine, black_box(&peer))
                    .map_err(|e| anyhow!("hkdf: {e:?}"))?,
            );
            Ok(())
        })?,
        time(&mut || {
            black_box(
                p.aead(black_box(&key))
                    .map_err(|e| anyhow!("aead: {e:?}"))?,
            );
            Ok(())
        })?,
    ])
}

type Runner = Box<dyn Fn(usize) -> Result<[f64; 6]>>;

fn providers() -> Vec<(&'static str, Runner)> {
    #[allow(unused_mut)]
    let mut all: Vec<(&'static str, Runner)> = vec![(
        "RustCrypto",
        Box::new(|n| batch(&blerpc_proto::crypto::RustCrypto, n)),
    )];
    #[cfg(feature = "ring")]
    all.push(("ring", Box::new(|n| batch(&blerpc_proto::crypto::Ring, n))));
    #[cfg(feature = "aws-lc-rs")]
    all.push((
        "aws-lc-rs",
        Box::new(|n| batch(&blerpc_proto::crypto::AwsLc, n)),
    ));
    #[cfg(all(feature = "ring", feature = "aws-lc-rs"))]
    all.push((
        "host (default)",
        Box::new(|n| batch(&blerpc_proto::crypto::Host, n)),
    ));
    all
}

/// Runs `blerpc-bench handshake`.
pub fn run(args: &HandshakeArgs) -> Result<bool> {
    ensure!(args.reps > 0, "--reps must be at least 1");
    ensure!(args.batch > 0, "--batch must be at least 1");
    let providers = providers();
    println!(
        "handshake: the key exchange's primitives, ns per operation (median of {} interleaved \
         reps × {} operations)",
        args.reps, args.batch
    );
    let mut samples = vec![vec![Vec::new(); OPS.len()]; providers.len()];
    for _ in 0..args.reps {
        for ((_, run), cells) in providers.iter().zip(samples.iter_mut()) {
            for (cell, v) in cells.iter_mut().zip(run(args.batch)?) {
                cell.push(v);
            }
        }
    }
    let mut table = Table::new(std::iter::once("operation").chain(providers.iter().map(|p| p.0)));
    for i in 1..=providers.len() {
        table = table.align(i, Align::Right);
    }
    for (i, op) in OPS.iter().enumerate() {
        table.row(
            std::iter::once(op.to_string()).chain(
                samples
                    .iter_mut()
                    .map(|cells| format!("{:.0}", median(&cells[i]))),
            ),
        );
    }
    println!();
    print!("{}", table.pipe());
    Ok(true)
}
