//! The project's two Python suites, run here so they share the machine by the harness's claims
//! instead of after the tier, one after the other: the browser
//! tests (`tests/browser`: the HTML report and the live dashboard in Debian's Chromium, driven by
//! Playwright) and the unit tests of loadlab's `locust` package against a fake engine.

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
fn the_browser_suite_draws_the_reports_and_the_dashboard_in_chromium() {
    let _shared = crate::support::shared_long();
    let venv =
        crate::support::built_once("LOADLAB_BROWSER_VENV", "browser-venv", "scripts/test.sh");
    let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("chromium is missing: install it with `sudo apt-get install chromium`");
    passes(
        Command::new(venv.join("bin/python"))
            .args([
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "tests/browser",
            ])
            .current_dir(root())
            .env("LOADLAB_BIN", env!("CARGO_BIN_EXE_loadlab"))
            .env("CHROMIUM", chromium)
            .env("PYTHONDONTWRITEBYTECODE", "1"),
        "the browser suite (pytest tests/browser)",
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
