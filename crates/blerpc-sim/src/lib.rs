//! # blerpc-sim: two peers on virtual time
//!
//! The one place where a bleRPC central and peripheral meet without a real link:
//!
//! ```text
//!  harness::Pair ── the sans-IO Central and Peripheral of blerpc-proto, the demo application,
//!      |            invariants checked on every step, a log; no runtime, no clock
//!      | Wire: Latency (fixed one-way delay) · Scripted (PDUs moved by hand: the fuzz targets)
//!      |       · BleWire (the BLE model below)
//!  ble ── the BLE connection model, sans-IO: parameters, platform profiles, event schedule, Air
//!      |
//!  SimLink (feature `link`) ── the same model on tokio's clock as a blerpc `Link`, so the real
//!                              `blerpc::Client` and `Server` run over it unchanged
//! ```
//!
//! The scenario tests of blerpc-proto, its fuzz targets and the benchmarks' simulated BLE suite
//! all run on these pieces.
//!
//! ## The simulated BLE link
//!
//! [`pair`] (feature `link`) returns the central and peripheral ends of one connection as [`SimLink`]s, which
//! implement [`blerpc::link::Link`], so the real `blerpc::Client` and `blerpc::Server` run over
//! them unchanged. A driver task spawned by [`pair`] models the connection
//! (`../shared/spec/benchmarks.md` §4 has the physics):
//!
//! - **Connection events** happen on a grid counted from the moment [`pair`] was called: at the
//!   central's initial interval ([`LinkParams::initial_interval`]) until the peripheral's
//!   request for [`LinkParams::conn_interval`] (sent [`LinkParams::interval_update_after`] after
//!   connect, 5 s by default) takes effect at the LL update instant 6 events later.
//! - Within an event the central and peripheral exchange **packet pairs** (central PDU, T_IFS
//!   150 µs, peripheral PDU, T_IFS) while either side still has data and the central's
//!   **event budget** ([`LinkParams::event_budget`], at most one interval) lasts, optionally
//!   capped at [`LinkParams::max_pdus_per_event`] pairs. A side with nothing to send sends an
//!   empty PDU. Each packet's **time on air** follows the PHY and its length ([`Phy`]); a
//!   container longer than the **data length** ([`LinkParams::data_length`], 251 with DLE)
//!   takes several packets.
//! - Only containers in the controller when an event starts go out in it, so a peripheral
//!   cannot answer in the event in which the request arrived, and a sequential
//!   request/response costs two events (≈ 30 ms at CI 15 ms, ≈ 60 ms at CI 30 ms, as published).
//! - **Flow control**: each end's host queue holds [`HOST_QUEUE_PDUS`] containers
//!   (`LinkTx::is_full`; as the runtime's BLE links) and each controller buffer
//!   [`LinkParams::queue_limit`] (`flush` waits for room). The
//!   central's OS may get only [`LinkParams::central_writes_per_event`] writes without
//!   response into its controller per event, and may take
//!   [`LinkParams::central_host_delay`] to do so.
//! - **Faults** (all off by default, all drawn from the link's seeded RNG): packets lost on air
//!   ([`LinkParams::loss`]; retransmitted, so delayed, never lost), writes the central's host
//!   drops ([`LinkParams::central_write_drop`]; really lost), the supervision timeout, and a
//!   forced disconnect ([`LinkParams::disconnect_at`], [`Monitor::disconnect`]). A lost
//!   connection is a `LinkError::Transport("BLE connection lost: …")` on both ends.
//! - A container reaches the receiving end at the virtual instant its last packet ends on air
//!   (tokio timers round that up to the next millisecond; the schedule itself is computed
//!   exactly, so the rounding never accumulates).
//!
//! [`profile`] has the published centrals (macOS, iOS, Android, Chrome) and a full-event
//! nRF54L15 central as parameter sets, each derived in its docs.
//!
//! Run it on a paused tokio clock (`#[tokio::test(start_paused = true)]`, or a runtime built
//! with `start_paused(true)`): time then advances on its own whenever every task is idle, and
//! a simulated minute takes milliseconds. The model is deterministic for a seed when the
//! runtime is single-threaded.
//!
//! ```
//! use blerpc_sim::{LinkParams, pair};
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let (central, peripheral) = pair(LinkParams::default()).expect("valid parameters");
//! let monitor = central.monitor();
//! // Client::connect(central, ...) and server.serve_link(peripheral) as on any link.
//! # drop((central, peripheral));
//! assert_eq!(monitor.interval_now(), std::time::Duration::from_millis(15));
//! # }
//! ```

#[cfg(feature = "link")]
mod link;

pub mod ble;
pub mod harness;

pub use ble::params::{self, DelayRange, LL_OVERHEAD, LinkParams, ParamError, Phy, T_IFS};
pub use ble::profile::{self, Profile};
pub use ble::{Air, LinkStats};
#[cfg(feature = "link")]
pub use link::{HOST_QUEUE_PDUS, Monitor, SimLink, SimRx, SimTx, pair, pair_with_driver};

/// Which way a PDU travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Central to peripheral (writes).
    C2P,
    /// Peripheral to central (notifications).
    P2C,
}

impl Dir {
    /// `0` for [`Dir::C2P`], `1` for [`Dir::P2C`].
    pub const fn index(self) -> usize {
        match self {
            Dir::C2P => 0,
            Dir::P2C => 1,
        }
    }
    /// The other way.
    pub const fn reverse(self) -> Dir {
        match self {
            Dir::C2P => Dir::P2C,
            Dir::P2C => Dir::C2P,
        }
    }
}

#[cfg(all(test, feature = "link"))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use blerpc::link::{Link, LinkRx, LinkTx};
    use tokio::time::Instant;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_pdu_arrives_in_the_next_event_and_close_is_seen() {
        let (c, p) = pair(LinkParams::default()).unwrap();
        let (mut ctx, _crx) = c.split();
        let (_ptx, mut prx) = p.split();
        let t0 = Instant::now();
        ctx.queue(b"one").unwrap();
        ctx.flush().await.unwrap();
        assert_eq!(prx.recv().await.unwrap(), Some(&b"one"[..]));
        let took = t0.elapsed();
        // Delivered 60 µs into event 1; tokio timers round up to the next millisecond.
        assert!(
            took > Duration::from_millis(15) && took <= Duration::from_millis(16),
            "{took:?}"
        );
        ctx.close().await.unwrap();
        assert_eq!(prx.recv().await.unwrap(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_connection_is_an_error_on_both_ends() {
        let (c, p) = pair(LinkParams {
            disconnect_at: Some(Duration::from_millis(100)),
            ..LinkParams::default()
        })
        .unwrap();
        let m = c.monitor();
        let (mut ctx, mut crx) = c.split();
        let (_ptx, mut prx) = p.split();
        let err = prx.recv().await.unwrap_err().to_string();
        assert!(err.contains("connection lost"), "{err}");
        assert!(crx.recv().await.is_err());
        assert!(ctx.queue(b"x").is_err());
        assert!(m.stats().disconnected.is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn writes_per_event_cap_the_central() {
        let (c, p) = pair(LinkParams {
            central_writes_per_event: Some(3),
            ..LinkParams::default()
        })
        .unwrap();
        let m = c.monitor();
        let (mut ctx, _crx) = c.split();
        let (_ptx, mut prx) = p.split();
        for i in 0..9u8 {
            ctx.queue(&[i; 40]).unwrap();
        }
        ctx.flush().await.unwrap();
        let t0 = Instant::now();
        for i in 0..9u8 {
            assert_eq!(prx.recv().await.unwrap().unwrap()[0], i);
        }
        // Three events (15, 30, 45 ms) of three writes each; the last ends 1.4 ms into its event.
        let took = t0.elapsed();
        assert!(
            took > Duration::from_millis(45) && took <= Duration::from_millis(47),
            "{took:?}"
        );
        assert_eq!(m.stats().events, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn lost_packets_are_retransmitted_in_order() {
        let (c, p) = pair(LinkParams {
            loss: 0.3,
            seed: 42,
            ..LinkParams::default()
        })
        .unwrap();
        let m = c.monitor();
        let (mut ctx, _crx) = c.split();
        let (_ptx, mut prx) = p.split();
        for i in 0..50u8 {
            ctx.queue(&[i; 100]).unwrap();
            ctx.flush().await.unwrap();
        }
        for i in 0..50u8 {
            assert_eq!(prx.recv().await.unwrap().unwrap(), &[i; 100][..]);
        }
        let s = m.stats();
        assert!(s.lost_packets > 5, "{s:?}");
        assert_eq!(s.containers[0], 50);
    }

    #[tokio::test(start_paused = true)]
    async fn long_containers_take_several_packets() {
        let params = LinkParams {
            att_mtu: 512,
            data_length: 27,
            event_budget: Duration::from_millis(15),
            ..LinkParams::default()
        };
        let (c, p) = pair(params).unwrap();
        let m = c.monitor();
        let (mut ctx, _crx) = c.split();
        let (_ptx, mut prx) = p.split();
        ctx.queue(&[7; 509]).unwrap();
        ctx.flush().await.unwrap();
        assert_eq!(prx.recv().await.unwrap().unwrap().len(), 509);
        assert_eq!(m.stats().packets[0], 20);
        assert!(
            pair(LinkParams {
                att_mtu: 10,
                ..params
            })
            .is_err()
        );
    }
}
