//! Records the engine produces: counts and histograms per second, merged into a [`RunData`].

use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;

use crate::{ErrorKind, Plan, TimelineRow, TlsFailure};

/// Highest latency a histogram holds, in microseconds (one hour); longer values are clamped.
pub const MAX_LATENCY_US: u64 = 3_600_000_000;

/// A latency histogram in microseconds, 1 µs to one hour, three significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("constant bounds are valid")
}

/// Number of distinct status codes counted (000–999; httparse accepts any three digits).
const STATUS_SLOTS: usize = 1000;

/// Request counters for one interval or a whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct Counts {
    /// Requests whose bytes were written (or whose connect was attempted).
    pub sent: u64,
    /// Requests that ended, with a response or a transport error.
    pub completed: u64,
    /// Responses with a status below 400.
    pub ok: u64,
    /// Requests never sent: they could not get a connection within their timeout.
    pub dropped: u64,
    /// Arrivals scheduled by the open model.
    pub offered: u64,
    /// Response bytes read, headers included.
    pub bytes: u64,
    /// Responses by status code.
    pub status: Vec<u64>,
    /// Transport errors by kind, indexed by [`ErrorKind::index`].
    pub error_kinds: [u64; ErrorKind::COUNT],
    /// Virtual-user sessions started.
    pub users_started: u64,
    /// Sessions that ran to their end.
    pub users_completed: u64,
    /// Sessions ended early by an error, a failed expectation or a failed capture.
    pub users_failed: u64,
}

impl Default for Counts {
    fn default() -> Self {
        Counts {
            sent: 0,
            completed: 0,
            ok: 0,
            dropped: 0,
            offered: 0,
            bytes: 0,
            status: vec![0; STATUS_SLOTS],
            error_kinds: [0; ErrorKind::COUNT],
            users_started: 0,
            users_completed: 0,
            users_failed: 0,
        }
    }
}

impl Counts {
    /// Counts one response with the given status.
    #[inline]
    pub fn record_status(&mut self, status: u16) {
        self.completed += 1;
        if status < 400 {
            self.ok += 1;
        }
        self.status[usize::from(status) % STATUS_SLOTS] += 1;
    }

    /// Counts one request that ended in a transport error.
    #[inline]
    pub fn record_error(&mut self, kind: ErrorKind) {
        self.completed += 1;
        self.error_kinds[kind.index()] += 1;
    }

    /// Requests that ended without a successful status: HTTP errors plus transport errors.
    pub fn errors(&self) -> u64 {
        self.completed - self.ok
    }

    /// Transport errors of every kind.
    pub fn transport_errors(&self) -> u64 {
        self.error_kinds.iter().sum()
    }

    /// Responses whose status is in `class` (1 for 1xx … 5xx).
    pub fn status_class(&self, class: usize) -> u64 {
        self.status[class * 100..(class + 1) * 100].iter().sum()
    }

    /// Status codes that occurred, with their counts, in ascending order.
    pub fn statuses(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.status
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(code, n)| (code as u16, *n))
    }

    /// Adds another set of counts to this one.
    pub fn add(&mut self, other: &Counts) {
        self.sent += other.sent;
        self.completed += other.completed;
        self.ok += other.ok;
        self.dropped += other.dropped;
        self.offered += other.offered;
        self.bytes += other.bytes;
        self.users_started += other.users_started;
        self.users_completed += other.users_completed;
        self.users_failed += other.users_failed;
        for (a, b) in self.status.iter_mut().zip(&other.status) {
            *a += b;
        }
        for (a, b) in self.error_kinds.iter_mut().zip(&other.error_kinds) {
            *a += b;
        }
    }
}

/// What one generator thread (or all of them, merged) saw during one second of the run.
#[derive(Debug, Clone)]
pub struct Interval {
    /// Second of the run this interval covers, counted from the run's origin.
    pub second: u64,
    /// Request counters.
    pub counts: Counts,
    /// Latency from the intended start, µs.
    pub latency: Histogram<u64>,
    /// Latency from the actual send, µs.
    pub service: Histogram<u64>,
    /// How late the open-model scheduler released each arrival, µs.
    pub lag: Histogram<u64>,
    /// Requests in flight (sent, not ended) when the interval closed.
    pub in_flight: u64,
    /// Virtual users in a session when the interval closed.
    pub users_active: u64,
}

impl Interval {
    /// An empty interval for `second`.
    pub fn new(second: u64) -> Self {
        Interval {
            second,
            counts: Counts::default(),
            latency: new_histogram(),
            service: new_histogram(),
            lag: new_histogram(),
            in_flight: 0,
            users_active: 0,
        }
    }

    /// Adds another thread's interval (or a later interval, for totals) into this one.
    pub fn merge(&mut self, other: &Interval) {
        self.counts.add(&other.counts);
        self.latency
            .add(&other.latency)
            .expect("histograms share bounds");
        self.service
            .add(&other.service)
            .expect("histograms share bounds");
        self.lag.add(&other.lag).expect("histograms share bounds");
        self.in_flight += other.in_flight;
        self.users_active += other.users_active;
    }

    /// Empties the interval for reuse as `second`, keeping its allocations.
    pub fn reset(&mut self, second: u64) {
        self.second = second;
        self.counts = Counts::default();
        self.latency.reset();
        self.service.reset();
        self.lag.reset();
        self.in_flight = 0;
        self.users_active = 0;
    }
}

/// The generator's account of itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GeneratorStats {
    /// User + system CPU the generator process used from the run's origin (not the connects
    /// before it), seconds.
    pub cpu_s: f64,
    /// Peak resident memory of the generator process, MB.
    pub max_rss_mb: f64,
    /// Busiest generator thread's CPU time over the run's wall time, both from the origin (0–1).
    pub busiest_thread_utilization: f64,
    /// Threads the engine ran.
    pub threads: usize,
    /// How the initial connections were opened, before the load started.
    pub connect: ConnectStats,
}

/// The opening of the initial connections, paced, before the run's origin: its time is in no
/// request's latency and not in the run's duration.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConnectStats {
    /// Initial connections asked for.
    pub connections: u64,
    /// Connections opened.
    pub opened: u64,
    /// Connections that could not be opened (each tries again at its first request).
    pub failed: u64,
    /// Time from the first connect to the last, seconds.
    pub duration_s: f64,
    /// Connect rate the plan asked for, per second.
    pub rate_per_s: f64,
    /// Limit on open files the run had (after raising the soft limit when it needed more).
    pub file_limit: u64,
}

impl ConnectStats {
    /// Adds another thread's connects (the longest time counts).
    pub fn merge(&mut self, other: &ConnectStats) {
        self.connections += other.connections;
        self.opened += other.opened;
        self.failed += other.failed;
        self.duration_s = self.duration_s.max(other.duration_s);
    }
}

/// What one phase of the load saw, from the whole seconds that fell in it.
#[derive(Debug, Clone)]
pub struct PhaseRecord {
    /// Phase name.
    pub name: String,
    /// Start, seconds from the origin.
    pub start_s: f64,
    /// Planned length, seconds (`None`: until the run stopped).
    pub duration_s: Option<f64>,
    /// Sum of the intervals of its seconds.
    pub totals: Interval,
}

impl PhaseRecord {
    /// Empty records for a plan's phases.
    pub fn for_plan(plan: &Plan) -> Vec<PhaseRecord> {
        plan.phase_spans()
            .into_iter()
            .map(|(name, start_s, duration_s)| PhaseRecord {
                name,
                start_s,
                duration_s,
                totals: Interval::new(0),
            })
            .collect()
    }

    /// Index of the phase that second `second` belongs to (the last that started by then).
    pub fn index_of(records: &[PhaseRecord], second: u64) -> usize {
        records
            .iter()
            .rposition(|p| p.start_s <= second as f64 + 1e-9)
            .unwrap_or(0)
    }
}

/// Where the requests' time went, whole run, µs (k6's breakdown). Connect and handshake times
/// are recorded only for requests that opened their connection: a summary counts the others
/// as zeros.
#[derive(Debug, Clone)]
pub struct Timings {
    /// TCP connect of the connections opened for a request.
    pub connect: Histogram<u64>,
    /// TLS handshake of the `https://` connections opened for a request.
    pub tls: Histogram<u64>,
    /// From the request's write to the first byte of its response (time to first byte).
    pub waiting: Histogram<u64>,
    /// From the first byte of the response to its last.
    pub receiving: Histogram<u64>,
    /// Failed TLS handshakes by cause, indexed by [`TlsFailure::index`].
    pub tls_failures: [u64; TlsFailure::COUNT],
}

impl Timings {
    /// Empty timings.
    pub fn new() -> Self {
        Timings {
            connect: new_histogram(),
            tls: new_histogram(),
            waiting: new_histogram(),
            receiving: new_histogram(),
            tls_failures: [0; TlsFailure::COUNT],
        }
    }

    /// Adds another thread's timings.
    pub fn merge(&mut self, other: &Timings) {
        for (mine, theirs) in [
            (&mut self.connect, &other.connect),
            (&mut self.tls, &other.tls),
            (&mut self.waiting, &other.waiting),
            (&mut self.receiving, &other.receiving),
        ] {
            mine.add(theirs).expect("histograms share bounds");
        }
        for (a, b) in self.tls_failures.iter_mut().zip(&other.tls_failures) {
            *a += b;
        }
    }
}

impl Default for Timings {
    fn default() -> Self {
        Timings::new()
    }
}

/// Everything a run produced: totals, the per-second timeline, and the interval log.
#[derive(Debug, Clone)]
pub struct RunData {
    /// The plan that was run.
    pub plan: Plan,
    /// Wall-clock time of the run's origin.
    pub started_at: SystemTime,
    /// Time from the origin to the end of the run.
    pub elapsed: Duration,
    /// False when the run was interrupted.
    pub complete: bool,
    /// Sum of every interval.
    pub totals: Interval,
    /// The same, per phase of the load.
    pub phases: Vec<PhaseRecord>,
    /// Whole-run results per request name, when the plan has several names.
    pub by_name: Vec<(String, Interval)>,
    /// One row per second.
    pub timeline: Vec<TimelineRow>,
    /// The interval histograms as HdrHistogram log lines (without the header), latency untagged
    /// and service latency tagged `service`.
    pub hlog_lines: Vec<u8>,
    /// Requests sent but not ended when the run stopped.
    pub unfinished: u64,
    /// The generator's own resource use.
    pub generator: GeneratorStats,
    /// The service's processes, when the lab watched them.
    pub server: Option<crate::ServerData>,
    /// What the virtual users did, when the plan had a user model.
    pub users: Option<UserRecord>,
    /// Where the requests' time went: connect, TLS handshake, waiting, receiving.
    pub timings: Timings,
    /// The service's CPU profile, when one was asked for.
    pub profile: Option<crate::profile::ProfileOutcome>,
}

/// Whole-run account of the virtual users' sessions.
#[derive(Debug, Clone)]
pub struct UserRecord {
    /// Length of each session that ended (completed or failed), µs.
    pub sessions: Histogram<u64>,
    /// Why sessions failed, with counts (e.g. `expect status on login`).
    pub failures: std::collections::BTreeMap<String, u64>,
    /// Static resources fetched and resources skipped (on another host).
    pub static_fetched: u64,
    /// Resources named by pages but not fetched: on another host, or unparseable.
    pub static_skipped: u64,
}

impl UserRecord {
    /// An empty record.
    pub fn new() -> Self {
        UserRecord {
            sessions: new_histogram(),
            failures: Default::default(),
            static_fetched: 0,
            static_skipped: 0,
        }
    }

    /// Adds another thread's record.
    pub fn merge(&mut self, other: &UserRecord) {
        self.sessions
            .add(&other.sessions)
            .expect("histograms share bounds");
        for (k, v) in &other.failures {
            *self.failures.entry(k.clone()).or_default() += v;
        }
        self.static_fetched += other.static_fetched;
        self.static_skipped += other.static_skipped;
    }
}

impl Default for UserRecord {
    fn default() -> Self {
        UserRecord::new()
    }
}

impl RunData {
    /// A complete run assembled from its per-second intervals under `plan`, as the engine's
    /// collector assembles one: totals, phases and the timeline (for analysis and report tests,
    /// and for replaying recorded seconds).
    pub fn from_intervals(plan: Plan, intervals: &[Interval]) -> RunData {
        let mut totals = Interval::new(0);
        let mut phases = PhaseRecord::for_plan(&plan);
        let mut timeline = Vec::with_capacity(intervals.len());
        for iv in intervals {
            totals.merge(iv);
            let phase = PhaseRecord::index_of(&phases, iv.second);
            phases[phase].totals.merge(iv);
            timeline.push(TimelineRow::from_interval(iv));
        }
        RunData {
            plan,
            started_at: SystemTime::now(),
            elapsed: Duration::from_secs(intervals.len() as u64),
            complete: true,
            totals,
            phases,
            by_name: Vec::new(),
            timeline,
            hlog_lines: Vec::new(),
            unfinished: 0,
            generator: GeneratorStats::default(),
            server: None,
            users: None,
            timings: Timings::new(),
            profile: None,
        }
    }

    /// Requests per second of the arrival schedule, averaged over the scheduled duration
    /// (over the time actually run when the run stopped early or had no duration); open model
    /// only.
    pub fn offered_rps(&self) -> Option<f64> {
        let crate::Model::Open { .. } = self.plan.model else {
            return None;
        };
        Some(self.totals.counts.offered as f64 / self.schedule_secs())
    }

    /// Length of the arrival schedule that ran, seconds: the scheduled duration for a complete
    /// run (sessions still running after the last arrival may lengthen the run; rates of the
    /// offer are over the schedule, not that drain), else the time actually run.
    pub fn schedule_secs(&self) -> f64 {
        match self.plan.scheduled_duration() {
            Some(d) if self.complete && self.elapsed >= d => d.as_secs_f64(),
            _ => self.secs(),
        }
    }

    /// Attaches what the lab saw of the service, and adds each second's totals (CPU summed
    /// over processes, RSS summed) to the timeline.
    pub fn attach_server(&mut self, server: crate::ServerData) {
        for row in &mut self.timeline {
            let samples = server
                .processes
                .iter()
                .filter_map(|p| p.samples.iter().find(|s| s.second == row.second));
            let (mut cpu, mut rss, mut any) = (0.0, 0.0, false);
            for s in samples {
                cpu += s.cpu_pct;
                rss += s.rss_mb;
                any = true;
            }
            if any {
                row.server_cpu_pct = Some(cpu);
                row.server_rss_mb = Some(rss);
            }
        }
        self.server = Some(server);
    }

    /// Length of the run in seconds, never zero.
    pub fn secs(&self) -> f64 {
        self.elapsed.as_secs_f64().max(1e-9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_500_counts_as_an_error_and_under_its_code() {
        let mut c = Counts::default();
        c.record_status(200);
        c.record_status(500);
        c.record_error(ErrorKind::Reset);
        assert_eq!(c.completed, 3);
        assert_eq!(c.ok, 1);
        assert_eq!(c.errors(), 2);
        assert_eq!(c.transport_errors(), 1);
        assert_eq!(c.statuses().collect::<Vec<_>>(), vec![(200, 1), (500, 1)]);
        assert_eq!(c.status_class(5), 1);
    }

    #[test]
    fn merging_intervals_adds_counts_and_histograms() {
        let mut a = Interval::new(0);
        let mut b = Interval::new(0);
        a.latency.record(100).unwrap();
        b.latency.record(300).unwrap();
        a.counts.record_status(200);
        b.counts.record_status(204);
        a.merge(&b);
        assert_eq!(a.latency.len(), 2);
        assert_eq!(a.counts.ok, 2);
        assert_eq!(a.latency.max(), 300);
    }
}
