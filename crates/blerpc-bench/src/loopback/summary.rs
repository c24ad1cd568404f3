//! The figures of one loopback row: percentiles of one run, medians across repetitions.

use serde::Serialize;

use crate::stats::{median, quantile};

/// The figures of one run (or the medians of several), in the published table's shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Timed messages (warm-up excluded).
    pub messages: usize,
    /// Median round trip, ms.
    pub p50_ms: f64,
    /// 95th percentile, ms.
    pub p95_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Mean round trip, ms.
    pub mean_ms: f64,
    /// Slowest round trip, ms.
    pub max_ms: f64,
    /// Messages per second: timed messages over the wall time of the timed loop (all clients).
    pub msg_per_s: f64,
}

impl Summary {
    /// Summarises round trips in nanoseconds measured over `wall_s` seconds.
    pub fn from_nanos(latencies_ns: &[u64], wall_s: f64) -> Summary {
        let mut ms: Vec<f64> = latencies_ns.iter().map(|&n| n as f64 / 1e6).collect();
        ms.sort_by(f64::total_cmp);
        let n = ms.len();
        let mean = if n == 0 {
            0.0
        } else {
            ms.iter().sum::<f64>() / n as f64
        };
        Summary {
            messages: n,
            p50_ms: quantile(&ms, 0.50),
            p95_ms: quantile(&ms, 0.95),
            p99_ms: quantile(&ms, 0.99),
            mean_ms: mean,
            max_ms: ms.last().copied().unwrap_or(0.0),
            msg_per_s: if wall_s > 0.0 { n as f64 / wall_s } else { 0.0 },
        }
    }

    /// Field by field medians of several runs.
    pub fn median_of(runs: &[Summary]) -> Summary {
        let m = |f: fn(&Summary) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
        Summary {
            messages: runs.iter().map(|r| r.messages).max().unwrap_or(0),
            p50_ms: m(|r| r.p50_ms),
            p95_ms: m(|r| r.p95_ms),
            p99_ms: m(|r| r.p99_ms),
            mean_ms: m(|r| r.mean_ms),
            max_ms: m(|r| r.max_ms),
            msg_per_s: m(|r| r.msg_per_s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_nanos() {
        let s = Summary::from_nanos(&[3_000_000, 1_000_000, 2_000_000], 0.5);
        assert_eq!(s.messages, 3);
        assert_eq!(s.p50_ms, 2.0);
        assert_eq!(s.mean_ms, 2.0);
        assert_eq!(s.max_ms, 3.0);
        assert_eq!(s.msg_per_s, 6.0);
        let m = Summary::median_of(&[
            s,
            Summary { p50_ms: 4.0, ..s },
            Summary { p50_ms: 1.0, ..s },
        ]);
        assert_eq!(m.p50_ms, 2.0);
    }
}
