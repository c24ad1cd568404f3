//! Time as the core sees it: an opaque, monotonic [`Instant`] handed in by the caller.
//!
//! The core never reads a clock. Every runtime (tokio, the simulator, an MCU timer) converts its own
//! notion of "now" into an [`Instant`] counted in microseconds from an arbitrary epoch of its choice,
//! and passes it to `handle_input`, `handle_timeout` and the user operations. Durations are
//! [`core::time::Duration`].

use core::ops::{Add, Sub};
use core::time::Duration;

/// A point on the caller's monotonic clock, in microseconds since an epoch the caller picks.
///
/// Arithmetic saturates instead of overflowing, so peer-controlled durations can never panic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant {
    micros: u64,
}

impl Instant {
    /// The epoch of the caller's clock.
    pub const ZERO: Instant = Instant { micros: 0 };

    /// An instant `micros` microseconds after the epoch.
    pub const fn from_micros(micros: u64) -> Self {
        Instant { micros }
    }

    /// An instant `millis` milliseconds after the epoch (saturating).
    pub const fn from_millis(millis: u64) -> Self {
        Instant {
            micros: millis.saturating_mul(1000),
        }
    }

    /// Microseconds since the epoch.
    pub const fn as_micros(self) -> u64 {
        self.micros
    }

    /// The time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.micros.saturating_sub(earlier.micros))
    }

    /// `self + d`, saturating at the end of time.
    pub fn saturating_add(self, d: Duration) -> Instant {
        let add = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        Instant {
            micros: self.micros.saturating_add(add),
        }
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        self.saturating_add(rhs)
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_micros(u64::MAX - 1);
        assert_eq!((t + Duration::from_secs(1)).as_micros(), u64::MAX);
        assert_eq!(Instant::ZERO - t, Duration::ZERO);
        assert_eq!(
            Instant::from_millis(3) - Instant::from_millis(1),
            Duration::from_millis(2)
        );
    }
}
