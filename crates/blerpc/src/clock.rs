//! The bridge between tokio's clock and the core's `Instant` (microseconds since the connection
//! started).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
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
    /// The sleep holds the task's waker from a poll at the current deadline. Only a fired or
    /// re-armed sleep is polled again (tokio may have let go of the waker then); otherwise
    /// [`Timer::fired`] looks at the sleep's state alone: polling a `Sleep` on every turn of a
    /// connection's loop cost ~400 instructions a turn. A connection task polls its timer from
    /// its own task only, so the waker held is always that task's.
    registered: bool,
}

impl Timer {
    pub(crate) fn new() -> Self {
        // Never fires unless `set`: a month away, re-armed before it is first polled.
        let far = tokio::time::Instant::now() + Duration::from_secs(30 * 86_400);
        Timer {
            sleep: Box::pin(tokio::time::sleep_until(far)),
            deadline: None,
            registered: false,
        }
    }

    /// Arms the timer for `deadline`, or disarms it.
    pub(crate) fn set(&mut self, deadline: Option<tokio::time::Instant>) {
        if let Some(d) = deadline
            && self.deadline != Some(d)
        {
            self.sleep.as_mut().reset(d);
            self.registered = false;
        }
        self.deadline = deadline;
    }

    /// `true` while armed.
    pub(crate) fn is_armed(&self) -> bool {
        self.deadline.is_some()
    }

    /// Completes when the armed deadline passes (never while disarmed). Cancel-safe.
    pub(crate) fn fired(&mut self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            if self.deadline.is_none() || (self.registered && !self.sleep.is_elapsed()) {
                return Poll::Pending;
            }
            match self.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    self.deadline = None;
                    self.registered = false;
                    Poll::Ready(())
                }
                Poll::Pending => {
                    self.registered = true;
                    Poll::Pending
                }
            }
        })
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

/// `timeout` less `random / u32::MAX` of `spread` (clamped to 0–0.9; not a number: 0) of it.
pub(crate) fn spread_deadline(timeout: Duration, spread: f64, random: u32) -> Duration {
    let spread = if spread.is_finite() {
        spread.clamp(0.0, 0.9)
    } else {
        0.0
    };
    timeout.saturating_sub(timeout.mul_f64(spread * f64::from(random) / f64::from(u32::MAX)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_are_spread_within_the_share_and_never_below_a_tenth() {
        let ten = Duration::from_secs(10);
        assert_eq!(spread_deadline(ten, 0.2, 0), ten);
        assert_eq!(spread_deadline(ten, 0.2, u32::MAX), Duration::from_secs(8));
        assert_eq!(spread_deadline(ten, 0.0, u32::MAX), ten);
        // Clamped: never below a tenth of the timeout, and a share that is not a number is 0.
        assert_eq!(spread_deadline(ten, 5.0, u32::MAX), Duration::from_secs(1));
        assert_eq!(spread_deadline(ten, -1.0, u32::MAX), ten);
        assert_eq!(spread_deadline(ten, f64::NAN, u32::MAX), ten);
        let mid = spread_deadline(ten, 0.2, u32::MAX / 2);
        assert!(mid > Duration::from_secs(8) && mid < ten, "{mid:?}");
    }

    /// Polls a fresh `fired()` once per turn, as a connection task's `select!` does: the first
    /// `turns` polls wake the task at once (busy turns), then it waits for the timer's wake-up.
    async fn turns_until_fired(timer: &mut Timer, turns: usize) -> usize {
        let mut polls = 0;
        std::future::poll_fn(|cx| {
            polls += 1;
            let mut fired = std::pin::pin!(timer.fired());
            if fired.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            if polls <= turns {
                cx.waker().wake_by_ref();
            }
            Poll::Pending
        })
        .await;
        polls
    }

    /// One poll of `fired()` with the task's own waker; `true` if it completed.
    async fn poll_once(timer: &mut Timer) -> bool {
        std::future::poll_fn(|cx| {
            Poll::Ready(std::pin::pin!(timer.fired()).as_mut().poll(cx).is_ready())
        })
        .await
    }

    #[tokio::test(start_paused = true)]
    async fn timer_wakes_its_task_without_being_polled_every_turn() {
        let ms = Duration::from_millis;
        let t0 = tokio::time::Instant::now();
        let mut timer = Timer::new();
        timer.set(Some(t0 + ms(10)));
        // Five turns before the deadline: only the first registers; the timer's own wake-up
        // completes it at the deadline.
        let polls = tokio::time::timeout(ms(1000), turns_until_fired(&mut timer, 5))
            .await
            .expect("the timer woke the task");
        assert_eq!(tokio::time::Instant::now() - t0, ms(10));
        assert!(polls > 5);
        assert!(!timer.is_armed());
        // Re-armed after firing: a new registration, and it fires again.
        timer.set(Some(t0 + ms(30)));
        tokio::time::timeout(ms(1000), turns_until_fired(&mut timer, 3))
            .await
            .expect("the re-armed timer woke the task");
        assert_eq!(tokio::time::Instant::now() - t0, ms(30));
    }

    #[tokio::test(start_paused = true)]
    async fn timer_moved_earlier_or_later_after_registering_fires_at_the_new_deadline() {
        let ms = Duration::from_millis;
        let t0 = tokio::time::Instant::now();
        let mut timer = Timer::new();
        timer.set(Some(t0 + ms(100)));
        assert!(!poll_once(&mut timer).await);
        // Earlier than the registered deadline.
        timer.set(Some(t0 + ms(20)));
        tokio::time::timeout(ms(1000), turns_until_fired(&mut timer, 2))
            .await
            .expect("fired at the earlier deadline");
        assert_eq!(tokio::time::Instant::now() - t0, ms(20));
        // Later than a registered one.
        timer.set(Some(t0 + ms(40)));
        assert!(!poll_once(&mut timer).await);
        timer.set(Some(t0 + ms(70)));
        tokio::time::timeout(ms(1000), turns_until_fired(&mut timer, 2))
            .await
            .expect("fired at the later deadline");
        assert_eq!(tokio::time::Instant::now() - t0, ms(70));
        // Disarmed: never fires.
        timer.set(Some(t0 + ms(90)));
        assert!(!poll_once(&mut timer).await);
        timer.set(None);
        assert!(
            tokio::time::timeout(ms(500), turns_until_fired(&mut timer, 2))
                .await
                .is_err()
        );
    }

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
