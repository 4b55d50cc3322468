//! Sharded runs end to end: real `loadlab run --shard I/N --start-at T` processes against one
//! reference service on loopback, merged by `loadlab merge`, checked against the plan's totals
//! and against HdrHistogram's own (Python) reader over the union of the shards' logs.

use crate::support::{loadlab_ok, read_json};
use loadlab_service::TestServer;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest a shard may take (a 2 s run, a 2 s wait for the common start, and slack).
const SHARD_DEADLINE: Duration = Duration::from_secs(30);

/// Starts the shard pod `index`'s container command as the kubelet would: `$(VAR)` in its
/// arguments expanded from its environment (`JOB_COMPLETION_INDEX`), the results volume at
/// `results`, and the dashboard on a free loopback port instead of the pod's own 9090.
fn start_pod(command: &[String], index: usize, results: &Path) -> Child {
    let expand = |arg: &str| {
        arg.replace("$(JOB_COMPLETION_INDEX)", &index.to_string())
            .replace("/results", results.to_str().unwrap())
            .replace("--dashboard=0.0.0.0:9090", "--dashboard=127.0.0.1:0")
    };
    assert_eq!(command[0], "loadlab");
    Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args(command[1..].iter().map(|a| expand(a)))
        .env("JOB_COMPLETION_INDEX", index.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("loadlab starts")
}

/// Waits for every shard to exit successfully, within [`SHARD_DEADLINE`]; a shard still running
/// then is killed by its PID and the test fails.
fn wait_all(children: Vec<Child>) {
    let began = Instant::now();
    for mut child in children {
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let mut err = String::new();
                use std::io::Read;
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                assert!(status.success(), "a shard failed: {err}");
                break;
            }
            if began.elapsed() > SHARD_DEADLINE {
                let _ = child.kill();
                let _ = child.wait();
                panic!("a shard ran past {SHARD_DEADLINE:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The Python interpreter of the tests' tools virtualenv (`scripts/test.sh` installs it, with
/// the pinned `hdrhistogram` and `kubernetes-validate` packages).
pub fn tools_python() -> PathBuf {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_loadlab"));
    let target = exe.parent().and_then(Path::parent).unwrap();
    let python = target.join("tools-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/test.sh once, which installs the tests' Python tools",
        python.display()
    );
    python
}

/// Percentiles of the union of `logs` as HdrHistogram's Python implementation reads them.
pub fn python_union(logs: &[PathBuf]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/hdr_union.py");
    let out = Command::new(tools_python())
        .arg(script)
        .args(logs)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "hdr_union.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// A summary's latency percentile in microseconds, as the histogram held it.
pub fn us(summary: &Value, key: &str) -> u64 {
    (summary["latency_ms"][key].as_f64().unwrap() * 1000.0).round() as u64
}

/// The objects `loadlab k8s job` prints for `args`, after `kubernetes-validate` (offline, with
/// Kubernetes' published schemas) has accepted them.
fn validated_job(args: &[&str], dir: &Path) -> Vec<Value> {
    let mut all = vec!["k8s", "job"];
    all.extend_from_slice(args);
    let out = loadlab_ok(&all);
    let yaml = String::from_utf8(out.stdout).unwrap();
    let file = dir.join("job.yaml");
    std::fs::write(&file, &yaml).unwrap();
    let validate = tools_python().with_file_name("kubernetes-validate");
    let check = Command::new(validate)
        .args(["--strict", "--quiet", file.to_str().unwrap()])
        .output()
        .expect("kubernetes-validate runs");
    assert!(
        check.status.success(),
        "kubernetes-validate: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    serde_saphyr::from_multiple(&yaml).expect("YAML documents")
}

/// A container's command and arguments, as one list.
fn container_command(object: &Value) -> Vec<String> {
    let c = &object["spec"]["template"]["spec"]["containers"][0];
    c["command"]
        .as_array()
        .unwrap()
        .iter()
        .chain(c["args"].as_array().into_iter().flatten())
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_jobs_own_commands_run_as_three_shards_and_merge_into_the_plan_with_exact_percentiles() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let url = server.url("/ping");
    let dir = tempfile::tempdir().unwrap();
    let (rate, secs, count) = (600.0, 2.0, 3);
    let plan = [
        &url,
        "-R",
        "600",
        "-d",
        "2s",
        "-t",
        "1",
        "--shards",
        "3",
        "--start-in",
        "3s",
    ];
    let objects = validated_job(&plan, dir.path());
    let kinds: Vec<&str> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["Secret", "PersistentVolumeClaim", "Job", "Job"]);
    let token = objects[0]["stringData"]["token"].as_str().unwrap();
    assert_eq!(token.len(), 32, "a random token for the pods' dashboards");
    let job = &objects[2];
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    assert_eq!(job["spec"]["completions"], count);
    assert_eq!(job["spec"]["parallelism"], count);

    let shard_command = container_command(job);
    let results = dir.path().join("results");
    let children = (0..count)
        .map(|i| start_pod(&shard_command, i, &results))
        .collect();
    wait_all(children);
    let dirs: Vec<PathBuf> = (0..count)
        .map(|i| results.join(format!("shard-{i}")))
        .collect();

    let shards: Vec<Value> = dirs
        .iter()
        .map(|d| read_json(&d.join("summary.json")))
        .collect();
    let hash = shards[0]["plan_hash"].as_str().unwrap();
    assert_eq!(hash.len(), 16);
    for (i, s) in shards.iter().enumerate() {
        assert_eq!(
            s["plan_hash"], hash,
            "shard {i} records the one plan's hash"
        );
        assert_eq!(s["shard"]["index"], i);
        let offset = s["start"]["offset_ms"].as_f64().unwrap();
        assert!(offset.abs() < 50.0, "shard {i} started {offset} ms off");
        // Arrival k goes to shard k mod 3: 1,200 arrivals make 400 each.
        let offered =
            s["requests"]["sent"].as_u64().unwrap() + s["requests"]["dropped"].as_u64().unwrap();
        assert!(
            (399..=401).contains(&offered),
            "shard {i}: {offered} arrivals"
        );
    }

    // The merge Job's own command: `loadlab merge`, no shell, waiting for the shards (they
    // have ended here) and printing the merged directory for its log.
    let merge_command = container_command(&objects[3]);
    assert_eq!(merge_command[..2], ["loadlab", "merge"]);
    let out = Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args(
            merge_command[1..]
                .iter()
                .map(|a| a.replace("/results", results.to_str().unwrap())),
        )
        .output()
        .expect("loadlab runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let merged_dir = results.join("merged");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("3 of 3 merged"), "{text}");
    // The log carries the merged directory whole, as `k8s run` copies it out.
    let copied = results.join("copied");
    loadlab_run::archive::extract_archive(text.as_bytes(), &copied).unwrap();
    assert_eq!(
        std::fs::read(copied.join("summary.json")).unwrap(),
        std::fs::read(merged_dir.join("summary.json")).unwrap()
    );
    let merged = read_json(&merged_dir.join("summary.json"));
    let sent = merged["requests"]["sent"].as_u64().unwrap();
    let expected = rate * secs;
    assert!(
        (sent as f64 - expected).abs() <= 0.01 * expected,
        "sent {sent}, the plan offers {expected}"
    );
    let total: u64 = shards
        .iter()
        .map(|s| s["requests"]["sent"].as_u64().unwrap())
        .sum();
    assert_eq!(sent, total, "the merged count is the shards' sum");
    assert_eq!(merged["merged"]["count"], 3);
    assert_eq!(merged["merged"]["shards"].as_array().unwrap().len(), 3);
    assert_eq!(merged["plan_hash"], hash);

    // HdrHistogram's Python reader over the union of the shards' own logs.
    let logs: Vec<PathBuf> = dirs.iter().map(|d| d.join("latency.hlog")).collect();
    let union = python_union(&logs);
    assert_eq!(union["count"], merged["requests"]["completed"]);
    for key in ["p50", "p99", "p99_9"] {
        assert_eq!(
            us(&merged, key),
            union[key].as_u64().unwrap(),
            "{key}: merged summary vs the Python reader over the shards' logs"
        );
    }
    // The merged directory's own log holds the same union.
    let again = python_union(&[merged_dir.join("latency.hlog")]);
    assert_eq!(again, union);

    // Other readers take the merged directory like any run directory.
    loadlab_ok(&["report", merged_dir.to_str().unwrap()]);
    loadlab_ok(&[
        "compare",
        dirs[0].to_str().unwrap(),
        merged_dir.to_str().unwrap(),
    ]);
}

#[test]
fn scenario_shards_split_the_arrivals_and_take_disjoint_payload_rows() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // 40 users over 2 s, each taking the next of 6 rows and counting a visit to its queue.
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/rows.csv"), "r0\nr1\nr2\nr3\nr4\nr5\n").unwrap();
    let file = dir.path().join("visits.yml");
    std::fs::write(
        &file,
        "config:\n  target: \"http://127.0.0.1:9\"\n  phases:\n    - duration: 2\n      arrivalRate: 20\n  payload:\n    path: data/rows.csv\n    fields: [row]\n    order: sequence\nscenarios:\n  - flow:\n      - get: { url: \"/turno/{{ row }}\" }\n",
    )
    .unwrap();
    let target = server.url("");
    let mut offered = 0;
    for shard in ["0/2", "1/2"] {
        let json = dir.path().join(format!("s{}.json", &shard[..1]));
        let f = file.to_str().unwrap();
        let j = json.to_str().unwrap();
        loadlab_ok(&[
            "run", f, "--target", &target, "--shard", shard, "-q", "--json", j,
        ]);
        let s = read_json(&json);
        // Half of the 40 arrivals each, started or (beside busy tests, a pacer that woke past
        // the run's end: the CI run read 19 started) counted dropped.
        let started = s["users"]["started"].as_u64().unwrap();
        let dropped = s["requests"]["dropped"].as_u64().unwrap();
        assert_eq!(
            started + dropped,
            20,
            "shard {shard}: half of the 40 arrivals: {s}"
        );
        offered += started + dropped;
        if shard == "0/2" {
            // Shard 0 holds rows 0, 2 and 4 only.
            let seen: Vec<u64> = (0..6)
                .map(|r| crate::support::next_ticket(&server, &format!("r{r}")) - 1)
                .collect();
            assert!(seen[1] == 0 && seen[3] == 0 && seen[5] == 0, "{seen:?}");
            assert_eq!(seen[0] + seen[2] + seen[4], started, "{seen:?}");
        }
    }
    assert_eq!(offered, 40);

    // The Job ships the scenario and its payload at the paths the scenario names.
    let f = file.to_str().unwrap();
    let objects = validated_job(&[f, "--target", &target, "--shards", "2"], dir.path());
    let map = &objects[0];
    assert_eq!(map["kind"], "ConfigMap");
    assert_eq!(map["data"]["rows.csv"], "r0\nr1\nr2\nr3\nr4\nr5\n");
    let command = container_command(&objects[3]);
    assert!(
        command.contains(&"/etc/loadlab/visits.yml".to_string()),
        "{command:?}"
    );
    let items =
        objects[3]["spec"]["template"]["spec"]["volumes"][1]["configMap"]["items"].to_string();
    assert!(items.contains("data/rows.csv"), "{items}");
}
