//! What carries PDUs between the two peers of a [`Pair`](super::Pair): a [`Wire`].
//!
//! | wire | delivers |
//! |---|---|
//! | [`Latency`] | every PDU after a fixed one-way delay, in order (the scenario tests) |
//! | [`Scripted`] | nothing by itself: the caller moves, drops, duplicates or corrupts PDUs (the fuzz targets) |
//! | [`BleWire`] | as a BLE connection does: connection events, packet pairs, time on air ([`crate::ble::Air`]) |

use std::collections::VecDeque;
use std::time::Duration;

use blerpc_proto::Instant;

use crate::Dir;
use crate::ble::params::{LinkParams, ParamError};
use crate::ble::{Air, LinkStats};

/// Carries PDUs between the peers on virtual time.
pub trait Wire {
    /// A side hands `pdu` to the link at `now`.
    fn send(&mut self, now: Instant, dir: Dir, pdu: Vec<u8>);
    /// The next instant (at or after `now`) at which [`Wire::poll_arrival`] may return
    /// something (a PDU arriving, or, on BLE, a connection event starting); `None` when nothing
    /// is on its way.
    fn next_wake(&mut self, now: Instant) -> Option<Instant>;
    /// The next PDU that has arrived by `now`, in arrival order.
    fn poll_arrival(&mut self, now: Instant) -> Option<(Dir, Vec<u8>)>;
}

/// Every PDU arrives a fixed delay after it was sent, in order.
#[derive(Debug, Default)]
pub struct Latency {
    /// The one-way delay.
    pub one_way: Duration,
    queues: [VecDeque<(Instant, Vec<u8>)>; 2],
}

impl Latency {
    /// A wire with this one-way delay.
    pub fn new(one_way: Duration) -> Latency {
        Latency {
            one_way,
            queues: Default::default(),
        }
    }

    /// PDUs on their way in `dir`, with their arrival times.
    pub fn in_flight(&self, dir: Dir) -> &VecDeque<(Instant, Vec<u8>)> {
        &self.queues[dir.index()]
    }
}

impl Wire for Latency {
    fn send(&mut self, now: Instant, dir: Dir, pdu: Vec<u8>) {
        self.queues[dir.index()].push_back((now + self.one_way, pdu));
    }
    fn next_wake(&mut self, _now: Instant) -> Option<Instant> {
        self.queues
            .iter()
            .filter_map(|q| q.front().map(|(t, _)| *t))
            .min()
    }
    fn poll_arrival(&mut self, now: Instant) -> Option<(Dir, Vec<u8>)> {
        // Central → peripheral first when both are due, as a BLE event carries the central's
        // packet before the peripheral's answer.
        for dir in [Dir::C2P, Dir::P2C] {
            let q = &mut self.queues[dir.index()];
            if q.front().is_some_and(|(t, _)| *t <= now) {
                return q.pop_front().map(|(_, pdu)| (dir, pdu));
            }
        }
        None
    }
}

/// Nothing arrives by itself: PDUs wait in a queue per direction until the caller takes them
/// ([`Scripted::pop`]) and hands them (or what it made of them) to a side. A queue keeps at most
/// [`Scripted::LIMIT`] PDUs, dropping the oldest, as a real link applies backpressure.
#[derive(Debug, Default)]
pub struct Scripted {
    queues: [VecDeque<Vec<u8>>; 2],
}

impl Scripted {
    /// The most PDUs a direction holds.
    pub const LIMIT: usize = 2_000;

    /// Takes the PDU at the head of `dir`.
    pub fn pop(&mut self, dir: Dir) -> Option<Vec<u8>> {
        self.queues[dir.index()].pop_front()
    }
    /// Puts a PDU back at the head of `dir` (a duplicate).
    pub fn push_front(&mut self, dir: Dir, pdu: Vec<u8>) {
        self.queues[dir.index()].push_front(pdu);
    }
    /// Puts a PDU at the back of `dir` (reordered).
    pub fn push_back(&mut self, dir: Dir, pdu: Vec<u8>) {
        self.queues[dir.index()].push_back(pdu);
    }
    /// PDUs waiting in `dir`.
    pub fn len(&self, dir: Dir) -> usize {
        self.queues[dir.index()].len()
    }
    /// `true` when nothing waits either way.
    pub fn is_empty(&self) -> bool {
        self.queues.iter().all(VecDeque::is_empty)
    }
}

impl Wire for Scripted {
    fn send(&mut self, _now: Instant, dir: Dir, pdu: Vec<u8>) {
        let q = &mut self.queues[dir.index()];
        q.push_back(pdu);
        while q.len() > Self::LIMIT {
            q.pop_front();
        }
    }
    fn next_wake(&mut self, _now: Instant) -> Option<Instant> {
        None
    }
    fn poll_arrival(&mut self, _now: Instant) -> Option<(Dir, Vec<u8>)> {
        None
    }
}

/// The BLE connection model ([`Air`]) as a wire: PDUs wait in a host queue per side, enter the
/// controller while it has room, go out in connection events and arrive when their last packet
/// ends on air. Idle events are not played (a lossy link's idle supervision timeout is the
/// tokio link's business).
#[derive(Debug)]
pub struct BleWire {
    air: Air,
    /// The instant the connection was made (the air's time zero).
    origin: Instant,
    host: [VecDeque<Vec<u8>>; 2],
    /// The start of the next event, once planned.
    event: Option<Duration>,
    arrivals: VecDeque<(Instant, Dir, Vec<u8>)>,
}

impl BleWire {
    /// A BLE connection made at `origin`.
    pub fn new(params: LinkParams, origin: Instant) -> Result<BleWire, ParamError> {
        Ok(BleWire {
            air: Air::new(params)?,
            origin,
            host: Default::default(),
            event: None,
            arrivals: VecDeque::new(),
        })
    }

    /// The connection's counters.
    pub fn stats(&self) -> &LinkStats {
        self.air.stats()
    }

    /// The model itself (interval in force, parameters).
    pub fn air(&self) -> &Air {
        &self.air
    }

    fn offset(&self, t: Instant) -> Duration {
        t.saturating_duration_since(self.origin)
    }

    /// Moves host-queued PDUs into the controllers while they have room.
    fn feed_controllers(&mut self, now: Instant) {
        let at = self.offset(now);
        for dir in [Dir::C2P, Dir::P2C] {
            while self.air.has_room(dir)
                && let Some(pdu) = self.host[dir.index()].pop_front()
            {
                self.air.submit(dir, at, pdu);
            }
        }
    }
}

impl Wire for BleWire {
    fn send(&mut self, now: Instant, dir: Dir, pdu: Vec<u8>) {
        self.host[dir.index()].push_back(pdu);
        self.feed_controllers(now);
    }
    fn next_wake(&mut self, now: Instant) -> Option<Instant> {
        if self.event.is_none() && self.air.earliest_ready().is_some() {
            self.event = self.air.next_event(self.offset(now));
        }
        let event = self.event.map(|e| self.origin + e);
        let arrival = self.arrivals.front().map(|(t, _, _)| *t);
        [event, arrival].into_iter().flatten().min()
    }
    fn poll_arrival(&mut self, now: Instant) -> Option<(Dir, Vec<u8>)> {
        if let Some(start) = self.event
            && self.origin + start <= now
        {
            self.event = None;
            let event = self.air.run_event(start);
            for d in event.deliveries {
                self.arrivals.push_back((self.origin + d.at, d.dir, d.pdu));
            }
            self.feed_controllers(now);
        }
        if self.arrivals.front().is_some_and(|(t, _, _)| *t <= now) {
            return self.arrivals.pop_front().map(|(_, dir, pdu)| (dir, pdu));
        }
        None
    }
}
