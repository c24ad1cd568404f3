//! The bridge between tokio's clock and the core's `Instant` (microseconds since the connection
//! started).

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

    /// A core instant on tokio's clock.
    pub(crate) fn to_tokio(self, t: Instant) -> tokio::time::Instant {
        self.base + std::time::Duration::from_micros(t.as_micros())
    }
}
