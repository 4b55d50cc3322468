//! Run directories on disk: `summary.json`, `timeline.csv` and `latency.hlog`, each written
//! atomically (to a temporary name, then renamed), and read back for comparisons.

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

/// A run directory that cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum ReadRunError {
    /// A file is missing or unreadable.
    #[error("cannot read {path}: {source}; is it a run directory (from --out, lab or demo)?")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: io::Error,
    },
    /// `summary.json` is not a loadlab summary.
    #[error("{path} is not a loadlab summary: {reason}")]
    Summary {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// A run read back from its directory: the summary and the per-second timeline's columns.
#[derive(Debug, Clone)]
pub struct SavedRun {
    /// `summary.json`.
    pub summary: Summary,
    /// `timeline.csv`'s column names.
    pub columns: Vec<String>,
    /// Its rows, as numbers (an empty field reads as NaN).
    pub rows: Vec<Vec<f64>>,
}

impl SavedRun {
    /// One column of the timeline, by name (empty when the run has no such column).
    pub fn column(&self, name: &str) -> Vec<f64> {
        match self.columns.iter().position(|c| c == name) {
            Some(i) => self.rows.iter().filter_map(|r| r.get(i).copied()).collect(),
            None => Vec::new(),
        }
    }
}

/// Reads a run directory's `summary.json` and `timeline.csv`.
pub fn read_run_dir(dir: &Path) -> Result<SavedRun, ReadRunError> {
    let read = |name: &str| {
        let path = dir.join(name);
        fs::read_to_string(&path).map_err(|source| ReadRunError::Io { path, source })
    };
    let text = read("summary.json")?;
    let summary: Summary = serde_json::from_str(&text).map_err(|e| ReadRunError::Summary {
        path: dir.join("summary.json"),
        reason: e.to_string(),
    })?;
    let csv = read("timeline.csv")?;
    let mut lines = csv.lines();
    let columns: Vec<String> = lines
        .next()
        .unwrap_or_default()
        .split(',')
        .map(str::to_string)
        .collect();
    let rows = lines
        .map(|l| {
            l.split(',')
                .map(|f| f.trim().parse::<f64>().unwrap_or(f64::NAN))
                .collect()
        })
        .collect();
    Ok(SavedRun {
        summary,
        columns,
        rows,
    })
}
