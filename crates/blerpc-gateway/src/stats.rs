//! Per-device call statistics: counts and a small latency histogram, allocated on the first
//! call (a device nobody calls costs nothing here).

use std::time::Duration;

/// Buckets of the latency histogram: bucket `i` holds latencies below `FLOOR_US × GROWTH^(i+1)`;
/// 80 buckets of ×1.25 span 10 µs to ~10 min (590 s; longer lands in the last).
const BUCKETS: usize = 80;
const FLOOR_US: f64 = 10.0;
const GROWTH: f64 = 1.25;

/// Calls, errors and latencies of one device.
#[derive(Clone, Debug, Default)]
pub struct CallStats {
    /// Calls answered (successfully or with an error).
    pub calls: u64,
    /// Calls that failed (any cause).
    pub errors: u64,
    latencies: Option<Box<[u32; BUCKETS]>>,
}

impl CallStats {
    /// Records one call's outcome and latency.
    pub fn record(&mut self, latency: Duration, ok: bool) {
        self.calls += 1;
        if !ok {
            self.errors += 1;
        }
        let buckets = self.latencies.get_or_insert_with(|| Box::new([0; BUCKETS]));
        let slot = &mut buckets[bucket(latency)];
        *slot = slot.saturating_add(1);
    }

    /// The `q` quantile (0 to 1) of the recorded latencies, in milliseconds: the upper edge of
    /// its bucket (at most 25 % above the true value). `None` before the first call.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        let buckets = self.latencies.as_ref()?;
        let total: u64 = buckets.iter().map(|&n| u64::from(n)).sum();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, &n) in buckets.iter().enumerate() {
            seen += u64::from(n);
            if seen >= rank {
                return Some(upper_edge_us(i) / 1000.0);
            }
        }
        Some(upper_edge_us(BUCKETS - 1) / 1000.0)
    }
}

fn bucket(latency: Duration) -> usize {
    let us = latency.as_secs_f64() * 1e6;
    if us < FLOOR_US * GROWTH {
        return 0;
    }
    let i = ((us / FLOOR_US).ln() / GROWTH.ln()).floor() as usize;
    i.min(BUCKETS - 1)
}

fn upper_edge_us(i: usize) -> f64 {
    FLOOR_US * GROWTH.powi(i as i32 + 1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn quantiles_come_within_a_bucket_of_the_truth() {
        let mut s = CallStats::default();
        assert_eq!(s.quantile_ms(0.5), None);
        for ms in 1..=100u64 {
            s.record(Duration::from_millis(ms), ms != 7);
        }
        assert_eq!((s.calls, s.errors), (100, 1));
        let p50 = s.quantile_ms(0.5).unwrap();
        assert!((50.0..=62.5).contains(&p50), "{p50}");
        let p99 = s.quantile_ms(0.99).unwrap();
        assert!((99.0..=124.0).contains(&p99), "{p99}");
    }

    #[test]
    fn extremes_land_in_the_end_buckets() {
        let mut s = CallStats::default();
        s.record(Duration::ZERO, true);
        assert!(s.quantile_ms(1.0).unwrap() <= 0.0125);
        s.record(Duration::from_secs(100_000), true);
        assert!(s.quantile_ms(1.0).unwrap() > 500_000.0);
    }
}
