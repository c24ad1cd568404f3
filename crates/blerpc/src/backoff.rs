//! Reconnecting without a thundering herd: capped exponential backoff with jitter.
//!
//! A device that dials out to a gateway (`blerpc serve --dial`), and a gateway that keeps BLE
//! peripherals connected, both retry a failed or lost connection. The n-th wait in a row is
//! drawn uniformly from `[base/2, base]` where `base = min(initial × 2ⁿ, max)` ("equal jitter"):
//! never zero, so a refused peer is not hammered, and spread so that 100,000 devices whose gateway
//! restarts do not all come back in the same millisecond. A connection that stayed up for
//! [`Backoff::reset_after`] starts the sequence over.
//!
//! ```
//! use std::time::Duration;
//! use blerpc::backoff::Backoff;
//!
//! let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
//! let waits: Vec<Duration> = (0..10).map(|_| backoff.next_wait()).collect();
//! assert!(waits[0] >= Duration::from_millis(50) && waits[0] <= Duration::from_millis(100));
//! assert!(waits.iter().all(|w| *w <= Duration::from_secs(5)));
//! assert!(waits[9] >= Duration::from_millis(2500)); // capped at 5 s, at least half of it
//! backoff.reset();
//! assert!(backoff.next_wait() <= Duration::from_millis(100));
//! ```

use std::time::Duration;

use rand_core::{OsRng, RngCore};

/// Capped exponential backoff with jitter (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    /// A connection that lasted this long resets the sequence. Default: `max` × 2.
    pub reset_after: Duration,
    attempt: u32,
}

impl Backoff {
    /// Waits starting at `initial` and doubling up to `max` (`max` is raised to `initial` if
    /// below it; a zero `initial` is taken as 1 ms).
    pub fn new(initial: Duration, max: Duration) -> Backoff {
        let initial = initial.max(Duration::from_millis(1));
        let max = max.max(initial);
        Backoff {
            initial,
            max,
            reset_after: max.saturating_mul(2),
            attempt: 0,
        }
    }

    /// The wait before the next attempt; each call doubles the next one's range, up to the cap.
    pub fn next_wait(&mut self) -> Duration {
        let base = self
            .initial
            .saturating_mul(1u32 << self.attempt.min(20))
            .min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        let half = base / 2;
        let spread = u64::try_from((base - half).as_micros()).unwrap_or(u64::MAX);
        let jitter = if spread == 0 {
            0
        } else {
            OsRng.next_u64() % (spread + 1)
        };
        half + Duration::from_micros(jitter)
    }

    /// Starts the sequence over (after a connection that lasted).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// Resets if a connection that was up for `uptime` lasted long enough
    /// ([`Backoff::reset_after`]).
    pub fn connection_ended(&mut self, uptime: Duration) {
        if uptime >= self.reset_after {
            self.reset();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_within_their_jitter_and_stop_at_the_cap() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(1000));
        let ranges = [
            (50, 100),
            (100, 200),
            (200, 400),
            (400, 800),
            (500, 1000),
            (500, 1000),
        ];
        for (lo, hi) in ranges {
            let w = b.next_wait();
            assert!(
                w >= Duration::from_millis(lo) && w <= Duration::from_millis(hi),
                "{w:?} outside {lo}..={hi} ms"
            );
        }
    }

    #[test]
    fn a_long_connection_resets_and_a_short_one_does_not() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(1000));
        for _ in 0..5 {
            b.next_wait();
        }
        b.connection_ended(Duration::from_millis(10));
        assert!(b.next_wait() >= Duration::from_millis(500));
        b.connection_ended(Duration::from_secs(2));
        assert!(b.next_wait() <= Duration::from_millis(100));
    }

    #[test]
    fn degenerate_settings_still_wait() {
        let mut b = Backoff::new(Duration::ZERO, Duration::ZERO);
        let w = b.next_wait();
        assert!(w <= Duration::from_millis(1));
        for _ in 0..100 {
            b.next_wait();
        }
    }
}
