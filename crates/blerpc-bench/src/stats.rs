//! The statistics every suite shares: quantiles of sorted samples and medians across
//! repetitions.

/// The `rate` quantile (0..=1) of `sorted` samples, linearly interpolated at `rate × (n − 1)`
/// (the published tools' method); 0 for no samples.
pub fn quantile(sorted: &[f64], rate: f64) -> f64 {
    let Some(last) = sorted.len().checked_sub(1) else {
        return 0.0;
    };
    let pos = rate.clamp(0.0, 1.0) * last as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let (Some(a), Some(b)) = (sorted.get(lo), sorted.get(hi)) else {
        return 0.0;
    };
    a + (b - a) * (pos - lo as f64)
}

/// The median of the finite `values` (the mean of the middle two for an even count); 0 for
/// none.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    quantile(&v, 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 1.0), 4.0);
        assert_eq!(quantile(&v, 0.5), 2.5);
        assert!((quantile(&v, 0.95) - 3.85).abs() < 1e-9);
        assert!((quantile(&[1.0, 5.0], 0.9) - 4.6).abs() < 1e-9);
        assert_eq!(quantile(&[7.0], 0.99), 7.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }

    #[test]
    fn medians_skip_what_is_not_finite() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[f64::NAN, 1.0, f64::INFINITY, 3.0]), 2.0);
        assert_eq!(median(&[]), 0.0);
    }
}
