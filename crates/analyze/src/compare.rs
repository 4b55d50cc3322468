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

/// One run against the baseline (`compare --json`'s `versus`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Versus {
    /// The run's name.
    pub run: String,
    /// Its throughput over the baseline's.
    pub throughput_ratio: f64,
    /// Its per-second medians against the baseline's (`None`: too few seconds).
    pub p50: Option<Difference>,
    /// Its per-second p99s against the baseline's.
    pub p99: Option<Difference>,
}

/// `compare --json`: each run's summary, and each against the first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareReport {
    /// The baseline's name.
    pub baseline: String,
    /// Every run's summary, the baseline first.
    pub runs: Vec<loadlab_run::Summary>,
    /// Every run but the first against it.
    pub versus: Vec<Versus>,
}

/// Every run after the first against it: throughput ratio, and whether the per-second medians
/// and p99s differ by more than noise. `runs` are (name, run), the baseline first.
pub fn versus_baseline(runs: &[(String, loadlab_run::SavedRun)]) -> Vec<Versus> {
    let Some((_, base)) = runs.first() else {
        return Vec::new();
    };
    let (b50, b99) = (per_second(base, "p50_ms"), per_second(base, "p99_ms"));
    let base_rps = base.summary.throughput.rps;
    runs.iter()
        .enumerate()
        .skip(1)
        .map(|(i, (label, run))| {
            let seed = i as u64;
            Versus {
                run: label.clone(),
                throughput_ratio: if base_rps > 0.0 {
                    run.summary.throughput.rps / base_rps
                } else {
                    f64::INFINITY
                },
                p50: difference(&b50, &per_second(run, "p50_ms"), seed),
                p99: difference(&b99, &per_second(run, "p99_ms"), seed + 1000),
            }
        })
        .collect()
}

/// A timeline column's values over the seconds that completed a request.
fn per_second(run: &loadlab_run::SavedRun, col: &str) -> Vec<f64> {
    let completed = run.column("completed");
    run.column(col)
        .into_iter()
        .zip(completed)
        .filter(|(v, n)| *n > 0.0 && v.is_finite())
        .map(|(v, _)| v)
        .collect()
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
