//! Comparing runs: each run's figures beside the first's, and for the medians and p99s
//! whether the difference is larger than the run-to-run noise, judged by a bootstrap over the
//! per-second values of each run.

use serde::Serialize;

/// Resamples drawn for a bootstrap.
pub const ROUNDS: usize = 2000;

/// A difference between two runs' per-second values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Difference {
    /// Median of the second run's per-second values over the first's.
    pub ratio: f64,
    /// 95 % interval of the difference of medians (second − first), same unit as the values.
    pub low: f64,
    /// Upper end of that interval.
    pub high: f64,
    /// True when the interval leaves out zero: more than noise.
    pub significant: bool,
}

/// The median of `v` (0 when empty).
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Compares per-second values of two runs: the ratio of their medians and a percentile
/// bootstrap interval for the difference, each run's seconds resampled with replacement.
/// `None` when either run has fewer than 3 seconds (too few to say anything about noise).
pub fn difference(first: &[f64], second: &[f64], seed: u64) -> Option<Difference> {
    if first.len() < 3 || second.len() < 3 {
        return None;
    }
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut draw = |v: &[f64]| {
        let sample: Vec<f64> = (0..v.len()).map(|_| v[rng.usize(..v.len())]).collect();
        median(&sample)
    };
    let mut diffs: Vec<f64> = (0..ROUNDS).map(|_| draw(second) - draw(first)).collect();
    diffs.sort_by(f64::total_cmp);
    let low = diffs[(0.025 * ROUNDS as f64) as usize];
    let high = diffs[(0.975 * ROUNDS as f64) as usize - 1];
    let base = median(first);
    Some(Difference {
        ratio: if base > 0.0 {
            median(second) / base
        } else {
            f64::INFINITY
        },
        low,
        high,
        significant: low > 0.0 || high < 0.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noisy(center: f64, spread: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = fastrand::Rng::with_seed(seed);
        (0..n)
            .map(|_| center + spread * (rng.f64() - 0.5))
            .collect()
    }

    #[test]
    fn a_real_shift_is_significant_and_noise_is_not() {
        let a = noisy(10.0, 2.0, 30, 1);
        let b = noisy(13.0, 2.0, 30, 2);
        let d = difference(&a, &b, 9).unwrap();
        assert!(d.significant, "{d:?}");
        assert!((d.ratio - 1.3).abs() < 0.1, "{d:?}");
        assert!(d.low > 0.0 && d.high < 6.0);
        let c = noisy(10.0, 2.0, 30, 3);
        let d = difference(&a, &c, 9).unwrap();
        assert!(!d.significant, "{d:?}");
        assert!(difference(&a[..2], &c, 9).is_none());
    }

    #[test]
    fn medians_of_odd_and_even_lengths() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }
}
