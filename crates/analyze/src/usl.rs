//! The Universal Scalability Law (Gunther): throughput at concurrency N is
//! `X(N) = λN / (1 + σ(N−1) + κN(N−1))`, with σ the cost of contention (queueing for a shared
//! resource) and κ the cost of coherency (crosstalk that makes more concurrency slower).
//! Fitted to a concurrency sweep, it predicts where throughput peaks.

pub use loadlab_run::lab::probe::Usl;

/// Fits the law to (concurrency, throughput) points by least squares on Gunther's
/// linearization `λN/X − 1 = σ(N−1) + κN(N−1)`, with λ from the point at N = 1 (or the
/// best per-client throughput), σ and κ kept non-negative. `None` with fewer than three
/// points or no point at N = 1's level.
pub fn fit(points: &[(f64, f64)]) -> Option<Usl> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(n, x)| *n >= 1.0 && *x > 0.0 && n.is_finite() && x.is_finite())
        .collect();
    if pts.len() < 3 {
        return None;
    }
    let lambda = pts
        .iter()
        .find(|(n, _)| *n == 1.0)
        .map(|(_, x)| *x)
        .unwrap_or_else(|| pts.iter().map(|(n, x)| x / n).fold(0.0, f64::max));
    let rows: Vec<(f64, f64, f64)> = pts
        .iter()
        .filter(|(n, _)| *n > 1.0)
        .map(|(n, x)| (n - 1.0, n * (n - 1.0), lambda * n / x - 1.0))
        .collect();
    let (sigma, kappa) = least_squares_2(&rows);
    let (sigma, kappa) = match (sigma < 0.0, kappa < 0.0) {
        (false, false) => (sigma, kappa),
        (_, true) => (
            least_squares_1(rows.iter().map(|r| (r.0, r.2))).max(0.0),
            0.0,
        ),
        (true, false) => (
            0.0,
            least_squares_1(rows.iter().map(|r| (r.1, r.2))).max(0.0),
        ),
    };
    Some(Usl {
        lambda,
        sigma: sigma.min(1.0),
        kappa,
    })
}

/// Least squares for `y = s·a + k·b` (no intercept): the normal equations solved directly.
fn least_squares_2(rows: &[(f64, f64, f64)]) -> (f64, f64) {
    let (mut aa, mut ab, mut bb, mut ay, mut by) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (a, b, y) in rows {
        aa += a * a;
        ab += a * b;
        bb += b * b;
        ay += a * y;
        by += b * y;
    }
    let det = aa * bb - ab * ab;
    if det.abs() < 1e-12 {
        return (least_squares_1(rows.iter().map(|r| (r.0, r.2))), 0.0);
    }
    ((ay * bb - by * ab) / det, (by * aa - ay * ab) / det)
}

/// Least squares for `y = s·a` (no intercept).
fn least_squares_1(rows: impl Iterator<Item = (f64, f64)>) -> f64 {
    let (mut aa, mut ay) = (0.0, 0.0);
    for (a, y) in rows {
        aa += a * a;
        ay += a * y;
    }
    if aa == 0.0 {
        0.0
    } else {
        ay / aa
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(law: &Usl, noise: f64, seed: u64) -> Vec<(f64, f64)> {
        let mut rng = fastrand::Rng::with_seed(seed);
        [1.0, 2.0, 4.0, 8.0, 16.0, 24.0, 32.0, 48.0, 64.0]
            .iter()
            .map(|n| (*n, law.throughput(*n) * (1.0 + noise * (rng.f64() - 0.5))))
            .collect()
    }

    #[test]
    fn exact_points_give_back_the_law() {
        let law = Usl {
            lambda: 1000.0,
            sigma: 0.05,
            kappa: 0.0008,
        };
        let fit = fit(&sweep(&law, 0.0, 1)).unwrap();
        assert!((fit.lambda - 1000.0).abs() < 1e-6);
        assert!((fit.sigma - 0.05).abs() < 1e-6, "{fit:?}");
        assert!((fit.kappa - 0.0008).abs() < 1e-8, "{fit:?}");
        let peak = fit.peak_concurrency().unwrap();
        assert!((peak - (0.95f64 / 0.0008).sqrt()).abs() < 1e-3);
    }

    #[test]
    fn noisy_points_give_a_close_law_and_peak() {
        let law = Usl {
            lambda: 200.0,
            sigma: 0.1,
            kappa: 0.002,
        };
        let fit = fit(&sweep(&law, 0.04, 7)).unwrap();
        assert!((fit.sigma - 0.1).abs() < 0.03, "{fit:?}");
        assert!((fit.kappa - 0.002).abs() < 0.0008, "{fit:?}");
        let (want, got) = (
            law.peak_concurrency().unwrap(),
            fit.peak_concurrency().unwrap(),
        );
        assert!((got - want).abs() / want < 0.2, "peak {got} vs {want}");
    }

    #[test]
    fn linear_scaling_has_no_peak_and_too_few_points_no_fit() {
        let pts: Vec<(f64, f64)> = (1..6).map(|n| (n as f64, 10.0 * n as f64)).collect();
        let law = fit(&pts).unwrap();
        assert!(law.sigma.abs() < 1e-9 && law.kappa.abs() < 1e-12, "{law:?}");
        assert_eq!(law.peak_concurrency(), None);
        assert_eq!(fit(&pts[..2]), None);
    }
}
