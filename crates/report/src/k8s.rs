//! Kubernetes objects for a sharded run (`loadlab k8s job`), as YAML: the Indexed Job whose
//! pods each run one shard from a common start, the ConfigMap of the files the run reads, the
//! Secret holding the token of the pods' dashboards, the volume the shards write to, and the
//! Job that merges them.

use serde_json::{json, Value};

/// Where the ConfigMap's files are mounted in the pods.
pub const FILES_DIR: &str = "/etc/loadlab";
/// Seconds between two progress lines in a shard's log.
pub const PROGRESS_EVERY_S: u64 = 5;

/// Where the results volume is mounted: shard I writes `shard-I/`, the merge `merged/`.
pub const RESULTS_DIR: &str = "/results";
/// The port of each pod's live dashboard and `/metrics`.
pub const METRICS_PORT: u16 = 9090;
/// The user the Dockerfile's image runs as: the pods' volumes are given to its group.
pub const IMAGE_UID: u32 = 10001;
/// Most bytes a ConfigMap holds.
pub const CONFIGMAP_LIMIT: usize = 1 << 20;
/// Seconds the merge keeps of the merge Job's deadline to merge once it stops waiting.
const MERGE_MARGIN_S: u64 = 60;

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
    /// Container image holding `loadlab` on its PATH.
    pub image: String,
    /// The containers' `imagePullPolicy` (`Always`, `IfNotPresent`, `Never`), when set: `Never`
    /// for an image imported into the nodes' runtime rather than pulled from a registry.
    pub pull_policy: Option<String>,
    /// The pods run on their node's network: the load leaves from the node's own addresses
    /// (a target on the node's loopback is reachable), and the shards have no dashboard (they
    /// would share its port on one node).
    pub host_network: bool,
    /// CPU each shard's pod asks for (a Kubernetes quantity: `1`, `500m`).
    pub cpu: String,
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
    /// index Kubernetes gives each pod), the common start, the results folder and the dashboard
    /// (none on the host's network).
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
        ]);
        if !self.host_network {
            args.push(format!("--dashboard=0.0.0.0:{METRICS_PORT}"));
        }
        // A progress line in the pod's log every few seconds (`kubectl logs`; `k8s run` reads
        // the last), unless the user's flags say how.
        let said = |flag: &str| {
            self.run_args
                .iter()
                .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
        };
        if !said("--progress") && !said("--quiet") && !said("-q") {
            args.extend(["--progress".into(), format!("{PROGRESS_EVERY_S}s")]);
        }
        args
    }

    /// The merge pod's container arguments: `merge` waits until the Job's deadline for every
    /// shard's run to end, merges those that did (naming the others missing) and prints the
    /// merged directory to its log, whence `loadlab k8s run` copies it.
    pub fn merge_args(&self) -> Vec<String> {
        let mut args = vec!["merge".to_string()];
        args.extend(self.shard_dirs());
        args.extend([
            "--out".into(),
            format!("{RESULTS_DIR}/merged"),
            "--wait".into(),
            format!(
                "{}s",
                self.merge_deadline_s.saturating_sub(MERGE_MARGIN_S).max(1)
            ),
            "--print-archive".into(),
        ]);
        args
    }

    /// A container of `image` running `loadlab` with `args`, with the pull policy set.
    fn container(&self, name: &str, args: Vec<String>, mounts: Value) -> Value {
        let mut c = json!({
            "name": name,
            "image": self.image,
            "command": ["loadlab"],
            "args": args,
            "volumeMounts": mounts
        });
        if let Some(policy) = &self.pull_policy {
            c["imagePullPolicy"] = json!(policy);
        }
        c
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
        let mut job = json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": { "name": self.name, "labels": self.labels() },
            "spec": {
                "completionMode": "Indexed",
                "completions": self.shards,
                "parallelism": self.shards,
                // A shard that fails is not started again (it would start late), and the
                // others go on: the merge counts what each sent.
                "backoffLimitPerIndex": 0,
                "template": {
                    "metadata": { "labels": self.labels() },
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
                        "containers": [self.shard_container(mounts)],
                        "volumes": volumes
                    }
                }
            }
        });
        let pod = &mut job["spec"]["template"];
        if self.host_network {
            pod["spec"]["hostNetwork"] = json!(true);
            pod["spec"]["dnsPolicy"] = json!("ClusterFirstWithHostNet");
        } else {
            pod["metadata"]["annotations"] = json!({
                "prometheus.io/scrape": "true",
                "prometheus.io/port": METRICS_PORT.to_string(),
                "prometheus.io/path": "/metrics"
            });
        }
        job
    }

    fn shard_container(&self, mounts: Value) -> Value {
        let mut c = self.container("shard", self.shard_args(), mounts);
        c["env"] = json!([{
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
        }]);
        if !self.host_network {
            c["ports"] = json!([{ "name": "metrics", "containerPort": METRICS_PORT }]);
        }
        c["resources"] = json!({ "requests": { "cpu": self.cpu, "memory": "256Mi" } });
        c
    }

    fn merge_job(&self) -> Value {
        let (volumes, mounts) = self.volumes();
        let mut job = json!({
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
                        "containers": [self.container("merge", self.merge_args(), mounts)],
                        "volumes": volumes
                    }
                }
            }
        });
        if self.host_network {
            // On one network with the shards, wherever the pods' own network stands.
            job["spec"]["template"]["spec"]["hostNetwork"] = json!(true);
        }
        job
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
            pull_policy: None,
            host_network: false,
            cpu: "1".into(),
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
        assert_eq!(job["backoffLimitPerIndex"], 0);
        assert!(
            job.get("backoffLimit").is_none(),
            "one failed shard fails no other"
        );
        assert_eq!(job["completions"], 4);
        assert_eq!(job["parallelism"], 4);
        let args = s.shard_args();
        let at = args.iter().position(|a| a == "--shard").unwrap();
        assert_eq!(args[at + 1], "$(JOB_COMPLETION_INDEX)/4");
        let merge = s.merge_args().join(" ");
        assert!(
            merge.starts_with(
                "merge /results/shard-0 /results/shard-1 /results/shard-2 /results/shard-3 \
                 --out /results/merged --wait 3540s"
            ),
            "{merge}"
        );
        let pod = &job["template"];
        assert_eq!(pod["metadata"]["annotations"]["prometheus.io/port"], "9090");
        assert!(pod["spec"].get("hostNetwork").is_none());
        assert!(pod["spec"]["containers"][0]
            .get("imagePullPolicy")
            .is_none());
        assert!(args.contains(&"--dashboard=0.0.0.0:9090".to_string()));
    }

    #[test]
    fn on_the_hosts_network_the_shards_have_no_dashboard_and_an_imported_image_is_not_pulled() {
        let mut s = spec(Vec::new());
        s.host_network = true;
        s.pull_policy = Some("Never".into());
        s.cpu = "250m".into();
        let objects = s.objects();
        for job in [&objects[2], &objects[3]] {
            let pod = &job["spec"]["template"]["spec"];
            assert_eq!(pod["containers"][0]["imagePullPolicy"], "Never");
            assert_eq!(
                pod["containers"][0]["command"][0], "loadlab",
                "no shell needed"
            );
        }
        assert_eq!(objects[3]["spec"]["template"]["spec"]["hostNetwork"], true);
        let pod = &objects[2]["spec"]["template"];
        assert_eq!(pod["spec"]["hostNetwork"], true);
        assert_eq!(pod["spec"]["dnsPolicy"], "ClusterFirstWithHostNet");
        assert!(pod["metadata"].get("annotations").is_none());
        let shard = &pod["spec"]["containers"][0];
        assert!(shard.get("ports").is_none());
        assert_eq!(shard["resources"]["requests"]["cpu"], "250m");
        assert!(!s.shard_args().iter().any(|a| a.starts_with("--dashboard")));
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
