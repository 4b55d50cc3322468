//! The unit tests of loadlab's `locust` package (Python, against a fake engine), run here so they
//! take a claim beside the other quiet tests instead of running after the tier. The browser
//! tests stay after it, in `scripts/test.sh`: their lab's capacity searches and CPU-bound cells
//! need the machine (among the shared tests a search found no breaking point, and the
//! Kubernetes test's generators, at 0.1 CPU each, fell behind beside them).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `command` to its end and fails the test with its output unless it exits 0.
fn passes(command: &mut Command, what: &str) {
    let out = command.stdin(Stdio::null()).output().unwrap_or_else(|e| {
        panic!("{what} could not start: {e} (scripts/test.sh installs what it needs)")
    });
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_locust_packages_unit_tests_pass_against_a_fake_engine() {
    // Some time how soon users start (two at once within 0.5 s): waits, so quiet.
    let _quiet = crate::support::quiet();
    let venv = crate::support::built_once(
        "LOADLAB_LOCUST_VENV",
        "locust-venv",
        "scripts/install-runtimes.sh",
    );
    passes(
        Command::new(venv.join("bin/python"))
            .args([
                "-m", "unittest", "discover", "-q", "-s", "tests", "-t", "tests",
            ])
            .current_dir(root().join("crates/engine/src/locust/python"))
            .env("PYTHONDONTWRITEBYTECODE", "1"),
        "the locust package's unit tests",
    );
}
