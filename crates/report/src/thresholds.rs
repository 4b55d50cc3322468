//! Thresholds for people and for CI: the pass/fail lines printed after a run, and the JUnit
//! XML report CI systems read.

use std::fmt::Write;

use loadlab_run::ThresholdResult;

/// The thresholds' lines for the terminal: a count, then each threshold with its measured
/// value; empty when there are none.
pub fn render_thresholds(results: &[ThresholdResult]) -> String {
    let mut out = String::new();
    if results.is_empty() {
        return out;
    }
    let met = results.iter().filter(|r| r.pass).count();
    let _ = writeln!(out, "  thresholds   {met} of {} met", results.len());
    let width = results.iter().map(|r| r.threshold.len()).max().unwrap_or(0);
    for r in results {
        let verdict = match (r.pass, r.strict) {
            (true, _) => "ok  ",
            (false, true) => "FAIL",
            (false, false) => "miss",
        };
        let note = if !r.pass && !r.strict {
            "  (not strict: reported only)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "    {verdict}  {:<width$}  {}{note}",
            r.threshold,
            r.measured_text()
        );
    }
    out
}

/// The JUnit XML of thresholds checked on runs: a test suite per run (`(label, duration_s,
/// results)`), a test case per threshold; a failed strict threshold is a `<failure>`, a failed
/// non-strict one is `<skipped>` (CI shows it without failing the build).
///
/// Written by hand: the format is a dozen elements and needs only attribute escaping, less
/// than an XML writer's setup.
pub fn junit_xml(suites: &[(String, f64, Vec<ThresholdResult>)]) -> String {
    let count = |pred: fn(&ThresholdResult) -> bool| {
        suites
            .iter()
            .flat_map(|(_, _, r)| r)
            .filter(|r| pred(r))
            .count()
    };
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"loadlab thresholds\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">",
        count(|_| true),
        count(ThresholdResult::fails_run),
        count(|r| !r.pass && !r.strict),
    );
    for (label, secs, results) in suites {
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" time=\"{secs:.3}\">",
            escape(label),
            results.len(),
            results.iter().filter(|r| r.fails_run()).count(),
            results.iter().filter(|r| !r.pass && !r.strict).count(),
        );
        for r in results {
            let case = format!(
                "    <testcase name=\"{}\" classname=\"loadlab.{}\" time=\"0\"",
                escape(&r.threshold),
                escape(&class_name(label)),
            );
            let message = format!("measured {}, limit {}", r.measured_text(), r.threshold);
            if r.pass {
                let _ = writeln!(
                    out,
                    "{case}>\n      <system-out>{}</system-out>\n    </testcase>",
                    escape(&message)
                );
            } else if r.strict {
                let _ = writeln!(
                    out,
                    "{case}>\n      <failure type=\"threshold\" message=\"{}\"/>\n    </testcase>",
                    escape(&message)
                );
            } else {
                let _ = writeln!(
                    out,
                    "{case}>\n      <skipped message=\"{}\"/>\n    </testcase>",
                    escape(&format!("not strict: {message}"))
                );
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// A label as a dotted class name: CI systems group test cases by the part before the last
/// dot, so dots and slashes in URLs become underscores.
fn class_name(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Text made safe inside an XML attribute or element.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 forbids most control characters even escaped.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(threshold: &str, measured: Option<f64>, pass: bool, strict: bool) -> ThresholdResult {
        ThresholdResult {
            threshold: threshold.into(),
            metric: "p99".into(),
            name: None,
            comparison: "<".into(),
            limit: 300.0,
            unit: "ms".into(),
            measured,
            pass,
            strict,
            reason: measured.is_none().then(|| "no request completed".into()),
        }
    }

    #[test]
    fn lines_say_each_verdict_and_value() {
        let text = render_thresholds(&[
            result("p99<300ms", Some(212.4), true, true),
            result("p50<1ms", Some(3.0), false, false),
            result("p99{a&b}<300ms", None, false, true),
        ]);
        assert!(text.contains("1 of 3 met"), "{text}");
        assert!(text.contains("ok    p99<300ms       212.40 ms"), "{text}");
        assert!(
            text.contains("miss") && text.contains("reported only"),
            "{text}"
        );
        assert!(
            text.contains("FAIL  p99{a&b}<300ms  no request completed"),
            "{text}"
        );
        assert!(render_thresholds(&[]).is_empty());
    }

    #[test]
    fn junit_counts_and_escapes() {
        let xml = junit_xml(&[(
            "http://127.0.0.1:1/a?x=1&y=\"2\"".into(),
            10.0,
            vec![
                result("p99<300ms", Some(400.0), false, true),
                result("p50<1ms", Some(3.0), false, false),
                result("max<1s", Some(3.0), true, true),
            ],
        )]);
        assert!(
            xml.contains("tests=\"3\" failures=\"1\" skipped=\"1\""),
            "{xml}"
        );
        assert!(xml.contains("name=\"p99&lt;300ms\""), "{xml}");
        assert!(xml.contains("a?x=1&amp;y=&quot;2&quot;"), "{xml}");
        assert!(!xml.contains("y=\"2\""), "{xml}");
    }
}
