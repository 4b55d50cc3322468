//! How throughput scaled across topology sizes: the ratio to the smallest against the ideal,
//! and with three sizes or more the Universal Scalability Law with its predicted peak.

use crate::usl::Usl;

/// One line for a workload measured at several sizes, given as (processes, req/s) points;
/// `None` with fewer than two sizes or no throughput at the smallest.
pub fn scaling_line(workload: &str, points: &[(f64, f64)]) -> Option<String> {
    let mut points = points.to_vec();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    points.dedup_by(|a, b| a.0 == b.0);
    let (first, last) = (*points.first()?, *points.last()?);
    if points.len() < 2 || first.1 <= 0.0 {
        return None;
    }
    let mut line = format!(
        "{workload}: {:.0} → {:.0} processes gave ×{:.2} throughput (ideal ×{:.0})",
        first.0,
        last.0,
        last.1 / first.1,
        last.0 / first.0
    );
    // The law's N is processes; normalized so one process is where it starts.
    let scaled: Vec<(f64, f64)> = points.iter().map(|(n, x)| (n / first.0, *x)).collect();
    if let Some(law) = Usl::fit(&scaled) {
        line.push_str(&format!("; USL σ = {:.3}, κ = {:.4}", law.sigma, law.kappa));
        if let Some(peak) = law.peak_concurrency() {
            line.push_str(&format!(
                ", peak near {:.0} processes ({:.0} req/s)",
                peak * first.0,
                law.throughput(peak)
            ));
        }
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_sizes_give_the_ratio_against_the_ideal_and_one_size_gives_nothing() {
        let line = scaling_line("calc", &[(3.0, 290.0), (1.0, 100.0)]).unwrap();
        assert!(
            line.starts_with("calc: 1 → 3 processes gave ×2.90 throughput (ideal ×3)"),
            "{line}"
        );
        assert!(scaling_line("calc", &[(1.0, 100.0)]).is_none());
        assert!(scaling_line("calc", &[(1.0, 0.0), (2.0, 5.0)]).is_none());
    }
}
