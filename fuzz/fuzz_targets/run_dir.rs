//! A run directory as `report`, `compare` and `merge` read it back: `summary.json`,
//! `timeline.csv`, `latency.hlog` (the interval log), `server.csv`, `plan.json`,
//! `records.json`, `profile.folded` and a stopped run's `seconds.jsonl`, each one part of the input (parts are separated by the
//! byte 0xFF, which no UTF-8 text holds; a missing part is a missing file).
#![no_main]

use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;

/// The files, in the order of the input's parts.
const FILES: [&str; 8] = [
    "summary.json",
    "timeline.csv",
    "latency.hlog",
    "server.csv",
    "plan.json",
    "records.json",
    "profile.folded",
    "seconds.jsonl",
];

/// This process's directory for the files, on a memory file system when there is one.
fn dir() -> PathBuf {
    let base = PathBuf::from("/dev/shm");
    let base = if base.is_dir() { base } else { std::env::temp_dir() };
    let dir = base.join(format!("loadlab-fuzz-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fuzz_target!(|data: &[u8]| {
    let dir = dir();
    let mut parts = data.split(|b| *b == 0xFF);
    for name in FILES {
        let path = dir.join(name);
        match parts.next() {
            Some(bytes) => std::fs::write(&path, bytes).unwrap(),
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    if let Ok(saved) = loadlab_run::dir::read_run_dir(&dir) {
        let _ = saved.timeline();
    }
    let _ = loadlab_run::dir::read_records(&dir);
    if let Ok(run) = loadlab_run::read_stopped_run(&dir) {
        let _ = loadlab_run::Summary::from_run(&run);
    }
    if let Ok(bytes) = std::fs::read(dir.join("latency.hlog")) {
        let _ = loadlab_run::hlog::read_intervals(&bytes);
        let _ = loadlab_run::hlog::untagged_total(&bytes);
    }
});
