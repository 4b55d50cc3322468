//! Thresholds gating CI: `--slo` on `run`, a scenario's `ensure`, `report --slo` on a saved
//! run, their exit codes, and the JUnit file, against a real server.

use crate::support::{exit_code, loadlab, stdout_of, EXIT_THRESHOLDS};

#[test]
fn a_lab_workloads_thresholds_fail_the_lab_and_fill_one_junit_suite_per_cell() {
    let _shared = crate::support::shared();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("exp.yaml");
    std::fs::write(
        &file,
        "name: gate\n\
         topologies:\n  - { name: one }\n\
         workloads:\n  - { name: slow, run: \"/delay?ms=20 -c 2 -n 40\", slo: \"p50<5ms\" }\n  \
         - { name: quick, run: \"/ping -c 2 -n 40 --slo 'p50<5s'\" }\n",
    )
    .unwrap();
    let junit = dir.path().join("lab.xml");
    let out = loadlab(&[
        "lab",
        file.to_str().unwrap(),
        "--out",
        dir.path().join("out").to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    let text = stdout_of(&out);
    assert_eq!(exit_code(&out), EXIT_THRESHOLDS, "{text}");
    assert!(
        text.contains("one / slow") && text.contains("FAIL  p50<5ms"),
        "{text}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("JUnit is well-formed XML");
    let suites: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testsuite"))
        .map(|n| {
            (
                n.attribute("name").unwrap(),
                n.attribute("failures").unwrap(),
            )
        })
        .collect();
    assert_eq!(suites, [("one / slow", "1"), ("one / quick", "0")]);
}
