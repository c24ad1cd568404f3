//! The serial link end to end: over a real pseudo-terminal pair (the client opens the tty by path)
//! and over in-memory pipes with injected line noise (garbage between frames, flipped bits inside
//! frames). Randomness is seeded and printed on failure.
#![cfg(feature = "serial")]
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use blerpc::client::CentralError;
use blerpc::client::PinPolicy;
use blerpc::link::serial::{SerialLink, SerialOptions};
use blerpc::link::{Link, LinkRx, LinkTx};
use blerpc::{Client, ClientConfig, Error};
use blerpc_proto::connection::CallError;
use common::*;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};

fn client_config(key: [u8; 32]) -> ClientConfig {
    ClientConfig {
        pinning: PinPolicy::Trust(key),
        ..Default::default()
    }
}

#[cfg(unix)]
#[tokio::test]
async fn a_clean_pseudo_terminal_drops_no_frame() {
    let blerpc::link::pty::Pty {
        master,
        path,
        slave: _slave,
    } = blerpc::link::pty::open().unwrap();
    let server = server(true);
    let key = server.identity_public().unwrap();
    let server_link = SerialLink::new(master, SerialOptions::default());
    let server_stats = server_link.stats();
    tokio::spawn(async move { server.serve_link(server_link).await });

    let link = SerialLink::open(
        &path,
        SerialOptions {
            baud_rate: 921_600,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(link.peer_id(), format!("serial://{path}"));
    assert_eq!(link.att_mtu(), 247);
    let client_stats = link.stats();
    let client = Client::connect(link, client_config(key)).await.unwrap();
    assert_eq!(client.info().peer_id, format!("serial://{path}"));
    every_call_shape(&client).await;
    // A clean line: every frame arrived, none was dropped.
    assert_eq!(client_stats.get().dropped(), 0);
    assert_eq!(server_stats.get().dropped(), 0);
    assert!(client_stats.get().received > 40);
}

#[cfg(unix)]
#[tokio::test]
async fn opening_a_missing_port_is_an_io_error() {
    let err = SerialLink::open("/dev/does-not-exist-blerpc", SerialOptions::default())
        .err()
        .unwrap();
    assert!(matches!(err, blerpc::link::LinkError::Io(_)), "{err:?}");
}

/// A seeded xorshift64* generator: reproducible noise.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What the line does to the bytes crossing it, in one direction.
#[derive(Clone)]
struct Noise {
    seed: u64,
    /// Probability (per mille) of a burst of garbage after each frame.
    garbage_per_mille: u64,
    /// Flip one bit inside the frame with this index (counted from 0 in this direction).
    flip_frame: Arc<AtomicUsize>,
    /// Frames seen so far in this direction.
    frames: Arc<AtomicUsize>,
}

impl Noise {
    fn new(seed: u64) -> Self {
        Noise {
            seed,
            garbage_per_mille: 0,
            flip_frame: Arc::new(AtomicUsize::new(usize::MAX)),
            frames: Arc::new(AtomicUsize::new(0)),
        }
    }
}

/// Copies bytes from `from` to `to`, applying `noise`. The relay knows the framing only as far
/// as a line analyser would: `00` ends a frame.
async fn relay(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    noise: Noise,
) -> usize {
    let mut rng = Rng(noise.seed | 1);
    let mut garbage_bursts = 0;
    let mut in_frame = false;
    let mut pos = 0usize;
    let mut buf = [0u8; 512];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut out = Vec::with_capacity(n * 2);
        for &byte in &buf[..n] {
            if byte != 0 {
                in_frame = true;
                pos += 1;
                let mut b = byte;
                if noise.frames.load(Ordering::SeqCst) == noise.flip_frame.load(Ordering::SeqCst)
                    && pos == 5
                {
                    // Flip a bit, but never into a delimiter.
                    let mask = 1u8 << rng.below(8);
                    b = if b ^ mask == 0 {
                        b ^ (mask << 1 | 1)
                    } else {
                        b ^ mask
                    };
                }
                out.push(b);
                continue;
            }
            out.push(0);
            if !in_frame {
                continue;
            }
            // A frame just ended.
            in_frame = false;
            pos = 0;
            noise.frames.fetch_add(1, Ordering::SeqCst);
            if rng.below(1000) < noise.garbage_per_mille {
                garbage_bursts += 1;
                for _ in 0..1 + rng.below(40) {
                    // Mostly non-zero noise, with the odd 00 in it.
                    out.push(if rng.below(16) == 0 {
                        0
                    } else {
                        rng.next() as u8
                    });
                }
            }
        }
        if to.write_all(&out).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
    garbage_bursts
}

/// Two serial links joined through a noisy relay, one `Noise` per direction.
fn noisy_pair(
    c2p: Noise,
    p2c: Noise,
) -> (
    SerialLink<DuplexStream>,
    SerialLink<DuplexStream>,
    tokio::task::JoinHandle<usize>,
    tokio::task::JoinHandle<usize>,
) {
    let (central_io, relay_c) = tokio::io::duplex(4096);
    let (relay_p, peripheral_io) = tokio::io::duplex(4096);
    let (c_read, c_write) = tokio::io::split(relay_c);
    let (p_read, p_write) = tokio::io::split(relay_p);
    let up = tokio::spawn(relay(c_read, p_write, c2p));
    let down = tokio::spawn(relay(p_read, c_write, p2c));
    let options = SerialOptions::default();
    (
        SerialLink::new(central_io, options.clone()),
        SerialLink::new(peripheral_io, options),
        up,
        down,
    )
}

#[tokio::test]
async fn garbage_between_frames_is_dropped_and_every_call_still_succeeds() {
    for seed in [1u64, 0xB1E_49C, 0xDEAD_BEEF] {
        let mut c2p = Noise::new(seed);
        c2p.garbage_per_mille = 300;
        let mut p2c = Noise::new(seed.rotate_left(17));
        p2c.garbage_per_mille = 300;
        let (central, peripheral, up, down) = noisy_pair(c2p, p2c);
        let central_stats = central.stats();
        let peripheral_stats = peripheral.stats();
        let server = server(true);
        let key = server.identity_public().unwrap();
        tokio::spawn(async move { server.serve_link(peripheral).await });
        let client = Client::connect(central, client_config(key)).await.unwrap();
        every_call_shape(&client).await;
        client.close().await;
        let bursts = up.await.unwrap() + down.await.unwrap();
        let dropped = central_stats.get().dropped() + peripheral_stats.get().dropped();
        assert!(bursts > 10, "seed {seed:#x}: only {bursts} bursts");
        // Each burst is one or more dropped frames (a burst of only 00s drops nothing).
        assert!(dropped > 0, "seed {seed:#x}: nothing dropped");
        assert_eq!(
            central_stats.get().crc_errors
                + peripheral_stats.get().crc_errors
                + central_stats.get().cobs_errors
                + peripheral_stats.get().cobs_errors
                + central_stats.get().oversized
                + peripheral_stats.get().oversized,
            dropped,
            "seed {seed:#x}"
        );
    }
}

#[tokio::test]
async fn a_flipped_bit_drops_that_frame_and_the_next_ones_are_delivered() {
    for seed in 1..=8u64 {
        let c2p = Noise::new(seed);
        c2p.flip_frame.store(3, Ordering::SeqCst);
        let (central, peripheral, _up, _down) = noisy_pair(c2p, Noise::new(0));
        let stats = peripheral.stats();
        let (mut tx, _crx) = central.split();
        let (_ptx, mut rx) = peripheral.split();
        for i in 0..10u8 {
            tx.queue(&[i, 0, 0x40, 20 + i, 1, 2, 3, 4, 5, 6, 7, 8])
                .unwrap();
        }
        tx.flush().await.unwrap();
        let mut got = Vec::new();
        for _ in 0..9 {
            got.push(rx.recv().await.unwrap().unwrap()[0]);
        }
        assert_eq!(got, vec![0, 1, 2, 4, 5, 6, 7, 8, 9], "seed {seed}");
        let c = stats.get();
        assert_eq!((c.received, c.dropped()), (9, 1), "seed {seed}: {c:?}");
    }
}

#[tokio::test]
async fn a_corrupted_container_surfaces_as_a_call_timeout_and_the_connection_recovers() {
    let c2p = Noise::new(7);
    let p2c = Noise::new(11);
    let (up_flip, up_frames) = (c2p.flip_frame.clone(), c2p.frames.clone());
    let (down_flip, down_frames) = (p2c.flip_frame.clone(), p2c.frames.clone());
    let (central, peripheral, _up, _down) = noisy_pair(c2p, p2c);
    let central_stats = central.stats();
    let peripheral_stats = peripheral.stats();
    let server = server(true);
    let key = server.identity_public().unwrap();
    tokio::spawn(async move { server.serve_link(peripheral).await });
    let mut config = client_config(key);
    config.central.call_timeout = Duration::from_millis(300);
    let client = Client::connect(central, config).await.unwrap();

    // A multi-container response loses its third container: the central's reassembly sees a
    // sequence gap, drops the transaction, and the call times out.
    down_flip.store(down_frames.load(Ordering::SeqCst) + 2, Ordering::SeqCst);
    let read = flash_read_req(0, 4096);
    let err = client.call("flash_read", read.clone()).await.unwrap_err();
    assert!(
        matches!(err, Error::Central(CentralError::Call(CallError::Timeout))),
        "{err}"
    );
    assert_eq!(central_stats.get().dropped(), 1);
    assert_eq!(
        client.call("flash_read", read).await.unwrap().len(),
        4096 + 3
    );

    // A single-container request is lost: the peripheral never sees it; the call times out.
    up_flip.store(up_frames.load(Ordering::SeqCst), Ordering::SeqCst);
    let req = echo_req("lost");
    let err = client.call("echo", req.clone()).await.unwrap_err();
    assert!(
        matches!(err, Error::Central(CentralError::Call(CallError::Timeout))),
        "{err}"
    );
    assert_eq!(peripheral_stats.get().dropped(), 1);
    assert_eq!(client.call("echo", req.clone()).await.unwrap(), req);
}
