//! Records the engine produces, merged into a [`RunData`]: the per-second intervals and
//! timeline, the generator's account of itself, phases, timings and sessions.

use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::error_kind::TlsFailure;
use crate::interval::{new_histogram, Interval, TimelineRow};
use crate::plan::Plan;
/// The generator's account of itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// How evenly the open model's arrivals went out (empty in the other models).
    pub pacing: PacingStats,
}

/// How evenly the open model's arrivals went out: each gap between two consecutive sends of a
/// thread against the schedule's gap between the same two arrivals. Kept as sums, so threads
/// merge by adding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PacingStats {
    /// Gaps measured.
    pub gaps: u64,
    /// Sum of the squared differences between the sent and the scheduled gaps, s².
    pub error_sq_s2: f64,
    /// Sum of the scheduled gaps, s.
    pub scheduled_s: f64,
}

impl PacingStats {
    /// Counts one gap: `sent_s` between the two sends, `scheduled_s` between their arrivals'
    /// times in the schedule.
    pub fn add_gap(&mut self, sent_s: f64, scheduled_s: f64) {
        self.gaps += 1;
        self.error_sq_s2 += (sent_s - scheduled_s).powi(2);
        self.scheduled_s += scheduled_s;
    }

    /// Adds another thread's gaps.
    pub fn merge(&mut self, other: &PacingStats) {
        self.gaps += other.gaps;
        self.error_sq_s2 += other.error_sq_s2;
        self.scheduled_s += other.scheduled_s;
    }

    /// The RMS difference between the sent and the scheduled gaps over the mean scheduled gap:
    /// 0 when every arrival went out exactly on time, and the coefficient of variation of the
    /// gaps for evenly spaced arrivals at a constant rate (the server's view of the pacing).
    /// `None` without gaps.
    pub fn gap_cv(&self) -> Option<f64> {
        (self.gaps > 0 && self.scheduled_s > 0.0).then(|| {
            let n = self.gaps as f64;
            (self.error_sq_s2 / n).sqrt() / (self.scheduled_s / n)
        })
    }
}

/// The opening of the initial connections, paced, before the run's origin: its time is in no
/// request's latency and not in the run's duration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timings {
    /// TCP connect of the connections opened for a request.
    #[serde(with = "crate::hlog::as_encoded")]
    pub connect: Histogram<u64>,
    /// TLS handshake of the `https://` connections opened for a request.
    #[serde(with = "crate::hlog::as_encoded")]
    pub tls: Histogram<u64>,
    /// Open model: from a request's release by the schedule to a connection taking it, the
    /// time it waited in the generator for a connection (k6's `blocked`); the closed model
    /// records none.
    #[serde(with = "crate::hlog::as_encoded")]
    pub queued: Histogram<u64>,
    /// From the request's write to the first byte of its response (time to first byte).
    #[serde(with = "crate::hlog::as_encoded")]
    pub waiting: Histogram<u64>,
    /// From the first byte of the response to its last.
    #[serde(with = "crate::hlog::as_encoded")]
    pub receiving: Histogram<u64>,
    /// Latency (from the intended start) of the responses that refused their request (429,
    /// or 503 with `Retry-After`): taken out of the run's latency, what is left is the
    /// answered requests'.
    #[serde(with = "crate::hlog::as_encoded")]
    pub refused: Histogram<u64>,
    /// Failed TLS handshakes by cause, indexed by [`TlsFailure::index`].
    pub tls_failures: [u64; TlsFailure::COUNT],
    /// Streaming gRPC calls' messages.
    #[serde(default)]
    pub streams: StreamTimings,
}

/// What streaming gRPC calls' messages did, over the calls answered, whole run (µs).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StreamTimings {
    /// Streaming calls answered.
    pub calls: u64,
    /// Messages their clients sent.
    pub messages_sent: u64,
    /// Messages their servers answered with.
    pub messages_received: u64,
    /// From each call's intended start to its first answered message.
    #[serde(with = "crate::hlog::as_encoded")]
    pub first_message: Histogram<u64>,
    /// A bidirectional call's time from each message it sent to its answer (the k-th answer
    /// taken as the k-th message's).
    #[serde(with = "crate::hlog::as_encoded")]
    pub replies: Histogram<u64>,
}

impl StreamTimings {
    /// Adds another thread's.
    pub fn merge(&mut self, other: &StreamTimings) {
        self.calls += other.calls;
        self.messages_sent += other.messages_sent;
        self.messages_received += other.messages_received;
        for (mine, theirs) in [
            (&mut self.first_message, &other.first_message),
            (&mut self.replies, &other.replies),
        ] {
            mine.add(theirs).expect("histograms share bounds");
        }
    }
}

impl Default for StreamTimings {
    fn default() -> Self {
        StreamTimings {
            calls: 0,
            messages_sent: 0,
            messages_received: 0,
            first_message: new_histogram(),
            replies: new_histogram(),
        }
    }
}

impl Timings {
    /// Empty timings.
    pub fn new() -> Self {
        Timings {
            connect: new_histogram(),
            tls: new_histogram(),
            queued: new_histogram(),
            waiting: new_histogram(),
            receiving: new_histogram(),
            refused: new_histogram(),
            tls_failures: [0; TlsFailure::COUNT],
            streams: StreamTimings::default(),
        }
    }

    /// Adds another thread's timings.
    pub fn merge(&mut self, other: &Timings) {
        for (mine, theirs) in [
            (&mut self.connect, &other.connect),
            (&mut self.tls, &other.tls),
            (&mut self.queued, &other.queued),
            (&mut self.waiting, &other.waiting),
            (&mut self.receiving, &other.receiving),
            (&mut self.refused, &other.refused),
        ] {
            mine.add(theirs).expect("histograms share bounds");
        }
        for (a, b) in self.tls_failures.iter_mut().zip(&other.tls_failures) {
            *a += b;
        }
        self.streams.merge(&other.streams);
    }
}

impl Default for Timings {
    fn default() -> Self {
        Timings::new()
    }
}

/// Everything a run produced: totals, the per-second timeline, and the interval log.
///
/// Its serialized form is a run directory's `records.json`: the run whole but for what has
/// files of its own (the timeline, the interval log, the processes, the profile), so that
/// shards' runs merge by adding their records ([`RunData::add_shard`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// One row per second (`timeline.csv`).
    #[serde(skip)]
    pub timeline: Vec<TimelineRow>,
    /// The interval histograms as HdrHistogram log lines (without the header), latency untagged
    /// and service latency tagged `service` (`latency.hlog`).
    #[serde(skip)]
    pub hlog_lines: Vec<u8>,
    /// Requests sent but not ended when the run stopped.
    pub unfinished: u64,
    /// The generator's own resource use.
    pub generator: GeneratorStats,
    /// The service's processes, when the lab watched them (`server.csv` and its neighbours).
    #[serde(skip)]
    pub server: Option<crate::server::ServerData>,
    /// What the virtual users did, when the plan had a user model.
    pub users: Option<UserRecord>,
    /// Where the requests' time went: connect, TLS handshake, waiting, receiving.
    pub timings: Timings,
    /// The service's CPU profile, when one was asked for (`profile.folded`).
    #[serde(skip)]
    pub profile: Option<crate::profile::ProfileOutcome>,
    /// The sampled requests (`--trace-sample`): how many, and the slowest.
    pub traces: crate::trace::TraceRecord,
    /// What an autoscaled topology did during the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling: Option<crate::scaling::ScalingData>,
}

/// Whole-run account of the virtual users' sessions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UserRecord {
    /// Length of each session that ended (completed or failed), µs.
    #[serde(with = "crate::hlog::as_encoded")]
    pub sessions: Histogram<u64>,
    /// Why sessions failed, with counts (e.g. `expect status on login`).
    pub failures: std::collections::BTreeMap<String, u64>,
    /// `expect` checks that failed, by check and request (e.g. `expect statusCode on GET /a`),
    /// with counts (whether or not the failure ended its session).
    pub checks_failed: std::collections::BTreeMap<String, u64>,
    /// Static resources fetched and resources skipped (on another host).
    pub static_fetched: u64,
    /// Resources named by pages but not fetched: on another host, or unparseable.
    pub static_skipped: u64,
    /// Users who arrived while their phase's cap (`maxVusers`) was running, and were skipped.
    pub skipped: u64,
    /// Sessions started, by the index of their scenario in the model.
    pub started_by_scenario: Vec<u64>,
    /// Requests that failed, by request type, name and message (a locustfile's users, whose
    /// failures Locust reports so).
    #[serde(with = "as_entries")]
    pub request_failures: std::collections::BTreeMap<(String, String, String), u64>,
    /// What the script's processor functions emitted.
    pub custom: CustomMetrics,
    /// CPU seconds the processor's Node.js helpers used, when the model has a processor.
    pub processor_cpu_s: Option<f64>,
    /// The exit code the processor's functions suggested (`artillery.suggestedExitCode`).
    pub suggested_exit_code: Option<i32>,
    /// The first processor function that threw where Artillery's worker dies of it (an
    /// `afterResponse` hook, a function called from the event loop): its error. The run
    /// ended there, and exits 11 as Artillery does.
    pub crashed: Option<String>,
    /// Errors raised where user code has no handler, by `Class.place: error` (a locustfile's
    /// user class whose `__init__` raised while spawning; Locust exits 2 for those).
    pub unhandled: std::collections::BTreeMap<String, u64>,
    /// The variables of the last session that ended, when the model keeps them (a `before`
    /// flow, whose captures the load's users start with).
    pub vars: Option<std::collections::BTreeMap<String, String>>,
}

/// Metrics a script's processor functions emit (`events.emit('counter' | 'histogram' |
/// 'rate', name, value)`, as in Artillery).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CustomMetrics {
    /// Counters: the sum of the values emitted, by name.
    pub counters: std::collections::BTreeMap<String, f64>,
    /// Rates: how many times each was emitted.
    pub rates: std::collections::BTreeMap<String, u64>,
    /// Histograms of the values emitted, in thousandths of the emitted unit (negative values
    /// count as 0).
    #[serde(with = "crate::hlog::as_encoded_map")]
    pub histograms: std::collections::BTreeMap<String, Histogram<u64>>,
}

impl CustomMetrics {
    /// Adds one emitted value; `false` for a kind that is not a metric. An `error` event
    /// counts under `errors.NAME`, as Artillery reports it.
    pub fn add(&mut self, kind: &str, name: &str, value: f64) -> bool {
        let value = if value.is_finite() { value } else { 0.0 };
        match kind {
            "counter" => *self.counters.entry(name.to_string()).or_default() += value,
            "error" => *self.counters.entry(format!("errors.{name}")).or_default() += 1.0,
            "rate" => *self.rates.entry(name.to_string()).or_default() += 1,
            "histogram" | "summary" => {
                let h = self
                    .histograms
                    .entry(name.to_string())
                    .or_insert_with(new_histogram);
                h.saturating_record((value.max(0.0) * 1000.0).round() as u64);
            }
            _ => return false,
        }
        true
    }

    /// True when nothing was emitted.
    pub fn is_empty(&self) -> bool {
        self.counters.is_empty() && self.rates.is_empty() && self.histograms.is_empty()
    }

    /// Adds another thread's metrics.
    pub fn merge(&mut self, other: &CustomMetrics) {
        for (k, v) in &other.counters {
            *self.counters.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &other.rates {
            *self.rates.entry(k.clone()).or_default() += v;
        }
        for (k, h) in &other.histograms {
            match self.histograms.get_mut(k) {
                Some(mine) => mine.add(h).expect("histograms share bounds"),
                None => {
                    self.histograms.insert(k.clone(), h.clone());
                }
            }
        }
    }
}

impl UserRecord {
    /// An empty record.
    pub fn new() -> Self {
        UserRecord {
            sessions: new_histogram(),
            failures: Default::default(),
            checks_failed: Default::default(),
            static_fetched: 0,
            static_skipped: 0,
            skipped: 0,
            started_by_scenario: Vec::new(),
            request_failures: Default::default(),
            custom: CustomMetrics::default(),
            processor_cpu_s: None,
            suggested_exit_code: None,
            crashed: None,
            unhandled: Default::default(),
            vars: None,
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
        for (k, v) in &other.checks_failed {
            *self.checks_failed.entry(k.clone()).or_default() += v;
        }
        self.static_fetched += other.static_fetched;
        self.static_skipped += other.static_skipped;
        self.skipped += other.skipped;
        for (k, v) in &other.request_failures {
            *self.request_failures.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &other.unhandled {
            *self.unhandled.entry(k.clone()).or_default() += v;
        }
        if self.started_by_scenario.len() < other.started_by_scenario.len() {
            self.started_by_scenario
                .resize(other.started_by_scenario.len(), 0);
        }
        for (mine, theirs) in self
            .started_by_scenario
            .iter_mut()
            .zip(&other.started_by_scenario)
        {
            *mine += theirs;
        }
        self.custom.merge(&other.custom);
        if let Some(cpu) = other.processor_cpu_s {
            *self.processor_cpu_s.get_or_insert(0.0) += cpu;
        }
        if other.suggested_exit_code.is_some() {
            self.suggested_exit_code = other.suggested_exit_code;
        }
        if self.crashed.is_none() {
            self.crashed.clone_from(&other.crashed);
        }
        if self.vars.is_none() {
            self.vars.clone_from(&other.vars);
        }
    }
}

impl Default for UserRecord {
    fn default() -> Self {
        UserRecord::new()
    }
}

/// Serde for a map whose keys are not text (JSON's keys are): its entries, as a list of
/// (key, value) pairs.
mod as_entries {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<K: Serialize, V: Serialize, S: Serializer>(
        map: &BTreeMap<K, V>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(map.iter())
    }

    pub fn deserialize<'de, K, V, D>(d: D) -> Result<BTreeMap<K, V>, D::Error>
    where
        K: Deserialize<'de> + Ord,
        V: Deserialize<'de>,
        D: Deserializer<'de>,
    {
        Ok(Vec::<(K, V)>::deserialize(d)?.into_iter().collect())
    }
}

impl GeneratorStats {
    /// Adds another generator's account, a shard's that ran at once on its own machine: CPU,
    /// threads and connect rates summed, the most memory and the busiest thread, the fewest
    /// open files allowed, connections and pacing merged as threads' are.
    pub fn add_shard(&mut self, other: &GeneratorStats) {
        self.cpu_s += other.cpu_s;
        self.max_rss_mb = self.max_rss_mb.max(other.max_rss_mb);
        self.busiest_thread_utilization = self
            .busiest_thread_utilization
            .max(other.busiest_thread_utilization);
        self.threads += other.threads;
        let file_limit = match self.connect.file_limit {
            0 => other.connect.file_limit,
            mine => mine.min(other.connect.file_limit),
        };
        self.connect.merge(&other.connect);
        self.connect.rate_per_s += other.connect.rate_per_s;
        self.connect.file_limit = file_limit;
        self.pacing.merge(&other.pacing);
    }
}

impl RunData {
    /// Adds the records of another shard of the same plan, run at the same time: counts and
    /// histograms summed, phases in their order, request names by name, the users', timings'
    /// and sampled requests' accounts merged, the generators' added
    /// ([`GeneratorStats::add_shard`]). The timeline and the interval log, joined per
    /// wall-clock second, and the run's origin and length are the merge's to set.
    pub fn add_shard(&mut self, other: &RunData) {
        self.complete &= other.complete;
        self.totals.merge(&other.totals);
        for (mine, theirs) in self.phases.iter_mut().zip(&other.phases) {
            mine.totals.merge(&theirs.totals);
        }
        for (name, theirs) in &other.by_name {
            match self.by_name.iter_mut().find(|(n, _)| n == name) {
                Some((_, mine)) => mine.merge(theirs),
                None => self.by_name.push((name.clone(), theirs.clone())),
            }
        }
        self.unfinished += other.unfinished;
        self.generator.add_shard(&other.generator);
        match (&mut self.users, &other.users) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (None, Some(theirs)) => self.users = Some(theirs.clone()),
            _ => {}
        }
        self.timings.merge(&other.timings);
        self.traces.merge(&other.traces);
    }

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
            traces: Default::default(),
            scaling: None,
        }
    }

    /// Requests per second of the arrival schedule, averaged over the scheduled duration
    /// (over the time actually run when the run stopped early or had no duration); open model
    /// only.
    pub fn offered_rps(&self) -> Option<f64> {
        let crate::plan::Model::Open { .. } = self.plan.model else {
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
    pub fn attach_server(&mut self, server: crate::server::ServerData) {
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

    /// Attaches what an autoscaled topology did, and adds its instances each second to the
    /// timeline.
    pub fn attach_scaling(&mut self, scaling: crate::scaling::ScalingData) {
        for row in &mut self.timeline {
            if let Some(s) = scaling.seconds.iter().find(|s| s.second == row.second) {
                row.set_instances(s.ready, s.desired, s.starting, s.held);
            }
        }
        self.scaling = Some(scaling);
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
    fn the_gap_cv_is_the_rms_gap_error_over_the_mean_scheduled_gap() {
        let mut exact = PacingStats::default();
        for _ in 0..10 {
            exact.add_gap(0.0002, 0.0002);
        }
        assert_eq!(exact.gap_cv(), Some(0.0));
        // Five arrivals 200 µs apart sent together every millisecond: four gaps of 0 and one
        // of 1 ms, each 200 µs apart in the schedule (a cv of 2).
        let mut bunched = PacingStats::default();
        for i in 0..100 {
            bunched.add_gap(if i % 5 == 4 { 0.001 } else { 0.0 }, 0.0002);
        }
        let cv = bunched.gap_cv().unwrap();
        assert!((cv - 2.0).abs() < 1e-9, "{cv}");
        // Threads merge by adding their sums.
        let mut both = exact;
        both.merge(&bunched);
        assert_eq!(both.gaps, 110);
        assert!(
            (both.gap_cv().unwrap() - (bunched.error_sq_s2 / 110.0).sqrt() / 0.0002).abs() < 1e-9
        );
        assert_eq!(PacingStats::default().gap_cv(), None);
    }
}
