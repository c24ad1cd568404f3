//! The simulated link on tokio's clock: [`SimLink`] (a [`Link`]) around the sans-IO
//! [`Air`](crate::ble::Air), a host queue in front of each controller, and the driver task that
//! plays connection events.

mod driver;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use blerpc::blerpc_proto::connection::SetupPipelining;
use blerpc::link::{Link, LinkError, LinkFields, LinkProbe, LinkRx, LinkTx, SendQueue};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::Dir;
use crate::ble::params::{LinkParams, ParamError, Phy};
use crate::ble::{Air, LinkStats};
use driver::drive;

/// One direction's ends.
#[derive(Debug, Default)]
pub(crate) struct Ends {
    /// Containers that arrived at the receiving end, waiting for `recv`.
    delivered: VecDeque<Vec<u8>>,
    /// Containers whose last packet is on air: the driver delivers them at its end.
    in_flight: usize,
    tx_closed: bool,
    rx_gone: bool,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) air: Air,
    ends: [Ends; 2],
}

impl Shared {
    /// Both directions closed (or their receivers gone) and nothing left on air.
    pub(crate) fn done(&self) -> bool {
        self.ends.iter().all(|e| e.tx_closed || e.rx_gone) && self.air.is_idle()
    }
}

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) params: LinkParams,
    /// The instant the connection was made: the air's time zero.
    pub(crate) origin: Instant,
    shared: Mutex<Shared>,
    /// Per direction: a container was delivered, the sender closed, or the link was lost.
    readable: [Notify; 2],
    /// Per direction: the controller buffer has room again (or the receiver is gone).
    space: [Notify; 2],
    /// Something was flushed or closed.
    pub(crate) driver: Notify,
}

impl State {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `t` as the air's time.
    pub(crate) fn offset(&self, t: Instant) -> Duration {
        t.saturating_duration_since(self.origin)
    }

    /// Ends the connection: both ends see `reason` on their next operation.
    pub(crate) fn disconnect(&self, reason: &str) {
        self.lock().air.disconnect(reason);
        self.wake_all();
    }

    /// Runs the event starting at `start`; its containers are in flight until delivered.
    pub(crate) fn run_event(&self, start: Duration) -> crate::ble::Event {
        let mut s = self.lock();
        let event = s.air.run_event(start);
        for d in &event.deliveries {
            s.ends[d.dir.index()].in_flight += 1;
        }
        event
    }

    /// Hands a container that arrived to the receiver of `dir`.
    pub(crate) fn deliver(&self, dir: Dir, pdu: Vec<u8>) {
        {
            let mut s = self.lock();
            let ends = &mut s.ends[dir.index()];
            ends.in_flight = ends.in_flight.saturating_sub(1);
            if !ends.rx_gone {
                ends.delivered.push_back(pdu);
            }
        }
        self.readable[dir.index()].notify_one();
    }

    /// An event ran: the controllers may have room again.
    pub(crate) fn space_freed(&self) {
        for n in &self.space {
            n.notify_one();
        }
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

/// PDUs each end's host queue holds beyond its controller's buffer before `is_full`: what the
/// runtime's BLE links keep of their own (`blerpc::link::ble::DEFAULT_QUEUE_PDUS`). Few, so that
/// the rest waits in the core's outbox, where a CANCEL still reaches it.
pub const HOST_QUEUE_PDUS: usize = 2;

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
    let air = Air::new(params)?;
    let origin = Instant::now();
    let state = Arc::new(State {
        params,
        origin,
        shared: Mutex::new(Shared {
            air,
            ends: [Ends::default(), Ends::default()],
        }),
        readable: [Notify::new(), Notify::new()],
        space: [Notify::new(), Notify::new()],
        driver: Notify::new(),
    });
    let end = |tx_dir: Dir, name: &str| SimLink {
        att_mtu: params.att_mtu,
        name: name.into(),
        tx: SimTx {
            state: state.clone(),
            dir: tx_dir,
            queue: SendQueue::for_att_mtu(HOST_QUEUE_PDUS, params.att_mtu),
        },
        rx: SimRx {
            state: state.clone(),
            dir: tx_dir.reverse(),
            current: Vec::new(),
        },
    };
    // Each end reports its peer: the central talks to the peripheral and vice versa.
    let central = end(Dir::C2P, "sim://peripheral");
    let peripheral = end(Dir::P2C, "sim://central");
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
        self.state.lock().air.stats().clone()
    }
    /// The connection interval in force now.
    pub fn interval_now(&self) -> Duration {
        let now = self.state.offset(Instant::now());
        self.state.lock().air.interval_at(now)
    }
    /// How long after connect the peripheral's requested interval took (or takes) effect;
    /// `None` if the initial interval was already the requested one.
    pub fn interval_updated_after(&self) -> Option<Duration> {
        self.state.lock().air.interval_switch()
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
        self.state.lock().air.set_faults(loss, write_drop)?;
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
    /// The interval in force now and the link's parameters; no RSSI (no radio).
    fn link_report(&self) -> Option<LinkProbe> {
        let monitor = self.monitor();
        Some(std::sync::Arc::new(move || {
            let params = monitor.params();
            let us = |d: Duration| u32::try_from(d.as_micros()).unwrap_or(u32::MAX);
            LinkFields {
                conn_interval_us: Some(us(monitor.interval_now())),
                peripheral_latency: Some(0),
                supervision_timeout_ms: Some(us(params.supervision_timeout) / 1000),
                phy: Some(match params.phy {
                    Phy::Le1M => 1,
                    Phy::Le2M => 2,
                }),
                data_length: Some(u32::try_from(params.data_length).unwrap_or(u32::MAX)),
                rssi_dbm: None,
            }
        }))
    }
    fn split(self) -> (SimTx, SimRx) {
        (self.tx, self.rx)
    }
}

/// Transmit half of a [`SimLink`]: a host queue in front of the controller's buffer.
#[derive(Debug)]
pub struct SimTx {
    state: Arc<State>,
    dir: Dir,
    queue: SendQueue,
}

impl SimTx {
    fn mark_closed(&self) {
        self.state.lock().ends[self.dir.index()].tx_closed = true;
        self.state.readable[self.dir.index()].notify_one();
        self.state.driver.notify_one();
    }
}

impl LinkTx for SimTx {
    fn queue(&mut self, pdu: &[u8]) -> Result<(), LinkError> {
        {
            let s = self.state.lock();
            if let Some(reason) = s.air.disconnected() {
                return Err(lost_error(reason));
            }
            let ends = &s.ends[self.dir.index()];
            if ends.rx_gone || ends.tx_closed {
                return Err(LinkError::Closed);
            }
        }
        self.queue.push(pdu)
    }
    fn is_full(&self) -> bool {
        self.queue.is_full()
    }
    fn has_pending(&self) -> bool {
        !self.queue.is_empty()
    }
    async fn flush(&mut self) -> Result<(), LinkError> {
        loop {
            {
                let mut s = self.state.lock();
                if self.queue.is_empty() {
                    return Ok(());
                }
                if let Some(reason) = s.air.disconnected() {
                    return Err(lost_error(reason));
                }
                let ends = &s.ends[self.dir.index()];
                if ends.rx_gone || ends.tx_closed {
                    return Err(LinkError::Closed);
                }
                let now = self.state.offset(Instant::now());
                let mut moved = false;
                while s.air.has_room(self.dir)
                    && let Some(pdu) = self.queue.pop()
                {
                    s.air.submit(self.dir, now, pdu);
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
            self.state.space[self.dir.index()].notified().await;
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
    dir: Dir,
    current: Vec<u8>,
}

impl LinkRx for SimRx {
    async fn recv(&mut self) -> Result<Option<&[u8]>, LinkError> {
        let d = self.dir.index();
        loop {
            let next = {
                let mut s = self.state.lock();
                let lost = s.air.disconnected().map(str::to_string);
                let on_air = s.air.holds(self.dir);
                let ends = &mut s.ends[d];
                let drained = !on_air && ends.in_flight == 0;
                match ends.delivered.pop_front() {
                    Some(pdu) => Some(Ok(Some(pdu))),
                    None => match lost {
                        Some(reason) => Some(Err(lost_error(&reason))),
                        None if ends.tx_closed && drained => Some(Ok(None)),
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
                None => self.state.readable[d].notified().await,
            }
        }
    }
}

impl Drop for SimRx {
    fn drop(&mut self) {
        {
            let mut s = self.state.lock();
            s.air.clear(self.dir);
            let ends = &mut s.ends[self.dir.index()];
            ends.rx_gone = true;
            ends.delivered.clear();
        }
        self.state.space[self.dir.index()].notify_one();
        self.state.driver.notify_one();
    }
}
