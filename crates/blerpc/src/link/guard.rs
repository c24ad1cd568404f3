//! Per-source-address policy shared by a server and its acceptors: how fast an address may open
//! connections, what misbehaving costs it, and the addresses refused for a while (penalized).
//!
//! Each address has a token bucket ([`GuardConfig::rate`]): a new connection takes one token,
//! and a connection closed for cause (see [`Reason::is_offence`]) takes
//! [`GuardConfig::offence_cost`] more. An address whose bucket runs dry is **penalized** for
//! [`GuardConfig::penalty`]: its connections are refused before any handshake, and on Linux the
//! acceptors drop its SYNs in the kernel (a socket filter on the listener), so a flood costs the
//! server nothing while the penalty lasts. When it ends the bucket starts empty: the address
//! must earn its tokens back at the configured rate.
//!
//! After a penalty the address is on **probation** for [`GuardConfig::probation`]: the kernel
//! lets through only [`GuardConfig::probation_keep`] of its connection attempts (SYNs; the
//! rest are retransmitted by the client's kernel later), so the thousands of SYNs a flooding
//! address's sockets keep retransmitting do not all reach the listen backlog the moment the
//! penalty ends (measured in `blerpc-bench hostile`: without probation they overflowed it and a
//! legitimate client's SYN was dropped, a 1 s retransmit). An address penalized again while on
//! probation is penalized twice as long as the last time, up to [`GuardConfig::max_penalty`].
//!
//! ```
//! use std::net::IpAddr;
//! use std::time::{Duration, Instant};
//! use blerpc::link::guard::{AddressGuard, GuardConfig, Rate, Refusal};
//!
//! let guard = AddressGuard::new(GuardConfig {
//!     rate: Some(Rate { per_second: 10.0, burst: 2.0 }),
//!     penalty: Duration::from_secs(5),
//!     offence_cost: 10.0,
//!     ..GuardConfig::default()
//! });
//! let ip: IpAddr = "127.0.0.2".parse().unwrap();
//! let now = Instant::now();
//! assert!(guard.admit(ip, now).is_ok());
//! assert!(guard.admit(ip, now).is_ok());
//! assert_eq!(guard.admit(ip, now), Err(Refusal::Rate)); // dry: penalized from now
//! assert_eq!(guard.admit(ip, now + Duration::from_secs(1)), Err(Refusal::Penalized));
//! let after = now + Duration::from_millis(5100); // one token earned since the penalty ended
//! assert!(guard.admit(ip, after).is_ok());
//! assert!(guard.listed(after).probation.contains(&ip)); // on probation for 30 s
//! assert_eq!(guard.admit(ip, after), Err(Refusal::Rate)); // again: penalized for 10 s
//! assert!(guard.is_penalized(ip, after + Duration::from_secs(9)));
//! ```

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::metrics::{Metrics, Reason};

/// A token bucket's refill rate and depth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    /// Tokens per second.
    pub per_second: f64,
    /// The bucket's depth: how many may come at once.
    pub burst: f64,
}

/// What an [`AddressGuard`] enforces.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GuardConfig {
    /// New connections per second from one address, and the burst above it. `None`: no rate
    /// limit and no penalties. Default 100 per second, bursts of 50.
    pub rate: Option<Rate>,
    /// How long an address whose bucket ran dry is refused. `Duration::ZERO`: never penalized
    /// (only the connections beyond the rate are refused). Default 10 s.
    pub penalty: Duration,
    /// Tokens a connection closed for cause takes from its address's bucket, besides the one it
    /// took to open ([`Reason::is_offence`]: the setup deadline, too many key exchanges,
    /// requests before the key exchange, a container deadline, a malformed frame, a failed
    /// handshake). Default 10: an address whose connections all misbehave opens a tenth as
    /// many.
    pub offence_cost: f64,
    /// How long an address stays on probation after a penalty ends: the kernel keeps only
    /// [`probation_keep`](Self::probation_keep) of its SYNs, and a new penalty is twice as long
    /// as the last one. `Duration::ZERO`: no probation (and no escalation). Default 30 s.
    pub probation: Duration,
    /// The share of an address's SYNs the kernel lets through while it is on probation, from 0
    /// (none) to 1 (all: no in-kernel throttle, escalation only). Default 1/8.
    pub probation_keep: f64,
    /// The longest penalty escalation reaches. Default 160 s (four doublings of 10 s).
    pub max_penalty: Duration,
}

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            rate: Some(Rate {
                per_second: 100.0,
                burst: 50.0,
            }),
            penalty: Duration::from_secs(10),
            offence_cost: 10.0,
            probation: Duration::from_secs(30),
            probation_keep: 0.125,
            max_penalty: Duration::from_secs(160),
        }
    }
}

/// The addresses a listener's kernel filter lists at one moment ([`AddressGuard::listed`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listed {
    /// Penalized: all their SYNs are dropped.
    pub penalized: Vec<IpAddr>,
    /// On probation: only [`GuardConfig::probation_keep`] of their SYNs are kept.
    pub probation: Vec<IpAddr>,
    /// When the lists next change without a new penalty (a penalty or a probation ends).
    pub next_change: Option<Instant>,
}

/// Why [`AddressGuard::admit`] refused a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The address opened connections faster than [`GuardConfig::rate`] (it is penalized from
    /// now, if penalties are on).
    Rate,
    /// The address is penalized.
    Penalized,
}

impl From<Refusal> for Reason {
    fn from(r: Refusal) -> Reason {
        match r {
            Refusal::Rate => Reason::ConnectionRate,
            Refusal::Penalized => Reason::Penalized,
        }
    }
}

/// Addresses tracked at once; past it the buckets of addresses quiet the longest (full again)
/// are forgotten, then all unpenalized ones.
pub const MAX_TRACKED_ADDRESSES: usize = 65_536;

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
    penalized_until: Option<Instant>,
    /// The end of the probation after the last penalty.
    probation_until: Option<Instant>,
    /// Penalties in a row, each imposed on probation from the one before.
    strikes: u32,
}

/// A listed address: penalized until the first instant, on probation until the second.
#[derive(Clone, Copy, Debug)]
struct Listing {
    penalized_until: Instant,
    probation_until: Instant,
}

#[derive(Debug, Default)]
struct State {
    buckets: HashMap<IpAddr, Bucket>,
    /// The penalized addresses and those on probation.
    listed: HashMap<IpAddr, Listing>,
}

/// The per-address policy (see the [module docs](self)). Share one `Arc` between a
/// [`Server`](crate::Server) and its acceptors; the server does this itself.
#[derive(Debug)]
pub struct AddressGuard {
    config: GuardConfig,
    /// Where penalties are counted and logged.
    metrics: Option<Arc<Metrics>>,
    state: Mutex<State>,
    /// Bumped whenever the set of penalized addresses gains a member.
    generation: AtomicU64,
    changed: Notify,
}

impl AddressGuard {
    /// A guard enforcing `config`.
    pub fn new(config: GuardConfig) -> Arc<AddressGuard> {
        Self::build(config, None)
    }

    /// A guard enforcing `config` that counts and logs each penalty in `metrics`
    /// (`blerpc_address_penalties_total`).
    pub fn with_metrics(config: GuardConfig, metrics: Arc<Metrics>) -> Arc<AddressGuard> {
        Self::build(config, Some(metrics))
    }

    fn build(config: GuardConfig, metrics: Option<Arc<Metrics>>) -> Arc<AddressGuard> {
        Arc::new(AddressGuard {
            config,
            metrics,
            state: Mutex::new(State::default()),
            generation: AtomicU64::new(0),
            changed: Notify::new(),
        })
    }

    /// What it enforces.
    pub fn config(&self) -> &GuardConfig {
        &self.config
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent across a panic elsewhere; serving goes on.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new connection from `ip` at `now`: takes a token, or refuses it.
    pub fn admit(&self, ip: IpAddr, now: Instant) -> Result<(), Refusal> {
        let Some(rate) = self.config.rate else {
            return Ok(());
        };
        let ip = ip.to_canonical();
        let mut state = self.lock();
        let b = Self::bucket(&mut state, ip, rate, now);
        if let Some(until) = b.penalized_until {
            if now < until {
                return Err(Refusal::Penalized);
            }
            // Served its time: it starts with an empty bucket (and stays listed, on
            // probation, until its probation ends).
            b.penalized_until = None;
            b.tokens = 0.0;
            b.at = until;
            Self::refill(b, rate, now);
        }
        self.take(&mut state, ip, rate, now, 1.0)
    }

    /// A connection from `ip` was closed for `reason`: an offence costs its address
    /// [`GuardConfig::offence_cost`] tokens (and a penalty if that empties the bucket).
    pub fn closed(&self, ip: IpAddr, reason: Reason, now: Instant) {
        if reason.is_offence() {
            let _ = self.offence(ip, now);
        }
    }

    /// A connection from `ip` misbehaved at `now` in a way the caller judges an offence (for
    /// listeners whose offences are not [`Reason`]s: the gateway's HTTP face counts a request
    /// head too large or too slow, a body too large or too slow): it costs the address
    /// [`GuardConfig::offence_cost`] tokens (and a penalty if that empties the bucket).
    /// `true` if it penalized the address.
    #[must_use = "a penalty imposed is worth counting"]
    pub fn offence(&self, ip: IpAddr, now: Instant) -> bool {
        let Some(rate) = self.config.rate else {
            return false;
        };
        if self.config.offence_cost <= 0.0 {
            return false;
        }
        let ip = ip.to_canonical();
        let mut state = self.lock();
        let b = Self::bucket(&mut state, ip, rate, now);
        if b.penalized_until.is_some_and(|until| now < until) {
            return false;
        }
        self.take(&mut state, ip, rate, now, self.config.offence_cost)
            .is_err()
            && !self.config.penalty.is_zero()
    }

    /// Takes `cost` tokens from `ip`'s bucket, or penalizes it when there are not enough.
    fn take(
        &self,
        state: &mut State,
        ip: IpAddr,
        rate: Rate,
        now: Instant,
        cost: f64,
    ) -> Result<(), Refusal> {
        let b = Self::bucket(state, ip, rate, now);
        if b.tokens >= cost {
            b.tokens -= cost;
            return Ok(());
        }
        b.tokens = 0.0;
        if !self.config.penalty.is_zero() {
            let on_probation = b.probation_until.is_some_and(|p| now < p);
            b.strikes = if on_probation { b.strikes + 1 } else { 1 };
            let penalty = self.penalty(b.strikes);
            let until = now + penalty;
            let probation_until = until + self.config.probation;
            b.penalized_until = Some(until);
            b.probation_until = Some(probation_until);
            state.listed.insert(
                ip,
                Listing {
                    penalized_until: until,
                    probation_until,
                },
            );
            self.generation.fetch_add(1, Ordering::Release);
            self.changed.notify_waiters();
            if let Some(m) = &self.metrics {
                m.penalized(ip, penalty);
            }
        }
        Err(Refusal::Rate)
    }

    /// The penalty for an address's `strikes`-th penalty in a row: doubled each time, capped.
    fn penalty(&self, strikes: u32) -> Duration {
        let doubled = self
            .config
            .penalty
            .saturating_mul(1u32 << strikes.saturating_sub(1).min(16));
        doubled.min(self.config.max_penalty.max(self.config.penalty))
    }

    /// `ip`'s bucket, refilled to `now` (created full).
    fn bucket(state: &mut State, ip: IpAddr, rate: Rate, now: Instant) -> &mut Bucket {
        if state.buckets.len() >= MAX_TRACKED_ADDRESSES && !state.buckets.contains_key(&ip) {
            Self::forget_quiet(state, rate, now);
        }
        let b = state.buckets.entry(ip).or_insert(Bucket {
            tokens: rate.burst,
            at: now,
            penalized_until: None,
            probation_until: None,
            strikes: 0,
        });
        Self::refill(b, rate, now);
        b
    }

    fn refill(b: &mut Bucket, rate: Rate, now: Instant) {
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + elapsed * rate.per_second).min(rate.burst);
        b.at = b.at.max(now);
    }

    /// Forgets the addresses whose buckets are full again (quiet for a whole refill), then, if
    /// that was not enough, every unpenalized one.
    fn forget_quiet(state: &mut State, rate: Rate, now: Instant) {
        let horizon = Duration::from_secs_f64(rate.burst / rate.per_second.max(1e-9));
        state.buckets.retain(|_, b| {
            b.probation_until.is_some_and(|u| now < u)
                || now.saturating_duration_since(b.at) < horizon
        });
        if state.buckets.len() >= MAX_TRACKED_ADDRESSES {
            state
                .buckets
                .retain(|_, b| b.probation_until.is_some_and(|u| now < u));
        }
        state.listed.retain(|_, l| now < l.probation_until);
        if state.buckets.len() >= MAX_TRACKED_ADDRESSES {
            // Every tracked address is listed: the oldest listings go first.
            let mut until: Vec<Instant> =
                state.listed.values().map(|l| l.probation_until).collect();
            until.sort_unstable();
            let cut = until.get(until.len() / 2).copied();
            if let Some(cut) = cut {
                state.listed.retain(|_, l| l.probation_until > cut);
                let keep = &state.listed;
                state.buckets.retain(|ip, _| keep.contains_key(ip));
            }
        }
    }

    /// `true` if `ip` is penalized at `now`.
    pub fn is_penalized(&self, ip: IpAddr, now: Instant) -> bool {
        self.lock()
            .listed
            .get(&ip.to_canonical())
            .is_some_and(|l| now < l.penalized_until)
    }

    /// The addresses penalized and on probation at `now`, and when that next changes; forgets
    /// the ones whose probation ended. With no probation throttle
    /// ([`GuardConfig::probation_keep`] ≥ 1, or no probation) the probation list is empty.
    pub fn listed(&self, now: Instant) -> Listed {
        let throttle = self.config.probation_keep < 1.0 && !self.config.probation.is_zero();
        let mut state = self.lock();
        state.listed.retain(|_, l| now < l.probation_until);
        let mut listed = Listed::default();
        for (ip, l) in &state.listed {
            let change = if now < l.penalized_until {
                listed.penalized.push(*ip);
                l.penalized_until
            } else if throttle {
                listed.probation.push(*ip);
                l.probation_until
            } else {
                continue;
            };
            listed.next_change = Some(listed.next_change.map_or(change, |n| n.min(change)));
        }
        listed
    }

    /// Changes whenever an address is newly penalized.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Completes when an address is next penalized.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 3));

    fn guard(penalty_secs: u64) -> Arc<AddressGuard> {
        AddressGuard::new(GuardConfig {
            rate: Some(Rate {
                per_second: 10.0,
                burst: 3.0,
            }),
            penalty: Duration::from_secs(penalty_secs),
            offence_cost: 2.0,
            probation: Duration::from_secs(20),
            probation_keep: 0.25,
            max_penalty: Duration::from_secs(12),
        })
    }

    #[test]
    fn an_address_opens_connections_at_the_configured_rate() {
        let g = guard(0);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(g.admit(A, t0), Ok(()));
        }
        assert_eq!(g.admit(A, t0), Err(Refusal::Rate));
        // Another address has its own bucket.
        assert_eq!(g.admit(B, t0), Ok(()));
        // Without penalties: 100 ms later, one more.
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(g.admit(A, t1), Ok(()));
        assert_eq!(g.admit(A, t1), Err(Refusal::Rate));
        assert_eq!(g.generation(), 0);
    }

    #[test]
    fn a_dry_bucket_penalizes_the_address_and_it_starts_empty_after() {
        let g = guard(5);
        let t0 = Instant::now();
        for _ in 0..3 {
            g.admit(A, t0).unwrap();
        }
        assert_eq!(g.admit(A, t0), Err(Refusal::Rate));
        assert_eq!(g.generation(), 1);
        assert!(g.is_penalized(A, t0));
        assert!(!g.is_penalized(B, t0));
        let listed = g.listed(t0);
        assert_eq!(listed.penalized, vec![A]);
        assert!(listed.probation.is_empty());
        assert_eq!(listed.next_change, Some(t0 + Duration::from_secs(5)));
        assert_eq!(
            g.admit(A, t0 + Duration::from_secs(4)),
            Err(Refusal::Penalized)
        );
        // 100 ms after the penalty: one token earned since it ended, no more.
        let t1 = t0 + Duration::from_millis(5100);
        assert_eq!(g.admit(A, t1), Ok(()));
        let listed = g.listed(t1);
        assert!(listed.penalized.is_empty());
        assert_eq!(listed.probation, vec![A]);
        assert_eq!(listed.next_change, Some(t0 + Duration::from_secs(25)));
        // The next one runs it dry again.
        assert_eq!(g.admit(A, t1), Err(Refusal::Rate));
        assert_eq!(g.generation(), 2);
    }

    #[test]
    fn penalties_double_on_probation_up_to_the_cap_and_reset_after_it() {
        let g = guard(5);
        let t0 = Instant::now();
        let dry = |at: Instant| {
            while g.admit(A, at).is_ok() {}
        };
        dry(t0);
        // Strike 2 (on probation after the first): 10 s.
        let t1 = t0 + Duration::from_secs(6);
        dry(t1);
        assert!(g.is_penalized(A, t1 + Duration::from_millis(9900)));
        assert!(!g.is_penalized(A, t1 + Duration::from_millis(10_100)));
        // Strike 3 would be 20 s: capped at 12.
        let t2 = t1 + Duration::from_secs(11);
        dry(t2);
        assert!(g.is_penalized(A, t2 + Duration::from_millis(11_900)));
        assert!(!g.is_penalized(A, t2 + Duration::from_millis(12_100)));
        // Quiet through its probation (12 + 20 s): the next penalty is the first again.
        let t3 = t2 + Duration::from_secs(40);
        assert!(g.listed(t3).probation.is_empty());
        dry(t3);
        assert!(g.is_penalized(A, t3 + Duration::from_millis(4900)));
        assert!(!g.is_penalized(A, t3 + Duration::from_millis(5100)));
    }

    #[test]
    fn without_a_probation_throttle_nothing_is_on_probation() {
        let g = AddressGuard::new(GuardConfig {
            probation_keep: 1.0,
            ..GuardConfig::default()
        });
        let t0 = Instant::now();
        while g.admit(A, t0).is_ok() {}
        let after = t0 + Duration::from_secs(11);
        let listed = g.listed(after);
        assert!(listed.penalized.is_empty() && listed.probation.is_empty());
        assert_eq!(listed.next_change, None);
    }

    #[test]
    fn offences_cost_tokens_and_ordinary_closes_do_not() {
        let g = guard(5);
        let t0 = Instant::now();
        g.admit(A, t0).unwrap(); // 2 left
        g.closed(A, Reason::KeepaliveTimeout, t0); // not an offence
        g.closed(A, Reason::KeyExchangeAttempts, t0); // 0 left
        assert!(!g.is_penalized(A, t0));
        g.closed(A, Reason::Framing, t0); // not enough: penalized
        assert!(g.is_penalized(A, t0));
        assert_eq!(g.admit(A, t0), Err(Refusal::Penalized));
    }

    #[test]
    fn offences_named_by_the_caller_cost_the_same_and_penalize() {
        let g = guard(5);
        let t0 = Instant::now();
        g.admit(A, t0).unwrap(); // 2 left
        assert!(!g.offence(A, t0)); // 0 left
        assert!(!g.is_penalized(A, t0));
        assert!(!g.offence(B, t0)); // another address: its own bucket (3 - 2)
        assert!(g.offence(A, t0)); // not enough: penalized
        assert!(g.is_penalized(A, t0));
        assert!(!g.is_penalized(B, t0));
        assert_eq!(g.generation(), 1);
        assert_eq!(g.admit(A, t0), Err(Refusal::Penalized));
        // While penalized, more offences change nothing (the penalty is not extended).
        assert!(!g.offence(A, t0 + Duration::from_secs(1)));
        assert!(!g.is_penalized(A, t0 + Duration::from_millis(5001)));
        // Without an offence cost, an offence costs nothing.
        let free = AddressGuard::new(GuardConfig {
            offence_cost: 0.0,
            ..*g.config()
        });
        for _ in 0..100 {
            assert!(!free.offence(A, t0));
        }
        assert_eq!(free.admit(A, t0), Ok(()));
        // Without penalties, an offence that empties the bucket penalizes nothing.
        let unpenalized = guard(0);
        assert!(!unpenalized.offence(A, t0));
        assert!(!unpenalized.offence(A, t0));
        assert!(!unpenalized.is_penalized(A, t0));
    }

    #[test]
    fn mapped_addresses_are_the_same_address() {
        let g = guard(5);
        let t0 = Instant::now();
        let mapped: IpAddr = "::ffff:127.0.0.2".parse().unwrap();
        for _ in 0..3 {
            g.admit(mapped, t0).unwrap();
        }
        assert_eq!(g.admit(A, t0), Err(Refusal::Rate));
        assert!(g.is_penalized(mapped, t0));
    }

    #[test]
    fn without_a_rate_nothing_is_refused() {
        let g = AddressGuard::new(GuardConfig {
            rate: None,
            ..GuardConfig::default()
        });
        let t0 = Instant::now();
        for _ in 0..1000 {
            g.admit(A, t0).unwrap();
            g.closed(A, Reason::Framing, t0);
        }
        assert!(!g.is_penalized(A, t0));
    }

    #[test]
    fn the_table_is_bounded() {
        let g = guard(5);
        let t0 = Instant::now();
        for i in 0..(MAX_TRACKED_ADDRESSES as u32 + 10) {
            let ip = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            g.admit(ip, t0).unwrap();
        }
        assert!(g.lock().buckets.len() <= MAX_TRACKED_ADDRESSES);
    }
}
