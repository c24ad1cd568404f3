//! Which connections a server serves: the connection cap, the per-address limits, eviction of
//! unproven connections at the cap, and the reassembly budget all connections share.
//!
//! Every accepted link asks [`Admission::admit`] for a [`Ticket`]. At
//! [`ServerConfig::max_connections`](super::ServerConfig::max_connections) the oldest
//! connection that has not yet proven itself (see
//! [`Peripheral::is_established`](blerpc_proto::connection::Peripheral::is_established)) is
//! evicted to make room; with none, the newcomer is closed at once (never left waiting). The
//! ticket's holder marks it proven once established, hears an eviction through
//! [`Ticket::evicted`], and gives its slot back by dropping it.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;

use crate::metrics::{Metrics, Reason};

/// The limits [`Admission`] enforces (from [`ServerConfig`](super::ServerConfig)).
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    pub(super) max_connections: usize,
    pub(super) max_per_address: Option<usize>,
    pub(super) max_unproven_per_address: Option<usize>,
    pub(super) reassembly_budget: usize,
    /// New connections per second from one address, and the burst above it.
    pub(super) connection_rate: Option<Rate>,
}

/// A token bucket's refill rate and depth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    /// Tokens per second.
    pub per_second: f64,
    /// The bucket's depth: how many may come at once.
    pub burst: f64,
}

/// Addresses whose connection rate is tracked at once; past it the fullest buckets (the
/// addresses that connected least recently) are forgotten.
const MAX_TRACKED_ADDRESSES: usize = 65_536;

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: std::time::Instant,
}

struct Entry {
    ip: Option<IpAddr>,
    proven: bool,
    evict: Arc<Notify>,
}

#[derive(Default)]
struct PerAddress {
    all: usize,
    unproven: usize,
}

#[derive(Default)]
struct State {
    next_id: u64,
    /// By id, which is also age (oldest first).
    conns: BTreeMap<u64, Entry>,
    addresses: HashMap<IpAddr, PerAddress>,
    buckets: HashMap<IpAddr, Bucket>,
}

impl State {
    /// Takes a token from `ip`'s bucket; `false` when it is empty.
    fn take_token(&mut self, ip: IpAddr, rate: Rate, now: std::time::Instant) -> bool {
        if self.buckets.len() >= MAX_TRACKED_ADDRESSES && !self.buckets.contains_key(&ip) {
            // Forget the addresses that have been quiet longest (their buckets are full).
            let horizon = Duration::from_secs_f64(rate.burst / rate.per_second.max(1e-9));
            self.buckets
                .retain(|_, b| now.saturating_duration_since(b.at) < horizon);
            if self.buckets.len() >= MAX_TRACKED_ADDRESSES {
                self.buckets.clear();
            }
        }
        let b = self.buckets.entry(ip).or_insert(Bucket {
            tokens: rate.burst,
            at: now,
        });
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + elapsed * rate.per_second).min(rate.burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The server's connection table (see the [module docs](self)).
pub(super) struct Admission {
    limits: Limits,
    state: Mutex<State>,
    /// What the partial requests of every connection announced, together.
    claimed: AtomicUsize,
    pub(super) metrics: Arc<Metrics>,
}

impl Admission {
    pub(super) fn new(limits: Limits, metrics: Arc<Metrics>) -> Arc<Admission> {
        Arc::new(Admission {
            limits,
            state: Mutex::new(State::default()),
            claimed: AtomicUsize::new(0),
            metrics,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves counts that are still consistent enough to go
        // on with; serving stops for no one.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A ticket for a new connection from `ip`, or `None` (counted and logged) when it is
    /// refused: its address is at a limit, or the server is at its cap with nothing unproven to
    /// evict.
    pub(super) fn admit(self: &Arc<Self>, ip: Option<IpAddr>, peer: &str) -> Option<Ticket> {
        let mut state = self.lock();
        if let (Some(ip), Some(rate)) = (ip, self.limits.connection_rate)
            && !state.take_token(ip, rate, std::time::Instant::now())
        {
            drop(state);
            self.metrics.refused(Reason::ConnectionRate, peer);
            return None;
        }
        if let Some(ip) = ip {
            let here = state.addresses.get(&ip);
            let (all, unproven) = here.map_or((0, 0), |a| (a.all, a.unproven));
            if self.limits.max_per_address.is_some_and(|max| all >= max)
                || self
                    .limits
                    .max_unproven_per_address
                    .is_some_and(|max| unproven >= max.max(1))
            {
                drop(state);
                self.metrics.refused(Reason::AddressLimit, peer);
                return None;
            }
        }
        if state.conns.len() >= self.limits.max_connections.max(1) {
            let oldest_unproven = state
                .conns
                .iter()
                .find(|(_, e)| !e.proven)
                .map(|(id, _)| *id);
            let Some(id) = oldest_unproven else {
                drop(state);
                self.metrics.refused(Reason::ConnectionCap, peer);
                return None;
            };
            if let Some(entry) = Self::remove(&mut state, id) {
                entry.evict.notify_one();
                self.metrics.unproven_delta(-1);
                self.metrics.open_delta(-1);
                self.metrics.closed(Reason::EvictedUnproven, peer);
            }
        }
        let id = state.next_id;
        state.next_id += 1;
        let evict = Arc::new(Notify::new());
        state.conns.insert(
            id,
            Entry {
                ip,
                proven: false,
                evict: evict.clone(),
            },
        );
        if let Some(ip) = ip {
            let a = state.addresses.entry(ip).or_default();
            a.all += 1;
            a.unproven += 1;
        }
        drop(state);
        self.metrics.accepted();
        self.metrics.open_delta(1);
        self.metrics.unproven_delta(1);
        Some(Ticket {
            admission: self.clone(),
            id,
            evict,
            proven: false,
            claimed: 0,
        })
    }

    fn remove(state: &mut State, id: u64) -> Option<Entry> {
        let entry = state.conns.remove(&id)?;
        if let Some(ip) = entry.ip
            && let Some(a) = state.addresses.get_mut(&ip)
        {
            a.all = a.all.saturating_sub(1);
            if !entry.proven {
                a.unproven = a.unproven.saturating_sub(1);
            }
            if a.all == 0 {
                state.addresses.remove(&ip);
            }
        }
        Some(entry)
    }

    /// Connections in the table now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().conns.len()
    }
}

/// One connection's place in the [`Admission`] table; dropping it gives the place back.
pub(super) struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    evict: Arc<Notify>,
    proven: bool,
    /// This connection's share of the reassembly budget in use.
    claimed: usize,
}

impl Ticket {
    /// The connection has proven itself: it is no longer the first to be evicted.
    pub(super) fn prove(&mut self) {
        if self.proven {
            return;
        }
        self.proven = true;
        let mut state = self.admission.lock();
        let Some(entry) = state.conns.get_mut(&self.id) else {
            return; // evicted meanwhile
        };
        entry.proven = true;
        if let Some(ip) = entry.ip
            && let Some(a) = state.addresses.get_mut(&ip)
        {
            a.unproven = a.unproven.saturating_sub(1);
        }
        drop(state);
        self.admission.metrics.unproven_delta(-1);
    }

    /// `true` once [`Ticket::prove`] was called.
    pub(super) fn is_proven(&self) -> bool {
        self.proven
    }

    /// Completes when the connection is evicted.
    pub(super) fn evicted(&self) -> impl Future<Output = ()> + Send + use<> {
        let evict = self.evict.clone();
        async move { evict.notified().await }
    }

    /// The reassembly budget this connection may use for its next input: what it holds plus
    /// what no connection holds.
    pub(super) fn reassembly_share(&self) -> usize {
        let total = self.admission.claimed.load(Ordering::Relaxed);
        let free = self
            .admission
            .limits
            .reassembly_budget
            .saturating_sub(total);
        self.claimed.saturating_add(free)
    }

    /// Records what this connection's partial requests announce now.
    pub(super) fn set_claimed(&mut self, claimed: usize) {
        if claimed == self.claimed {
            return;
        }
        let total = if claimed > self.claimed {
            let add = claimed - self.claimed;
            self.admission.claimed.fetch_add(add, Ordering::Relaxed) + add
        } else {
            let sub = self.claimed - claimed;
            self.admission
                .claimed
                .fetch_sub(sub, Ordering::Relaxed)
                .saturating_sub(sub)
        };
        self.claimed = claimed;
        self.admission.metrics.set_reassembly(total);
    }

    /// The server's counters.
    pub(super) fn metrics(&self) -> &Metrics {
        &self.admission.metrics
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.set_claimed(0);
        let mut state = self.admission.lock();
        if let Some(entry) = Admission::remove(&mut state, self.id) {
            drop(state);
            self.admission.metrics.open_delta(-1);
            if !entry.proven {
                self.admission.metrics.unproven_delta(-1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admission(
        max: usize,
        per_address: Option<usize>,
        unproven: Option<usize>,
    ) -> Arc<Admission> {
        Admission::new(
            Limits {
                max_connections: max,
                max_per_address: per_address,
                max_unproven_per_address: unproven,
                reassembly_budget: 1000,
                connection_rate: None,
            },
            Metrics::new(),
        )
    }

    const A: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2)));
    const B: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 3)));

    #[tokio::test]
    async fn at_the_cap_the_oldest_unproven_connection_is_evicted() {
        let adm = admission(2, None, None);
        let mut first = adm.admit(A, "a1").unwrap();
        let second = adm.admit(A, "a2").unwrap();
        first.prove();
        // Full: the newcomer evicts `second` (unproven), not `first`.
        let third = adm.admit(B, "b1").unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(1), second.evicted())
            .await
            .unwrap();
        assert_eq!(adm.len(), 2);
        assert_eq!(adm.metrics.count(Reason::EvictedUnproven), 1);
        drop(second); // the evicted task ends: nothing more to give back
        assert_eq!(adm.len(), 2);
        // Both proven now: a newcomer is refused at once.
        let mut third = third;
        third.prove();
        assert!(adm.admit(B, "b2").is_none());
        assert_eq!(adm.metrics.count(Reason::ConnectionCap), 1);
        drop(first);
        assert!(adm.admit(B, "b3").is_some());
    }

    #[test]
    fn per_address_limits_count_all_and_unproven_connections() {
        let adm = admission(100, Some(3), Some(2));
        let mut a1 = adm.admit(A, "a1").unwrap();
        let _a2 = adm.admit(A, "a2").unwrap();
        // Two unproven from A: the third is refused, B is not affected.
        assert!(adm.admit(A, "a3").is_none());
        let _b1 = adm.admit(B, "b1").unwrap();
        a1.prove();
        let _a3 = adm.admit(A, "a3").unwrap();
        // Three from A in all.
        assert!(adm.admit(A, "a4").is_none());
        assert_eq!(adm.metrics.count(Reason::AddressLimit), 2);
        // Links without an IP address are not limited by address.
        let _x = adm.admit(None, "mem").unwrap();
    }

    #[test]
    fn an_address_opens_connections_at_the_configured_rate() {
        let mut state = State::default();
        let rate = Rate {
            per_second: 10.0,
            burst: 3.0,
        };
        let t0 = std::time::Instant::now();
        let ip = A.unwrap();
        for _ in 0..3 {
            assert!(state.take_token(ip, rate, t0));
        }
        assert!(!state.take_token(ip, rate, t0));
        // Another address has its own bucket.
        assert!(state.take_token(B.unwrap(), rate, t0));
        // 100 ms later, one more.
        let t1 = t0 + Duration::from_millis(100);
        assert!(state.take_token(ip, rate, t1));
        assert!(!state.take_token(ip, rate, t1));
    }

    #[test]
    fn the_reassembly_budget_is_shared() {
        let adm = admission(10, None, None);
        let mut a = adm.admit(A, "a").unwrap();
        let mut b = adm.admit(B, "b").unwrap();
        assert_eq!(a.reassembly_share(), 1000);
        a.set_claimed(700);
        assert_eq!(a.reassembly_share(), 1000);
        assert_eq!(b.reassembly_share(), 300);
        b.set_claimed(300);
        assert_eq!(b.reassembly_share(), 300);
        assert_eq!(a.reassembly_share(), 700);
        drop(a);
        assert_eq!(b.reassembly_share(), 1000);
    }
}
