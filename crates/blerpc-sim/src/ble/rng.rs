//! The link's seeded RNG: SplitMix64, small and deterministic (no global RNG anywhere).

use std::time::Duration;

use super::params::DelayRange;

/// SplitMix64 (Steele, Lea, Flood 2014): one `u64` of state.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `true` with probability `p` (never draws when `p` is 0, so a lossless link's sequence
    /// does not depend on how many packets it sent).
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.next_f64() < p
    }

    /// A delay uniform in the range.
    pub(crate) fn delay(&mut self, r: DelayRange) -> Duration {
        if r.max <= r.min {
            return r.min;
        }
        let span = (r.max - r.min).as_nanos() as f64;
        r.min + Duration::from_nanos((span * self.next_f64()) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_deterministic_and_in_range() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
            let x = a.next_f64();
            assert_eq!(x, b.next_f64());
            assert!((0.0..1.0).contains(&x));
            let d = a.delay(DelayRange::micros(10, 20));
            assert_eq!(d, b.delay(DelayRange::micros(10, 20)));
            assert!(d >= Duration::from_micros(10) && d <= Duration::from_micros(20));
        }
        // The reference output of SplitMix64 seeded with 0.
        assert_eq!(SplitMix64::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
        assert!(!a.chance(0.0));
    }
}
