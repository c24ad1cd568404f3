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
