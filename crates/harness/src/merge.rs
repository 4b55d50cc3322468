//! Merging the run directories of a plan's shards into one run (`loadlab merge`): counts summed,
//! histograms merged exactly from each shard's `latency.hlog` and `histograms.hlog`, timelines
//! joined per wall-clock second, each shard's generator health kept, the plan joined back from
//! the plans the shards recorded, and the merged run judged as `run` judges one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

use loadlab_analyze::health;
use loadlab_run::hlog::{self, LoggedInterval, SecondsLog};
use loadlab_run::shard::join_shards;
use loadlab_run::summary::{
    Breakdown, Connect, Errors, Generator, Http2, LatencyStats, MergeSummary, MergedShard,
    NamedRequests, Phase, Requests, Summary, Throughput, Users,
};
use loadlab_run::{
    new_histogram, read_run_dir, ErrorKind, Interval, Plan, ReadRunError, RunData, SavedRun,
    TimelineRow, Timings, TlsFailure, UserRecord,
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
    /// A shard's directory without the plan it ran (written by a loadlab before `plan.json`).
    #[error("{0} holds no plan.json (the plan a shard ran, kept since loadlab 0.1 round 3): run the shards again with this loadlab")]
    NoPlan(PathBuf),
    /// Nothing to merge.
    #[error("no run directory to merge")]
    Empty,
}

/// One shard's run directory, read for merging.
struct ShardRun {
    dir: PathBuf,
    saved: SavedRun,
    /// Its origin's offset from the merged origin, whole seconds.
    offset_s: u64,
    /// Per second of its own origin: true for service latency, and the encoded histogram.
    seconds: Vec<(u64, bool, String)>,
    /// Whole-run histograms by tag (`histograms.hlog`).
    whole: BTreeMap<String, Histogram<u64>>,
    /// Request names by tag.
    names: BTreeMap<String, String>,
}

/// Reads an HdrHistogram interval log: its intervals, their histograms left encoded, and its
/// request names by tag.
fn read_log(path: &Path) -> Result<(Vec<LoggedInterval>, BTreeMap<String, String>), MergeError> {
    let bad = |why: String| MergeError::Log(path.to_path_buf(), why);
    let bytes = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    let log = hlog::read_intervals(&bytes).map_err(|e| bad(e.to_string()))?;
    Ok((log.intervals, log.names.into_iter().collect()))
}

/// Decodes a histogram of the log at `path`.
fn decode(encoded: &str, de: &mut Deserializer, path: &Path) -> Result<Histogram<u64>, MergeError> {
    hlog::decode(encoded, de).map_err(|e| MergeError::Log(path.to_path_buf(), e.to_string()))
}

/// The time a summary's `started_at` names.
fn origin_of(s: &Summary) -> SystemTime {
    humantime::parse_rfc3339_weak(&s.started_at).unwrap_or(SystemTime::UNIX_EPOCH)
}

/// Reads shard directories and checks they are distinct shards of one plan.
fn read_shards(dirs: &[PathBuf]) -> Result<Vec<ShardRun>, MergeError> {
    let mut shards: Vec<ShardRun> = Vec::with_capacity(dirs.len());
    for dir in dirs {
        let saved = read_run_dir(dir)?;
        let Some(me) = &saved.summary.shard else {
            return Err(MergeError::NotAShard(dir.clone()));
        };
        if saved.plan.is_none() {
            return Err(MergeError::NoPlan(dir.clone()));
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
        let (intervals, _) = read_log(&dir.join("latency.hlog"))?;
        let seconds = intervals
            .into_iter()
            .filter_map(|iv| match iv.tag.as_deref() {
                None => Some((iv.second, false, iv.encoded)),
                Some(hlog::SERVICE_TAG) => Some((iv.second, true, iv.encoded)),
                Some(_) => None,
            })
            .collect();
        let whole_path = dir.join("histograms.hlog");
        let (whole, names) = if whole_path.exists() {
            let (intervals, names) = read_log(&whole_path)?;
            let mut de = Deserializer::new();
            let mut whole = BTreeMap::new();
            for iv in intervals {
                if let Some(tag) = iv.tag {
                    whole.insert(tag, decode(&iv.encoded, &mut de, &whole_path)?);
                }
            }
            (whole, names)
        } else {
            Default::default()
        };
        shards.push(ShardRun {
            dir: dir.clone(),
            saved,
            offset_s: 0,
            seconds,
            whole,
            names,
        });
    }
    let origin = shards
        .iter()
        .map(|s| origin_of(&s.saved.summary))
        .min()
        .ok_or(MergeError::Empty)?;
    for s in &mut shards {
        let late = origin_of(&s.saved.summary)
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
        .map(|s| origin_of(&s.saved.summary))
        .min()
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let summaries: Vec<&Summary> = shards.iter().map(|s| &s.saved.summary).collect();

    let phase_starts: Vec<f64> = first.phases.iter().map(|p| p.start_s).collect();
    let Seconds {
        latency,
        service,
        phase_latency,
        log,
        timeline,
    } = merge_seconds(&shards, &phase_starts)?;
    let duration_s = shards
        .iter()
        .map(|s| s.offset_s as f64 + s.saved.summary.duration_s)
        .fold(0.0, f64::max)
        .max(1e-9);

    let sum = |f: &dyn Fn(&Summary) -> u64| summaries.iter().map(|s| f(s)).sum::<u64>();
    let requests = merge_requests(&summaries);
    let (status, kinds) = merge_outcomes(&summaries);
    let offered: Option<f64> = summaries.iter().map(|s| s.throughput.offered_rps).sum();
    let bytes: f64 = summaries
        .iter()
        .map(|s| s.throughput.bytes_per_s * s.duration_s)
        .sum();

    let health = shard_health(&shards);
    let present: Vec<usize> = health.iter().map(|h| h.index).collect();
    let missing: Vec<usize> = (0..count).filter(|i| !present.contains(i)).collect();
    let mut generator = merge_generators(&summaries);
    generator.warnings = health::merged_warnings(&summaries, &health, &missing, count);

    let phases = merge_phases(&summaries, &phase_latency);

    let by_name = merge_names(&shards);
    let timings = merge_timings(&shards, &summaries);
    let users = first
        .users
        .is_some()
        .then(|| merge_user_record(&shards, &summaries));

    let summary = Summary {
        schema: first.schema.clone(),
        complete: summaries.iter().all(|s| s.complete),
        model: first.model.clone(),
        targets: first.targets.clone(),
        started_at: humantime::format_rfc3339_millis(origin).to_string(),
        duration_s,
        throughput: Throughput {
            rps: requests.completed as f64 / duration_s,
            offered_rps: offered,
            bytes_per_s: bytes / duration_s,
        },
        requests,
        latency_ms: LatencyStats::from_histogram(&latency),
        answered_latency_ms: None,
        apdex: first
            .apdex
            .as_ref()
            .and_then(|a| loadlab_run::Apdex::of(&latency, a.threshold_ms)),
        service_latency_ms: LatencyStats::from_histogram(&service),
        status,
        errors: Errors::from_kinds(&kinds),
        generator,
        phases,
        server: None,
        requests_by_name: by_name
            .iter()
            .map(|(name, named, _)| (name.clone(), named.clone()))
            .collect(),
        users: users.as_ref().map(|u| Users {
            started: sum(&|s| s.users.as_ref().map_or(0, |u| u.started)),
            completed: sum(&|s| s.users.as_ref().map_or(0, |u| u.completed)),
            failed: sum(&|s| s.users.as_ref().map_or(0, |u| u.failed)),
            failures: u.failures.clone(),
            checks_failed: u.checks_failed.clone(),
            max_active: timeline.iter().map(|r| r.users_active).max().unwrap_or(0),
            session_ms: LatencyStats::from_histogram(&u.sessions),
            static_fetched: u.static_fetched,
            static_skipped: u.static_skipped,
            skipped: u.skipped,
            started_by_scenario: {
                let mut by: BTreeMap<String, u64> = BTreeMap::new();
                for s in summaries.iter().filter_map(|s| s.users.as_ref()) {
                    for (name, n) in &s.started_by_scenario {
                        *by.entry(name.clone()).or_default() += n;
                    }
                }
                by
            },
            metrics: merged_metrics(&summaries),
            // Any shard's suggestion, as any of Artillery's workers sets the code it exits with.
            suggested_exit_code: summaries
                .iter()
                .find_map(|s| s.users.as_ref().and_then(|u| u.suggested_exit_code)),
            crashed: summaries
                .iter()
                .find_map(|s| s.users.as_ref().and_then(|u| u.crashed.clone())),
        }),
        timings_ms: Breakdown::from_timings(&timings),
        tls: first.tls.clone().map(|mut t| {
            t.failures = TlsFailure::ALL
                .into_iter()
                .enumerate()
                .filter(|(i, _)| timings.tls_failures[*i] > 0)
                .map(|(i, f)| (f.as_str().to_string(), timings.tls_failures[i]))
                .collect();
            t
        }),
        http2: first.http2.clone().map(|h| Http2 {
            connections: sum(&|s| s.http2.as_ref().map_or(0, |h| h.connections)),
            ..h
        }),
        findings: Vec::new(),
        profile: None,
        thresholds: Vec::new(),
        plan_hash: first.plan_hash.clone(),
        shard: None,
        start: None,
        merged: Some(MergeSummary {
            count,
            shards: health,
            missing,
        }),
        traces: merge_traces(&summaries),
    };

    let recorded: Vec<&Plan> = shards
        .iter()
        .filter_map(|s| s.saved.plan.as_ref())
        .collect();
    let plan = join_shards(&recorded).ok_or(MergeError::Empty)?;
    let mut run = RunData::from_intervals(plan, &[]);
    run.started_at = origin;
    run.elapsed = Duration::from_secs_f64(duration_s);
    run.complete = summary.complete;
    run.timeline = timeline;
    run.hlog_lines = log.into_lines();
    run.by_name = by_name
        .into_iter()
        .map(|(name, _, lat)| {
            let mut iv = Interval::new(0);
            iv.latency = lat;
            (name, iv)
        })
        .collect();
    run.users = users;
    run.timings = timings;
    let mut summary = summary;
    summary.findings = loadlab_analyze::findings(&run, &summary, cores);
    summary.thresholds = loadlab_analyze::thresholds::check_all(&run.plan.thresholds, &summary);
    Ok(Merged { run, summary })
}

/// The shards' generators as one: CPU and threads summed, the worst lag (the warnings are the
/// analysis's: [`health::merged_warnings`]).
fn merge_generators(summaries: &[&Summary]) -> Generator {
    let sum = |f: fn(&Summary) -> u64| summaries.iter().map(|s| f(s)).sum::<u64>();
    let g = |f: fn(&Generator) -> f64| summaries.iter().map(move |s| f(&s.generator));
    Generator {
        cpu_s: g(|g| g.cpu_s).sum(),
        max_rss_mb: g(|g| g.max_rss_mb).fold(0.0, f64::max),
        schedule_lag_ms_p99: g(|g| g.schedule_lag_ms_p99).fold(0.0, f64::max),
        saturated: summaries.iter().any(|s| s.generator.saturated),
        threads: summaries.iter().map(|s| s.generator.threads).sum(),
        processor_cpu_s: summaries
            .iter()
            .filter_map(|s| s.generator.processor_cpu_s)
            .reduce(|a, b| a + b),
        warnings: Vec::new(),
        // The shards' own evenness, the worst of them (each shard paces its own threads).
        pacing: summaries
            .iter()
            .filter_map(|s| s.generator.pacing.clone())
            .reduce(|a, b| {
                if b.arrival_gap_cv > a.arrival_gap_cv {
                    b
                } else {
                    a
                }
            }),
        connect: Connect {
            connections: sum(|s| s.generator.connect.connections),
            opened: sum(|s| s.generator.connect.opened),
            failed: sum(|s| s.generator.connect.failed),
            duration_s: g(|g| g.connect.duration_s).fold(0.0, f64::max),
            rate_per_s: g(|g| g.connect.rate_per_s).sum(),
            source_addrs: summaries
                .iter()
                .flat_map(|s| s.generator.connect.source_addrs.clone())
                .collect(),
            file_limit: summaries
                .iter()
                .map(|s| s.generator.connect.file_limit)
                .min()
                .unwrap_or(0),
        },
    }
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

/// Per request name: counts summed, and the latency merged from `histograms.hlog` (names are
/// matched by text, tags differ between shards only if their plans did).
fn merge_names(shards: &[ShardRun]) -> Vec<(String, NamedRequests, Histogram<u64>)> {
    let mut out: Vec<(String, NamedRequests, Histogram<u64>)> = Vec::new();
    for s in shards {
        for (name, n) in &s.saved.summary.requests_by_name {
            let i = match out.iter().position(|(x, _, _)| x == name) {
                Some(i) => i,
                None => {
                    out.push((name.clone(), NamedRequests::default(), new_histogram()));
                    out.len() - 1
                }
            };
            let (_, all, lat) = &mut out[i];
            all.completed += n.completed;
            all.ok += n.ok;
            all.errors += n.errors;
            for (code, k) in &n.status {
                *all.status.entry(code.clone()).or_default() += k;
            }
            let tag = s
                .names
                .iter()
                .find(|(_, v)| *v == name)
                .map(|(t, _)| t.clone());
            if let Some(h) = tag.and_then(|t| s.whole.get(&t)) {
                add(lat, h);
            }
        }
    }
    for (_, named, lat) in &mut out {
        named.latency_ms = LatencyStats::from_histogram(lat);
    }
    out
}

/// The shards' seconds merged by wall-clock second: the whole run's latency and service
/// latency, each phase's latency, the merged interval log and the timeline.
struct Seconds {
    latency: Histogram<u64>,
    service: Histogram<u64>,
    phase_latency: Vec<Histogram<u64>>,
    log: SecondsLog,
    timeline: Vec<TimelineRow>,
}

/// Merges the shards' per-second histograms and timeline rows, one wall-clock second at a
/// time (a decoded histogram takes hundreds of KB), into the run's, each phase's (phases start
/// at `phase_starts`, seconds) and the merged log.
fn merge_seconds(shards: &[ShardRun], phase_starts: &[f64]) -> Result<Seconds, MergeError> {
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
    let phase_of = |second: u64| {
        phase_starts
            .iter()
            .rposition(|start| *start <= second as f64 + 1e-9)
            .unwrap_or(0)
    };
    let mut phase_latency: Vec<Histogram<u64>> =
        phase_starts.iter().map(|_| new_histogram()).collect();
    let (mut latency, mut service) = (new_histogram(), new_histogram());
    let (mut lat, mut svc) = (new_histogram(), new_histogram());
    let mut de = Deserializer::new();
    let mut log = SecondsLog::new();
    let mut timeline = Vec::with_capacity(rows.len());
    let seconds: std::collections::BTreeSet<u64> =
        encoded.keys().chain(rows.keys()).copied().collect();
    for second in seconds {
        lat.reset();
        svc.reset();
        for (service, h, path) in encoded.get(&second).into_iter().flatten() {
            let h = decode(h, &mut de, path)?;
            add(if *service { &mut svc } else { &mut lat }, &h);
        }
        add(&mut latency, &lat);
        add(&mut service, &svc);
        if let Some(p) = phase_latency.get_mut(phase_of(second)) {
            add(p, &lat);
        }
        log.write(second, &lat, &svc);
        if let Some(parts) = rows.get(&second) {
            timeline.push(join_row(second, parts, &lat, &svc));
        }
    }
    Ok(Seconds {
        latency,
        service,
        phase_latency,
        log,
        timeline,
    })
}

/// The shards' requests, summed.
fn merge_requests(summaries: &[&Summary]) -> Requests {
    let sum = |f: &dyn Fn(&Summary) -> u64| summaries.iter().map(|s| f(s)).sum::<u64>();
    Requests {
        sent: sum(&|s| s.requests.sent),
        completed: sum(&|s| s.requests.completed),
        ok: sum(&|s| s.requests.ok),
        errors: sum(&|s| s.requests.errors),
        dropped: sum(&|s| s.requests.dropped),
        unfinished: sum(&|s| s.requests.unfinished),
        refused: sum(&|s| s.requests.refused),
    }
}

/// The shards' responses by status and their errors by kind, summed.
fn merge_outcomes(summaries: &[&Summary]) -> (BTreeMap<String, u64>, [u64; ErrorKind::COUNT]) {
    let mut status: BTreeMap<String, u64> = BTreeMap::new();
    let mut kinds = [0u64; ErrorKind::COUNT];
    for s in summaries {
        for (code, n) in &s.status {
            *status.entry(code.clone()).or_default() += n;
        }
        for (k, (_, n)) in s.errors.by_kind().iter().enumerate() {
            kinds[k] += n;
        }
    }
    (status, kinds)
}

/// The first shard's phases with the shards' rates summed and each phase's merged latency.
fn merge_phases(summaries: &[&Summary], phase_latency: &[Histogram<u64>]) -> Vec<Phase> {
    let Some(first) = summaries.first() else {
        return Vec::new();
    };
    first
        .phases
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let of_phase = summaries.iter().filter_map(|s| s.phases.get(i));
            Phase {
                name: p.name.clone(),
                start_s: p.start_s,
                duration_s: p.duration_s,
                offered_rps: of_phase.clone().map(|q| q.offered_rps).sum(),
                rps: of_phase.map(|q| q.rps).sum(),
                latency_ms: LatencyStats::from_histogram(&phase_latency[i]),
            }
        })
        .collect()
}

/// A whole-run histogram of `histograms.hlog`, the shards' added.
fn merge_whole(shards: &[ShardRun], tag: &str) -> Histogram<u64> {
    let mut h = new_histogram();
    for s in shards {
        if let Some(x) = s.whole.get(tag) {
            add(&mut h, x);
        }
    }
    h
}

/// The request timings (connect, TLS, queued, waiting, receiving) and TLS failures of the shards.
fn merge_timings(shards: &[ShardRun], summaries: &[&Summary]) -> Timings {
    let mut timings = Timings::new();
    timings.connect = merge_whole(shards, "connect");
    timings.tls = merge_whole(shards, "tls");
    timings.queued = merge_whole(shards, "queued");
    timings.waiting = merge_whole(shards, "waiting");
    timings.receiving = merge_whole(shards, "receiving");
    for (i, f) in TlsFailure::ALL.into_iter().enumerate() {
        timings.tls_failures[i] = summaries
            .iter()
            .filter_map(|s| s.tls.as_ref())
            .filter_map(|t| t.failures.get(f.as_str()))
            .sum();
    }
    timings
}

/// The shards' virtual users: sessions merged exactly, failures and checks summed.
fn merge_user_record(shards: &[ShardRun], summaries: &[&Summary]) -> UserRecord {
    let mut record = UserRecord::new();
    record.sessions = merge_whole(shards, "sessions");
    for s in summaries.iter().filter_map(|s| s.users.as_ref()) {
        for (why, n) in &s.failures {
            *record.failures.entry(why.clone()).or_default() += n;
        }
        for (check, n) in &s.checks_failed {
            *record.checks_failed.entry(check.clone()).or_default() += n;
        }
        record.static_fetched += s.static_fetched;
        record.static_skipped += s.static_skipped;
        record.skipped += s.skipped;
    }
    record
}

/// The shards' custom metrics: counters summed, and rates too (the shards ran at once).
/// Histograms are left to each shard's own summary: their percentiles do not add up.
fn merged_metrics(summaries: &[&Summary]) -> Option<loadlab_run::CustomSummary> {
    let mut whole = loadlab_run::CustomSummary::default();
    for m in summaries
        .iter()
        .filter_map(|s| s.users.as_ref()?.metrics.as_ref())
    {
        for (k, v) in &m.counters {
            *whole.counters.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &m.rates {
            *whole.rates.entry(k.clone()).or_default() += v;
        }
    }
    (!whole.counters.is_empty() || !whole.rates.is_empty()).then_some(whole)
}

/// The shards' sampled requests: their counts summed, the slowest of all kept; `None` when no
/// shard traced.
fn merge_traces(summaries: &[&Summary]) -> Option<loadlab_run::summary::Traces> {
    let traced: Vec<&loadlab_run::summary::Traces> =
        summaries.iter().filter_map(|s| s.traces.as_ref()).collect();
    let first = traced.first()?;
    let mut slowest: Vec<_> = traced
        .iter()
        .flat_map(|t| t.slowest.iter().cloned())
        .collect();
    slowest.sort_by(|a, b| b.latency_ms.total_cmp(&a.latency_ms));
    slowest.truncate(loadlab_run::trace::SLOWEST_KEPT);
    Some(loadlab_run::summary::Traces {
        sample: first.sample,
        sampled: traced.iter().map(|t| t.sampled).sum(),
        slowest,
    })
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

        std::fs::remove_file(b.join("plan.json")).unwrap();
        let e = merge_dirs(&[a.clone(), b.clone()], 2).unwrap_err();
        assert!(e.to_string().contains("holds no plan.json"), "{e}");
    }
}
