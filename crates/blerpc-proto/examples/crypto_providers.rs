//! Compares the crypto providers on the operations bleRPC performs.
//!
//! ```text
//! cargo run --release -p blerpc-proto --example crypto_providers --features ring,aws-lc-rs
//! ```
//!
//! Prints the median ns per operation over 31 batches for each compiled-in provider. The
//! RustCrypto column is the baseline measured in the same run. AES-GCM rows are one seal plus one
//! open of a message of that size (8,229 bytes is the largest encrypted message the reference
//! firmware accepts; 35 bytes is a small echo request). "handshake" is both roles end to end:
//! four steps, two X25519 key generations and agreements, HKDF twice, one signature and one
//! verification, two confirmations.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(
    clippy::disallowed_methods,
    reason = "a benchmark outside the sans-IO core: it reads the wall clock"
)]

use std::hint::black_box;
use std::time::Instant;

use blerpc_proto::crypto::{
    Aead, CryptoProvider, IdentitySeed, RustCrypto, SessionKey, X25519Secret,
};
use blerpc_proto::handshake::{CentralHandshake, PeripheralHandshake};

const BATCHES: usize = 31;

/// Median ns per call of `f`, calibrating the batch size to about 2 ms.
fn measure(mut f: impl FnMut()) -> f64 {
    let mut iters = 1u32;
    loop {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        if t.elapsed().as_micros() > 2_000 || iters > 1 << 24 {
            break;
        }
        iters *= 2;
    }
    let mut samples: Vec<f64> = (0..BATCHES)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_nanos() as f64 / f64::from(iters)
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[BATCHES / 2]
}

fn aead_roundtrip<P: CryptoProvider>(p: &P, len: usize) -> f64 {
    let aead = p.aead(&SessionKey::from_bytes([7; 16])).unwrap();
    let mut buf = vec![0x5a; len];
    let nonce = [1u8; 12];
    measure(|| {
        let tag = aead.seal_in_place(&nonce, black_box(&mut buf)).unwrap();
        aead.open_in_place(&nonce, black_box(&mut buf), &tag)
            .unwrap();
    })
}

fn handshake<P: CryptoProvider>(p: &P, identity: &P::Identity) {
    let (c, s1) = CentralHandshake::start(p.clone(), X25519Secret::from_bytes([1; 32]));
    let (pp, s2) = PeripheralHandshake::new(p.clone(), identity.clone())
        .receive_step1(&s1, X25519Secret::from_bytes([2; 32]))
        .unwrap();
    let (c, s3) = c.receive_step2(&s2).unwrap().accept([3; 12]).unwrap();
    let (_, s4) = pp.receive_step3(&s3, [4; 12]).unwrap();
    black_box(c.receive_step4(&s4).unwrap());
}

fn column<P: CryptoProvider>(p: &P) -> Vec<f64> {
    let id = p.load_identity(&IdentitySeed::from_bytes([9; 32])).unwrap();
    let msg = [0x42u8; 64];
    let sig = p.ed25519_sign(&id, &msg);
    let public = p.identity_public(&id);
    let secret = X25519Secret::from_bytes([5; 32]);
    let peer = p.x25519_public(&X25519Secret::from_bytes([6; 32]));
    vec![
        aead_roundtrip(p, 8229),
        aead_roundtrip(p, 35),
        measure(|| {
            black_box(p.ed25519_sign(&id, black_box(&msg)));
        }),
        measure(|| p.ed25519_verify(&public, black_box(&msg), &sig).unwrap()),
        measure(|| {
            black_box(p.x25519_agree(&secret, black_box(&peer)).unwrap());
        }),
        measure(|| handshake(p, &id)),
    ]
}

fn main() {
    let rows = [
        "aes128gcm seal+open 8229 B",
        "aes128gcm seal+open 35 B",
        "ed25519 sign",
        "ed25519 verify",
        "x25519 agree",
        "handshake central+peripheral",
    ];
    let columns: Vec<(&str, Vec<f64>)> = [
        ("RustCrypto", column(&RustCrypto)),
        #[cfg(feature = "ring")]
        ("Ring", column(&blerpc_proto::crypto::Ring)),
        #[cfg(feature = "aws-lc-rs")]
        ("AwsLc", column(&blerpc_proto::crypto::AwsLc)),
    ]
    .into_iter()
    .collect();

    print!("{:<30}", "operation (median ns/op)");
    for (name, _) in &columns {
        print!("{name:>12}");
    }
    println!();
    for (i, row) in rows.iter().enumerate() {
        print!("{row:<30}");
        for (_, values) in &columns {
            print!("{:>12.0}", values[i]);
        }
        println!();
    }
    println!(
        "DefaultProvider = {}",
        std::any::type_name::<blerpc_proto::crypto::DefaultProvider>()
    );
}
