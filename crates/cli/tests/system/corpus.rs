//! loadlab's own corpus of Artillery scripts (`tests/fixtures/artillery-corpus`, one script per
//! key or two of docs/scenarios.md's tables, each saying what it covers on its first line):
//! every one validates offline and runs against the reference service on 127.0.0.1 with no
//! user failing (unless its `# users fail:` line says why they do, as in Artillery), exiting 0
//! (or the code its `# exit:` line gives). JSON scripts, which hold no comments, are run too.
//! Artillery itself runs the same scripts in bench/artillery-diff.py.

use loadlab_service::TestServer;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const CORPUS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/artillery-corpus"
);

/// The corpus copied into `dir` with its target set to `url`; the scripts' paths, in order.
fn corpus_in(dir: &Path, url: &str) -> Vec<PathBuf> {
    let mut scripts = Vec::new();
    for entry in std::fs::read_dir(CORPUS).unwrap() {
        let from = entry.unwrap().path();
        let to = dir.join(from.file_name().unwrap());
        let text = std::fs::read(&from).unwrap();
        match String::from_utf8(text.clone()) {
            Ok(t) => std::fs::write(&to, t.replace("http://127.0.0.1:9", url)).unwrap(),
            Err(_) => std::fs::write(&to, text).unwrap(),
        }
        let name = to.file_name().unwrap().to_string_lossy().into_owned();
        if (name.ends_with(".yml") || name.ends_with(".json"))
            && name.starts_with(|c: char| c.is_ascii_digit())
        {
            scripts.push(to);
        }
    }
    scripts.sort();
    scripts
}

/// The flags a script's `# run:` line gives, paths made absolute.
fn flags_of(script: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(script).unwrap();
    let dir = script.parent().unwrap();
    let Some(line) = text.lines().find_map(|l| l.strip_prefix("# run: ")) else {
        return Vec::new();
    };
    let mut out: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    for i in 1..out.len() {
        if out[i - 1] == "--config" {
            out[i] = dir.join(&out[i]).display().to_string();
        }
    }
    out
}

/// Runs loadlab with `args` in `dir`, the corpus's environment set.
fn loadlab_in(dir: &Path, url: &str, args: &[String]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args(args)
        .current_dir(dir)
        .env("CORPUS_TARGET", url)
        .env("CORPUS_PAGE", "ci")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Validates and runs one script; what went wrong, in words.
fn check(script: &Path, dir: &Path, url: &str) -> Result<(), String> {
    let name = script.file_name().unwrap().to_string_lossy().into_owned();
    let text = std::fs::read_to_string(script).unwrap();
    if !text.starts_with("# covers: ") && !name.ends_with(".json") {
        return Err(format!("{name}: no `# covers:` line"));
    }
    let path = script.display().to_string();
    let flags = flags_of(script);
    let mut validate = vec!["validate".to_string()];
    validate.extend(flags.iter().cloned());
    validate.push(path.clone());
    let out = loadlab_in(dir, url, &validate);
    if !out.status.success() {
        return Err(format!(
            "{name}: validate: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let json = dir.join(format!("{name}.json"));
    let mut run = vec!["run".to_string()];
    run.extend(flags);
    run.extend([path, "--json".into(), json.display().to_string()]);
    let out = loadlab_in(dir, url, &run);
    // A script whose checks fail on purpose says the exit code it expects (`# exit: 21`).
    let exit = text
        .lines()
        .find_map(|l| l.strip_prefix("# exit: "))
        .map_or(0, |c| c.trim().parse::<i32>().unwrap());
    if out.status.code() != Some(exit) {
        return Err(format!(
            "{name}: run exited {:?}, not {exit}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    // A run that stops before its load (a processor that does not load) writes no summary.
    let Ok(summary) = std::fs::read_to_string(&json) else {
        return match exit {
            0 => Err(format!("{name}: no summary written")),
            _ => Ok(()),
        };
    };
    let s: Value = serde_json::from_str(&summary).unwrap();
    // A flow of functions alone sends no request of loadlab's: its users must have run.
    let ran = if text.contains("a flow of functions alone") {
        s["users"]["completed"].as_u64().unwrap_or(0)
    } else {
        s["requests"]["completed"].as_u64().unwrap_or(0)
    };
    if ran == 0 {
        return Err(format!("{name}: no request completed: {s:#}"));
    }
    let users_fail = text.lines().any(|l| l.starts_with("# users fail: "));
    if let Some(u) = s.get("users") {
        if u["failed"] != 0 && !users_fail {
            return Err(format!("{name}: users failed: {:#}", u["failures"]));
        }
    }
    Ok(())
}

#[test]
fn every_script_of_the_corpus_validates_and_runs_without_a_failed_user() {
    let _shared = crate::support::shared_long();
    let server = TestServer::start(2).unwrap();
    let url = server.url("").trim_end_matches('/').to_string();
    let dir = tempfile::tempdir().unwrap();
    let scripts = corpus_in(dir.path(), &url);
    assert!(scripts.len() >= 110, "{} scripts", scripts.len());
    // Three at a time: each is a short run of a few users.
    let failures: Vec<String> = std::thread::scope(|scope| {
        let chunks: Vec<Vec<PathBuf>> = (0..3)
            .map(|k| scripts.iter().skip(k).step_by(3).cloned().collect())
            .collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                let (dir, url) = (dir.path(), url.as_str());
                scope.spawn(move || {
                    chunk
                        .iter()
                        .filter_map(|s| check(s, dir, url).err())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
