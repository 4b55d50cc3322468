//! The sharded run on a real Kubernetes (issue 56): a single-node cluster built here from
//! upstream components (scripts/install-kubernetes.sh) and started on loopback
//! (scripts/kube-up.sh), loadlab's image built without a registry and imported into its
//! containerd, and `loadlab k8s run` driving the Indexed Job's pods against a reference
//! service on 127.0.0.1 (the pods run on the host's network), merged exactly.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::read_json;

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A cluster started by scripts/kube-up.sh in a folder of its own, stopped (and checked to
/// leave nothing behind) when dropped.
struct Cluster {
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Cluster {
    fn start() -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("loadlab-kube")
            .tempdir()
            .unwrap();
        let up = Command::new("bash")
            .arg(root().join("scripts/kube-up.sh"))
            .arg(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&up.stderr);
        if !up.status.success() {
            let _ = Command::new("bash")
                .arg(root().join("scripts/kube-down.sh"))
                .arg(dir.path())
                .status();
            panic!("kube-up failed: {stderr}");
        }
        let kubeconfig = PathBuf::from(String::from_utf8_lossy(&up.stdout).trim());
        Cluster { dir, kubeconfig }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Imports loadlab's image (this build's binary) as `loadlab:test`.
    fn import_loadlab(&self) {
        let tar = self.path().join("loadlab.tar");
        let built = Command::new("python3")
            .arg(root().join("scripts/oci-image.py"))
            .args(["--name", "loadlab:test", "--out"])
            .arg(&tar)
            .arg("--add")
            .arg(format!(
                "{}:/usr/local/bin/loadlab",
                env!("CARGO_BIN_EXE_loadlab")
            ))
            .args([
                "--libs",
                "--user",
                "10001",
                "--entrypoint",
                "/usr/local/bin/loadlab",
            ])
            .status()
            .unwrap();
        assert!(built.success());
        let imported = Command::new("ctr")
            .arg("--address")
            .arg(self.path().join("containerd/containerd.sock"))
            .args(["-n", "k8s.io", "images", "import"])
            .arg(&tar)
            .output()
            .unwrap();
        assert!(
            imported.status.success(),
            "{}",
            String::from_utf8_lossy(&imported.stderr)
        );
    }

    /// The pids of the processes the cluster started, as kube-up recorded them.
    fn pids(&self) -> Vec<u32> {
        std::fs::read_to_string(self.path().join("pids"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let pids = self.pids();
        let down = Command::new("bash")
            .arg(root().join("scripts/kube-down.sh"))
            .arg(self.path())
            .status();
        if std::thread::panicking() {
            return;
        }
        assert!(down.is_ok_and(|s| s.success()), "kube-down failed");
        // Nothing left behind: no component, no mount under the cluster's folder.
        for pid in pids {
            assert!(
                !Path::new(&format!("/proc/{pid}")).exists(),
                "pid {pid} still runs"
            );
        }
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let dir = self.path().to_str().unwrap();
        assert!(
            !mounts.lines().any(|l| l.contains(dir)),
            "mounts left under {dir}"
        );
    }
}

/// `loadlab k8s run` of `plan` against the cluster, its merged run going to `out`.
fn k8s_run_command(kubeconfig: &Path, plan: &[&str], out: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_loadlab"));
    c.args(["k8s", "run"])
        .args(plan)
        .args([
            "--image",
            "loadlab:test",
            "--pull",
            "never",
            "--host-network",
        ])
        .args(["--cpu", "100m", "--start-in", "15s", "--kubeconfig"])
        .arg(kubeconfig)
        .arg("--out")
        .arg(out);
    c
}

#[test]
fn k8s_run_completes_four_shards_on_a_real_cluster_merged_exactly() {
    let _shared = crate::support::shared_long();
    let cluster = Cluster::start();
    cluster.import_loadlab();
    let server = loadlab_service::TestServer::start(1).unwrap();
    let url = server.url("/ping");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("merged");
    let mut run = Running(
        k8s_run_command(
            &cluster.kubeconfig,
            &[&url, "-R", "100", "-d", "5s", "--shards", "4"],
            &out,
        )
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap(),
    );
    let (status, stderr) = run.wait_within(std::time::Duration::from_secs(90));
    assert_eq!(status.code(), Some(0), "{stderr}");
    let merged = read_json(&out.join("summary.json"));
    for shard in 0..4 {
        assert!(stderr.contains(&format!("shard {shard}/4")), "{stderr}");
    }
    // The four shards' schedules are the plan's 500 arrivals, each sent or counted dropped (a
    // shard at 0.1 CPU beside busy tests falls behind: a suite read 16 of 150 dropped at the
    // end of a 3 s run), and the merge counts exactly what the shards sent.
    assert_eq!(merged["merged"]["count"], 4, "{merged}");
    assert_eq!(
        merged["merged"]["missing"],
        serde_json::json!([]),
        "{merged}"
    );
    let count = |key: &str| merged["requests"][key].as_u64().unwrap();
    assert_eq!(count("sent") + count("dropped"), 500, "{merged}");
    let shards = merged["merged"]["shards"].as_array().unwrap();
    let of_shards = |key: &str| -> u64 { shards.iter().map(|s| s[key].as_u64().unwrap()).sum() };
    assert_eq!(of_shards("sent"), count("sent"), "{merged}");
    assert_eq!(of_shards("dropped"), count("dropped"), "{merged}");
    for s in shards {
        assert_eq!(
            s["sent"].as_u64().unwrap() + s["dropped"].as_u64().unwrap(),
            125,
            "a quarter of the arrivals each: {s}"
        );
    }
    // The shards' progress, read from their logs: the last line sums every shard's last one,
    // so it counts what the merge counts.
    let last_load = stderr.lines().rfind(|l| l.contains("load at"));
    let sum = format!(" s: {} completed (by shard 0: ", count("completed"));
    assert!(
        last_load.is_some_and(|l| l.contains(&sum)),
        "{sum}\n{stderr}"
    );
    // Exactly: its percentiles are those of the union of the shards' own latency logs, as
    // HdrHistogram's Python implementation reads them from the run's volume on the node.
    let volume = std::fs::read_dir(cluster.path().join("volumes"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|v| v.join("shard-0").exists())
        .expect("the run's volume");
    let logs: Vec<PathBuf> = (0..4)
        .map(|i| volume.join(format!("shard-{i}/latency.hlog")))
        .collect();
    let union = crate::shard::python_union(&logs);
    assert_eq!(union["count"], merged["requests"]["completed"]);
    for key in ["p50", "p99", "p99_9"] {
        assert_eq!(
            crate::shard::us(&merged, key),
            union[key].as_u64().unwrap(),
            "{key}: the merged run against the union of the shards' logs"
        );
    }

    // A shard's pod deleted mid-run: the shard stops as on Ctrl-C and keeps what it sent, the
    // Job does not start it again (it would start late) and the other shards go on; the merge
    // counts the stopped shard's part and says it stopped. This run's kubeconfig gives its
    // token through an exec plugin, as managed clusters' do.
    let out = dir.path().join("merged-without-2");
    let by_plugin = exec_kubeconfig(&cluster.kubeconfig, dir.path());
    let mut run = Running(
        k8s_run_command(
            &by_plugin,
            &[
                &url, "-R", "100", "-d", "20s", "--shards", "4", "--name", "cut",
            ],
            &out,
        )
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap(),
    );
    let kube = loadlab_harness::kube::Kube::from_kubeconfig(&cluster.kubeconfig, None).unwrap();
    let pod = wait_for_running_shard(&kube, "cut", "2");
    // Into the load: the shards start 15 s after the objects were made.
    std::thread::sleep(std::time::Duration::from_secs(20));
    let gone = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod}});
    kube.delete(&gone).unwrap();
    let (status, stderr) = run.wait_within(std::time::Duration::from_secs(150));
    assert_eq!(status.code(), Some(0), "{stderr}");
    let merged = read_json(&out.join("summary.json"));
    assert_eq!(merged["merged"]["count"], 4, "{stderr}\n{merged}");
    assert_eq!(
        merged["merged"]["missing"],
        serde_json::json!([]),
        "{merged}"
    );
    for s in merged["merged"]["shards"].as_array().unwrap() {
        let offered = s["sent"].as_u64().unwrap() + s["dropped"].as_u64().unwrap();
        match s["index"].as_u64() {
            Some(2) => assert!(
                offered < 450,
                "the stopped shard offered part of its 500: {s}"
            ),
            _ => assert_eq!(offered, 500, "the others offered all of theirs: {s}"),
        }
    }
    let warnings = merged["generator"]["warnings"].to_string();
    assert!(
        warnings.contains("shard 2/4 stopped before its end"),
        "{warnings}"
    );
    assert!(stderr.contains("shard 2/4"), "{stderr}");
    // Progress was shown while the shards ran, not only at their end.
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("load at 5 s:") || l.contains("load at 10 s:")),
        "{stderr}"
    );

    // The same objects, applied with kubectl by a user who has it.
    kubectl_applies_what_k8s_job_prints(&cluster, &url, dir.path());
}

/// A copy of `kubeconfig` in `dir` whose user's token comes from an exec plugin (a script that
/// prints it as an `ExecCredential`).
fn exec_kubeconfig(kubeconfig: &Path, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    let token = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("the cluster's kubeconfig has a token");
    let plugin = dir.join("token-plugin.sh");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\nprintf '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{token}\"}}}}'\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exec = format!(
        "exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {}\n      interactiveMode: Never",
        plugin.display()
    );
    let path = dir.join("exec-kubeconfig");
    std::fs::write(&path, text.replace(&format!("token: {token}"), &exec)).unwrap();
    path
}

/// The objects `k8s job` prints, applied with the cluster's own kubectl as a user with kubectl
/// would: the merge Job completes, and its log carries the merged run (here, of 2 shards of 3 s
/// at 100 req/s: the plan's 300 arrivals).
fn kubectl_applies_what_k8s_job_prints(cluster: &Cluster, url: &str, dir: &Path) {
    let kubectl = |args: &[&str]| {
        let bin = PathBuf::from(
            String::from_utf8_lossy(
                &Command::new("bash")
                    .arg(root().join("scripts/install-kubernetes.sh"))
                    .output()
                    .unwrap()
                    .stdout,
            )
            .trim(),
        )
        .join("bin/kubectl");
        let o = Command::new(bin)
            .arg("--kubeconfig")
            .arg(&cluster.kubeconfig)
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "kubectl {args:?}: {err}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let printed = crate::support::loadlab_ok(&[
        "k8s",
        "job",
        url,
        "-R",
        "100",
        "-d",
        "3s",
        "--shards",
        "2",
        "--name",
        "kc",
        "--image",
        "loadlab:test",
        "--pull",
        "never",
        "--host-network",
        "--cpu",
        "100m",
        "--start-in",
        "15s",
    ]);
    let yaml = dir.join("kc.yaml");
    std::fs::write(&yaml, &printed.stdout).unwrap();
    kubectl(&["apply", "-f", yaml.to_str().unwrap()]);
    kubectl(&[
        "wait",
        "--for=condition=complete",
        "job/kc-merge",
        "--timeout=120s",
    ]);
    // A shard's log shows its progress every 5 s, and at its last second.
    let shard_log = kubectl(&["logs", "job/kc"]);
    assert!(
        shard_log
            .lines()
            .any(|l| loadlab_report::LoggedProgress::parse(l).is_some()),
        "{shard_log}"
    );
    let log = kubectl(&["logs", "job/kc-merge"]);
    let merged = dir.join("kc-merged");
    loadlab_run::archive::extract_archive(log.as_bytes(), &merged).unwrap();
    let summary = read_json(&merged.join("summary.json"));
    assert_eq!(summary["merged"]["count"], 2, "{summary}");
    let count = |key: &str| summary["requests"][key].as_u64().unwrap();
    assert_eq!(count("sent") + count("dropped"), 300, "{summary}");
    kubectl(&["delete", "-f", yaml.to_str().unwrap(), "--wait=false"]);
}

/// A `loadlab k8s run` in progress, stopped (by PID) if the test ends first.
struct Running(std::process::Child);

impl Running {
    /// Its exit status and stderr, within `limit` (or the test fails).
    fn wait_within(&mut self, limit: std::time::Duration) -> (std::process::ExitStatus, String) {
        let until = std::time::Instant::now() + limit;
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                let mut err = String::new();
                if let Some(mut e) = self.0.stderr.take() {
                    std::io::Read::read_to_string(&mut e, &mut err).unwrap();
                }
                return (status, err);
            }
            assert!(
                std::time::Instant::now() < until,
                "k8s run did not end in {limit:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The name of shard `index`'s pod of run `name` once it runs (within 60 s).
fn wait_for_running_shard(kube: &loadlab_harness::kube::Kube, name: &str, index: &str) -> String {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let pods = kube
            .pods(&format!("batch.kubernetes.io/job-name={name}"))
            .unwrap();
        let running = pods.iter().find(|p| {
            p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == index
                && p["status"]["phase"] == "Running"
        });
        if let Some(p) = running {
            return p["metadata"]["name"].as_str().unwrap().to_string();
        }
        assert!(
            std::time::Instant::now() < until,
            "shard {index} never ran: {pods:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}
