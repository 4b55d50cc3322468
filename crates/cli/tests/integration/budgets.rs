//! Budgets in a lab: replicas with CPU quotas and memory limits enforced by control groups, the
//! generator on a core of its own, what each budget did read from the kernel, and the budgets
//! that do not fit refused before anything starts. They need root (or a delegated cgroup), as
//! this project's test machines give.

#[test]
fn a_budget_that_does_not_fit_is_refused_in_one_line_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let cores = std::thread::available_parallelism().unwrap().get();
    // One more core's worth of quota than the host has: it cannot fit beside the generator.
    let experiment = format!(
        "name: too big\ntopologies:\n  - {{ name: wide, replicas: {}, cpus: 0.5 }}\n\
         workloads:\n  - {{ name: ping, run: \"/ping -R 10 -d 1s\" }}\n",
        2 * cores + 1
    );
    let (code, stdout, stderr, _) = crate::support::lab_exit(dir.path(), &experiment);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    let line = stderr.trim();
    assert_eq!(line.lines().count(), 1, "{stderr}");
    assert!(
        line.contains(&format!(
            "topology \"wide\": its CPU quotas add up to {} × 0.5",
            2 * cores + 1
        )) && line.contains("oversubscribe: true"),
        "{line}"
    );
    assert!(
        !dir.path().join("out").exists(),
        "the lab started: {stdout}"
    );
}
