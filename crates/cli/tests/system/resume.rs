//! `loadlab lab --resume`: a lab killed with SIGKILL in the middle of a cell continues where it
//! stopped, keeps the cells that finished as they were, and ends with every cell judged; a
//! changed experiment is refused.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{loadlab, read_json};

/// Two rounds of three 2 s workloads on one replica: six cells, each waiting on `/delay`.
const EXPERIMENT: &str = "name: resumed\nrounds: 2\ntopologies:\n  - { name: one }\nworkloads:\n  \
     - { name: a, run: \"/delay?ms=5 -R 40 -d 2s\" }\n  \
     - { name: b, run: \"/delay?ms=10 -R 40 -d 2s\" }\n  \
     - { name: c, run: \"/delay?ms=20 -R 40 -d 2s\" }\n";

/// The finished cells' records under `out`.
fn finished(out: &Path) -> usize {
    ["a", "b", "c"]
        .iter()
        .flat_map(|w| (1..=2).map(move |r| out.join("one").join(w).join(format!("round-{r}"))))
        .filter(|cell| cell.join("cell.json").is_file())
        .count()
}

#[test]
fn a_lab_killed_in_a_cell_resumes_to_every_cell_without_running_the_finished_ones_again() {
    let _shared = crate::support::shared();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lab.yaml");
    std::fs::write(&file, EXPERIMENT).unwrap();
    let out = dir.path().join("out");
    let mut lab = Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args([
            "lab",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed a second into its third cell: two cells finished, one cut off.
    let started = Instant::now();
    while finished(&out) < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "two cells within a minute"
        );
        assert!(lab.try_wait().unwrap().is_none(), "the lab ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(1));
    lab.kill().unwrap(); // SIGKILL
    lab.wait().unwrap();
    assert_eq!(finished(&out), 2);
    let first = out.join("one/a/round-1/summary.json");
    let kept = std::fs::read(&first).unwrap();
    let kept_at = std::fs::metadata(&first).unwrap().modified().unwrap();

    // Without --resume, the lab's folder is not written over.
    let again = loadlab(&[
        "lab",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--resume"));

    let resumed = loadlab(&[
        "lab",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--resume",
    ]);
    let stdout = String::from_utf8_lossy(&resumed.stdout);
    assert_eq!(
        resumed.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    assert!(
        stdout.contains("2 of 6 cells finished before and are kept"),
        "{stdout}"
    );
    assert_eq!(finished(&out), 6);
    // The finished cells were kept as they were, not run again.
    assert_eq!(std::fs::read(&first).unwrap(), kept);
    assert_eq!(
        std::fs::metadata(&first).unwrap().modified().unwrap(),
        kept_at
    );
    let lab_json = read_json(&out.join("lab.json"));
    assert_eq!(lab_json["cells"].as_array().unwrap().len(), 6, "{lab_json}");
    // Every cell has its measurements, the one cut off included, and none was left out.
    for cell in lab_json["cells"].as_array().unwrap() {
        assert!(cell["excluded"].is_null(), "{cell}");
    }
    for w in ["a", "b", "c"] {
        for r in 1..=2 {
            let s = read_json(&out.join(format!("one/{w}/round-{r}/summary.json")));
            assert!(
                s["requests"]["completed"].as_u64().unwrap() >= 60,
                "{w} {r}: {s}"
            );
            // The seconds a cell writes as it runs are gone once it ends, the cut one's too.
            let cell = out.join(format!("one/{w}/round-{r}"));
            assert!(!cell.join("seconds.jsonl").exists(), "{}", cell.display());
        }
    }
    // The verdicts are those of the cells on disk: judged again by `report`, the same.
    let verdicts = lab_json["verdicts"].clone();
    let report = loadlab(&["report", out.to_str().unwrap()]);
    assert_eq!(report.status.code(), Some(0));
    assert_eq!(read_json(&out.join("lab.json"))["verdicts"], verdicts);

    // A changed workload is refused by name, and nothing runs.
    std::fs::write(&file, EXPERIMENT.replace("ms=10", "ms=15")).unwrap();
    let changed = loadlab(&[
        "lab",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--resume",
    ]);
    let stderr = String::from_utf8_lossy(&changed.stderr);
    assert_eq!(changed.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("workload \"b\" changed"), "{stderr}");
}
