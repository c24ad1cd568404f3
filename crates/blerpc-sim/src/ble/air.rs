//! The connection on air, sans-IO: two controller buffers, connection events on a schedule, and
//! packet pairs within each event. Time is a [`Duration`] since the connection was made; the
//! caller says when it is and calls [`Air::run_event`] at the instant [`Air::next_event`]
//! named. The tokio link ([`crate::SimLink`]) and the harness's BLE wire
//! ([`crate::harness::BleWire`]) are two shells around it.

use std::collections::VecDeque;
use std::time::Duration;

use super::params::{LinkParams, ParamError, T_IFS};
use super::rng::SplitMix64;
use super::schedule::Schedule;
use crate::Dir;

/// A container in a controller's buffer.
#[derive(Debug)]
struct AirPdu {
    data: Vec<u8>,
    /// When it reaches the controller (after the central host's delay).
    ready_at: Duration,
    /// Link-layer packets it takes, and how many got through.
    frags: usize,
    sent: usize,
}

/// Counters of one connection.
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

/// A container that reaches the other end, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The instant its last packet ends on air.
    pub at: Duration,
    /// Which way it went.
    pub dir: Dir,
    /// The container.
    pub pdu: Vec<u8>,
}

/// The outcome of one connection event.
#[derive(Debug, Default)]
pub struct Event {
    /// The containers completed in the event, in time order.
    pub deliveries: Vec<Delivery>,
    /// When the event's last packet ends.
    pub end: Duration,
    /// The event ended the connection (its supervision timeout passed with nothing through).
    pub lost: bool,
}

/// What one side puts in the next packet of an event.
#[derive(Debug, Clone, Copy)]
struct Next {
    /// Link-layer payload bytes (0 = empty PDU).
    len: usize,
    /// Whether the packet carries data.
    data: bool,
}

const EMPTY: Next = Next {
    len: 0,
    data: false,
};

/// The connection between two controllers: see the [`ble`](crate::ble) module.
#[derive(Debug)]
pub struct Air {
    params: LinkParams,
    queues: [VecDeque<AirPdu>; 2],
    /// The latest `ready_at` handed out to the central's writes, so delayed writes stay in
    /// order.
    last_ready: Option<Duration>,
    /// The central host's delay drawn for the writes made at one instant: `(when, ready_at)`.
    /// Writes at the same instant share one draw, so the random sequence depends on when a
    /// runtime writes, never on how many times it flushes at that instant.
    burst: Option<(Duration, Duration)>,
    rng: SplitMix64,
    stats: LinkStats,
    schedule: Schedule,
    loss: f64,
    write_drop: f64,
    /// The last event in which a packet got through (supervision timeout).
    last_ok: Duration,
}

impl Air {
    /// A connection made at time zero.
    pub fn new(params: LinkParams) -> Result<Air, ParamError> {
        params.validate()?;
        Ok(Air {
            queues: [VecDeque::new(), VecDeque::new()],
            last_ready: None,
            burst: None,
            rng: SplitMix64::new(params.seed),
            stats: LinkStats::default(),
            schedule: Schedule::new(&params),
            loss: params.loss,
            write_drop: params.central_write_drop,
            last_ok: Duration::ZERO,
            params,
        })
    }

    /// The link's parameters.
    pub fn params(&self) -> &LinkParams {
        &self.params
    }

    /// The counters so far.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// The connection interval in force at `t`.
    pub fn interval_at(&self, t: Duration) -> Duration {
        self.schedule.interval_at(t)
    }

    /// When the peripheral's requested interval takes effect, if it differs from the initial
    /// one.
    pub fn interval_switch(&self) -> Option<Duration> {
        self.schedule.switch_at()
    }

    /// Changes the loss and write-drop probabilities from now on (the same ranges as
    /// [`LinkParams::loss`] and [`LinkParams::central_write_drop`]).
    pub fn set_faults(&mut self, loss: f64, write_drop: f64) -> Result<(), ParamError> {
        LinkParams {
            loss,
            central_write_drop: write_drop,
            ..self.params
        }
        .validate()?;
        self.loss = loss;
        self.write_drop = write_drop;
        Ok(())
    }

    /// `true` with a lossy link: every event runs, empty or not, so the supervision timeout
    /// also ends a link that dies while idle.
    pub fn is_lossy(&self) -> bool {
        self.loss > 0.0
    }

    /// Why the connection was lost, once it was.
    pub fn disconnected(&self) -> Option<&str> {
        self.stats.disconnected.as_deref()
    }

    /// Ends the connection now; what is on air is gone.
    pub fn disconnect(&mut self, reason: &str) {
        if self.stats.disconnected.is_none() {
            self.stats.disconnected = Some(reason.to_string());
            for q in &mut self.queues {
                q.clear();
            }
        }
    }

    /// `true` when the controller of `dir` can take another container.
    pub fn has_room(&self, dir: Dir) -> bool {
        self.queues[dir.index()].len() < self.params.queue_limit
    }

    /// `true` when neither controller holds a container.
    pub fn is_idle(&self) -> bool {
        self.queues.iter().all(VecDeque::is_empty)
    }

    /// `true` when the controller of `dir` holds a container.
    pub fn holds(&self, dir: Dir) -> bool {
        !self.queues[dir.index()].is_empty()
    }

    /// Drops what the controller of `dir` holds (its receiver is gone).
    pub fn clear(&mut self, dir: Dir) {
        self.queues[dir.index()].clear();
    }

    /// Hands a container from the host of the sending side to its controller at `now` (check
    /// [`Air::has_room`] first). The central's writes cross its OS stack first
    /// ([`LinkParams::central_host_delay`]) and may be dropped there
    /// ([`LinkParams::central_write_drop`]): `false` then.
    pub fn submit(&mut self, dir: Dir, now: Duration, pdu: Vec<u8>) -> bool {
        let ready_at = match (dir, self.burst) {
            (Dir::P2C, _) => now,
            (Dir::C2P, Some((at, ready))) if at == now => ready,
            (Dir::C2P, _) => {
                let at = now + self.rng.delay(self.params.central_host_delay);
                let ready = self.last_ready.map_or(at, |l| l.max(at));
                self.burst = Some((now, ready));
                ready
            }
        };
        if dir == Dir::C2P && self.rng.chance(self.write_drop) {
            self.stats.dropped_writes += 1;
            return false;
        }
        if dir == Dir::C2P {
            self.last_ready = Some(ready_at);
        }
        let frags = self.params.fragments(pdu.len());
        self.queues[dir.index()].push_back(AirPdu {
            data: pdu,
            ready_at,
            frags,
            sent: 0,
        });
        true
    }

    /// The earliest instant a queued container reaches its controller.
    pub fn earliest_ready(&self) -> Option<Duration> {
        self.queues
            .iter()
            .filter_map(|q| q.front().map(|a| a.ready_at))
            .min()
    }

    /// The start of the next connection event worth running at or after `now`: on a lossless
    /// link the first one after a container is ready (events with nothing to send change
    /// nothing and are skipped); on a lossy one the next one, whatever is queued. `None` when
    /// nothing is queued on a lossless link, or the connection is lost.
    pub fn next_event(&mut self, now: Duration) -> Option<Duration> {
        if self.stats.disconnected.is_some() {
            return None;
        }
        let from = match self.earliest_ready() {
            Some(ready) => now.max(ready),
            None if self.is_lossy() => now,
            None => {
                // The skipped idle events all got through.
                self.last_ok = self.last_ok.max(now);
                return None;
            }
        };
        Some(self.schedule.next_event(from))
    }

    /// Runs the connection event starting at `start` (the instant [`Air::next_event`] gave):
    /// which packets go, which are lost, which containers complete and when. Completed
    /// containers leave their controller now; each arrives at the instant its last packet ends.
    pub fn run_event(&mut self, start: Duration) -> Event {
        let p = self.params;
        let ci = self.schedule.interval_at(start);
        let budget = p.event_budget.min(ci);
        let max_pairs = p.max_pdus_per_event.unwrap_or(usize::MAX);
        // Only what the controllers hold when the event starts goes out in it.
        let mut left = [0usize; 2];
        for (d, n) in left.iter_mut().enumerate() {
            *n = self.queues[d]
                .iter()
                .take_while(|a| a.ready_at <= start)
                .count();
        }
        let mut t = Duration::ZERO;
        let mut pairs = 0;
        let mut writes_started = 0;
        let mut any_ok = false;
        let packets_before: u64 = self.stats.packets.iter().sum();
        let mut deliveries = Vec::new();
        let c2p = Dir::C2P.index();
        let p2c = Dir::P2C.index();
        loop {
            let next = |d: usize, queues: &[VecDeque<AirPdu>; 2], writes_started: usize| {
                if left[d] == 0 {
                    return EMPTY;
                }
                let Some(head) = queues[d].front() else {
                    return EMPTY;
                };
                if d == c2p
                    && head.sent == 0
                    && p.central_writes_per_event
                        .is_some_and(|cap| writes_started >= cap)
                {
                    return EMPTY;
                }
                Next {
                    len: p.fragment_len(head.data.len(), head.sent),
                    data: true,
                }
            };
            let c = next(c2p, &self.queues, writes_started);
            let q = next(p2c, &self.queues, writes_started);
            // Both MD bits clear, or the cap reached: the event ends (after at least one pair
            // of empty packets, which keeps the connection alive).
            if (!c.data && !q.data && pairs > 0) || pairs >= max_pairs {
                break;
            }
            let dur = p.pair_time(c.len, q.len);
            if pairs > 0 && t + dur > budget {
                break;
            }
            let c_end = t + p.pdu_time(c.len);
            let p_end = c_end + T_IFS + p.pdu_time(q.len);
            // The peripheral answers only a packet it received.
            let c_lost = self.rng.chance(self.loss);
            let q_lost = !c_lost && self.rng.chance(self.loss);
            if c_lost {
                self.stats.lost_packets += 1;
            } else {
                any_ok = true;
                if c.data {
                    if self.queues[c2p].front().is_some_and(|a| a.sent == 0) {
                        writes_started += 1;
                    }
                    self.stats.packets[c2p] += 1;
                    if let Some(pdu) = self.advance(c2p) {
                        left[c2p] -= 1;
                        deliveries.push(Delivery {
                            at: start + c_end,
                            dir: Dir::C2P,
                            pdu,
                        });
                    }
                }
                if q_lost {
                    self.stats.lost_packets += 1;
                } else if q.data {
                    self.stats.packets[p2c] += 1;
                    if let Some(pdu) = self.advance(p2c) {
                        left[p2c] -= 1;
                        deliveries.push(Delivery {
                            at: start + p_end,
                            dir: Dir::P2C,
                            pdu,
                        });
                    }
                }
            }
            t += dur;
            pairs += 1;
            // A CRC error closes the event; the packet goes again in a later one.
            if c_lost || q_lost {
                break;
            }
        }
        if !deliveries.is_empty() || self.stats.packets.iter().sum::<u64>() > packets_before {
            self.stats.events += 1;
        }
        for d in &deliveries {
            self.stats.containers[d.dir.index()] += 1;
        }
        let mut lost = false;
        if any_ok {
            self.last_ok = start;
        } else if start.saturating_sub(self.last_ok) >= p.supervision_timeout {
            self.disconnect("supervision timeout");
            lost = true;
        }
        Event {
            deliveries,
            end: start + t,
            lost,
        }
    }

    /// Counts one more packet of the head container of direction `d`; when it was the last one,
    /// the container leaves the controller.
    fn advance(&mut self, d: usize) -> Option<Vec<u8>> {
        let head = self.queues[d].front_mut()?;
        head.sent += 1;
        if head.sent < head.frags {
            return None;
        }
        self.queues[d].pop_front().map(|a| a.data)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_container_goes_in_the_next_event_and_arrives_as_its_packet_ends() {
        let mut air = Air::new(LinkParams::default()).unwrap();
        assert_eq!(air.next_event(Duration::ZERO), None, "nothing queued");
        assert!(air.submit(Dir::C2P, Duration::ZERO, b"one".to_vec()));
        let start = air.next_event(Duration::ZERO).unwrap();
        assert_eq!(start, 15 * MS);
        let event = air.run_event(start);
        assert_eq!(event.deliveries.len(), 1);
        let d = &event.deliveries[0];
        assert_eq!((d.dir, d.pdu.as_slice()), (Dir::C2P, &b"one"[..]));
        // 2M PHY: the 3-byte write plus link-layer overhead is on air well under a millisecond.
        assert!(d.at > start && d.at < start + MS, "{:?}", d.at);
        assert!(air.is_idle());
        assert_eq!(air.stats().containers, [1, 0]);
    }

    #[test]
    fn the_controller_buffer_is_bounded() {
        let mut air = Air::new(LinkParams::default()).unwrap();
        let limit = air.params().queue_limit;
        for i in 0..limit {
            assert!(air.has_room(Dir::P2C), "{i}");
            air.submit(Dir::P2C, Duration::ZERO, vec![0; 20]);
        }
        assert!(!air.has_room(Dir::P2C));
        assert!(air.has_room(Dir::C2P));
    }

    #[test]
    fn a_dead_link_ends_at_its_supervision_timeout() {
        let mut air = Air::new(LinkParams {
            loss: 0.999_999,
            ..LinkParams::default()
        })
        .unwrap();
        let mut now = Duration::ZERO;
        let mut lost = false;
        for _ in 0..10_000 {
            let Some(start) = air.next_event(now) else {
                break;
            };
            let event = air.run_event(start);
            now = event.end;
            if event.lost {
                lost = true;
                break;
            }
        }
        assert!(lost);
        assert_eq!(air.disconnected(), Some("supervision timeout"));
        assert!(now >= air.params().supervision_timeout);
        assert_eq!(air.next_event(now), None);
    }
}
