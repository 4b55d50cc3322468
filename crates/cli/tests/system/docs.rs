//! The README's, the recipes page's and the gRPC page's commands, run as a reader runs them:
//! every `loadlab` line of their `sh` blocks against the reference service (its
//! `http://127.0.0.1:8080` replaced by a `loadlab serve` of the test's own), with durations and
//! rates shortened. A command that fails, or a program the docs call that this list does not
//! know, fails the test.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use crate::support::{write_file, Served};

/// Programs the docs call besides loadlab, which a test cannot run here: a build, an image, a
/// cluster, the whole suite.
const NOT_RUN: [&str; 4] = ["cargo", "docker", "kubectl", "bash"];

/// The `sh` blocks' commands of the file at `path` (from the repository's root), each with its
/// line.
fn commands(path: &str) -> Vec<(usize, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    commands_in(&std::fs::read_to_string(root.join(path)).unwrap())
}

/// The commands of `text`'s `sh` blocks, each with its line: continuation lines joined,
/// comments and blank lines left out.
fn commands_in(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_sh = !in_sh && trimmed == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let code = without_comment(trimmed);
        let (start, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
        match code.strip_suffix('\\') {
            Some(part) => {
                joined.push_str(part);
                pending = Some((start, joined));
            }
            None => {
                joined.push_str(code);
                if !joined.trim().is_empty() {
                    out.push((start, joined.trim().to_string()));
                }
            }
        }
    }
    out
}

/// `line` without a `# comment` outside quotes.
fn without_comment(line: &str) -> &str {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if i == 0 || line[..i].ends_with(' ') => return line[..i].trim_end(),
            _ => {}
        }
    }
    line
}

/// A command's words as the test runs them: the service's URL for the docs' example one,
/// durations of a second or two, rates and searches bounded (a shard's `--start-at` is set when its
/// batch starts).
fn shortened(words: Vec<String>, base: &str) -> Vec<String> {
    let locust = words.get(1).is_some_and(|w| w == "locust");
    let mut out = Vec::new();
    let mut it = words.into_iter().peekable();
    while let Some(w) = it.next() {
        let value = |it: &mut std::iter::Peekable<std::vec::IntoIter<String>>| it.next().unwrap();
        match w.as_str() {
            "-d" | "--duration" => {
                value(&mut it);
                out.extend([w, "1s".into()]);
            }
            "-t" if locust => {
                value(&mut it);
                out.extend([w, "2s".into()]);
            }
            "-R" => {
                let rate: f64 = value(&mut it).parse().unwrap();
                out.extend([w, rate.min(200.0).to_string()]);
            }
            _ => out.push(
                w.replace("http://127.0.0.1:8080", base)
                    .replace("grpc://127.0.0.1:8080", &base.replace("http://", "grpc://")),
            ),
        }
    }
    if out.get(1).is_some_and(|w| w == "capacity") {
        out.extend(
            [
                "--max-time",
                "15s",
                "--max-rate",
                "200",
                "--warmup",
                "1s",
                "--step",
                "1s",
            ]
            .map(String::from),
        );
    }
    out
}

/// The files the docs' commands name, written into `dir` for the service at `base`: an
/// Artillery script in YAML and in JSON, a locustfile, two runs to compare, and the reference
/// service's `.proto` file where the repository has it.
fn fixtures(dir: &Path, base: &str) {
    let proto = "crates/grpc/proto/loadlab/reference/v1/reference.proto";
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::create_dir_all(dir.join(proto).parent().unwrap()).unwrap();
    std::fs::copy(root.join(proto), dir.join(proto)).unwrap();
    let script = format!(
        "config:\n  target: \"{base}\"\n  phases: [{{ duration: 1, arrivalRate: 5 }}]\nscenarios:\n  - flow:\n      - get: {{ url: \"/ping\" }}\n"
    );
    write_file(dir, "load.yml", &script);
    let json = serde_json::json!({
        "config": {"target": base, "phases": [{"duration": 1, "arrivalRate": 5}]},
        "scenarios": [{"flow": [{"get": {"url": "/ping"}}]}],
    });
    write_file(dir, "load.json", &json.to_string());
    write_file(
        dir,
        "locustfile.py",
        "from locust import HttpUser, task, constant\n\nclass Reader(HttpUser):\n    wait_time = constant(0.1)\n\n    @task\n    def ping(self):\n        self.client.get(\"/ping\")\n",
    );
    for name in ["runs/before", "runs/after"] {
        let out = Command::new(env!("CARGO_BIN_EXE_loadlab"))
            .args([
                "run",
                &format!("{base}/ping"),
                "-d",
                "1s",
                "-c",
                "2",
                "-q",
                "--out",
                name,
            ])
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A command of the docs, ready to start: its words after `loadlab`, and the file its output
/// goes to (`> FILE`), if any.
#[derive(Clone)]
struct Ready {
    place: String,
    args: Vec<String>,
    stdout_to: Option<String>,
}

impl Ready {
    fn start(&self, dir: &Path) -> std::process::Child {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_loadlab"));
        cmd.args(&self.args)
            .current_dir(dir)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        match &self.stdout_to {
            Some(file) => cmd.stdout(std::fs::File::create(dir.join(file)).unwrap()),
            None => cmd.stdout(std::process::Stdio::piped()),
        };
        cmd.spawn().unwrap()
    }
}

/// Runs every command of `files`, in order, in one directory (a run's shards, written one
/// after the other, together, from one start); the failures, each with its file, line,
/// command and output.
fn run_docs(files: &[&str]) -> Vec<String> {
    let service = Served::start(&[]);
    let base = format!("http://127.0.0.1:{}", service.port);
    let dir = tempfile::tempdir().unwrap();
    fixtures(dir.path(), &base);
    let token = crate::support::login_token(([127, 0, 0, 1], service.port).into(), "reader");
    let mut batches: Vec<Vec<Ready>> = Vec::new();
    for file in files {
        for (line, command) in commands(file) {
            let text = command.replace("$TOKEN", &token);
            let mut words = loadlab_input::experiment::split_words(&text)
                .unwrap_or_else(|e| panic!("{file}:{line}: {e}"));
            if NOT_RUN.contains(&words[0].as_str()) {
                continue;
            }
            assert_eq!(
                words[0], "loadlab",
                "{file}:{line}: a program this test does not know"
            );
            let stdout_to = match words.iter().position(|w| w == ">") {
                Some(at) => {
                    let file = words.get(at + 1).cloned();
                    words.truncate(at);
                    file
                }
                None => None,
            };
            let shard = words.iter().any(|w| w == "--shard");
            let ready = Ready {
                place: format!("{file}:{line}"),
                args: shortened(words, &base).split_off(1),
                stdout_to,
            };
            match batches.last_mut() {
                Some(last)
                    if shard && last.iter().all(|r| r.args.iter().any(|w| w == "--shard")) =>
                {
                    last.push(ready)
                }
                _ => batches.push(vec![ready]),
            }
        }
    }
    let mut failures = Vec::new();
    for batch in batches {
        // Shards share a start a few seconds ahead, set when their batch begins.
        let at = SystemTime::now() + Duration::from_secs(3);
        let children: Vec<_> = batch
            .iter()
            .map(|r| {
                let mut r = r.clone();
                if let Some(i) = r.args.iter().position(|w| w == "--start-at") {
                    r.args[i + 1] = humantime::format_rfc3339_seconds(at).to_string();
                }
                let child = r.start(dir.path());
                (r, child)
            })
            .collect();
        for (r, child) in children {
            let out = child.wait_with_output().unwrap();
            if !out.status.success() {
                failures.push(format!(
                    "{}: `loadlab {}` exited {:?}\n{}{}",
                    r.place,
                    r.args.join(" "),
                    out.status.code(),
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
    }
    failures
}

#[test]
fn every_command_of_the_readme_the_recipes_and_the_grpc_page_runs() {
    let _shared = crate::support::shared_long();
    let failures = run_docs(&["README.md", "docs/recipes.md", "docs/grpc.md"]);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_docs_commands_are_read_as_a_shell_reads_them() {
    let text = "text\n```sh\nloadlab run URL \\\n  -d 5m   # a comment\n\n# only a comment\nloadlab run 'a # b'\n```\n```yaml\nloadlab: no\n```\n";
    assert_eq!(
        commands_in(text),
        [
            (3, "loadlab run URL -d 5m".to_string()),
            (7, "loadlab run 'a # b'".to_string())
        ]
    );
    let words: Vec<String> = [
        "loadlab",
        "run",
        "http://127.0.0.1:8080/x",
        "-d",
        "5m",
        "-R",
        "20000",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(
        shortened(words, "http://127.0.0.1:9"),
        [
            "loadlab",
            "run",
            "http://127.0.0.1:9/x",
            "-d",
            "1s",
            "-R",
            "200"
        ]
    );
}
