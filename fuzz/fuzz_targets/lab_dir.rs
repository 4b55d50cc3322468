//! A lab directory as `report` reads it back: `experiment.json`, `lab.json`, and the first
//! cell's `cell.json`, `summary.json`, `capacity.json` and `probe.json`, each one part of the
//! input (parts are separated by the byte 0xFF; a missing part is a missing file). The cell's
//! folder is the one the experiment names first, so the reader finds it.
#![no_main]

use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;
use loadlab_run::lab::{cell_path, read_lab_dir, Experiment};

/// The cell's files, in the order of the input's parts after the first two.
const CELL_FILES: [&str; 4] = ["cell.json", "summary.json", "capacity.json", "probe.json"];

/// This process's directory for the lab, on a memory file system when there is one.
fn dir() -> PathBuf {
    let base = PathBuf::from("/dev/shm");
    let base = if base.is_dir() { base } else { std::env::temp_dir() };
    base.join(format!("loadlab-fuzz-lab-{}", std::process::id()))
}

/// Writes `bytes` to `path` (its folders made), or removes the file when there is no part. A
/// cell's folder named after fuzzed names may be one the file system refuses (a name over 255
/// bytes): the reader then finds no file there, as it would in a real lab.
fn put(path: PathBuf, bytes: Option<&[u8]>) {
    match bytes {
        Some(b) => {
            let _ = std::fs::create_dir_all(path.parent().unwrap_or(&path))
                .and_then(|_| std::fs::write(&path, b));
        }
        None => {
            let _ = std::fs::remove_file(&path);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let dir = dir();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut parts = data.split(|b| *b == 0xFF);
    let experiment = parts.next();
    put(dir.join("experiment.json"), experiment);
    put(dir.join("lab.json"), parts.next());
    let first_cell = experiment
        .and_then(|e| serde_json::from_slice::<Experiment>(e).ok())
        .and_then(|e| {
            let (t, w, r) = e.cells().next()?;
            Some(cell_path(t, w, r, e.rounds))
        });
    if let Some(cell) = first_cell {
        for name in CELL_FILES {
            put(dir.join(&cell).join(name), parts.next());
        }
    }
    let _ = read_lab_dir(&dir);
});
