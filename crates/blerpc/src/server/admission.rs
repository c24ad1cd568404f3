//! Which connections a server serves: the connection cap, the per-address limits, eviction of
//! unproven connections at the cap, and the reassembly budget all connections share.
//!
//! Every accepted link asks [`Admission::admit`] for a [`Ticket`]. At
//! [`ServerConfig::max_connections`](super::ServerConfig::max_connections) the oldest
//! connection that has not yet proven itself (see
//! [`Peripheral::is_established`](blerpc_proto::connection::Peripheral::is_established)) is
//! evicted to make room; with none, the newcomer is closed at once (never left waiting). The
//! ticket's holder marks it proven once established, hears an eviction through
//! [`Ticket::poll_evicted`] (the table keeps the unproven connection's task waker, no waiter of
//! its own), reports a close for cause through [`Ticket::closed`] (an offence costs
//! the address tokens in the [`AddressGuard`]), and gives its slot back by dropping it.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use std::task::{Context, Poll, Waker};

use crate::link::guard::AddressGuard;
use crate::metrics::{Metrics, Reason};

/// The limits [`Admission`] enforces (from [`ServerConfig`](super::ServerConfig)).
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    pub(super) max_connections: usize,
    pub(super) max_per_address: Option<usize>,
    pub(super) max_unproven_per_address: Option<usize>,
    pub(super) reassembly_budget: usize,
}

/// An unproven connection (proven ones are only counted: nothing evicts them).
struct Entry {
    ip: Option<IpAddr>,
    /// The connection's task, woken when it is evicted (set by its first wait).
    waker: Option<Waker>,
}

#[derive(Default)]
struct PerAddress {
    all: usize,
    unproven: usize,
}

#[derive(Default)]
struct State {
    next_id: u64,
    /// The unproven connections by id, which is also age (oldest first).
    unproven: BTreeMap<u64, Entry>,
    /// The proven connections.
    proven: usize,
    addresses: HashMap<IpAddr, PerAddress>,
}

/// The server's connection table (see the [module docs](self)).
pub(super) struct Admission {
    limits: Limits,
    state: Mutex<State>,
    /// What the partial requests of every connection announced, together.
    claimed: AtomicUsize,
    pub(super) metrics: Arc<Metrics>,
    /// The per-address rate and penalties (shared with the acceptors).
    pub(super) guard: Arc<AddressGuard>,
}

impl Admission {
    pub(super) fn new(
        limits: Limits,
        metrics: Arc<Metrics>,
        guard: Arc<AddressGuard>,
    ) -> Arc<Admission> {
        Arc::new(Admission {
            limits,
            state: Mutex::new(State::default()),
            claimed: AtomicUsize::new(0),
            metrics,
            guard,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves counts that are still consistent enough to go
        // on with; serving stops for no one.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A ticket for a new connection from `ip`, or `None` (counted and logged) when it is
    /// refused: its address is over its rate or penalized (unless the acceptor checked that
    /// already: `guarded`), or at a limit, or the server is at its cap with nothing unproven to
    /// evict.
    pub(super) fn admit(
        self: &Arc<Self>,
        ip: Option<IpAddr>,
        peer: &str,
        guarded: bool,
    ) -> Option<Ticket> {
        if let Some(ip) = ip
            && !guarded
            && let Err(why) = self.guard.admit(ip, std::time::Instant::now())
        {
            self.metrics.refused(why.into(), peer);
            return None;
        }
        let mut state = self.lock();
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
        if state.unproven.len() + state.proven >= self.limits.max_connections.max(1) {
            let Some(id) = state.unproven.keys().next().copied() else {
                drop(state);
                self.metrics.refused(Reason::ConnectionCap, peer);
                return None;
            };
            if let Some(entry) = Self::remove_unproven(&mut state, id) {
                if let Some(waker) = entry.waker {
                    waker.wake();
                }
                self.metrics.unproven_delta(-1);
                self.metrics.open_delta(-1);
                // Logged with the evicted connection's address (not the newcomer's).
                let who = entry
                    .ip
                    .map_or_else(|| "an unproven connection".to_string(), |ip| ip.to_string());
                report_closed(self, entry.ip, Reason::EvictedUnproven, &who);
            }
        }
        let id = state.next_id;
        state.next_id += 1;
        state.unproven.insert(id, Entry { ip, waker: None });
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
            ip,
            proven: false,
            counted_proven: false,
            claimed: 0,
        })
    }

    /// Removes unproven connection `id` (`None`: it is gone already) and its address's counts.
    fn remove_unproven(state: &mut State, id: u64) -> Option<Entry> {
        let entry = state.unproven.remove(&id)?;
        if let Some(ip) = entry.ip {
            Self::leave_address(state, ip, true);
        }
        Some(entry)
    }

    fn leave_address(state: &mut State, ip: IpAddr, unproven: bool) {
        if let Some(a) = state.addresses.get_mut(&ip) {
            a.all = a.all.saturating_sub(1);
            if unproven {
                a.unproven = a.unproven.saturating_sub(1);
            }
            if a.all == 0 {
                state.addresses.remove(&ip);
            }
        }
    }

    /// Connections in the table now.
    #[cfg(test)]
    fn len(&self) -> usize {
        let state = self.lock();
        state.unproven.len() + state.proven
    }
}

/// One connection's place in the [`Admission`] table; dropping it gives the place back.
pub(super) struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    ip: Option<IpAddr>,
    /// [`Ticket::prove`] was called.
    proven: bool,
    /// It was counted as proven (it had not been evicted meanwhile).
    counted_proven: bool,
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
        let Some(entry) = state.unproven.remove(&self.id) else {
            return; // evicted meanwhile
        };
        state.proven += 1;
        if let Some(ip) = entry.ip
            && let Some(a) = state.addresses.get_mut(&ip)
        {
            a.unproven = a.unproven.saturating_sub(1);
        }
        drop(state);
        self.counted_proven = true;
        self.admission.metrics.unproven_delta(-1);
    }

    /// `true` once [`Ticket::prove`] was called.
    pub(super) fn is_proven(&self) -> bool {
        self.proven
    }

    /// `false` once the connection is counted as proven: nothing can evict it then.
    pub(super) fn can_be_evicted(&self) -> bool {
        !self.counted_proven
    }

    /// Ready once the connection has been evicted (never once it is proven); pending, it
    /// leaves `cx`'s waker in the table for the eviction to wake.
    pub(super) fn poll_evicted(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.counted_proven {
            return Poll::Pending;
        }
        let mut state = self.admission.lock();
        // Only an eviction takes an unproven connection's entry away while it holds its ticket.
        let Some(entry) = state.unproven.get_mut(&self.id) else {
            return Poll::Ready(());
        };
        if !entry
            .waker
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            entry.waker = Some(cx.waker().clone());
        }
        Poll::Pending
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

    /// Where the connection's close for cause is reported (it outlives the ticket).
    /// The server's metrics.
    pub(super) fn metrics(&self) -> &Metrics {
        &self.admission.metrics
    }

    pub(super) fn reporter(&self) -> Reporter {
        Reporter {
            admission: self.admission.clone(),
            ip: self.ip,
        }
    }

    /// Counts and logs the connection's close (or a refusal) for `reason`; an offence costs its
    /// address tokens ([`AddressGuard::closed`]).
    pub(super) fn closed(&self, reason: Reason, peer: &str) {
        report_closed(&self.admission, self.ip, reason, peer);
    }
}

/// Reports a connection's close for cause after its ticket is gone ([`Ticket::reporter`]).
pub(super) struct Reporter {
    admission: Arc<Admission>,
    ip: Option<IpAddr>,
}

impl Reporter {
    /// The server's metrics.
    pub(super) fn metrics(&self) -> &Metrics {
        &self.admission.metrics
    }
    /// As [`Ticket::closed`].
    pub(super) fn closed(&self, reason: Reason, peer: &str) {
        report_closed(&self.admission, self.ip, reason, peer);
    }
}

fn report_closed(admission: &Admission, ip: Option<IpAddr>, reason: Reason, peer: &str) {
    admission.metrics.closed(reason, peer);
    if let Some(ip) = ip {
        admission
            .guard
            .closed(ip, reason, std::time::Instant::now());
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.set_claimed(0);
        let mut state = self.admission.lock();
        if self.counted_proven {
            state.proven = state.proven.saturating_sub(1);
            if let Some(ip) = self.ip {
                Admission::leave_address(&mut state, ip, false);
            }
            drop(state);
            self.admission.metrics.open_delta(-1);
        } else if Admission::remove_unproven(&mut state, self.id).is_some() {
            drop(state);
            self.admission.metrics.open_delta(-1);
            self.admission.metrics.unproven_delta(-1);
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
            },
            Metrics::new(),
            AddressGuard::new(crate::link::guard::GuardConfig {
                rate: None,
                ..Default::default()
            }),
        )
    }

    async fn evicted(ticket: &Ticket) {
        std::future::poll_fn(|cx| ticket.poll_evicted(cx)).await;
    }

    const A: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2)));
    const B: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 3)));

    #[tokio::test]
    async fn at_the_cap_the_oldest_unproven_connection_is_evicted() {
        let adm = admission(2, None, None);
        let mut first = adm.admit(A, "a1", false).unwrap();
        let second = adm.admit(A, "a2", false).unwrap();
        first.prove();
        // `second`'s task waits (its waker is in the table) when the eviction comes.
        let waiting = tokio::spawn(async move {
            evicted(&second).await;
            second
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        // Full: the newcomer evicts `second` (unproven), not `first`.
        let third = adm.admit(B, "b1", false).unwrap();
        let second = tokio::time::timeout(std::time::Duration::from_secs(1), waiting)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(adm.len(), 2);
        assert_eq!(adm.metrics.count(Reason::EvictedUnproven), 1);
        drop(second); // the evicted task ends: nothing more to give back
        assert_eq!(adm.len(), 2);
        // Both proven now: a newcomer is refused at once.
        let mut third = third;
        third.prove();
        assert!(adm.admit(B, "b2", false).is_none());
        assert_eq!(adm.metrics.count(Reason::ConnectionCap), 1);
        drop(first);
        assert!(adm.admit(B, "b3", false).is_some());
    }

    #[tokio::test]
    async fn a_proven_connection_leaves_the_eviction_table_and_is_still_counted() {
        let adm = admission(3, Some(2), None);
        let mut a1 = adm.admit(A, "a1", false).unwrap();
        assert!(a1.can_be_evicted());
        a1.prove();
        assert!(!a1.can_be_evicted());
        assert_eq!(adm.lock().unproven.len(), 0);
        assert_eq!(adm.len(), 1);
        // Still counted towards its address and the cap.
        let _a2 = adm.admit(A, "a2", false).unwrap();
        assert!(adm.admit(A, "a3", false).is_none());
        // Its waiter never completes.
        let never = tokio::time::timeout(std::time::Duration::from_millis(20), evicted(&a1)).await;
        assert!(never.is_err());
        drop(a1);
        assert_eq!(adm.len(), 1);
        assert!(adm.admit(A, "a3", false).is_some());
    }

    #[tokio::test]
    async fn a_connection_evicted_before_it_proves_itself_stays_evicted() {
        let adm = admission(1, None, None);
        let mut first = adm.admit(A, "a1", false).unwrap();
        let _second = adm.admit(B, "b1", false).unwrap();
        // `first` was evicted; establishing it afterwards does not bring it back.
        first.prove();
        assert!(first.can_be_evicted());
        tokio::time::timeout(std::time::Duration::from_secs(1), evicted(&first))
            .await
            .unwrap();
        assert_eq!(adm.len(), 1);
        drop(first);
        assert_eq!(adm.len(), 1);
    }

    #[test]
    fn per_address_limits_count_all_and_unproven_connections() {
        let adm = admission(100, Some(3), Some(2));
        let mut a1 = adm.admit(A, "a1", false).unwrap();
        let _a2 = adm.admit(A, "a2", false).unwrap();
        // Two unproven from A: the third is refused, B is not affected.
        assert!(adm.admit(A, "a3", false).is_none());
        let _b1 = adm.admit(B, "b1", false).unwrap();
        a1.prove();
        let _a3 = adm.admit(A, "a3", false).unwrap();
        // Three from A in all.
        assert!(adm.admit(A, "a4", false).is_none());
        assert_eq!(adm.metrics.count(Reason::AddressLimit), 2);
        // Links without an IP address are not limited by address.
        let _x = adm.admit(None, "mem", false).unwrap();
    }

    #[test]
    fn the_reassembly_budget_is_shared() {
        let adm = admission(10, None, None);
        let mut a = adm.admit(A, "a", false).unwrap();
        let mut b = adm.admit(B, "b", false).unwrap();
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
