//! The bridge between tokio's clock and the core's `Instant` (microseconds since the connection
//! started).

use std::pin::Pin;
use std::time::Duration;

use blerpc_proto::Instant;

/// A connection's clock: the core's instants count from `base`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    base: tokio::time::Instant,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Clock {
            base: tokio::time::Instant::now(),
        }
    }

    /// Now, as the core counts.
    pub(crate) fn now(&self) -> Instant {
        let micros = self.base.elapsed().as_micros();
        Instant::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
    }

    /// A tokio instant as the core counts (no clock read).
    pub(crate) fn at(&self, t: tokio::time::Instant) -> Instant {
        let micros = t.saturating_duration_since(self.base).as_micros();
        Instant::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
    }

    /// A core instant on tokio's clock.
    pub(crate) fn to_tokio(self, t: Instant) -> tokio::time::Instant {
        self.base + std::time::Duration::from_micros(t.as_micros())
    }
}

/// The one timer of a connection task, re-armed in place instead of a new `Sleep` for every turn
/// of the loop: moving it to a later deadline is lock-free in tokio (the common case: a call's
/// deadline after the previous one's), where registering a new timer locks the driver and, if it
/// is earlier than the one the runtime parked on, wakes the driver (an eventfd write).
#[derive(Debug)]
pub(crate) struct Timer {
    sleep: Pin<Box<tokio::time::Sleep>>,
    deadline: Option<tokio::time::Instant>,
}

impl Timer {
    pub(crate) fn new() -> Self {
        // Never fires unless `set`: a month away, re-armed before it is first polled.
        let far = tokio::time::Instant::now() + Duration::from_secs(30 * 86_400);
        Timer {
            sleep: Box::pin(tokio::time::sleep_until(far)),
            deadline: None,
        }
    }

    /// Arms the timer for `deadline`, or disarms it.
    pub(crate) fn set(&mut self, deadline: Option<tokio::time::Instant>) {
        if let Some(d) = deadline
            && self.deadline != Some(d)
        {
            self.sleep.as_mut().reset(d);
        }
        self.deadline = deadline;
    }

    /// `true` while armed.
    pub(crate) fn is_armed(&self) -> bool {
        self.deadline.is_some()
    }

    /// Completes when the armed deadline passes (never while disarmed). Cancel-safe.
    pub(crate) async fn fired(&mut self) {
        if self.deadline.is_none() {
            return std::future::pending().await;
        }
        self.sleep.as_mut().await;
        self.deadline = None;
    }
}

/// When a connection task gives its buffers back: once, after it has been idle for `after`
/// without a break. The deadline to look again is armed once per idle period and not moved by
/// each call: a timer earlier than the one the runtime parked on makes tokio wake its driver (an
/// eventfd write and an extra `epoll_wait`), which re-arming after every response would cost on
/// every call.
#[derive(Debug)]
pub(crate) struct IdleRelease {
    after: Duration,
    since: Option<tokio::time::Instant>,
    check: Option<tokio::time::Instant>,
    released: bool,
}

impl IdleRelease {
    pub(crate) fn new(after: Duration) -> Self {
        IdleRelease {
            after,
            since: None,
            check: None,
            released: false,
        }
    }

    /// Called once per turn of the task's loop with whether the connection is idle now; `true`
    /// when the buffers are to be released now (once per idle period).
    pub(crate) fn update(&mut self, idle: bool, now: tokio::time::Instant) -> bool {
        if self.check.is_some_and(|c| c <= now) {
            self.check = None;
        }
        if !idle {
            self.since = None;
            self.released = false;
            return false;
        }
        let since = *self.since.get_or_insert(now);
        if self.released {
            return false;
        }
        if now >= since + self.after {
            self.released = true;
            return true;
        }
        if self.check.is_none() {
            self.check = Some(since + self.after);
        }
        false
    }

    /// `true` while the buffers are released (idle since the release).
    pub(crate) fn released(&self) -> bool {
        self.released
    }

    /// When to look again, if a release is still to come.
    pub(crate) fn deadline(&self) -> Option<tokio::time::Instant> {
        self.check.filter(|_| !self.released)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_release_fires_once_per_idle_period_and_calls_do_not_move_the_check() {
        let t0 = tokio::time::Instant::now();
        let ms = Duration::from_millis;
        let mut idle = IdleRelease::new(ms(1000));
        assert!(!idle.update(true, t0));
        assert_eq!(idle.deadline(), Some(t0 + ms(1000)));
        // A call (busy, then idle again) restarts the idle period but keeps the armed check.
        assert!(!idle.update(false, t0 + ms(300)));
        assert!(!idle.update(true, t0 + ms(400)));
        assert_eq!(idle.deadline(), Some(t0 + ms(1000)));
        // At the check the period is too short: the next check is its own end.
        assert!(!idle.update(true, t0 + ms(1000)));
        assert_eq!(idle.deadline(), Some(t0 + ms(1400)));
        assert!(idle.update(true, t0 + ms(1400)));
        assert!(idle.released());
        assert_eq!(idle.deadline(), None);
        // Once per idle period.
        assert!(!idle.update(true, t0 + ms(5000)));
        // Busy again: released no more; the next idle period releases again.
        assert!(!idle.update(false, t0 + ms(5001)));
        assert!(!idle.released());
        assert!(!idle.update(true, t0 + ms(5002)));
        assert!(idle.update(true, t0 + ms(6002)));
    }
}
