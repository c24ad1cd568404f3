//! The statistics of `blerpc-bench scale`: the published tool's summary (avg, median, min, max,
//! p90, p95 with linear interpolation at index `rate × (n − 1)` over the sorted samples) and true
//! latency percentiles from an HDR histogram.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::stats::quantile;

/// The published tool's six figures, in ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Theirs {
    /// Mean.
    pub avg: f64,
    /// 50th percentile (interpolated).
    pub median: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// 90th percentile (interpolated).
    pub p90: f64,
    /// 95th percentile (interpolated).
    pub p95: f64,
}

impl Theirs {
    /// The summary of `samples` (any order).
    pub fn of(samples: &[f64]) -> Theirs {
        if samples.is_empty() {
            return Theirs::default();
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        Theirs {
            avg: sorted.iter().sum::<f64>() / sorted.len() as f64,
            median: quantile(&sorted, 0.5),
            min: sorted.first().copied().unwrap_or(0.0),
            max: sorted.last().copied().unwrap_or(0.0),
            p90: quantile(&sorted, 0.9),
            p95: quantile(&sorted, 0.95),
        }
    }
}

/// True latency percentiles from a histogram, in ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tail {
    /// Samples.
    pub count: u64,
    /// 50th percentile.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest sample.
    pub max: f64,
}

impl Tail {
    /// The percentiles of a histogram of ns values.
    pub fn of(h: &Histogram<u64>) -> Tail {
        let ms = |ns: u64| ns as f64 / 1e6;
        Tail {
            count: h.len(),
            p50: ms(h.value_at_quantile(0.5)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        }
    }

    /// The percentiles of ns samples (through a histogram, like every other tail figure).
    pub fn of_ns(samples: &[u64]) -> Tail {
        let mut h = super::client::new_histogram();
        for &s in samples {
            let _ = h.record(s.max(1));
        }
        Tail::of(&h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_like_the_published_tool() {
        let s = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        // index 0.9 × 9 = 8.1: 9 + 0.1 × (10 − 9).
        assert!((quantile(&s, 0.9) - 9.1).abs() < 1e-9);
        assert!((quantile(&s, 0.5) - 5.5).abs() < 1e-9);
        assert!((quantile(&s, 0.95) - 9.55).abs() < 1e-9);
        let t = Theirs::of(&[10.0, 1.0, 5.0]);
        assert_eq!((t.min, t.max, t.median), (1.0, 10.0, 5.0));
        assert!((t.avg - 16.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn tails() {
        let t = Tail::of_ns(&[1_000_000; 100]);
        assert_eq!(t.count, 100);
        assert!((t.p50 - 1.0).abs() < 0.01, "{t:?}");
        assert!((t.max - 1.0).abs() < 0.01, "{t:?}");
    }
}
