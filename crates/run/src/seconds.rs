//! A run directory's seconds written while the run goes, and a run stopped before its end
//! (killed, out of power) read back from them.
//!
//! At the start `plan.json` is written; then, as each second ends, a row of `timeline.csv`, an
//! interval of `latency.hlog` and the second's whole interval (counts by status code, the three
//! histograms, outcomes per name) as a line of `seconds.jsonl`, each file written once per second
//! with one `write` call. A kill loses at most the second being written; a power cut may also
//! lose what the kernel had not yet put on disk (the files are not synced each second). When the
//! run ends, [`crate::write_run_dir`] rewrites every file atomically from the run's records and
//! removes `seconds.jsonl`: a directory that has it and no `summary.json` is a run that stopped.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::dir::{read_text, remove_if_present, write_atomic, ReadRunError, RunDirError, SECONDS};
use crate::interval::{Interval, TimelineRow};
use crate::plan::Plan;
use crate::record::RunData;

/// `seconds.jsonl`'s first line.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    /// The format's version.
    loadlab_seconds: u32,
    /// The run's origin, seconds since the epoch (from the first second's end, to the
    /// millisecond or so; the run's records hold the exact one).
    started_at_s: f64,
}

/// The files of a run directory that grow a second at a time while the run goes.
pub struct SecondsWriter {
    dir: PathBuf,
    timeline: fs::File,
    hlog: fs::File,
    seconds: fs::File,
    /// Whether the first second (and with it the headers that need the origin) was written.
    started: bool,
}

impl SecondsWriter {
    /// Creates `dir` when missing, writes `plan.json`, and starts `timeline.csv`,
    /// `latency.hlog` and `seconds.jsonl` empty (a run directory's earlier files are replaced).
    pub fn start(dir: &Path, plan: &Plan) -> Result<Self, RunDirError> {
        fs::create_dir_all(dir).map_err(|error| RunDirError {
            path: dir.to_path_buf(),
            error,
        })?;
        let mut json = serde_json::to_vec_pretty(plan).expect("a plan serializes");
        json.push(b'\n');
        write_atomic(&dir.join("plan.json"), &json)?;
        // An earlier run's summary would make this directory read as complete.
        remove_if_present(&dir.join("summary.json"))?;
        let create = |name: &str| {
            let path = dir.join(name);
            fs::File::create(&path).map_err(|error| RunDirError { path, error })
        };
        let mut timeline = create("timeline.csv")?;
        let mut header = TimelineRow::csv_header().into_bytes();
        header.push(b'\n');
        timeline.write_all(&header).map_err(|error| RunDirError {
            path: dir.join("timeline.csv"),
            error,
        })?;
        Ok(SecondsWriter {
            dir: dir.to_path_buf(),
            timeline,
            hlog: create("latency.hlog")?,
            seconds: create(SECONDS)?,
            started: false,
        })
    }

    /// Appends second `iv` (whose timeline row is `row`) to the three files.
    pub fn add(&mut self, row: &TimelineRow, iv: &Interval) -> Result<(), RunDirError> {
        let mut seconds = Vec::new();
        let mut hlog = Vec::new();
        if !self.started {
            // The callback comes as the second ends: the origin is that long before now.
            let origin = SystemTime::now()
                .checked_sub(Duration::from_secs(iv.second + 1))
                .unwrap_or(UNIX_EPOCH);
            let started_at_s = origin
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64();
            let header = Header {
                loadlab_seconds: 1,
                started_at_s,
            };
            serde_json::to_writer(&mut seconds, &header).expect("writes to a Vec");
            seconds.push(b'\n');
            hlog.extend_from_slice(crate::hlog::latency_header(started_at_s).as_bytes());
            self.started = true;
        }
        serde_json::to_writer(&mut seconds, iv).expect("an interval serializes");
        seconds.push(b'\n');
        let mut log = crate::hlog::SecondsLog::new();
        log.write(iv.second, &iv.latency, &iv.service);
        hlog.extend_from_slice(&log.into_lines());
        let mut csv = Vec::new();
        row.write_csv(&mut csv).expect("writes to a Vec");
        for (file, name, bytes) in [
            (&mut self.timeline, "timeline.csv", csv),
            (&mut self.hlog, "latency.hlog", hlog),
            (&mut self.seconds, SECONDS, seconds),
        ] {
            file.write_all(&bytes).map_err(|error| RunDirError {
                path: self.dir.join(name),
                error,
            })?;
        }
        Ok(())
    }
}

/// Whether `dir` holds a run that stopped before its end: `seconds.jsonl` without
/// `summary.json`.
pub fn is_stopped_run(dir: &Path) -> bool {
    dir.join(SECONDS).is_file() && !dir.join("summary.json").exists()
}

/// A stopped run's records rebuilt from `plan.json` and `seconds.jsonl`: every second that
/// was written, marked incomplete. What the run keeps only as a whole (request timings,
/// per-name histograms, the users' failures and sessions, the generator's account, the watched
/// processes) is not in them. A last line cut by the kill is left out.
pub fn read_stopped_run(dir: &Path) -> Result<RunData, ReadRunError> {
    let read = |name: &str| read_text(dir, name);
    let plan_path = dir.join("plan.json");
    let plan: Plan = serde_json::from_str(&read("plan.json")?).map_err(|e| ReadRunError::Plan {
        path: plan_path,
        reason: e.to_string(),
    })?;
    let path = dir.join(SECONDS);
    let text = read(SECONDS)?;
    let bad = |line: usize, reason: String| ReadRunError::Seconds {
        path: path.clone(),
        line,
        reason,
    };
    let mut lines = text.split_inclusive('\n').enumerate();
    let header: Header = match lines.next() {
        Some((_, l)) if l.ends_with('\n') => {
            serde_json::from_str(l).map_err(|e| bad(1, e.to_string()))?
        }
        _ => {
            return Err(bad(
                1,
                "the run stopped before its first second ended".into(),
            ))
        }
    };
    if header.loadlab_seconds != 1 {
        return Err(bad(
            1,
            format!(
                "version {} is not one this loadlab reads",
                header.loadlab_seconds
            ),
        ));
    }
    let mut intervals: Vec<Interval> = Vec::new();
    for (i, line) in lines {
        // A line without its newline is the one the kill cut.
        if !line.ends_with('\n') {
            break;
        }
        let iv: Interval = serde_json::from_str(line).map_err(|e| bad(i + 1, e.to_string()))?;
        if intervals.last().is_some_and(|l| l.second >= iv.second) {
            return Err(bad(i + 1, format!("second {} is out of order", iv.second)));
        }
        intervals.push(iv);
    }
    let Some(last) = intervals.last() else {
        return Err(bad(
            2,
            "the run stopped before its first second ended".into(),
        ));
    };
    let (seconds, in_flight) = (last.second + 1, last.in_flight);
    let mut run = RunData::from_intervals(plan, &intervals);
    run.complete = false;
    run.started_at = UNIX_EPOCH
        .checked_add(Duration::from_secs_f64(header.started_at_s.max(0.0)))
        .unwrap_or(UNIX_EPOCH);
    run.elapsed = Duration::from_secs(seconds);
    run.unfinished = in_flight;
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Model, Stop};

    fn plan() -> Plan {
        Plan::get(
            "127.0.0.1:9".parse().unwrap(),
            "/",
            Model::open(10.0, 1, 1),
            Stop::default(),
        )
    }

    fn second(n: u64, statuses: &[u16]) -> Interval {
        let mut iv = Interval::new(n);
        for &s in statuses {
            iv.counts.sent += 1;
            iv.counts.offered += 1;
            iv.counts.record_status(s);
            iv.latency.record(1_000 + n * 100).unwrap();
            iv.service.record(900).unwrap();
        }
        iv.in_flight = n;
        iv
    }

    #[test]
    fn a_stopped_run_reads_back_its_seconds_with_their_exact_statuses() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = SecondsWriter::start(dir.path(), &plan()).unwrap();
        let seconds = [second(0, &[200, 200]), second(1, &[503, 200, 404])];
        for iv in &seconds {
            w.add(&TimelineRow::from_interval(iv), iv).unwrap();
        }
        // The kill cut the third second's line in the middle.
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(SECONDS))
            .unwrap();
        f.write_all(b"{\"second\":2,\"counts\"").unwrap();
        assert!(is_stopped_run(dir.path()));
        let run = read_stopped_run(dir.path()).unwrap();
        assert!(!run.complete);
        assert_eq!(run.elapsed, Duration::from_secs(2));
        assert_eq!(run.unfinished, 1);
        let c = &run.totals.counts;
        assert_eq!((c.sent, c.completed, c.ok), (5, 5, 3));
        let statuses: Vec<(u16, u64)> = c.statuses().collect();
        assert_eq!(statuses, vec![(200, 3), (404, 1), (503, 1)]);
        assert_eq!(run.totals.latency.len(), 5);
        assert_eq!(run.timeline.len(), 2);
        // The interval log and the timeline hold the same two seconds.
        let csv = fs::read_to_string(dir.path().join("timeline.csv")).unwrap();
        assert_eq!(csv.lines().count(), 3);
        let hlog = fs::read(dir.path().join("latency.hlog")).unwrap();
        let total = crate::hlog::untagged_total(&hlog).unwrap();
        assert_eq!(total.len(), 5);
        let started = run.started_at.duration_since(UNIX_EPOCH).unwrap();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        assert!(now - started >= Duration::from_secs(1) && now - started < Duration::from_secs(60));
    }

    #[test]
    fn a_run_killed_at_its_fifth_second_by_loadlab_0_2_reads_back() {
        // `run URL/delay?ms=20 -R 50 -d 60s --out DIR`, killed with SIGKILL after 4.5 s.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stopped-run");
        let run = read_stopped_run(&dir).unwrap();
        assert_eq!(run.elapsed, Duration::from_secs(4));
        assert_eq!(run.timeline.len(), 4);
        let c = &run.totals.counts;
        assert_eq!((c.offered, c.sent, c.completed), (200, 200, 199));
        assert_eq!(c.statuses().collect::<Vec<_>>(), vec![(200, 199)]);
        assert_eq!(run.unfinished, 1);
        let p50 = run.totals.latency.value_at_quantile(0.5);
        assert!((20_000..30_000).contains(&p50), "{p50} µs");
    }

    #[test]
    fn a_run_that_ends_keeps_no_seconds_file_and_reads_as_complete() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = SecondsWriter::start(dir.path(), &plan()).unwrap();
        let iv = second(0, &[200]);
        w.add(&TimelineRow::from_interval(&iv), &iv).unwrap();
        drop(w);
        let run = RunData::from_intervals(plan(), &[iv]);
        crate::write_run_dir(dir.path(), &run, &crate::Summary::from_run(&run)).unwrap();
        assert!(!dir.path().join(SECONDS).exists());
        assert!(!is_stopped_run(dir.path()));
        crate::read_run_dir(dir.path()).unwrap();
    }

    #[test]
    fn seconds_files_that_cannot_be_a_run_are_refused_with_their_line() {
        let dir = tempfile::tempdir().unwrap();
        SecondsWriter::start(dir.path(), &plan()).unwrap();
        let err = read_stopped_run(dir.path()).unwrap_err().to_string();
        assert!(err.contains("before its first second ended"), "{err}");
        let path = dir.path().join(SECONDS);
        fs::write(
            &path,
            "{\"loadlab_seconds\":1,\"started_at_s\":1.0}\nnot json\n",
        )
        .unwrap();
        let err = read_stopped_run(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("seconds.jsonl") && err.contains("line 2"),
            "{err}"
        );
        fs::write(&path, "{\"loadlab_seconds\":7,\"started_at_s\":1.0}\n").unwrap();
        let err = read_stopped_run(dir.path()).unwrap_err().to_string();
        assert!(err.contains("version 7"), "{err}");
    }
}
