//! Merging the run directories of a plan's shards into one run (`loadlab merge`): each shard's
//! records (`records.json`: counts and whole-run histograms) added up, its seconds joined by
//! wall-clock second into the timeline and the interval log, the plan joined back from the
//! plans the shards ran, and the merged run summarized as `run` summarizes one, but for the
//! generator, judged shard by shard on the machine each ran on.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

use loadlab_analyze::health;
use loadlab_run::hlog::{self, SecondsLog};
use loadlab_run::shard::join_shards;
use loadlab_run::summary::{MergeSummary, MergedShard, Summary};
use loadlab_run::{
    new_histogram, read_records, read_run_dir, Interval, Plan, ReadRunError, RunData, SavedRun,
    TimelineRow,
};

/// Shard run directories that cannot be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A directory that cannot be read.
    #[error(transparent)]
    Read(#[from] ReadRunError),
    /// A run that was not a shard.
    #[error("{0} is not a shard's run: run each shard with --shard I/N (and --out DIR)")]
    NotAShard(PathBuf),
    /// Runs of different plans.
    #[error("{dir} ran another plan (hash {theirs}, not {ours} as {first}): merge the shards of one plan only")]
    OtherPlan {
        /// The directory that differs.
        dir: PathBuf,
        /// Its plan hash.
        theirs: String,
        /// The first directory.
        first: PathBuf,
        /// The first directory's plan hash.
        ours: String,
    },
    /// The same shard given twice.
    #[error("{0} and {1} are the same shard ({2}): give each shard's directory once")]
    SameShard(PathBuf, PathBuf, String),
    /// An interval log that cannot be read, so nothing can be merged exactly.
    #[error("{0}: unreadable HdrHistogram log ({1}); the shard's run directory is damaged")]
    Log(PathBuf, String),
    /// A shard's directory without its records (written by a loadlab before `records.json`).
    #[error("{0} holds no records.json (what a run recorded, which shards merge by, kept since loadlab 0.1 round 5): run the shards again with this loadlab")]
    NoRecords(PathBuf),
    /// A shard that stopped before its end (killed), so its records were never written.
    #[error("{0} is a shard that stopped before its end (it has no summary.json; `loadlab report` reads its seconds): leave it out, and the merge counts it as a missing shard")]
    Stopped(PathBuf),
    /// Nothing to merge.
    #[error("no run directory to merge")]
    Empty,
}

/// One shard's run directory, read for merging.
struct ShardRun {
    dir: PathBuf,
    /// Its summary and timeline.
    saved: SavedRun,
    /// Its records: the run the engine returned, but for its timeline and interval log.
    records: RunData,
    /// Its origin's offset from the merged origin, whole seconds.
    offset_s: u64,
    /// Per second of its own origin: true for service latency, and the encoded histogram.
    seconds: Vec<(u64, bool, String)>,
}

/// Reads shard directories and checks they are distinct shards of one plan.
fn read_shards(dirs: &[PathBuf]) -> Result<Vec<ShardRun>, MergeError> {
    let mut shards: Vec<ShardRun> = Vec::with_capacity(dirs.len());
    for dir in dirs {
        if loadlab_run::is_stopped_run(dir) {
            return Err(MergeError::Stopped(dir.clone()));
        }
        let saved = read_run_dir(dir)?;
        let Some(me) = &saved.summary.shard else {
            return Err(MergeError::NotAShard(dir.clone()));
        };
        if !dir.join(loadlab_run::dir::RECORDS).is_file() {
            return Err(MergeError::NoRecords(dir.clone()));
        }
        if let Some(first) = shards.first() {
            let ours = &first.saved.summary.plan_hash;
            let first_count = first.saved.summary.shard.as_ref().map_or(0, |s| s.count);
            if saved.summary.plan_hash != *ours || me.count != first_count {
                return Err(MergeError::OtherPlan {
                    dir: dir.clone(),
                    theirs: format!("{}, {} shards", saved.summary.plan_hash, me.count),
                    first: first.dir.clone(),
                    ours: format!("{ours}, {first_count} shards"),
                });
            }
        }
        if let Some(twin) = shards
            .iter()
            .find(|s| s.saved.summary.shard.as_ref().map(|x| x.index) == Some(me.index))
        {
            let label = format!("{}/{}", me.index, me.count);
            return Err(MergeError::SameShard(twin.dir.clone(), dir.clone(), label));
        }
        let records = read_records(dir)?;
        let log = dir.join("latency.hlog");
        let bytes = std::fs::read(&log).map_err(|e| MergeError::Log(log.clone(), e.to_string()))?;
        let seconds = hlog::read_intervals(&bytes)
            .map_err(|e| MergeError::Log(log.clone(), e.to_string()))?
            .intervals
            .into_iter()
            .filter_map(|iv| match iv.tag.as_deref() {
                None => Some((iv.second, false, iv.encoded)),
                Some(hlog::SERVICE_TAG) => Some((iv.second, true, iv.encoded)),
                Some(_) => None,
            })
            .collect();
        shards.push(ShardRun {
            dir: dir.clone(),
            saved,
            records,
            offset_s: 0,
            seconds,
        });
    }
    let origin = shards
        .iter()
        .map(|s| s.records.started_at)
        .min()
        .ok_or(MergeError::Empty)?;
    for s in &mut shards {
        let late = s
            .records
            .started_at
            .duration_since(origin)
            .unwrap_or_default();
        s.offset_s = late.as_secs_f64().round() as u64;
    }
    shards.sort_by_key(|s| s.saved.summary.shard.as_ref().map_or(0, |x| x.index));
    Ok(shards)
}

/// Adds `from` into `into` (both from [`new_histogram`], so their bounds agree).
fn add(into: &mut Histogram<u64>, from: &Histogram<u64>) {
    into.add(from).expect("histograms share bounds");
}

/// A merged run: the run data (timeline, interval log, whole-run histograms, the joined plan)
/// to write as a run directory, and its summary with findings and thresholds.
#[derive(Debug)]
pub struct Merged {
    /// The merged run, as the engine would have returned it.
    pub run: RunData,
    /// Its summary, judged as `run` judges one (`cores`: the CPUs the service could use).
    pub summary: Summary,
}

/// Merges the run directories of shards of one plan; `cores` is what the findings take the
/// service's machine to have.
pub fn merge_dirs(dirs: &[PathBuf], cores: usize) -> Result<Merged, MergeError> {
    let shards = read_shards(dirs)?;
    let first = &shards.first().ok_or(MergeError::Empty)?.saved.summary;
    let count = first.shard.as_ref().map_or(1, |s| s.count);
    let origin = shards
        .iter()
        .map(|s| s.records.started_at)
        .min()
        .unwrap_or(SystemTime::UNIX_EPOCH);

    let plans: Vec<&Plan> = shards.iter().map(|s| &s.records.plan).collect();
    let plan = join_shards(&plans).ok_or(MergeError::Empty)?;
    let mut run = RunData::from_intervals(plan, &[]);
    for s in &shards {
        run.add_shard(&s.records);
    }
    run.started_at = origin;
    run.elapsed = shards
        .iter()
        .map(|s| Duration::from_secs(s.offset_s) + s.records.elapsed)
        .max()
        .unwrap_or_default();
    let (log, timeline) = merge_seconds(&shards)?;
    run.timeline = timeline;
    run.hlog_lines = log.into_lines();

    let summaries: Vec<&Summary> = shards.iter().map(|s| &s.saved.summary).collect();
    let health = shard_health(&shards);
    let present: Vec<usize> = health.iter().map(|h| h.index).collect();
    let missing: Vec<usize> = (0..count).filter(|i| !present.contains(i)).collect();
    let mut summary = loadlab_analyze::summarize_judging(&run, cores, |_, g| {
        g.saturated = summaries.iter().any(|s| s.generator.saturated);
        g.warnings = health::merged_warnings(&summaries, &health, &missing, count);
    });
    // The shards' plan hash names the plan they split, whatever the joined plan's own is.
    summary.plan_hash = first.plan_hash.clone();
    summary.merged = Some(MergeSummary {
        count,
        shards: health,
        missing,
    });
    Ok(Merged { run, summary })
}

/// One merged second: counts summed, percentiles of the merged histograms, the highest of the
/// shards' schedule lags.
fn join_row(
    second: u64,
    parts: &[TimelineRow],
    latency: &Histogram<u64>,
    service: &Histogram<u64>,
) -> TimelineRow {
    let mut iv = Interval::new(second);
    iv.latency = latency.clone();
    iv.service = service.clone();
    let mut row = TimelineRow::from_interval(&iv);
    for p in parts {
        row.offered += p.offered;
        row.sent += p.sent;
        row.completed += p.completed;
        for (a, b) in row.status_classes.iter_mut().zip(&p.status_classes) {
            *a += b;
        }
        for (a, b) in row.error_kinds.iter_mut().zip(&p.error_kinds) {
            *a += b;
        }
        row.dropped += p.dropped;
        row.in_flight += p.in_flight;
        row.users_active += p.users_active;
        row.users_started += p.users_started;
        row.users_failed += p.users_failed;
        row.users_completed += p.users_completed;
        row.grpc_failed += p.grpc_failed;
        if p.lag_p99_ms.is_finite() {
            row.lag_p99_ms = row.lag_p99_ms.max(p.lag_p99_ms);
        }
    }
    row
}

/// Each shard's generator health, and whether it limited the load itself.
fn shard_health(shards: &[ShardRun]) -> Vec<MergedShard> {
    shards
        .iter()
        .map(|s| {
            let x = &s.saved.summary;
            let g = &x.generator;
            MergedShard {
                index: x.shard.as_ref().map_or(0, |s| s.index),
                dir: s.dir.display().to_string(),
                sent: x.requests.sent,
                dropped: x.requests.dropped,
                start_offset_ms: x.start.as_ref().map(|s| s.offset_ms),
                schedule_lag_ms_p99: g.schedule_lag_ms_p99,
                cpu_s: g.cpu_s,
                saturated: g.saturated,
                bottleneck: health::generator_limited(g),
            }
        })
        .collect()
}

/// Merges the shards' per-second histograms and timeline rows, one wall-clock second at a
/// time (a decoded histogram takes hundreds of KB): the merged interval log and timeline.
fn merge_seconds(shards: &[ShardRun]) -> Result<(SecondsLog, Vec<TimelineRow>), MergeError> {
    let mut encoded: BTreeMap<u64, Vec<(bool, &str, &Path)>> = BTreeMap::new();
    let mut rows: BTreeMap<u64, Vec<TimelineRow>> = BTreeMap::new();
    let logs: Vec<PathBuf> = shards.iter().map(|s| s.dir.join("latency.hlog")).collect();
    for (s, log) in shards.iter().zip(&logs) {
        for (second, service, h) in &s.seconds {
            encoded.entry(second + s.offset_s).or_default().push((
                *service,
                h.as_str(),
                log.as_path(),
            ));
        }
        for row in s.saved.timeline() {
            rows.entry(row.second + s.offset_s).or_default().push(row);
        }
    }
    let (mut lat, mut svc) = (new_histogram(), new_histogram());
    let mut de = Deserializer::new();
    let mut log = SecondsLog::new();
    let mut timeline = Vec::with_capacity(rows.len());
    let seconds: BTreeSet<u64> = encoded.keys().chain(rows.keys()).copied().collect();
    for second in seconds {
        lat.reset();
        svc.reset();
        for (service, h, path) in encoded.get(&second).into_iter().flatten() {
            let h = hlog::decode(h, &mut de)
                .map_err(|e| MergeError::Log(path.to_path_buf(), e.to_string()))?;
            add(if *service { &mut svc } else { &mut lat }, &h);
        }
        log.write(second, &lat, &svc);
        if let Some(parts) = rows.get(&second) {
            timeline.push(join_row(second, parts, &lat, &svc));
        }
    }
    Ok((log, timeline))
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadlab_run::{write_run_dir, Model, Protocol, Shard, Stop};

    /// A shard's run directory: `latencies_us[s]` recorded in second `s`, its origin `start`.
    fn shard_dir(dir: &Path, index: usize, start: SystemTime, latencies_us: &[&[u64]]) {
        let mut plan = Plan::get(
            "127.0.0.1:9".parse().unwrap(),
            "/",
            Model::closed(1, 1),
            Stop::default(),
        );
        plan.thresholds = loadlab_run::Threshold::parse_list("p99<1ms").unwrap();
        plan.shard = Some(Shard {
            index,
            count: 2,
            plan_hash: 7,
        });
        plan.protocol = Protocol::Http2 { streams: 3 };
        let intervals: Vec<Interval> = latencies_us
            .iter()
            .enumerate()
            .map(|(s, values)| {
                let mut iv = Interval::new(s as u64);
                for v in *values {
                    iv.latency.record(*v).unwrap();
                    iv.service.record(*v).unwrap();
                    iv.counts.sent += 1;
                    iv.counts.record_status(200);
                }
                iv
            })
            .collect();
        let mut run = RunData::from_intervals(plan, &intervals);
        run.started_at = start;
        let mut log = SecondsLog::new();
        for iv in &intervals {
            log.write(iv.second, &iv.latency, &iv.service);
        }
        run.hlog_lines = log.into_lines();
        write_run_dir(dir, &run, &Summary::from_run(&run)).unwrap();
    }

    #[test]
    fn shards_join_by_wall_clock_second_and_their_histograms_add_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        shard_dir(&a, 0, t0, &[&[100, 200], &[300]]);
        // Shard 1 started a second later: its second 0 is shard 0's second 1.
        shard_dir(
            &b,
            1,
            t0 + Duration::from_secs(1),
            &[&[400, 500, 600], &[700]],
        );
        let m = merge_dirs(&[b.clone(), a.clone()], 2).unwrap();
        assert_eq!(m.summary.requests.sent, 7);
        assert_eq!(
            m.run.plan.model,
            Model::closed(2, 1),
            "the plan joined from the shards' plan.json: their connections summed"
        );
        assert_eq!(m.run.plan.shard, None);
        assert_eq!(
            m.summary.thresholds.len(),
            1,
            "the plan's thresholds checked"
        );
        assert!(m.summary.thresholds[0].pass, "{:?}", m.summary.thresholds);
        let sent: Vec<u64> = m.run.timeline.iter().map(|r| r.sent).collect();
        assert_eq!(sent, [2, 4, 1], "seconds joined on the wall clock");
        assert_eq!(m.summary.latency_ms.max, 0.7);
        assert_eq!(m.summary.latency_ms.min, 0.1);
        assert_eq!(m.summary.latency_ms.p50, 0.4, "the 4th of 7 values");
        let shards: Vec<usize> = m
            .summary
            .merged
            .unwrap()
            .shards
            .iter()
            .map(|s| s.index)
            .collect();
        assert_eq!(shards, [0, 1]);
        assert_eq!(m.run.plan.protocol, Protocol::Http2 { streams: 3 });
        assert_eq!(m.summary.http2.as_ref().map(|h| h.streams), Some(3));

        let e = merge_dirs(&[a.clone(), a.clone()], 2).unwrap_err();
        assert!(e.to_string().contains("same shard (0/2)"), "{e}");

        std::fs::remove_file(b.join("records.json")).unwrap();
        let e = merge_dirs(&[a.clone(), b.clone()], 2).unwrap_err();
        assert!(e.to_string().contains("holds no records.json"), "{e}");
    }

    #[test]
    fn a_shard_that_stopped_before_its_end_is_named_and_left_to_the_user() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        shard_dir(&a, 0, t0, &[&[100]]);
        shard_dir(&b, 1, t0, &[&[100]]);
        // Shard 1 ran again into its directory and was killed in its first second.
        let plan = loadlab_run::read_run_dir(&b).unwrap().plan.unwrap();
        drop(loadlab_run::SecondsWriter::start(&b, &plan).unwrap());
        let e = merge_dirs(&[a.clone(), b.clone()], 2).unwrap_err();
        assert!(matches!(&e, MergeError::Stopped(d) if *d == b), "{e}");
        assert!(e.to_string().contains("stopped before its end"), "{e}");
        let m = merge_dirs(&[a], 2).unwrap();
        assert_eq!(m.summary.requests.sent, 1);
    }
}
