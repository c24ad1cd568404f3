//! A simulated BLE GATT link that runs on tokio's (virtual) time.
//!
//! [`pair`] returns the central and peripheral ends of one connection as [`SimLink`]s, which
//! implement [`blerpc::link::Link`], so the real `blerpc::Client` and `blerpc::Server` run over
//! them unchanged. A driver task spawned by [`pair`] models the connection:
//!
//! - Connection events happen at `t = k × CI` (CI = [`LinkParams::conn_interval`]), counted from
//!   the moment [`pair`] was called.
//! - Within an event the central and peripheral exchange **packet pairs** (central PDU, T_IFS
//!   150 µs, peripheral PDU, T_IFS) while either side still has data and the event budget
//!   ([`LinkParams::event_budget`], at most one CI) lasts, optionally capped at
//!   [`LinkParams::max_pdus_per_event`] pairs. Each pair carries at most one queued PDU per
//!   direction; a side with nothing to send sends an empty PDU. At least one pair runs per event.
//! - Only PDUs handed to the controller (flushed) before an event starts go out in that event: a
//!   PDU flushed while event `k` runs waits for event `k + 1`. So a peripheral cannot answer in the
//!   event in which the request arrived, and a sequential request/response costs two connection
//!   events (≈ 30 ms at CI 15 ms, ≈ 60 ms at CI 30 ms, as published).
//! - A PDU is delivered to the receiving end at the virtual instant its packet ends on air
//!   (tokio timers round that up to the next millisecond; the schedule itself is computed
//!   exactly, so the rounding never accumulates).
//!
//! Run it under `#[tokio::test(start_paused = true)]` (or a paused runtime): time then advances
//! on its own whenever every task is idle, and a simulated minute takes milliseconds.
//!
//! The model is deterministic: no loss, no jitter. With an ATT MTU above 247 a container would
//! need several link-layer PDUs; this model sends each container as one (longer) packet.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use blerpc::link::{Link, LinkError, LinkRx, LinkTx};
use tokio::sync::Notify;
use tokio::time::{Instant, sleep_until};

/// The inter-frame space between two packets of a connection event: 150 µs.
pub const T_IFS: Duration = Duration::from_micros(150);

/// Bytes the link layer carries per container on top of the bleRPC data: 3 bytes of ATT header
/// and 4 bytes of L2CAP header. A 244-byte container (ATT MTU 247) is a full 251-byte LL PDU.
pub const LL_OVERHEAD: usize = 7;

/// The physical layer of the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phy {
    /// LE 1M: 1 bit/µs, 1-byte preamble.
    Le1M,
    /// LE 2M: 2 bits/µs, 2-byte preamble.
    #[default]
    Le2M,
}

impl Phy {
    /// Time on air of a data PDU with `ll_payload` link-layer payload bytes:
    /// `8 × (preamble + 4 access address + 2 header + L + 3 CRC (+ 4 MIC)) / R` µs, where the
    /// preamble is 1 byte at 1M and 2 at 2M and R is 1 or 2 bits/µs. The 4-byte MIC is added
    /// when `encrypted` (link-layer encryption) and the PDU is not empty. A full 251-byte PDU
    /// takes 2,088 µs at 1M and 1,048 µs at 2M; an empty PDU 80 µs at 1M and 44 µs at 2M.
    pub fn time_on_air(self, ll_payload: usize, encrypted: bool) -> Duration {
        let (preamble, rate) = match self {
            Phy::Le1M => (1u64, 1u64),
            Phy::Le2M => (2, 2),
        };
        let mic = if encrypted && ll_payload > 0 { 4 } else { 0 };
        let bytes = preamble + 4 + 2 + ll_payload as u64 + 3 + mic;
        Duration::from_nanos(8 * bytes * 1000 / rate)
    }
}

/// The parameters of a simulated connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkParams {
    /// The connection interval: one connection event every `conn_interval` (default 15 ms).
    pub conn_interval: Duration,
    /// The negotiated ATT MTU; containers are at most `att_mtu - 3` bytes (default 247).
    pub att_mtu: usize,
    /// The PHY, which sets the time on air of each packet (default LE 2M).
    pub phy: Phy,
    /// How long the central lets one connection event run (default 7.5 ms, capped at the
    /// connection interval). A packet pair starts only if it ends within the budget; this is
    /// what sets how many packets fit in one event on a given platform.
    pub event_budget: Duration,
    /// An optional cap on packet pairs per connection event (at least 1), on top of the budget.
    pub max_pdus_per_event: Option<usize>,
    /// Whether the link layer is encrypted (paired), adding a 4-byte MIC to non-empty PDUs
    /// (default off; bleRPC encrypts end to end).
    pub ll_encryption: bool,
    /// PDUs each end queues before `is_full`, and PDUs each direction's controller buffer holds
    /// before `flush` waits (default 64).
    pub queue_limit: usize,
}

impl Default for LinkParams {
    fn default() -> Self {
        LinkParams {
            conn_interval: Duration::from_millis(15),
            att_mtu: 247,
            phy: Phy::Le2M,
            event_budget: Duration::from_micros(7500),
            max_pdus_per_event: None,
            ll_encryption: false,
            queue_limit: 64,
        }
    }
}

impl LinkParams {
    /// Duration of one packet pair: central PDU, T_IFS, peripheral PDU, T_IFS. `None` is an
    /// empty PDU; `Some(n)` a container of `n` bytes (plus [`LL_OVERHEAD`] at the link layer).
    pub fn pair_time(&self, central: Option<usize>, peripheral: Option<usize>) -> Duration {
        self.pdu_time(central) + T_IFS + self.pdu_time(peripheral) + T_IFS
    }

    fn pdu_time(&self, container: Option<usize>) -> Duration {
        let ll = container.map_or(0, |n| n + LL_OVERHEAD);
        self.phy.time_on_air(ll, self.ll_encryption)
    }
}

/// Direction index: central → peripheral.
const C2P: usize = 0;
/// Direction index: peripheral → central.
const P2C: usize = 1;

#[derive(Debug, Default)]
struct Dir {
    /// PDUs handed to the controller, waiting for a packet.
    air: VecDeque<Vec<u8>>,
    /// PDUs that arrived at the receiving end, waiting for `recv`.
    delivered: VecDeque<Vec<u8>>,
    tx_closed: bool,
    rx_gone: bool,
}

impl Dir {
    fn done(&self) -> bool {
        (self.tx_closed || self.rx_gone) && self.air.is_empty()
    }
}

#[derive(Debug)]
struct State {
    params: LinkParams,
    dirs: Mutex<[Dir; 2]>,
    /// Per direction: a PDU was delivered or the sender closed.
    readable: [Notify; 2],
    /// Per direction: the controller buffer has room again (or the receiver is gone).
    space: [Notify; 2],
    /// Something was flushed or closed.
    driver: Notify,
}

impl State {
    fn lock(&self) -> MutexGuard<'_, [Dir; 2]> {
        self.dirs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves the head PDU of direction `d` from the air to the receiver.
    fn deliver(&self, d: usize) {
        {
            let mut dirs = self.lock();
            let dir = &mut dirs[d];
            if let Some(pdu) = dir.air.pop_front()
                && !dir.rx_gone
            {
                dir.delivered.push_back(pdu);
            }
        }
        self.readable[d].notify_one();
        self.space[d].notify_one();
    }
}

/// Creates a simulated connection and spawns its driver on the current tokio runtime (panics
/// outside one, like `tokio::spawn`). Returns `(central end, peripheral end)`: run the client on
/// the first and the server on the second. Connection events are counted from now.
pub fn pair(params: LinkParams) -> (SimLink, SimLink) {
    let (central, peripheral, driver) = pair_with_driver(params);
    tokio::spawn(driver);
    (central, peripheral)
}

/// Like [`pair`], but returns the driver future instead of spawning it; the link moves no PDUs
/// until it is polled (spawn it, or join it with the code under test). It ends once both
/// directions are closed and drained.
pub fn pair_with_driver(
    params: LinkParams,
) -> (
    SimLink,
    SimLink,
    impl std::future::Future<Output = ()> + Send + 'static,
) {
    let state = Arc::new(State {
        params,
        dirs: Mutex::new([Dir::default(), Dir::default()]),
        readable: [Notify::new(), Notify::new()],
        space: [Notify::new(), Notify::new()],
        driver: Notify::new(),
    });
    let end = |tx_dir: usize, name: &str| SimLink {
        att_mtu: params.att_mtu,
        name: name.into(),
        tx: SimTx {
            state: state.clone(),
            dir: tx_dir,
            queue: VecDeque::new(),
            limit: params.queue_limit.max(1),
            max: params.att_mtu.saturating_sub(3),
        },
        rx: SimRx {
            state: state.clone(),
            dir: 1 - tx_dir,
            current: Vec::new(),
        },
    };
    // Each end reports its peer: the central talks to the peripheral and vice versa.
    let central = end(C2P, "sim://peripheral");
    let peripheral = end(P2C, "sim://central");
    (central, peripheral, drive(state, Instant::now()))
}

/// The connection: runs connection events on tokio time and moves PDUs between the ends.
async fn drive(state: Arc<State>, origin: Instant) {
    let p = state.params;
    let ci = p.conn_interval.max(Duration::from_micros(1));
    let ci_ns = ci.as_nanos();
    let budget = p.event_budget.min(ci);
    let max_pairs = p.max_pdus_per_event.map_or(usize::MAX, |m| m.max(1));
    let mut next_k: u128 = 1;
    loop {
        // Idle until something is flushed (events with nothing to send change nothing).
        loop {
            let (has_data, done) = {
                let dirs = state.lock();
                (
                    dirs.iter().any(|d| !d.air.is_empty()),
                    dirs.iter().all(Dir::done),
                )
            };
            if done {
                return;
            }
            if has_data {
                break;
            }
            state.driver.notified().await;
        }
        let since = Instant::now().saturating_duration_since(origin).as_nanos();
        let k = next_k.max(since.div_ceil(ci_ns));
        next_k = k + 1;
        let start = origin + Duration::from_nanos(u64::try_from(k * ci_ns).unwrap_or(u64::MAX));
        sleep_until(start).await;
        // Only what the controllers hold when the event starts goes out in it.
        let mut left = {
            let dirs = state.lock();
            [dirs[C2P].air.len(), dirs[P2C].air.len()]
        };
        let mut t = Duration::ZERO;
        let mut pairs = 0;
        while left[C2P] + left[P2C] > 0 && pairs < max_pairs {
            let (c_len, p_len) = {
                let dirs = state.lock();
                let head = |d: usize| {
                    if left[d] > 0 {
                        dirs[d].air.front().map(Vec::len)
                    } else {
                        None
                    }
                };
                (head(C2P), head(P2C))
            };
            let dur = p.pair_time(c_len, p_len);
            if pairs > 0 && t + dur > budget {
                break;
            }
            let c_end = t + p.pdu_time(c_len);
            sleep_until(start + c_end).await;
            if left[C2P] > 0 {
                state.deliver(C2P);
                left[C2P] -= 1;
            }
            sleep_until(start + c_end + T_IFS + p.pdu_time(p_len)).await;
            if left[P2C] > 0 {
                state.deliver(P2C);
                left[P2C] -= 1;
            }
            t += dur;
            pairs += 1;
        }
    }
}

/// One end of a simulated BLE connection.
#[derive(Debug)]
pub struct SimLink {
    att_mtu: usize,
    name: String,
    tx: SimTx,
    rx: SimRx,
}

impl Link for SimLink {
    type Tx = SimTx;
    type Rx = SimRx;
    fn att_mtu(&self) -> usize {
        self.att_mtu
    }
    fn peer_id(&self) -> String {
        self.name.clone()
    }
    fn split(self) -> (SimTx, SimRx) {
        (self.tx, self.rx)
    }
}

/// Transmit half of a [`SimLink`]: a host queue in front of the controller's buffer.
#[derive(Debug)]
pub struct SimTx {
    state: Arc<State>,
    dir: usize,
    queue: VecDeque<Vec<u8>>,
    limit: usize,
    max: usize,
}

impl SimTx {
    fn mark_closed(&self) {
        self.state.lock()[self.dir].tx_closed = true;
        self.state.readable[self.dir].notify_one();
        self.state.driver.notify_one();
    }
}

impl LinkTx for SimTx {
    fn queue(&mut self, pdu: &[u8]) -> Result<(), LinkError> {
        if pdu.len() > self.max {
            return Err(LinkError::TooLarge {
                len: pdu.len(),
                max: self.max,
            });
        }
        {
            let dirs = self.state.lock();
            if dirs[self.dir].rx_gone || dirs[self.dir].tx_closed {
                return Err(LinkError::Closed);
            }
        }
        self.queue.push_back(pdu.to_vec());
        Ok(())
    }
    fn is_full(&self) -> bool {
        self.queue.len() >= self.limit
    }
    fn has_pending(&self) -> bool {
        !self.queue.is_empty()
    }
    async fn flush(&mut self) -> Result<(), LinkError> {
        loop {
            {
                let mut dirs = self.state.lock();
                let dir = &mut dirs[self.dir];
                if self.queue.is_empty() {
                    return Ok(());
                }
                if dir.rx_gone || dir.tx_closed {
                    return Err(LinkError::Closed);
                }
                let mut moved = false;
                while dir.air.len() < self.limit
                    && let Some(pdu) = self.queue.pop_front()
                {
                    dir.air.push_back(pdu);
                    moved = true;
                }
                if moved {
                    self.state.driver.notify_one();
                }
                if self.queue.is_empty() {
                    return Ok(());
                }
            }
            // Cancel-safe: nothing is held across the wait, and moved PDUs stay moved.
            self.state.space[self.dir].notified().await;
        }
    }
    async fn close(&mut self) -> Result<(), LinkError> {
        let flushed = self.flush().await;
        self.mark_closed();
        flushed
    }
}

impl Drop for SimTx {
    fn drop(&mut self) {
        self.mark_closed();
    }
}

/// Receive half of a [`SimLink`].
#[derive(Debug)]
pub struct SimRx {
    state: Arc<State>,
    dir: usize,
    current: Vec<u8>,
}

impl LinkRx for SimRx {
    async fn recv(&mut self) -> Result<Option<&[u8]>, LinkError> {
        loop {
            let next = {
                let mut dirs = self.state.lock();
                let dir = &mut dirs[self.dir];
                match dir.delivered.pop_front() {
                    Some(pdu) => Some(Some(pdu)),
                    None if dir.tx_closed && dir.air.is_empty() => Some(None),
                    None => None,
                }
            };
            match next {
                Some(Some(pdu)) => {
                    self.current = pdu;
                    return Ok(Some(&self.current));
                }
                Some(None) => return Ok(None),
                // Cancel-safe: a PDU leaves `delivered` only when it is returned.
                None => self.state.readable[self.dir].notified().await,
            }
        }
    }
}

impl Drop for SimRx {
    fn drop(&mut self) {
        {
            let mut dirs = self.state.lock();
            let dir = &mut dirs[self.dir];
            dir.rx_gone = true;
            dir.air.clear();
            dir.delivered.clear();
        }
        self.state.space[self.dir].notify_one();
        self.state.driver.notify_one();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn time_on_air_matches_the_core_spec() {
        assert_eq!(
            Phy::Le1M.time_on_air(251, false),
            Duration::from_micros(2088)
        );
        assert_eq!(
            Phy::Le2M.time_on_air(251, false),
            Duration::from_micros(1048)
        );
        assert_eq!(Phy::Le1M.time_on_air(0, true), Duration::from_micros(80));
        assert_eq!(Phy::Le2M.time_on_air(0, false), Duration::from_micros(44));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pdu_arrives_in_the_next_event_and_close_is_seen() {
        let (c, p) = pair(LinkParams::default());
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
}
