//! When connection events happen: the central's initial interval, then the interval the
//! peripheral asked for. Times are durations since the connection was made.

use std::time::Duration;

use super::params::{LinkParams, UPDATE_INSTANT_EVENTS};

/// The event grid of one connection.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    initial: Duration,
    interval: Duration,
    /// The first event at the new interval (`None`: one interval throughout).
    switch: Option<Duration>,
    last: Option<Duration>,
}

fn ceil_div(a: Duration, b: Duration) -> u128 {
    a.as_nanos().div_ceil(b.as_nanos().max(1))
}

fn times(d: Duration, k: u128) -> Duration {
    Duration::from_nanos(u64::try_from(d.as_nanos() * k).unwrap_or(u64::MAX))
}

impl Schedule {
    pub(crate) fn new(p: &LinkParams) -> Schedule {
        let interval = p.conn_interval;
        let initial = p.initial_interval.unwrap_or(interval);
        let switch = (initial != interval).then(|| {
            // The request goes out at `interval_update_after`; the update instant is at least
            // UPDATE_INSTANT_EVENTS events later, on the old grid.
            let at = p.interval_update_after + initial * UPDATE_INSTANT_EVENTS;
            times(initial, ceil_div(at, initial))
        });
        Schedule {
            initial,
            interval,
            switch,
            // The event at the origin is the connection's first, taken by connection setup.
            last: Some(Duration::ZERO),
        }
    }

    /// The start of the first event at or after `t`, strictly after the previous one returned.
    pub(crate) fn next_event(&mut self, t: Duration) -> Duration {
        let t = match self.last {
            Some(l) if t <= l => l + Duration::from_nanos(1),
            _ => t,
        };
        let e = match self.switch {
            Some(s) if t <= s => times(self.initial, ceil_div(t, self.initial)),
            _ => {
                let base = self.switch.unwrap_or(Duration::ZERO);
                base + times(self.interval, ceil_div(t - base, self.interval))
            }
        };
        self.last = Some(e);
        e
    }

    /// The interval in force at `t`.
    pub(crate) fn interval_at(&self, t: Duration) -> Duration {
        match self.switch {
            Some(s) if t < s => self.initial,
            _ => self.interval,
        }
    }

    /// When the new interval takes effect, if it differs from the initial one.
    pub(crate) fn switch_at(&self) -> Option<Duration> {
        self.switch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_follow_the_initial_then_the_requested_interval() {
        let o = Duration::ZERO;
        let p = LinkParams {
            initial_interval: Some(Duration::from_millis(30)),
            ..LinkParams::default()
        };
        let mut s = Schedule::new(&p);
        let ms = |n: u64| Duration::from_millis(n);
        assert_eq!(s.next_event(o), o + ms(30));
        assert_eq!(s.next_event(o), o + ms(60));
        assert_eq!(s.next_event(o + ms(61)), o + ms(90));
        // Requested at 5 s, in force at least 6 events (180 ms) later, on the 30 ms grid.
        assert_eq!(s.switch_at(), Some(o + ms(5190)));
        assert_eq!(s.interval_at(o + ms(5189)), ms(30));
        assert_eq!(s.interval_at(o + ms(5190)), ms(15));
        assert_eq!(s.next_event(o + ms(5170)), o + ms(5190));
        assert_eq!(s.next_event(o + ms(5191)), o + ms(5205));
        let mut flat = Schedule::new(&LinkParams::default());
        assert_eq!(flat.switch_at(), None);
        assert_eq!(flat.next_event(o + ms(16)), o + ms(30));
    }
}
