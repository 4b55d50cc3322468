//! Run directories on disk: `summary.json`, `plan.json`, `records.json`, `timeline.csv` and
//! `latency.hlog`, each written atomically (to a temporary name, then renamed), and read back for comparisons
//! and merges.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use crate::interval::TimelineRow;
use crate::plan::Plan;
use crate::record::RunData;
use crate::summary::Summary;

/// A run directory or summary file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {path}: {error}")]
pub struct RunDirError {
    /// The file or directory concerned.
    pub path: PathBuf,
    /// The underlying failure.
    pub error: io::Error,
}

/// Writes `bytes` to `path` atomically: to a temporary name, then renamed.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), RunDirError> {
    let err = |error| RunDirError {
        path: path.to_path_buf(),
        error,
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let written = fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    });
    // A write cut short (a full disk) leaves no partial file behind, and `path` as it was.
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written.map_err(err)
}

/// Writes `summary` as pretty JSON to `path`, atomically.
pub fn write_summary(path: &Path, summary: &Summary) -> Result<(), RunDirError> {
    let mut json = serde_json::to_vec_pretty(summary).expect("summary serializes");
    json.push(b'\n');
    write_atomic(path, &json)
}

/// Writes a run directory: `summary.json`, `plan.json` (the plan as it ran, so a merge of shards
/// recovers it), `records.json` (the run's records, which shards merge by: [`read_records`]),
/// `timeline.csv`, `latency.hlog`, `histograms.hlog`,
/// and `server.csv` when the lab watched the service's processes (with `stores.csv` when it
/// watched stores, `host.csv` with the host's CPU, `groups.csv` when processes had budgets), and `profile.folded` when the service was profiled. `summary.json` is
/// written last, so a directory that has one is complete (the merge of shards waits for it);
/// then the `seconds.jsonl` kept while the run went (by the `seconds` module) is removed.
pub fn write_run_dir(dir: &Path, run: &RunData, summary: &Summary) -> Result<(), RunDirError> {
    fs::create_dir_all(dir).map_err(|error| RunDirError {
        path: dir.to_path_buf(),
        error,
    })?;
    let mut plan = serde_json::to_vec_pretty(&run.plan).expect("a plan serializes");
    plan.push(b'\n');
    write_atomic(&dir.join("plan.json"), &plan)?;
    let records = serde_json::to_vec(run).expect("a run's records serialize");
    write_atomic(&dir.join(RECORDS), &records)?;
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
    let mut hlog = crate::hlog::latency_header(start).into_bytes();
    hlog.extend_from_slice(&run.hlog_lines);
    write_atomic(&dir.join("latency.hlog"), &hlog)?;

    if let Some(whole) = whole_run_log(run) {
        write_atomic(&dir.join("histograms.hlog"), &whole)?;
    }
    if let Some(crate::profile::ProfileOutcome::Recorded(p)) = &run.profile {
        write_atomic(&dir.join("profile.folded"), p.folded().as_bytes())?;
    }
    if let Some(server) = &run.server {
        let mut csv = Vec::new();
        server.write_csv(&mut csv).expect("writes to a Vec");
        write_atomic(&dir.join("server.csv"), &csv)?;
        if !server.stores.is_empty() {
            let mut csv = Vec::new();
            server.write_stores_csv(&mut csv).expect("writes to a Vec");
            write_atomic(&dir.join("stores.csv"), &csv)?;
        }
        if !server.host.is_empty() {
            let mut csv = Vec::new();
            server.write_host_csv(&mut csv).expect("writes to a Vec");
            write_atomic(&dir.join("host.csv"), &csv)?;
        }
        if !server.groups.is_empty() {
            let mut csv = Vec::new();
            server.write_groups_csv(&mut csv).expect("writes to a Vec");
            write_atomic(&dir.join("groups.csv"), &csv)?;
        }
    }
    write_summary(&dir.join("summary.json"), summary)?;
    remove_if_present(&dir.join(SECONDS))
}

/// The file that holds each second's interval while a run goes (see the `seconds` module).
pub const SECONDS: &str = "seconds.jsonl";

/// Removes `path`; one that is not there is no error.
pub(crate) fn remove_if_present(path: &Path) -> Result<(), RunDirError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(RunDirError {
            path: path.to_path_buf(),
            error: e,
        }),
        _ => Ok(()),
    }
}

/// `histograms.hlog`: the whole run's histograms that `latency.hlog` does not hold, so that
/// `loadlab merge` merges them exactly: request timings (tags `connect`, `tls`, `queued`,
/// `waiting`, `receiving`), streaming gRPC calls' (`first_message`, `reply`), sessions (`sessions`) and the latency of each request name (`n0`, `n1`, …, named
/// by `#name TAG NAME` lines). `None` when there is none of them.
fn whole_run_log(run: &RunData) -> Option<Vec<u8>> {
    let t = &run.timings;
    let mut entries: Vec<(String, &hdrhistogram::Histogram<u64>)> = vec![
        ("connect".into(), &t.connect),
        ("tls".into(), &t.tls),
        ("queued".into(), &t.queued),
        ("waiting".into(), &t.waiting),
        ("receiving".into(), &t.receiving),
        ("first_message".into(), &t.streams.first_message),
        ("reply".into(), &t.streams.replies),
    ];
    if let Some(u) = &run.users {
        entries.push(("sessions".into(), &u.sessions));
    }
    let mut names = Vec::new();
    for (i, (name, iv)) in run.by_name.iter().enumerate() {
        names.push((format!("n{i}"), name.clone()));
        entries.push((format!("n{i}"), &iv.latency));
    }
    crate::hlog::whole_run_log(&entries, &names, run.elapsed)
}

/// The file of a run directory that holds its records.
pub const RECORDS: &str = "records.json";

/// A run's records as its directory keeps them (`records.json`): the run as the engine
/// returned it, without its timeline, interval log, processes and profile, which have files of
/// their own (the timeline is left empty).
pub fn read_records(dir: &Path) -> Result<RunData, ReadRunError> {
    let path = dir.join(RECORDS);
    let bytes = fs::read(&path).map_err(|error| ReadRunError::Io {
        path: path.clone(),
        error,
    })?;
    serde_json::from_slice(&bytes).map_err(|e| ReadRunError::Records {
        path,
        reason: e.to_string(),
    })
}

/// A run directory that cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum ReadRunError {
    /// A file is missing or unreadable.
    #[error("cannot read {path}: {error}; is it a run directory (from --out, lab or demo)?")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        error: io::Error,
    },
    /// `summary.json` is not a loadlab summary.
    #[error("{path} is not a loadlab summary: {reason}")]
    Summary {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// `records.json` that does not parse.
    #[error("{path} is not a run's records this loadlab reads: {reason}")]
    Records {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// `seconds.jsonl` (a stopped run's seconds) that cannot be read.
    #[error("{path}, line {line}: {reason}")]
    Seconds {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// `plan.json` that does not parse.
    #[error("{path} is not a plan this loadlab reads: {reason}")]
    Plan {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// A run read back from its directory: the summary, the per-second timeline's columns, the
/// watched processes and the whole run's latency histogram.
#[derive(Debug, Clone)]
pub struct SavedRun {
    /// `summary.json`.
    pub summary: Summary,
    /// `plan.json`: the plan as it ran (`None` in directories written before it was kept).
    pub plan: Option<Plan>,
    /// `timeline.csv`'s column names.
    pub columns: Vec<String>,
    /// Its rows, as numbers (an empty field reads as NaN).
    pub rows: Vec<Vec<f64>>,
    /// `server.csv`, when the run watched processes.
    pub server: Option<crate::server::ServerData>,
    /// The latency from the intended start of every interval in `latency.hlog`, merged (µs);
    /// `None` when the log is missing or unreadable.
    pub latency: Option<hdrhistogram::Histogram<u64>>,
    /// `profile.folded`'s stacks and counts, when the service was profiled.
    pub profile: Option<std::collections::BTreeMap<String, u64>>,
}

impl SavedRun {
    /// One column of the timeline, by name (empty when the run has no such column).
    pub fn column(&self, name: &str) -> Vec<f64> {
        match self.columns.iter().position(|c| c == name) {
            Some(i) => self.rows.iter().filter_map(|r| r.get(i).copied()).collect(),
            None => Vec::new(),
        }
    }

    /// The timeline as rows.
    pub fn timeline(&self) -> Vec<TimelineRow> {
        self.rows
            .iter()
            .map(|r| {
                TimelineRow::from_columns(|name| {
                    self.columns
                        .iter()
                        .position(|c| c == name)
                        .and_then(|i| r.get(i).copied())
                        .unwrap_or(f64::NAN)
                })
            })
            .collect()
    }
}

/// Reads `server.csv` (second,pid,name,cpu_pct,rss_mb, and cpu_wait_pct since it was added)
/// into per-process series.
fn read_server_csv(text: &str) -> crate::server::ServerData {
    let mut processes: Vec<crate::server::ProcessSeries> = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let (second, pid, name, cpu, rss, wait) = match f.as_slice() {
            [second, pid, name, cpu, rss] => (second, pid, name, cpu, rss, &"0"),
            [second, pid, name, cpu, rss, wait] => (second, pid, name, cpu, rss, wait),
            _ => continue,
        };
        let (Ok(second), Ok(pid)) = (second.parse::<u64>(), pid.parse::<u32>()) else {
            continue;
        };
        let sample = crate::server::ProcessSample {
            second,
            cpu_pct: cpu.parse().unwrap_or(0.0),
            cpu_wait_pct: wait.parse().unwrap_or(0.0),
            rss_mb: rss.parse().unwrap_or(0.0),
        };
        match processes.iter_mut().find(|p| p.pid == pid) {
            Some(p) => p.samples.push(sample),
            None => processes.push(crate::server::ProcessSeries {
                pid,
                name: name.to_string(),
                samples: vec![sample],
            }),
        }
    }
    crate::server::ServerData {
        processes,
        ..Default::default()
    }
}

/// Reads `stores.csv` (a line per store per second, and one per stream) into series.
fn read_stores_csv(text: &str) -> Vec<crate::server::StoreSeries> {
    let mut stores: Vec<crate::server::StoreSeries> = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let [second, store, cmds, mem, clients, stream, length, pending, lag] = f.as_slice() else {
            continue;
        };
        let Ok(second) = second.parse::<u64>() else {
            continue;
        };
        let i = match stores.iter().position(|s| s.name == *store) {
            Some(i) => i,
            None => {
                stores.push(crate::server::StoreSeries {
                    name: store.to_string(),
                    samples: Vec::new(),
                });
                stores.len() - 1
            }
        };
        let samples = &mut stores[i].samples;
        if stream.is_empty() {
            samples.push(crate::server::StoreSample {
                second,
                commands_per_s: cmds.parse().unwrap_or(0.0),
                memory_mb: mem.parse().unwrap_or(0.0),
                clients: clients.parse().unwrap_or(0),
                streams: Vec::new(),
            });
        } else if let Some(sample) = samples.last_mut().filter(|s| s.second == second) {
            sample.streams.push(crate::server::StreamReading {
                stream: stream.to_string(),
                length: length.parse().unwrap_or(0),
                pending: pending.parse().unwrap_or(0),
                lag: lag.parse().ok(),
            });
        }
    }
    stores
}

/// The text of file `name` of run directory `dir`.
pub(crate) fn read_text(dir: &Path, name: &str) -> Result<String, ReadRunError> {
    let path = dir.join(name);
    fs::read_to_string(&path).map_err(|error| ReadRunError::Io { path, error })
}

/// Reads a run directory's `summary.json` and `timeline.csv`, and `server.csv` and
/// `latency.hlog` when present.
pub fn read_run_dir(dir: &Path) -> Result<SavedRun, ReadRunError> {
    let read = |name: &str| read_text(dir, name);
    let text = read("summary.json")?;
    let summary: Summary = serde_json::from_str(&text).map_err(|e| ReadRunError::Summary {
        path: dir.join("summary.json"),
        reason: e.to_string(),
    })?;
    read_run_files(dir, summary)
}

/// Reads a run directory's files as [`read_run_dir`] does, with `summary` in place of its
/// `summary.json` (a stopped run's, rebuilt from its seconds).
pub fn read_run_files(dir: &Path, summary: Summary) -> Result<SavedRun, ReadRunError> {
    let read = |name: &str| read_text(dir, name);
    let plan = match fs::read_to_string(dir.join("plan.json")) {
        Ok(text) => Some(serde_json::from_str(&text).map_err(|e| ReadRunError::Plan {
            path: dir.join("plan.json"),
            reason: e.to_string(),
        })?),
        Err(_) => None,
    };
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
    let mut server = fs::read_to_string(dir.join("server.csv"))
        .ok()
        .map(|t| read_server_csv(&t));
    if let (Some(server), Ok(text)) = (&mut server, fs::read_to_string(dir.join("stores.csv"))) {
        server.stores = read_stores_csv(&text);
    }
    if let (Some(server), Ok(text)) = (&mut server, fs::read_to_string(dir.join("host.csv"))) {
        server.host = crate::server::ServerData::read_host_csv(&text);
    }
    if let (Some(server), Ok(text)) = (&mut server, fs::read_to_string(dir.join("groups.csv"))) {
        server.groups = crate::server::ServerData::read_groups_csv(&text);
    }
    let latency = fs::read(dir.join("latency.hlog"))
        .ok()
        .and_then(|b| crate::hlog::untagged_total(&b).ok());
    let profile = fs::read_to_string(dir.join("profile.folded"))
        .ok()
        .map(|t| crate::profile::Profile::parse_folded(&t));
    Ok(SavedRun {
        summary,
        plan,
        columns,
        rows,
        server,
        latency,
        profile,
    })
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::{read_records, read_server_csv, write_run_dir};
    use crate::{ErrorKind, Interval, Model, Plan, RunData, Stop, Summary, UserRecord};

    /// A run with something in every record: statuses and errors, two phases' seconds, two
    /// request names, users with failures and custom metrics, timings, the generator's account.
    fn recorded_run() -> RunData {
        let mut plan = Plan::get(
            "127.0.0.1:9".parse().unwrap(),
            "/",
            Model::closed(2, 1),
            Stop::default(),
        );
        plan.apdex_ms = Some(5.0);
        let intervals: Vec<Interval> = (0..3)
            .map(|second| {
                let mut iv = Interval::new(second);
                for (i, status) in [200u16, 200, 503, 404].into_iter().enumerate() {
                    iv.counts.sent += 1;
                    iv.counts.record_status(status);
                    iv.counts.bytes += 120;
                    iv.latency.record(1_000 * (second + 1) + i as u64).unwrap();
                    iv.service.record(900 * (second + 1)).unwrap();
                }
                iv.counts.sent += 1;
                iv.counts.record_error(ErrorKind::Reset);
                iv.lag.record(40).unwrap();
                iv
            })
            .collect();
        let mut run = RunData::from_intervals(plan, &intervals);
        run.started_at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_800_000_000_123);
        run.elapsed = Duration::from_millis(3_250);
        run.unfinished = 2;
        for (name, us) in [("get /a", 700), ("get /b", 9_000)] {
            let mut iv = Interval::new(0);
            iv.counts.record_status(200);
            iv.latency.record(us).unwrap();
            run.by_name.push((name.to_string(), iv));
        }
        let mut users = UserRecord::new();
        users.sessions.record(2_500_000).unwrap();
        users.failures.insert("expect status on login".into(), 3);
        users
            .request_failures
            .insert(("GET".into(), "/a".into(), "500".into()), 4);
        users.custom.add("histogram", "rows", 12.5);
        users.custom.add("counter", "orders", 2.0);
        users.started_by_scenario = vec![5, 1];
        run.users = Some(users);
        run.timings.connect.record(150).unwrap();
        run.timings.refused.record(3_000).unwrap();
        run.timings.tls_failures[1] = 2;
        run.generator.cpu_s = 1.25;
        run.generator.threads = 2;
        run.generator.connect.opened = 2;
        run.generator.pacing.add_gap(0.001, 0.001);
        run
    }

    #[test]
    fn a_run_read_back_from_its_records_summarizes_as_it_did() {
        let dir = tempfile::tempdir().unwrap();
        let run = recorded_run();
        write_run_dir(dir.path(), &run, &Summary::from_run(&run)).unwrap();
        let mut back = read_records(dir.path()).unwrap();
        assert!(
            back.timeline.is_empty(),
            "the timeline has a file of its own"
        );
        back.timeline = run.timeline.clone();
        let json = |r: &RunData| serde_json::to_value(Summary::from_run(r)).unwrap();
        assert_eq!(json(&back), json(&run));
        assert_eq!(back.totals.counts, run.totals.counts);
        assert_eq!(back.totals.lag.len(), 3);
        let users = back.users.as_ref().unwrap();
        assert_eq!(users.request_failures.values().sum::<u64>(), 4);
        let rows = |r: &RunData| r.users.as_ref().unwrap().custom.histograms["rows"].max();
        assert_eq!(rows(&back), rows(&run));
        assert_eq!(back.generator, run.generator);
        // Shards of a plan add their records.
        let mut both = back.clone();
        both.add_shard(&run);
        assert_eq!(
            both.totals.counts.completed,
            2 * run.totals.counts.completed
        );
        assert_eq!(both.totals.counts.status[503], 6);
        assert_eq!(both.by_name[1].1.latency.len(), 2);
        assert_eq!(
            both.users.as_ref().unwrap().failures["expect status on login"],
            6
        );
        assert_eq!(both.generator.threads, 4);
        assert_eq!(both.timings.tls_failures[1], 4);

        std::fs::write(dir.path().join(super::RECORDS), "{}").unwrap();
        let e = read_records(dir.path()).unwrap_err();
        assert!(e.to_string().contains("is not a run's records"), "{e}");
    }

    #[test]
    fn server_csv_reads_with_and_without_the_cpu_wait_column() {
        let old = read_server_csv("second,pid,name,cpu_pct,rss_mb\n0,7,node,50.0,10.00\n");
        let new = read_server_csv(
            "second,pid,name,cpu_pct,rss_mb,cpu_wait_pct\n0,7,node,50.0,10.00,30.0\n",
        );
        assert_eq!(old.processes[0].samples[0].cpu_wait_pct, 0.0);
        assert_eq!(old.processes[0].samples[0].cpu_pct, 50.0);
        assert_eq!(new.processes[0].samples[0].cpu_wait_pct, 30.0);
        assert_eq!(new.processes[0].samples[0].rss_mb, 10.0);
    }
}
