//! Kubernetes objects for a sharded run (`loadlab k8s job`), as YAML: the Indexed Job whose
//! pods each run one shard from a common start, the ConfigMap of the files the run reads, the
//! Secret holding the token of the pods' dashboards, the volume the shards write to, and the
//! Job that merges them.

use serde_json::{json, Value};

/// Where the ConfigMap's files are mounted in the pods.
pub const FILES_DIR: &str = "/etc/loadlab";
/// Where the results volume is mounted: shard I writes `shard-I/`, the merge `merged/`.
pub const RESULTS_DIR: &str = "/results";
/// The port of each pod's live dashboard and `/metrics`.
pub const METRICS_PORT: u16 = 9090;
/// The user the Dockerfile's image runs as: the pods' volumes are given to its group.
pub const IMAGE_UID: u32 = 10001;
/// Most bytes a ConfigMap holds.
pub const CONFIGMAP_LIMIT: usize = 1 << 20;

/// A file the run reads, shipped in the ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShippedFile {
    /// Its key in the ConfigMap (letters, digits, `-`, `_`, `.`).
    pub key: String,
    /// Its path under [`FILES_DIR`] (relative, `/`-separated).
    pub path: String,
    /// Its text.
    pub text: String,
}

/// What the objects are made of.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// Name of the Job; the other objects' names start with it.
    pub name: String,
    /// Container image holding `loadlab` on its PATH (and `sh`, for the merge Job's wait).
    pub image: String,
    /// Shards, one pod each.
    pub shards: usize,
    /// `loadlab run`'s arguments, its files already named under [`FILES_DIR`].
    pub run_args: Vec<String>,
    /// The files they read.
    pub files: Vec<ShippedFile>,
    /// `--start-at` for every shard, RFC 3339.
    pub start_at: String,
    /// Size of the results volume (e.g. `1Gi`).
    pub storage: String,
    /// Longest the merge Job waits for the shards and merges, seconds.
    pub merge_deadline_s: u64,
    /// The token every request to a pod's dashboard and `/metrics` needs (they listen beyond
    /// loopback), kept in a Secret.
    pub dashboard_token: String,
}

impl JobSpec {
    fn labels(&self) -> Value {
        json!({ "app.kubernetes.io/name": "loadlab", "loadlab/run": self.name })
    }

    /// The shard pods' container arguments: `run`, the user's flags, then the shard (from the
    /// index Kubernetes gives each pod), the common start, the results folder and the dashboard.
    pub fn shard_args(&self) -> Vec<String> {
        let mut args = vec!["run".to_string()];
        args.extend(self.run_args.iter().cloned());
        args.extend([
            "--shard".into(),
            format!("$(JOB_COMPLETION_INDEX)/{}", self.shards),
            "--start-at".into(),
            self.start_at.clone(),
            "--out".into(),
            format!("{RESULTS_DIR}/shard-$(JOB_COMPLETION_INDEX)"),
            format!("--dashboard=0.0.0.0:{METRICS_PORT}"),
        ]);
        args
    }

    /// The shards' run directories, as the merge reads them.
    fn shard_dirs(&self) -> Vec<String> {
        (0..self.shards)
            .map(|i| format!("{RESULTS_DIR}/shard-{i}"))
            .collect()
    }

    fn volumes(&self) -> (Value, Value) {
        let mut volumes = vec![json!({
            "name": "results",
            "persistentVolumeClaim": { "claimName": format!("{}-results", self.name) }
        })];
        let mut mounts = vec![json!({ "name": "results", "mountPath": RESULTS_DIR })];
        if !self.files.is_empty() {
            let items: Vec<Value> = self
                .files
                .iter()
                .map(|f| json!({ "key": f.key, "path": f.path }))
                .collect();
            volumes.push(json!({
                "name": "files",
                "configMap": { "name": format!("{}-files", self.name), "items": items }
            }));
            mounts.push(json!({ "name": "files", "mountPath": FILES_DIR, "readOnly": true }));
        }
        (Value::Array(volumes), Value::Array(mounts))
    }

    fn config_map(&self) -> Value {
        let data: serde_json::Map<String, Value> = self
            .files
            .iter()
            .map(|f| (f.key.clone(), Value::String(f.text.clone())))
            .collect();
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": format!("{}-files", self.name), "labels": self.labels() },
            "data": data
        })
    }

    fn secret(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": { "name": format!("{}-dashboard", self.name), "labels": self.labels() },
            "type": "Opaque",
            "stringData": { "token": self.dashboard_token }
        })
    }

    fn claim(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": { "name": format!("{}-results", self.name), "labels": self.labels() },
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "resources": { "requests": { "storage": self.storage } }
            }
        })
    }

    fn shard_job(&self) -> Value {
        let (volumes, mounts) = self.volumes();
        json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": { "name": self.name, "labels": self.labels() },
            "spec": {
                "completionMode": "Indexed",
                "completions": self.shards,
                "parallelism": self.shards,
                "backoffLimit": 0,
                "template": {
                    "metadata": {
                        "labels": self.labels(),
                        "annotations": {
                            "prometheus.io/scrape": "true",
                            "prometheus.io/port": METRICS_PORT.to_string(),
                            "prometheus.io/path": "/metrics"
                        }
                    },
                    "spec": {
                        "restartPolicy": "Never",
                        "securityContext": { "fsGroup": IMAGE_UID },
                        "affinity": { "podAntiAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [{
                                "weight": 100,
                                "podAffinityTerm": {
                                    "labelSelector": { "matchLabels": self.labels() },
                                    "topologyKey": "kubernetes.io/hostname"
                                }
                            }]
                        }},
                        "containers": [{
                            "name": "shard",
                            "image": self.image,
                            "command": ["loadlab"],
                            "args": self.shard_args(),
                            "env": [{
                                "name": "JOB_COMPLETION_INDEX",
                                "valueFrom": { "fieldRef": {
                                    "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                                }}
                            }, {
                                "name": "LOADLAB_DASHBOARD_TOKEN",
                                "valueFrom": { "secretKeyRef": {
                                    "name": format!("{}-dashboard", self.name),
                                    "key": "token"
                                }}
                            }],
                            "ports": [{ "name": "metrics", "containerPort": METRICS_PORT }],
                            "resources": {
                                "requests": { "cpu": "1", "memory": "256Mi" }
                            },
                            "volumeMounts": mounts
                        }],
                        "volumes": volumes
                    }
                }
            }
        })
    }

    /// The merge pod's shell script: wait until every shard's run directory is complete (its
    /// `summary.json`, written last), then merge them.
    pub fn merge_script(&self) -> String {
        let dirs = self.shard_dirs().join(" ");
        format!(
            "for d in {dirs}; do until [ -f \"$d/summary.json\" ]; do sleep 5; done; done; \
             exec loadlab merge {dirs} --out {RESULTS_DIR}/merged"
        )
    }

    fn merge_job(&self) -> Value {
        let (volumes, mounts) = self.volumes();
        json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": { "name": format!("{}-merge", self.name), "labels": self.labels() },
            "spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": self.merge_deadline_s,
                "template": {
                    "metadata": { "labels": self.labels() },
                    "spec": {
                        "restartPolicy": "Never",
                        "securityContext": { "fsGroup": IMAGE_UID },
                        "containers": [{
                            "name": "merge",
                            "image": self.image,
                            "command": ["sh", "-c", self.merge_script()],
                            "volumeMounts": mounts
                        }],
                        "volumes": volumes
                    }
                }
            }
        })
    }

    /// Every object, in the order `kubectl apply` should create them.
    pub fn objects(&self) -> Vec<Value> {
        let mut out = Vec::new();
        if !self.files.is_empty() {
            out.push(self.config_map());
        }
        out.push(self.secret());
        out.push(self.claim());
        out.push(self.shard_job());
        out.push(self.merge_job());
        out
    }

    /// The objects as one multi-document YAML stream, with a header saying how to use it.
    pub fn yaml(&self) -> String {
        let mut out = format!(
            "# loadlab k8s job: {shards} shards of `loadlab {cmd}` starting at {start}.\n\
             # kubectl apply -f THIS.yaml; watch: kubectl get pods -l loadlab/run={name}\n\
             # Each shard's live numbers: kubectl port-forward pod/POD {port}, then /metrics with the\n\
             # token: kubectl get secret {name}-dashboard -o jsonpath='{{.data.token}}' | base64 -d\n\
             # The merged run: {dir}/merged on the {name}-results volume, once {name}-merge completes.\n",
            shards = self.shards,
            cmd = self.run_args_text(),
            start = self.start_at,
            name = self.name,
            port = METRICS_PORT,
            dir = RESULTS_DIR,
        );
        for object in self.objects() {
            out.push_str("---\n");
            out.push_str(&serde_saphyr::to_string(&object).expect("JSON values serialize"));
        }
        out
    }

    fn run_args_text(&self) -> String {
        let mut words = vec!["run".to_string()];
        words.extend(self.run_args.iter().cloned());
        words.join(" ").replace('\n', " ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(files: Vec<ShippedFile>) -> JobSpec {
        JobSpec {
            name: "loadlab".into(),
            image: "loadlab:0.2.0".into(),
            shards: 4,
            run_args: vec!["http://web/ping".into(), "-R".into(), "1000".into()],
            files,
            start_at: "2026-11-23T15:00:00Z".into(),
            storage: "1Gi".into(),
            merge_deadline_s: 3600,
            dashboard_token: "0123456789abcdef0123456789abcdef".into(),
        }
    }

    #[test]
    fn the_job_is_indexed_with_one_pod_per_shard_and_the_index_as_the_shard() {
        let s = spec(Vec::new());
        let objects = s.objects();
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            ["Secret", "PersistentVolumeClaim", "Job", "Job"],
            "no files, no ConfigMap"
        );
        assert_eq!(
            objects[0]["stringData"]["token"],
            "0123456789abcdef0123456789abcdef"
        );
        let job = &objects[2]["spec"];
        let env = &job["template"]["spec"]["containers"][0]["env"][1];
        assert_eq!(env["name"], "LOADLAB_DASHBOARD_TOKEN");
        assert_eq!(
            env["valueFrom"]["secretKeyRef"]["name"],
            "loadlab-dashboard"
        );
        assert_eq!(job["completionMode"], "Indexed");
        assert_eq!(job["completions"], 4);
        assert_eq!(job["parallelism"], 4);
        let args = s.shard_args();
        let at = args.iter().position(|a| a == "--shard").unwrap();
        assert_eq!(args[at + 1], "$(JOB_COMPLETION_INDEX)/4");
        let merge = s.merge_script();
        assert!(merge.contains("loadlab merge /results/shard-0 /results/shard-1 /results/shard-2 /results/shard-3 --out /results/merged"), "{merge}");
    }

    #[test]
    fn files_go_into_a_config_map_mounted_where_the_arguments_name_them() {
        let file = ShippedFile {
            key: "users.csv".into(),
            path: "data/users.csv".into(),
            text: "a\nb\n".into(),
        };
        let s = spec(vec![file]);
        let yaml = s.yaml();
        assert!(yaml.contains("kind: ConfigMap"), "{yaml}");
        assert!(yaml.contains("path: data/users.csv"), "{yaml}");
        assert!(yaml.contains("mountPath: /etc/loadlab"), "{yaml}");
        assert_eq!(yaml.lines().filter(|l| *l == "---").count(), 5, "{yaml}");
    }
}
