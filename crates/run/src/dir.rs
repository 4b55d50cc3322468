//! Run directories on disk: `summary.json`, `timeline.csv` and `latency.hlog`, each written
//! atomically (to a temporary name, then renamed).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use crate::{RunData, Summary, TimelineRow};

/// A run directory or summary file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {path}: {source}")]
pub struct RunDirError {
    /// The file or directory concerned.
    pub path: PathBuf,
    /// The underlying failure.
    pub source: io::Error,
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), RunDirError> {
    let err = |source| RunDirError {
        path: path.to_path_buf(),
        source,
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = fs::File::create(&tmp).map_err(err)?;
    f.write_all(bytes).map_err(err)?;
    f.sync_all().map_err(err)?;
    fs::rename(&tmp, path).map_err(err)
}

/// Writes `summary` as pretty JSON to `path`, atomically.
pub fn write_summary(path: &Path, summary: &Summary) -> Result<(), RunDirError> {
    let mut json = serde_json::to_vec_pretty(summary).expect("summary serializes");
    json.push(b'\n');
    write_atomic(path, &json)
}

/// Writes a run directory: `summary.json`, `timeline.csv`, `latency.hlog`, and `server.csv`
/// when the lab watched the service's processes.
pub fn write_run_dir(dir: &Path, run: &RunData, summary: &Summary) -> Result<(), RunDirError> {
    fs::create_dir_all(dir).map_err(|source| RunDirError {
        path: dir.to_path_buf(),
        source,
    })?;
    write_summary(&dir.join("summary.json"), summary)?;

    let mut csv = Vec::new();
    writeln!(csv, "{}", TimelineRow::csv_header()).expect("writes to a Vec");
    for row in &run.timeline {
        row.write_csv(&mut csv).expect("writes to a Vec");
    }
    write_atomic(&dir.join("timeline.csv"), &csv)?;

    let start = run
        .started_at
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    let mut hlog = Vec::new();
    writeln!(
        hlog,
        "#loadlab latency log: values in microseconds; untagged = latency from the intended \
         start, Tag=service = from the actual send\n\
         #[StartTime: {start:.3} (seconds since epoch)]\n\
         #[BaseTime: {start:.3} (seconds since epoch)]\n\
         \"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
    )
    .expect("writes to a Vec");
    hlog.extend_from_slice(&run.hlog_lines);
    write_atomic(&dir.join("latency.hlog"), &hlog)?;

    if let Some(server) = &run.server {
        let mut csv = Vec::new();
        server.write_csv(&mut csv).expect("writes to a Vec");
        write_atomic(&dir.join("server.csv"), &csv)?;
    }
    Ok(())
}
