//! An experiment's verdicts as sentences, after the lab's table: one line per comparison and
//! measure, the factor and sides first, then what the analysis said.

use std::fmt::Write;

use loadlab_analyze::verdict::{Factor, Verdict};

/// The verdicts, a line each (empty when there are none).
pub fn render_verdicts(verdicts: &[Verdict]) -> String {
    let mut out = String::new();
    if verdicts.is_empty() {
        return out;
    }
    out.push_str("  verdicts (ratio of variant to baseline; the interval is over the rounds):\n");
    for v in verdicts {
        let mark = if v.differs { "≠" } else { "=" };
        let _ = writeln!(out, "  {mark} {}: {}", heading(v), v.why);
    }
    out
}

/// What a verdict compares, on what and by which measure: "3 workers vs 1 worker [block,
/// breaking point]".
pub fn heading(v: &Verdict) -> String {
    let on = match (&v.factor, &v.topology) {
        (Factor::Workload, Some(t)) => format!("on {t}"),
        _ => v.workload.clone(),
    };
    format!(
        "{} vs {} [{on}, {}]",
        v.variant,
        v.baseline,
        v.measure.replace('_', " ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_verdict_is_one_line_naming_its_sides_and_measure() {
        let v = Verdict {
            factor: Factor::Topology,
            measure: "breaking_point".into(),
            baseline: "1 worker".into(),
            variant: "3 workers".into(),
            workload: "block".into(),
            topology: None,
            ratio: 3.0,
            ci_low: 2.8,
            ci_high: 3.2,
            rounds: 3,
            differs: true,
            why: "breaking point ×3.00 (3 workers over 1 worker)".into(),
        };
        let text = render_verdicts(std::slice::from_ref(&v));
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(
            text.contains("≠ 3 workers vs 1 worker [block, breaking point]"),
            "{text}"
        );
        assert!(render_verdicts(&[]).is_empty());
    }
}
