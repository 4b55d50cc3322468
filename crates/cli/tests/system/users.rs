//! Virtual users from scenario files (flows with payload, captures, templates, expectations
//! and loops; Markov user models with static resources; users phases) against the real
//! reference service on 127.0.0.1.

use crate::support::{read_json, run_scenario};
use loadlab_service::TestServer;

#[test]
fn users_phases_hold_their_user_counts() {
    // It reads each phase's rate, a time its users wait (20 ms answers, 30 ms thinks) on little
    // CPU: beside busy shared tests three users' cycles stretched to 11.8 requests/s each.
    let _quiet = crate::support::quiet();
    let server = TestServer::start(1).unwrap();
    let (dir, file) = crate::support::scenario_file(
        r#"config:
  target: "http://127.0.0.1:9"
  phases:
    - { name: three, duration: 2, users: 3 }
    - { name: seven, duration: 2, users: 7 }
    - { name: two, duration: 2, users: 2 }
scenarios:
  - flow:
      - get: { url: "/delay?ms=20" }
      - think: 0.03
"#,
    );
    let out_dir = dir.path().join("run");
    run_scenario(&file, &server, &["--out", out_dir.to_str().unwrap()]);
    let s = read_json(&out_dir.join("summary.json"));
    assert_eq!(s["model"], "closed");
    assert_eq!(s["users"]["max_active"], 7);
    let csv = std::fs::read_to_string(out_dir.join("timeline.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "users_active").unwrap();
    let active: Vec<u64> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(col).unwrap().parse().unwrap())
        .collect();
    assert_eq!(&active[..6], &[3, 3, 7, 7, 2, 2], "{csv}");
    // A user's cycle is ~50 ms (20 ms delay + 30 ms think): about 20 requests/s per user.
    let rps: Vec<f64> = s["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rps"].as_f64().unwrap())
        .collect();
    for (rate, users) in rps.iter().zip([3.0, 7.0, 2.0]) {
        let per_user = rate / users;
        assert!((12.0..=21.0).contains(&per_user), "{rps:?}");
    }
}
