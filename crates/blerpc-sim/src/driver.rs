//! The connection itself: connection events on tokio time, packet pairs within them.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use crate::link::{C2P, P2C, State};
use crate::params::T_IFS;

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

/// Runs the connection until both directions are closed and drained, or it is lost.
pub(crate) async fn drive(state: Arc<State>) {
    let p = state.params;
    let origin = state.origin;
    let max_pairs = p.max_pdus_per_event.unwrap_or(usize::MAX);
    let forced = p.disconnect_at.map(|d| origin + d);
    // The last event in which a packet got through (supervision timeout).
    let mut last_ok = origin;
    loop {
        // Idle until something is queued: on a lossless link, events with nothing to send change
        // nothing and are skipped. On a lossy one every event runs (empty packets), so the
        // supervision timeout also ends a link that dies while idle.
        let earliest = loop {
            let (earliest, done, lossy) = {
                let s = state.lock();
                let earliest = s
                    .dirs
                    .iter()
                    .filter_map(|d| d.air.front().map(|a| a.ready_at))
                    .min();
                let done = s.stats.disconnected.is_some() || s.dirs.iter().all(|d| d.done());
                (earliest, done, s.faults.loss > 0.0)
            };
            if done {
                return;
            }
            if let Some(e) = earliest {
                break e;
            }
            if lossy {
                break Instant::now();
            }
            match forced {
                Some(at) => tokio::select! {
                    () = state.driver.notified() => {}
                    () = sleep_until(at) => {
                        state.disconnect("disconnected (simulated)");
                        return;
                    }
                },
                None => state.driver.notified().await,
            }
            // The skipped idle events all got through.
            last_ok = last_ok.max(Instant::now());
        };
        let now = Instant::now();
        let (start, ci) = {
            let mut s = state.lock();
            let start = s.schedule.next_event(now.max(earliest));
            (start, s.schedule.interval_at(start))
        };
        if let Some(at) = forced
            && start >= at
        {
            sleep_until(at).await;
            state.disconnect("disconnected (simulated)");
            return;
        }
        sleep_until(start).await;
        let event = run_event(&state, start, ci, max_pairs);
        for (at, d) in event.deliveries {
            sleep_until(at).await;
            state.deliver(d);
        }
        sleep_until(event.end).await;
        if event.any_ok {
            last_ok = start;
        } else if start.saturating_duration_since(last_ok) >= p.supervision_timeout {
            state.disconnect("supervision timeout");
            return;
        }
    }
}

/// The outcome of one connection event.
#[derive(Debug)]
struct Event {
    /// When each completed container arrives, and in which direction (in time order).
    deliveries: Vec<(Instant, usize)>,
    /// When the event's last packet ends.
    end: Instant,
    /// Whether any packet got through.
    any_ok: bool,
}

/// Plans one connection event starting at `start`: which packets go, which are lost, which
/// containers complete. Completed containers leave the controller buffer now and reach the
/// receiver at the instant their last packet ends on air (the driver sleeps until then).
fn run_event(state: &Arc<State>, start: Instant, ci: Duration, max_pairs: usize) -> Event {
    let p = state.params;
    let budget = p.event_budget.min(ci);
    let mut s = state.lock();
    // Only what the controllers hold when the event starts goes out in it.
    let mut left = [0usize; 2];
    for (d, n) in left.iter_mut().enumerate() {
        *n = s.dirs[d]
            .air
            .iter()
            .take_while(|a| a.ready_at <= start)
            .count();
    }
    let mut t = Duration::ZERO;
    let mut pairs = 0;
    let mut writes_started = 0;
    let mut any_ok = false;
    let packets_before: u64 = s.stats.packets.iter().sum();
    let mut deliveries: Vec<(Duration, usize)> = Vec::new();
    loop {
        let next = |d: usize, s: &crate::link::Shared, writes_started: usize| -> Next {
            if left[d] == 0 {
                return EMPTY;
            }
            let Some(head) = s.dirs[d].air.front() else {
                return EMPTY;
            };
            if d == C2P
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
        let c = next(C2P, &s, writes_started);
        let q = next(P2C, &s, writes_started);
        // Both MD bits clear, or the cap reached: the event ends (after at least one pair of
        // empty packets, which keeps the connection alive).
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
        let loss = s.faults.loss;
        let c_lost = s.rng.chance(loss);
        let q_lost = !c_lost && s.rng.chance(loss);
        if c_lost {
            s.stats.lost_packets += 1;
        } else {
            any_ok = true;
            if c.data {
                let head_sent_before = s.dirs[C2P].air.front().map_or(0, |a| a.sent);
                if head_sent_before == 0 {
                    writes_started += 1;
                }
                s.stats.packets[C2P] += 1;
                if advance(&mut s, C2P) {
                    left[C2P] -= 1;
                    deliveries.push((c_end, C2P));
                }
            }
            if q_lost {
                s.stats.lost_packets += 1;
            } else if q.data {
                s.stats.packets[P2C] += 1;
                if advance(&mut s, P2C) {
                    left[P2C] -= 1;
                    deliveries.push((p_end, P2C));
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
    if deliveries.iter().any(|_| true) || s.stats.packets.iter().sum::<u64>() > packets_before {
        s.stats.events += 1;
    }
    drop(s);
    state.space[C2P].notify_one();
    state.space[P2C].notify_one();
    Event {
        deliveries: deliveries
            .into_iter()
            .map(|(at, d)| (start + at, d))
            .collect(),
        end: start + t,
        any_ok,
    }
}

/// Counts one more packet of the head container of direction `d`; when it was the last one,
/// moves the container to the in-flight list and returns `true`.
fn advance(s: &mut crate::link::Shared, d: usize) -> bool {
    let Some(head) = s.dirs[d].air.front_mut() else {
        return false;
    };
    head.sent += 1;
    if head.sent < head.frags {
        return false;
    }
    if let Some(done) = s.dirs[d].air.pop_front() {
        s.in_flight[d].push_back(done.data);
    }
    true
}
