//! `loadlab probe`, `loadlab capacity`, `loadlab compare` and the findings of a run, against
//! the reference service's black boxes on 127.0.0.1.

use crate::support::{loadlab, read_json};

#[test]
fn a_run_whose_connections_were_all_refused_says_only_that() {
    let port = crate::support::closed_port();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let out = loadlab(&[
        "run",
        &format!("http://127.0.0.1:{port}/"),
        "-n",
        "50",
        "-c",
        "2",
        "--json",
        json.to_str().unwrap(),
    ]);
    let s = read_json(&json);
    let kinds = crate::support::finding_kinds(&s);
    assert_eq!(kinds, ["errors"], "{s}");
    let next = s["findings"][0]["next"].as_str().unwrap();
    assert!(next.contains(&format!("127.0.0.1:{port}")), "{next}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("Little"), "{stdout}");
}
