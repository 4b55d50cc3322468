//! The sampler: every interval, reads `/proc` for the watched processes and all their
//! descendants (CPU and memory), and the watched stores' own figures (lab → run).

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use loadlab_run::{
    GroupSample, GroupSeries, GroupTotals, HostSample, LiveReading, ProcessSample, ProcessSeries,
    ServerData,
};
use procfs::process::Process;

use crate::cgroup::{Group, Reading};
use crate::clock::span_second;
use crate::store_sampler::StoreReader;

/// A process cannot be watched.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    /// No process has this PID (or /proc cannot show it).
    #[error("no process with pid {0} to watch (is it running, and is /proc mounted?)")]
    NoSuchProcess(i32),
    /// A store to watch is not given as a URL it can be reached at.
    #[error("cannot watch the store: {0}")]
    BadStore(String),
}

/// Where each store and process reading goes as it is taken (a live dashboard, the metric
/// exporters), besides the run's record.
pub type Feed = Box<dyn FnMut(LiveReading) + Send>;

/// Processes and control groups that come and go during a run (an autoscaler's instances),
/// asked for at each reading: the processes are watched with their descendants while listed,
/// a group from the reading that first lists it to the one after it leaves the list.
pub type Members = Box<dyn FnMut() -> (Vec<i32>, Vec<Group>) + Send>;

/// CPU time this process (every thread of it) has used so far, seconds; 0 where `/proc`
/// cannot tell.
pub fn own_cpu_seconds() -> f64 {
    Process::myself().and_then(|p| p.stat()).map_or(0.0, |s| {
        (s.utime + s.stime) as f64 / procfs::ticks_per_second() as f64
    })
}

/// Samples watched processes on its own thread until [`Sampler::finish`].
pub struct Sampler {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<ServerData>,
}

/// CPU ticks and when they were read, per PID.
struct Previous {
    ticks: u64,
    /// Nanoseconds its threads spent runnable but waiting for a CPU (`schedstat`'s run delay).
    waited_ns: u64,
    at: Instant,
    /// Ticks, run delay and time at the start of the last sample's interval, to stretch it
    /// over a short last reading.
    sample_from: Option<(u64, u64, Instant)>,
}

impl Sampler {
    /// Starts watching `roots` and their descendants, and the Redis servers at `stores`, one
    /// sample per `interval`.
    pub fn start(
        roots: &[i32],
        stores: &[String],
        interval: Duration,
    ) -> Result<Sampler, SamplerError> {
        Sampler::start_feeding(roots, stores, &[], None, interval, Box::new(|_| {}))
    }

    /// Like [`Sampler::start`], also reading the control groups `groups` (the budgeted
    /// processes' CPU, throttling, memory and OOM kills) and the `members` that come and go,
    /// and handing each store and process reading to `feed` as it is taken.
    pub fn start_feeding(
        roots: &[i32],
        stores: &[String],
        groups: &[Group],
        members: Option<Members>,
        interval: Duration,
        feed: Feed,
    ) -> Result<Sampler, SamplerError> {
        for &pid in roots {
            Process::new(pid)
                .and_then(|p| p.stat())
                .map_err(|_| SamplerError::NoSuchProcess(pid))?;
        }
        let readers = stores
            .iter()
            .map(|url| StoreReader::new(url).map_err(SamplerError::BadStore))
            .collect::<Result<Vec<_>, _>>()?;
        let targets = Targets {
            roots: roots.to_vec(),
            groups: groups.iter().cloned().map(GroupReader::new).collect(),
            members,
        };
        let (stop, stopped) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("loadlab-sampler".into())
            .spawn(move || sample_loop(targets, readers, feed, interval, &stopped))
            .expect("the sampler thread starts");
        Ok(Sampler { stop, thread })
    }

    /// Stops sampling and returns every process's series.
    pub fn finish(self) -> ServerData {
        let _ = self.stop.send(());
        self.thread.join().unwrap_or_default()
    }
}

/// The processes and groups a sampler watches: those named at its start, and the members.
struct Targets {
    roots: Vec<i32>,
    /// Every group read so far, those named at the start first, then members' as they came.
    groups: Vec<GroupReader>,
    members: Option<Members>,
}

impl Targets {
    /// The roots to read now: those named at the start and the members listed now. A member's
    /// group is read from now on when it is new, and once more (its last second) when it has
    /// left the list.
    fn refresh(&mut self, start: Instant) -> Vec<i32> {
        let Some(members) = self.members.as_mut() else {
            return self.roots.clone();
        };
        let (pids, groups) = members();
        for g in &mut self.groups {
            if g.member && !g.ended && !groups.iter().any(|n| n.name == g.group.name) {
                g.read(start);
                g.ended = true;
            }
        }
        for group in groups {
            if !self.groups.iter().any(|g| g.group.name == group.name) {
                let mut reader = GroupReader::new(group);
                reader.member = true;
                self.groups.push(reader);
            }
        }
        self.roots.iter().copied().chain(pids).collect()
    }

    /// Reads every group still watched.
    fn read_groups(&mut self, start: Instant) {
        for g in self.groups.iter_mut().filter(|g| !g.ended) {
            g.read(start);
        }
    }
}

fn sample_loop(
    mut targets: Targets,
    mut stores: Vec<StoreReader>,
    mut feed: Feed,
    interval: Duration,
    stopped: &mpsc::Receiver<()>,
) -> ServerData {
    let mut reader = Reader {
        roots: targets.roots.clone(),
        start: Instant::now(),
        ticks_per_s: procfs::ticks_per_second() as f64,
        page: procfs::page_size(),
        previous: HashMap::new(),
        series: BTreeMap::new(),
    };
    let mut host = HostReader::new();
    let mut tick = 0u32;
    loop {
        reader.roots = targets.refresh(reader.start);
        let fresh = reader.read_all(None);
        for p in reader.series.values() {
            if let Some(sample) = p.samples.last().filter(|_| fresh.contains(&p.pid)) {
                feed(LiveReading::Process {
                    pid: p.pid,
                    name: p.name.clone(),
                    sample: sample.clone(),
                });
            }
        }
        host.read(reader.start, None);
        targets.read_groups(reader.start);
        for store in &mut stores {
            let name = store.name().to_string();
            if let Some(sample) = store.read(reader.start) {
                feed(LiveReading::Store {
                    name,
                    sample: sample.clone(),
                });
            }
        }
        tick += 1;
        let next = reader.start + interval * tick;
        match stopped.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    // A last reading, so a run shorter than the interval still gets one sample. One much
    // shorter than the interval would weigh as much as a whole one in the average, with the
    // few clock ticks it holds: it extends the sample before it instead.
    reader.roots = targets.refresh(reader.start);
    reader.read_all(Some(interval / 2));
    host.read(reader.start, Some(interval / 2));
    targets.read_groups(reader.start);
    ServerData {
        processes: reader.series.into_values().collect(),
        stores: stores.into_iter().map(StoreReader::finish).collect(),
        host: host.samples,
        groups: targets
            .groups
            .into_iter()
            .map(GroupReader::finish)
            .collect(),
        cores: None,
    }
}

/// The least time between two readings of a group for the second to count as a sample.
const MIN_GROUP_SPAN: Duration = Duration::from_millis(20);

/// One control group's readings: the counters at the start, the last reading, and a sample
/// per reading of what changed since the one before.
struct GroupReader {
    group: Group,
    first: (Reading, Instant),
    last: (Reading, Instant),
    series: GroupSeries,
    /// Most memory charged at a reading, bytes.
    most: u64,
    /// Second of the first reading that saw an OOM kill.
    first_oom: Option<u64>,
    /// A member's group (it comes and goes), not one named at the start.
    member: bool,
    /// Read for the last time: its member has left.
    ended: bool,
}

impl GroupReader {
    fn new(group: Group) -> GroupReader {
        let now = (group.read(), Instant::now());
        GroupReader {
            series: GroupSeries {
                name: group.name.clone(),
                cpus: group.budget.cpus,
                memory_bytes: group.budget.memory_bytes,
                ..GroupSeries::default()
            },
            most: now.0.memory_bytes,
            first_oom: None,
            member: false,
            ended: false,
            first: now,
            last: now,
            group,
        }
    }

    /// Reads the group's counters and adds a sample for the span since the last reading (its
    /// second counted from `start`); the first reading that sees an OOM kill marks the second.
    fn read(&mut self, start: Instant) {
        let (r, at) = (self.group.read(), Instant::now());
        let (p, then) = self.last;
        // A reading right after the last one (the first reading of a group just made) spans
        // too little time to measure anything.
        if at.duration_since(then) < MIN_GROUP_SPAN {
            return;
        }
        let second = span_second(start, then, at);
        let wall = at.duration_since(then).as_secs_f64().max(1e-3);
        let cpu_ns = r.cpu_ns.unwrap_or(0).saturating_sub(p.cpu_ns.unwrap_or(0));
        let periods = r.periods.saturating_sub(p.periods);
        self.series.samples.push(GroupSample {
            second,
            cpu_pct: 100.0 * cpu_ns as f64 / 1e9 / wall,
            throttled_pct: match periods {
                0 => 0.0,
                n => {
                    100.0 * r.throttled_periods.saturating_sub(p.throttled_periods) as f64
                        / n as f64
                }
            },
            memory_mb: mb(r.memory_bytes),
        });
        if self.first_oom.is_none() && r.oom_kills > self.first.0.oom_kills {
            self.first_oom = Some(second);
        }
        self.most = self.most.max(r.memory_bytes);
        self.last = (r, at);
        for pid in self.group.pids() {
            if !self.series.pids.contains(&pid) {
                self.series.pids.push(pid);
            }
        }
    }

    /// The series with the run's totals.
    fn finish(mut self) -> GroupSeries {
        let ((a, began), (b, ended)) = (self.first, self.last);
        // The kernel's peak is since the group was made, maybe in an earlier run against the
        // same deployment: it is this run's only when it rose during it.
        let peak = match (a.memory_peak_bytes, b.memory_peak_bytes) {
            (Some(x), Some(y)) if y > x => y,
            _ => self.most,
        };
        self.series.totals = Some(GroupTotals {
            cpu_s: b.cpu_ns.unwrap_or(0).saturating_sub(a.cpu_ns.unwrap_or(0)) as f64 / 1e9,
            wall_s: ended.duration_since(began).as_secs_f64(),
            periods: b.periods.saturating_sub(a.periods),
            throttled_periods: b.throttled_periods.saturating_sub(a.throttled_periods),
            throttled_s: b.throttled_ns.saturating_sub(a.throttled_ns) as f64 / 1e9,
            memory_peak_mb: mb(peak),
            oom_kills: b.oom_kills.saturating_sub(a.oom_kills),
            first_oom_second: self.first_oom,
        });
        self.series
    }
}

/// Bytes in MB.
fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The host's CPU between readings of `/proc/stat`'s first line, every core's ticks together.
struct HostReader {
    previous: Option<(u64, u64, Instant)>,
    samples: Vec<HostSample>,
}

impl HostReader {
    fn new() -> HostReader {
        HostReader {
            previous: host_ticks().map(|(busy, all, _)| (busy, all, Instant::now())),
            samples: Vec::new(),
        }
    }

    /// Adds a sample since the previous reading (its second counted from `start`); one less
    /// than `skip_under` after it adds nothing (too few ticks to mean anything).
    fn read(&mut self, start: Instant, skip_under: Option<Duration>) {
        let Some((busy, all, cores)) = host_ticks() else {
            return;
        };
        let now = Instant::now();
        if let Some((b0, a0, at)) = self.previous {
            if skip_under.is_some_and(|s| now.duration_since(at) < s) {
                return;
            }
            if all > a0 {
                self.samples.push(HostSample {
                    second: span_second(start, at, now),
                    busy_pct: 100.0 * cores as f64 * busy.saturating_sub(b0) as f64
                        / (all - a0) as f64,
                });
            }
        }
        self.previous = Some((busy, all, now));
    }
}

/// The host's busy and total CPU ticks so far and its cores, from `/proc/stat` (busy: user,
/// nice, system, irq, softirq and steal; total adds idle and iowait; a `cpuN` line a core).
fn host_ticks() -> Option<(u64, u64, usize)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cores = stat
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count()
        .max(1);
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    let at = |i: usize| fields.get(i).copied().unwrap_or(0);
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    Some((busy, busy + at(3) + at(4), cores))
}

/// What the sampler keeps between readings.
struct Reader {
    roots: Vec<i32>,
    start: Instant,
    ticks_per_s: f64,
    page: u64,
    previous: HashMap<i32, Previous>,
    series: BTreeMap<i32, ProcessSeries>,
}

impl Reader {
    /// Reads every watched process once, adding a sample for each one read before; a reading
    /// less than `merge_under` after the last one extends that last sample instead. Returns
    /// the processes that got a new sample.
    fn read_all(&mut self, merge_under: Option<Duration>) -> Vec<u32> {
        let (ticks_per_s, page) = (self.ticks_per_s, self.page);
        let (previous, series) = (&mut self.previous, &mut self.series);
        let pids = watched(&self.roots);
        let (now, start) = (Instant::now(), self.start);
        let mut fresh = Vec::new();
        for pid in pids {
            let Ok(stat) = Process::new(pid).and_then(|p| p.stat()) else {
                continue;
            };
            let ticks = stat.utime + stat.stime;
            let waited_ns = run_delay_ns(pid);
            let rss_mb = (stat.rss * page) as f64 / (1024.0 * 1024.0);
            let mut sample_from = None;
            if let Some(prev) = previous.get(&pid) {
                let short = merge_under.is_some_and(|m| now.duration_since(prev.at) < m);
                let last = series.get_mut(&pid).and_then(|s| s.samples.last_mut());
                let (from_ticks, from_waited, from_at) = match (short, last, prev.sample_from) {
                    (true, Some(_), Some(from)) => from,
                    _ => (prev.ticks, prev.waited_ns, prev.at),
                };
                let wall = now.duration_since(from_at).as_secs_f64().max(1e-3);
                let cpu_pct =
                    100.0 * (ticks.saturating_sub(from_ticks)) as f64 / ticks_per_s / wall;
                let cpu_wait_pct =
                    100.0 * waited_ns.saturating_sub(from_waited) as f64 / 1e9 / wall;
                let samples = &mut series
                    .entry(pid)
                    .or_insert_with(|| ProcessSeries {
                        pid: pid as u32,
                        name: stat.comm.clone(),
                        samples: Vec::new(),
                    })
                    .samples;
                // A merged reading keeps the second of the sample it extends.
                let second = span_second(start, from_at, now);
                let second = match from_at != prev.at {
                    true => samples.pop().map_or(second, |s| s.second),
                    false => {
                        fresh.push(pid as u32);
                        second
                    }
                };
                samples.push(ProcessSample {
                    second,
                    cpu_pct,
                    cpu_wait_pct,
                    rss_mb,
                });
                sample_from = Some((from_ticks, from_waited, from_at));
            }
            previous.insert(
                pid,
                Previous {
                    ticks,
                    waited_ns,
                    at: now,
                    sample_from,
                },
            );
        }
        fresh
    }
}

/// Nanoseconds the threads of `pid` have spent runnable but waiting for a CPU, summed over its
/// live threads (`/proc/PID/task/*/schedstat`); 0 where the kernel does not keep schedstats.
/// A process that waits for the CPU as much as it runs wants more CPU than it gets: on a
/// shared machine its CPU percent alone understates its demand.
fn run_delay_ns(pid: i32) -> u64 {
    let Ok(tasks) = Process::new(pid).and_then(|p| p.tasks()) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| t.schedstat().ok())
        .map(|s| s.run_delay)
        .sum()
}

/// The roots that still run and all their descendants.
pub(crate) fn watched(roots: &[i32]) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    if let Ok(all) = procfs::process::all_processes() {
        for p in all.flatten() {
            if let Ok(stat) = p.stat() {
                children.entry(stat.ppid).or_default().push(stat.pid);
            }
        }
    }
    let mut out = Vec::new();
    let mut stack: Vec<i32> = roots.to_vec();
    while let Some(pid) = stack.pop() {
        if out.contains(&pid) {
            continue;
        }
        out.push(pid);
        if let Some(kids) = children.get(&pid) {
            stack.extend(kids);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::process::{Child, Command};
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A `sleep` stopped (by PID) when dropped.
    struct Sleeper(Child);

    impl Drop for Sleeper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn members_are_watched_while_they_are_listed_and_their_readings_are_kept_after() {
        let spawn = || Sleeper(Command::new("sleep").arg("30").spawn().unwrap());
        let (first, second) = (spawn(), spawn());
        let (a, b) = (first.0.id(), second.0.id());
        // The members listed: `a` throughout, `b` only in the middle of the run.
        let listed = Arc::new(Mutex::new(vec![a as i32]));
        let shared = Arc::clone(&listed);
        let members: Members = Box::new(move || (shared.lock().unwrap().clone(), Vec::new()));
        // Each process's readings as the sampler hands them out.
        let seen = Arc::new(Mutex::new(HashMap::<u32, usize>::new()));
        let counted = Arc::clone(&seen);
        let feed: Feed = Box::new(move |r| {
            if let LiveReading::Process { pid, .. } = r {
                *counted.lock().unwrap().entry(pid).or_default() += 1;
            }
        });
        let sampler = Sampler::start_feeding(
            &[],
            &[],
            &[],
            Some(members),
            Duration::from_millis(50),
            feed,
        )
        .unwrap();
        let readings = |pid: u32| seen.lock().unwrap().get(&pid).copied().unwrap_or(0);
        let until = |done: &dyn Fn() -> bool| {
            let start = Instant::now();
            while !done() {
                assert!(start.elapsed() < Duration::from_secs(10), "never happened");
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        until(&|| readings(a) >= 2);
        assert_eq!(readings(b), 0, "not listed yet");
        listed.lock().unwrap().push(b as i32);
        until(&|| readings(b) >= 3);
        listed.lock().unwrap().retain(|p| *p != b as i32);
        let b_listed = readings(b);
        let a_then = readings(a);
        until(&|| readings(a) >= a_then + 3);
        let data = sampler.finish();
        let samples = |pid: u32| {
            data.processes
                .iter()
                .find(|p| p.pid == pid)
                .map_or(0, |p| p.samples.len())
        };
        // `b`'s readings are kept; a reading under way when it left may add one, no more.
        assert!(
            (b_listed..=b_listed + 1).contains(&samples(b)),
            "{b_listed} readings of b while listed: {data:?}"
        );
        assert!(samples(a) >= samples(b) + 4, "{data:?}");
        assert_eq!(data.processes.len(), 2, "only the members: {data:?}");
    }
}
