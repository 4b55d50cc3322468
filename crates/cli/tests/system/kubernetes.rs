//! The sharded run on a real Kubernetes (issue 56): a single-node cluster built here from
//! upstream components (scripts/install-kubernetes.sh) and started on loopback
//! (scripts/kube-up.sh), loadlab's image built without a registry and imported into its
//! containerd, and `loadlab k8s run` driving the Indexed Job's pods against a reference
//! service on 127.0.0.1 (the pods run on the host's network), merged exactly.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

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
            .arg(format!("{}:/usr/local/bin/loadlab", env!("CARGO_BIN_EXE_loadlab")))
            .args(["--libs", "--user", "10001", "--entrypoint", "/usr/local/bin/loadlab"])
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

/// `loadlab k8s run` of `plan` against the cluster; its output and the merged summary.
fn k8s_run(cluster: &Cluster, plan: &[&str], out: &Path) -> (std::process::Output, Value) {
    let o = Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args(["k8s", "run"])
        .args(plan)
        .args(["--image", "loadlab:test", "--pull", "never", "--host-network"])
        .args(["--cpu", "100m", "--start-in", "15s", "--kubeconfig"])
        .arg(&cluster.kubeconfig)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    let summary = if out.join("summary.json").exists() {
        read_json(&out.join("summary.json"))
    } else {
        Value::Null
    };
    (o, summary)
}

#[test]
fn k8s_run_completes_four_shards_on_a_real_cluster_merged_exactly() {
    let _shared = crate::support::shared();
    let cluster = Cluster::start();
    cluster.import_loadlab();
    let server = loadlab_service::TestServer::start(1).unwrap();
    let url = server.url("/ping");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("merged");
    let (o, merged) = k8s_run(&cluster, &[&url, "-R", "100", "-d", "5s", "--shards", "4"], &out);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    for shard in 0..4 {
        assert!(stderr.contains(&format!("shard {shard}/4")), "{stderr}");
    }
    // The four shards sent the plan's arrivals exactly, and the merge counted all of them.
    assert_eq!(merged["merged"]["count"], 4, "{merged}");
    assert_eq!(merged["merged"]["missing"], serde_json::json!([]), "{merged}");
    assert_eq!(merged["requests"]["sent"], 500, "{merged}");
    let per_shard: u64 = merged["merged"]["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sent"].as_u64().unwrap())
        .sum();
    assert_eq!(per_shard, 500);
    assert_eq!(merged["requests"]["completed"], 500, "{merged}");
}
