//! The two ends of a simulated connection: [`SimLink`] (a [`Link`]) and its shared state.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use blerpc::blerpc_proto::connection::SetupPipelining;
use blerpc::link::{Link, LinkError, LinkRx, LinkTx};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::driver::drive;
use crate::params::{LinkParams, ParamError};
use crate::rng::SplitMix64;
use crate::schedule::Schedule;

/// Direction index: central → peripheral.
pub(crate) const C2P: usize = 0;
/// Direction index: peripheral → central.
pub(crate) const P2C: usize = 1;

/// A container in a controller's buffer.
#[derive(Debug)]
pub(crate) struct AirPdu {
    pub(crate) data: Vec<u8>,
    /// When it reaches the controller (after the central host's delay).
    pub(crate) ready_at: Instant,
    /// Link-layer packets it takes, and how many got through.
    pub(crate) frags: usize,
    pub(crate) sent: usize,
}

#[derive(Debug, Default)]
pub(crate) struct Dir {
    /// Containers handed to the controller, waiting for packets.
    pub(crate) air: VecDeque<AirPdu>,
    /// Containers that arrived at the receiving end, waiting for `recv`.
    pub(crate) delivered: VecDeque<Vec<u8>>,
    pub(crate) tx_closed: bool,
    pub(crate) rx_gone: bool,
    /// The latest `ready_at` handed out, so delayed writes stay in order.
    pub(crate) last_ready: Option<Instant>,
    /// The host delay drawn for writes made at one instant: `(when, ready_at)`. Writes at the
    /// same virtual instant share one draw, so the random sequence depends on when the runtime
    /// writes, never on how many times it calls `flush` at that instant.
    pub(crate) burst: Option<(Instant, Instant)>,
}

impl Dir {
    pub(crate) fn done(&self) -> bool {
        (self.tx_closed || self.rx_gone) && self.air.is_empty()
    }
}

/// Counters of one connection, from [`Monitor::stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Connection events that carried at least one packet pair.
    pub events: u64,
    /// Link-layer packets with data that got through, central → peripheral and back.
    pub packets: [u64; 2],
    /// Containers delivered, central → peripheral and back.
    pub containers: [u64; 2],
    /// Packets lost on air (and retransmitted later).
    pub lost_packets: u64,
    /// Writes the central's host dropped.
    pub dropped_writes: u64,
    /// Why the connection was lost, if it was.
    pub disconnected: Option<String>,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) dirs: [Dir; 2],
    /// Per direction: containers whose last packet is on air, delivered in order.
    pub(crate) in_flight: [VecDeque<Vec<u8>>; 2],
    pub(crate) rng: SplitMix64,
    pub(crate) stats: LinkStats,
    pub(crate) schedule: Schedule,
    /// The fault probabilities in force (from the parameters, changed by
    /// [`Monitor::set_faults`]).
    pub(crate) faults: Faults,
}

/// Fault probabilities that can change while the link runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Faults {
    pub(crate) loss: f64,
    pub(crate) write_drop: f64,
}

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) params: LinkParams,
    pub(crate) origin: Instant,
    shared: Mutex<Shared>,
    /// Per direction: a container was delivered, the sender closed, or the link was lost.
    pub(crate) readable: [Notify; 2],
    /// Per direction: the controller buffer has room again (or the receiver is gone).
    pub(crate) space: [Notify; 2],
    /// Something was flushed or closed.
    pub(crate) driver: Notify,
}

impl State {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends the connection: both ends see `reason` on their next operation.
    pub(crate) fn disconnect(&self, reason: &str) {
        {
            let mut s = self.lock();
            if s.stats.disconnected.is_some() {
                return;
            }
            s.stats.disconnected = Some(reason.to_string());
            for d in &mut s.dirs {
                d.air.clear();
            }
            for f in &mut s.in_flight {
                f.clear();
            }
        }
        self.wake_all();
    }

    /// Hands the next in-flight container of direction `d` to its receiver.
    pub(crate) fn deliver(&self, d: usize) {
        {
            let mut s = self.lock();
            if let Some(pdu) = s.in_flight[d].pop_front() {
                s.stats.containers[d] += 1;
                if !s.dirs[d].rx_gone {
                    s.dirs[d].delivered.push_back(pdu);
                }
            }
        }
        self.readable[d].notify_one();
    }

    pub(crate) fn wake_all(&self) {
        for n in self.readable.iter().chain(&self.space) {
            n.notify_waiters();
            n.notify_one();
        }
        self.driver.notify_one();
    }
}

fn lost_error(reason: &str) -> LinkError {
    LinkError::Transport(format!("BLE connection lost: {reason}"))
}

/// Creates a simulated connection and spawns its driver on the current tokio runtime (panics
/// outside one, like `tokio::spawn`). Returns `(central end, peripheral end)`: run the client on
/// the first and the server on the second. Connection events are counted from now.
pub fn pair(params: LinkParams) -> Result<(SimLink, SimLink), ParamError> {
    let (central, peripheral, driver) = pair_with_driver(params)?;
    tokio::spawn(driver);
    Ok((central, peripheral))
}

/// Like [`pair`], but returns the driver future instead of spawning it; the link moves no PDUs
/// until it is polled (spawn it, or join it with the code under test). It ends once both
/// directions are closed and drained, or the connection is lost.
pub fn pair_with_driver(
    params: LinkParams,
) -> Result<
    (
        SimLink,
        SimLink,
        impl std::future::Future<Output = ()> + Send + 'static,
    ),
    ParamError,
> {
    params.validate()?;
    let origin = Instant::now();
    let state = Arc::new(State {
        params,
        origin,
        shared: Mutex::new(Shared {
            dirs: [Dir::default(), Dir::default()],
            in_flight: [VecDeque::new(), VecDeque::new()],
            rng: SplitMix64::new(params.seed),
            stats: LinkStats::default(),
            schedule: Schedule::new(origin, &params),
            faults: Faults {
                loss: params.loss,
                write_drop: params.central_write_drop,
            },
        }),
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
            limit: params.queue_limit,
            max: params.att_mtu - 3,
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
    Ok((central, peripheral, drive(state)))
}

/// A view of a running connection: its counters and the interval in force. Cloneable; it
/// outlives the link ends.
#[derive(Debug, Clone)]
pub struct Monitor {
    state: Arc<State>,
}

impl Monitor {
    /// The counters so far.
    pub fn stats(&self) -> LinkStats {
        self.state.lock().stats.clone()
    }
    /// The connection interval in force now.
    pub fn interval_now(&self) -> Duration {
        self.state.lock().schedule.interval_at(Instant::now())
    }
    /// How long after connect the peripheral's requested interval took (or takes) effect;
    /// `None` if the initial interval was already the requested one.
    pub fn interval_updated_after(&self) -> Option<Duration> {
        let s = self.state.lock();
        s.schedule.switch_at().map(|t| t - self.state.origin)
    }
    /// Time since connect.
    pub fn connected_for(&self) -> Duration {
        Instant::now() - self.state.origin
    }
    /// The link's parameters.
    pub fn params(&self) -> LinkParams {
        self.state.params
    }
    /// Changes the packet loss and the central's write-drop probability from now on (the link
    /// degrades or recovers); the same ranges as [`LinkParams::loss`] and
    /// [`LinkParams::central_write_drop`].
    pub fn set_faults(&self, loss: f64, write_drop: f64) -> Result<(), ParamError> {
        LinkParams {
            loss,
            central_write_drop: write_drop,
            ..self.state.params
        }
        .validate()?;
        self.state.lock().faults = Faults { loss, write_drop };
        self.state.driver.notify_one();
        Ok(())
    }
    /// Drops the connection now (both ends see a transport error).
    pub fn disconnect(&self, reason: &str) {
        self.state.disconnect(reason);
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

impl SimLink {
    /// A [`Monitor`] of this connection (take it before handing the link to a client or
    /// server).
    pub fn monitor(&self) -> Monitor {
        Monitor {
            state: self.tx.state.clone(),
        }
    }
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
    /// As a BLE central link: TIMEOUT and CAPABILITIES together, step 1 after the reply.
    fn setup_pipelining(&self) -> SetupPipelining {
        SetupPipelining::Requests
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
        self.state.lock().dirs[self.dir].tx_closed = true;
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
            let s = self.state.lock();
            if let Some(reason) = &s.stats.disconnected {
                return Err(lost_error(reason));
            }
            let d = &s.dirs[self.dir];
            if d.rx_gone || d.tx_closed {
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
        let p = self.state.params;
        loop {
            {
                let mut guard = self.state.lock();
                let s = &mut *guard;
                if self.queue.is_empty() {
                    return Ok(());
                }
                if let Some(reason) = &s.stats.disconnected {
                    return Err(lost_error(reason));
                }
                if s.dirs[self.dir].rx_gone || s.dirs[self.dir].tx_closed {
                    return Err(LinkError::Closed);
                }
                let now = Instant::now();
                // The central's writes cross its OS stack before reaching the controller.
                let central = self.dir == C2P;
                let ready_at = match s.dirs[C2P].burst {
                    _ if !central => now,
                    Some((at, ready)) if at == now => ready,
                    _ => {
                        let at = now + s.rng.delay(p.central_host_delay);
                        let ready = s.dirs[C2P].last_ready.map_or(at, |l| l.max(at));
                        s.dirs[C2P].burst = Some((now, ready));
                        ready
                    }
                };
                let mut moved = false;
                while s.dirs[self.dir].air.len() < self.limit
                    && let Some(pdu) = self.queue.pop_front()
                {
                    let drop = s.faults.write_drop;
                    if central && s.rng.chance(drop) {
                        s.stats.dropped_writes += 1;
                        continue;
                    }
                    let frags = p.fragments(pdu.len());
                    let dir = &mut s.dirs[self.dir];
                    dir.air.push_back(AirPdu {
                        data: pdu,
                        ready_at,
                        frags,
                        sent: 0,
                    });
                    dir.last_ready = Some(ready_at);
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
                let mut s = self.state.lock();
                let lost = s.stats.disconnected.clone();
                let nothing_in_flight = s.in_flight[self.dir].is_empty();
                let dir = &mut s.dirs[self.dir];
                match dir.delivered.pop_front() {
                    Some(pdu) => Some(Ok(Some(pdu))),
                    None => match lost {
                        Some(reason) => Some(Err(lost_error(&reason))),
                        None if dir.tx_closed && dir.air.is_empty() && nothing_in_flight => {
                            Some(Ok(None))
                        }
                        None => None,
                    },
                }
            };
            match next {
                Some(Ok(Some(pdu))) => {
                    self.current = pdu;
                    return Ok(Some(&self.current));
                }
                Some(Ok(None)) => return Ok(None),
                Some(Err(e)) => return Err(e),
                // Cancel-safe: a PDU leaves `delivered` only when it is returned.
                None => self.state.readable[self.dir].notified().await,
            }
        }
    }
}

impl Drop for SimRx {
    fn drop(&mut self) {
        {
            let mut s = self.state.lock();
            let dir = &mut s.dirs[self.dir];
            dir.rx_gone = true;
            dir.air.clear();
            dir.delivered.clear();
        }
        self.state.space[self.dir].notify_one();
        self.state.driver.notify_one();
    }
}
