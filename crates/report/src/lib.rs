//! Reports: the live one-line progress display and the end-of-run tables in the terminal,
//! SVG charts, the self-contained HTML report, a plan in words, and the Kubernetes objects of
//! a sharded run.

#![deny(missing_docs)]

pub mod capacity;
pub mod chart;
pub mod files;
pub mod flame;
pub mod html;
pub mod k8s;
pub mod lab;
pub mod lab_table;
pub mod live;
pub mod locust;
pub mod plan;
pub mod plot;
pub mod probe;
pub mod series;
pub mod thresholds;
pub mod verdicts;

pub use lab_table::{lab_csv, render_lab_table};

use std::fmt::Write;

use loadlab_run::{GrpcCode, LatencyStats, Summary, TimelineRow};

/// Formats an integer with thousands separators: `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Formats a byte rate with a binary unit: `1536.0` → `1.5 KiB`.
pub fn bytes(n: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB"];
    let mut v = n;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} {}", units[u])
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// `name × count` for each non-zero count, or `none` when there is nothing to list.
fn counted(items: impl Iterator<Item = (String, u64)>, none: &str) -> String {
    let parts: Vec<String> = items
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| format!("{name} × {}", thousands(n)))
        .collect();
    if parts.is_empty() {
        none.to_string()
    } else {
        parts.join("  ")
    }
}

/// The live progress line for a finished second: elapsed, req/s, p99, errors so far.
pub fn progress_line(row: &TimelineRow, errors_so_far: u64) -> String {
    format!(
        "  {:>4}s  {:>9} req/s  p99 {:>9.2} ms  in flight {:>6}  errors {}",
        row.second + 1,
        thousands(row.completed),
        row.p99_ms,
        row.in_flight,
        thousands(errors_so_far)
    )
}

/// A run's progress as a line of its log (`loadlab run --progress DUR`), every few seconds, for
/// a log that no terminal redraws (a pod's, CI's); `loadlab k8s run` reads the shards' last one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoggedProgress {
    /// Seconds of the run ended.
    pub elapsed_s: u64,
    /// Requests completed so far.
    pub completed: u64,
    /// Requests completed in the last second.
    pub last_second: u64,
    /// The last second's p99, milliseconds.
    pub p99_ms: f64,
    /// Requests in flight at the last second's end.
    pub in_flight: u64,
    /// Requests that failed so far (no answer, or a status of 400 or more).
    pub errors: u64,
}

/// What begins a [`LoggedProgress`] line.
const PROGRESS_WORD: &str = "progress";

impl LoggedProgress {
    /// The line: `progress 10 s: 1,000 completed, 100 req/s, p99 1.23 ms, 3 in flight, 0 errors`.
    pub fn line(&self) -> String {
        format!(
            "{PROGRESS_WORD} {} s: {} completed, {} req/s, p99 {:.2} ms, {} in flight, {} errors",
            self.elapsed_s,
            thousands(self.completed),
            thousands(self.last_second),
            self.p99_ms,
            thousands(self.in_flight),
            thousands(self.errors)
        )
    }

    /// The progress a [`LoggedProgress::line`] says; `None` for any other line.
    pub fn parse(line: &str) -> Option<LoggedProgress> {
        let rest = line.trim().strip_prefix(PROGRESS_WORD)?.strip_prefix(' ')?;
        let (elapsed, rest) = rest.split_once(" s: ")?;
        let mut fields = rest.split(", ");
        // Each field is a number (commas between thousands) then its words.
        let mut next = |words: &str| -> Option<&str> {
            let field = fields.next()?;
            if words.starts_with(' ') {
                field.strip_suffix(words)
            } else {
                field.strip_prefix(words)?.strip_suffix(" ms")
            }
        };
        let whole = |s: &str| s.replace(',', "").parse::<u64>().ok();
        Some(LoggedProgress {
            elapsed_s: elapsed.parse().ok()?,
            completed: whole(next(" completed")?)?,
            last_second: whole(next(" req/s")?)?,
            p99_ms: next("p99 ")?.parse().ok()?,
            in_flight: whole(next(" in flight")?)?,
            errors: whole(next(" errors")?)?,
        })
    }
}

fn latency_row(out: &mut String, label: &str, l: &LatencyStats) {
    let _ = writeln!(
        out,
        "  {label:<14}{:>9.2}{:>9.2}{:>9.2}{:>9.2}{:>9.2}{:>9.2}{:>9.2}{:>10.2}",
        l.p2_5, l.p50, l.p97_5, l.p99, l.p99_9, l.mean, l.stdev, l.max
    );
}

/// Where the requests' time went, in one line: p50 and p99 of connect, TLS handshake (runs
/// with `https://` targets), queued for a connection (open-model runs), waiting (time to first byte) and receiving; `None` when the run
/// has no timings.
pub fn timings_line(s: &Summary) -> Option<String> {
    let t = s.timings_ms.as_ref()?;
    let pair = |l: &LatencyStats| format!("{:.2}/{:.2}", l.p50, l.p99);
    let tls = match s.tls {
        Some(_) => format!("  tls {}", pair(&t.tls)),
        None => String::new(),
    };
    // Only the open model's plain requests queue for a connection; others' zeros say nothing.
    let queued = if t.queued.max > 0.0 {
        format!("  queued {}", pair(&t.queued))
    } else {
        String::new()
    };
    Some(format!(
        "connect {}{tls}{queued}  waiting {}  receiving {}  (ms p50/p99; {} new connections)",
        pair(&t.connect),
        pair(&t.waiting),
        pair(&t.receiving),
        thousands(t.new_connections)
    ))
}

/// The generator line's pacing: how even the sends were, and the slack they had.
fn pacing_words(p: &loadlab_run::summary::Pacing) -> String {
    let how = if p.slack_ms > 0.0 {
        format!("slack {} ms", p.slack_ms)
    } else {
        "exact".into()
    };
    format!("  arrival gaps cv {:.2} ({how})", p.arrival_gap_cv)
}

/// How `https://` targets were checked, in one line; `None` when the run had none.
pub fn tls_line(s: &Summary) -> Option<String> {
    let t = s.tls.as_ref()?;
    let checked = match (t.verify, &t.cacert) {
        (false, _) => "certificates NOT verified (--insecure)".to_string(),
        (true, None) => "certificates verified against the platform's roots".to_string(),
        (true, Some(ca)) => format!("certificates verified against the platform's roots and {ca}"),
    };
    let failures = counted(
        t.failures.iter().map(|(why, n)| (why.clone(), *n)),
        "no failed handshakes",
    );
    Some(format!("{checked}; {failures}"))
}

/// How an HTTP/2 run used its connections, in one line; `None` for HTTP/1.1.
pub fn http2_line(s: &Summary) -> Option<String> {
    let h = s.http2.as_ref()?;
    let how = if h.cleartext {
        "h2c (prior knowledge)"
    } else {
        "h2 (TLS ALPN)"
    };
    Some(format!(
        "{how}, up to {} stream(s) per connection, {} connection(s) opened",
        h.streams,
        thousands(h.connections)
    ))
}

/// One line describing the load: model, shape and targets.
pub fn headline(s: &Summary) -> String {
    let unit = if s.users.is_some() {
        "users/s"
    } else {
        "req/s"
    };
    let shape = match (s.throughput.offered_rps, &s.users) {
        (Some(r), _) => format!("open model, {r:.0} {unit} offered"),
        (None, Some(u)) => format!("closed model, up to {} users", u.max_active),
        (None, None) => "closed model".to_string(),
    };
    let targets = if s.targets.is_empty() {
        "no request of its own (a processor's functions may send their own traffic)".to_string()
    } else {
        s.targets.join(" ")
    };
    format!("{shape}, {:.2} s, {targets}", s.duration_s)
}

/// The shard a run was and its start, or the shards a merged run came from with each one's
/// generator health.
fn shard_lines(out: &mut String, s: &Summary) {
    if let Some(x) = &s.shard {
        let start = s
            .start
            .as_ref()
            .map(|t| format!("  started {:+.1} ms from --start-at", t.offset_ms))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  shard        {}/{} of plan {}{start}",
            x.index, x.count, s.plan_hash
        );
    }
    if let Some(m) = &s.merged {
        let _ = writeln!(
            out,
            "  shards       {} of {} merged (plan {})",
            m.shards.len(),
            m.count,
            s.plan_hash
        );
        for h in &m.shards {
            let _ = writeln!(
                out,
                "    {:>3}/{:<4} sent {:>10}  dropped {:>6}  lag p99 {:>7.2} ms  cpu {:>6.2} s{}",
                h.index,
                m.count,
                thousands(h.sent),
                thousands(h.dropped),
                h.schedule_lag_ms_p99,
                h.cpu_s,
                if h.bottleneck {
                    "  <- limited the load itself"
                } else {
                    ""
                }
            );
        }
    }
}

/// The end-of-run summary, in the spirit of autocannon's tables.
pub fn render_summary(s: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "loadlab: {}", headline(s));
    if !s.complete {
        let _ = writeln!(out, "  (interrupted: partial results)");
    }
    latency_lines(&mut out, s);
    traffic_lines(&mut out, s);
    if let Some(u) = &s.users {
        user_lines(&mut out, u);
    }
    outcome_lines(&mut out, s);
    generator_lines(&mut out, s);
    if let Some(t) = &s.traces {
        trace_lines(&mut out, t, s.requests.sent);
    }
    request_lines(&mut out, s);
    phase_lines(&mut out, s);
    if let Some(server) = &s.server {
        server_lines(&mut out, server);
    }
    if let Some(p) = &s.profile {
        profile_lines(&mut out, p);
    }
    if !s.thresholds.is_empty() {
        let _ = writeln!(out);
        out.push_str(&thresholds::render_thresholds(&s.thresholds));
    }
    if !s.findings.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "  findings");
        for f in &s.findings {
            let _ = writeln!(out, "  - {}", f.message);
            if !f.next.is_empty() {
                let _ = writeln!(out, "    next: {}", f.next);
            }
        }
    }
    out
}

/// The latency table (from the intended start and from the send) and where the time went.
fn latency_lines(out: &mut String, s: &Summary) {
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "  {:<14}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>10}",
        "latency (ms)", "p2.5", "p50", "p97.5", "p99", "p99.9", "avg", "stdev", "max"
    );
    latency_row(out, "from intended", &s.latency_ms);
    latency_row(out, "from send", &s.service_latency_ms);
    if let Some(line) = timings_line(s) {
        let _ = writeln!(out, "  timings      {line}");
    }
}

/// The rate achieved (and offered) and the requests by outcome.
fn traffic_lines(out: &mut String, s: &Summary) {
    let _ = writeln!(out);
    let t = &s.throughput;
    let offered = t
        .offered_rps
        .map(|o| match s.users {
            Some(_) => format!("   offered {o:.1} users/s"),
            None => format!("   offered {o:.1}"),
        })
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "  req/s        {:.1}{offered}   bytes/s {}",
        t.rps,
        bytes(t.bytes_per_s)
    );
    let r = &s.requests;
    let _ = writeln!(
        out,
        "  requests     sent {}  completed {}  ok {}  errors {}  dropped {}  unfinished {}",
        thousands(r.sent),
        thousands(r.completed),
        thousands(r.ok),
        thousands(r.errors),
        thousands(r.dropped),
        thousands(r.unfinished)
    );
}

/// The virtual users: sessions, static files, failures, checks and a script's own metrics.
fn user_lines(out: &mut String, u: &loadlab_run::summary::Users) {
    let _ = writeln!(
        out,
        "  users        started {}  completed {}  failed {}  most at once {}  session p50 {:.2} ms  p99 {:.2} ms",
        thousands(u.started),
        thousands(u.completed),
        thousands(u.failed),
        thousands(u.max_active),
        u.session_ms.p50,
        u.session_ms.p99
    );
    if u.skipped > 0 {
        let _ = writeln!(
            out,
            "  skipped      {} arriving users: their phase's maxVusers were in a session (Artillery's vusers.skipped)",
            thousands(u.skipped)
        );
    }
    if u.static_fetched + u.static_skipped > 0 {
        let _ = writeln!(
            out,
            "  static       fetched {}  skipped {} (on other hosts)",
            thousands(u.static_fetched),
            thousands(u.static_skipped)
        );
    }
    let failures = counted(u.failures.iter().map(|(why, n)| (why.clone(), *n)), "");
    if !failures.is_empty() {
        let _ = writeln!(out, "  failed by    {failures}");
    }
    let checks = counted(u.checks_failed.iter().map(|(why, n)| (why.clone(), *n)), "");
    if !checks.is_empty() {
        let _ = writeln!(out, "  checks failed {checks}");
    }
    if let Some(m) = &u.metrics {
        custom_metrics(out, m);
    }
}

/// Responses by status, Apdex, transport errors, and the TLS, HTTP/2 and shard lines.
fn outcome_lines(out: &mut String, s: &Summary) {
    let codes = counted(
        s.status.iter().map(|(code, n)| (code.clone(), *n)),
        "no responses",
    );
    let _ = writeln!(out, "  status       {codes}");
    if let Some(line) = grpc_line(s) {
        let _ = writeln!(out, "  grpc         {line}");
    }
    if let Some(line) = grpc_streams_line(s) {
        let _ = writeln!(out, "  streams      {line}");
    }
    if let Some(a) = &s.apdex {
        let _ = writeln!(
            out,
            "  apdex        {:.2} ({}) at T = {} ms: satisfied {}  tolerated {}  frustrated {}",
            a.score,
            a.ranking,
            a.threshold_ms,
            thousands(a.satisfied),
            thousands(a.tolerated),
            thousands(a.frustrated)
        );
    }
    let kinds = counted(
        s.errors
            .by_kind()
            .into_iter()
            .map(|(k, n)| (k.to_string(), n)),
        "no errors",
    );
    let _ = writeln!(out, "  transport    {kinds}");
    if let Some(line) = tls_line(s) {
        let _ = writeln!(out, "  tls          {line}");
    }
    if let Some(line) = http2_line(s) {
        let _ = writeln!(out, "  http2        {line}");
    }
    shard_lines(out, s);
}

/// The run's gRPC calls by status, in the order of the statuses' numbers (`OK × 960
/// UNAVAILABLE × 30`), when it made any.
pub(crate) fn grpc_line(s: &Summary) -> Option<String> {
    let mut codes: Vec<_> = s.grpc.iter().collect();
    codes.sort_by_key(|(name, _)| GrpcCode::from_name(name).map_or(usize::MAX, GrpcCode::number));
    let line = counted(codes.into_iter().map(|(name, n)| (name.clone(), *n)), "");
    (!line.is_empty()).then_some(line)
}

/// Streaming gRPC calls' messages in one line: counts each way, answered messages a second,
/// and the time to a call's first answer and a message's reply (p50/p99); `None` when the run
/// made no streaming call.
pub(crate) fn grpc_streams_line(s: &Summary) -> Option<String> {
    let g = s.grpc_streams.as_ref()?;
    let pair = |l: &LatencyStats| format!("{:.2}/{:.2}", l.p50, l.p99);
    let mut line = format!(
        "{} calls  messages sent {}  received {} ({:.1}/s)",
        thousands(g.calls),
        thousands(g.messages_sent),
        thousands(g.messages_received),
        g.messages_received_per_s
    );
    if let Some(f) = &g.first_message_ms {
        let _ = write!(line, "  first message {}", pair(f));
    }
    if let Some(r) = &g.reply_ms {
        let _ = write!(line, "  reply {}", pair(r));
    }
    if g.first_message_ms.is_some() || g.reply_ms.is_some() {
        line.push_str("  (ms p50/p99)");
    }
    Some(line)
}

/// The generator's own health: CPU, memory, schedule lag, connections opened, warnings.
fn generator_lines(out: &mut String, s: &Summary) {
    let g = &s.generator;
    if g.threads == 0 {
        // A run rebuilt from the seconds a stopped run wrote has no account of the generator.
        let _ = writeln!(
            out,
            "  generator    schedule lag p99 {:.2} ms  (CPU and memory not recorded: the run \
             stopped before its end)",
            g.schedule_lag_ms_p99
        );
        return;
    }
    let _ = writeln!(
        out,
        "  generator    cpu {:.2} s  max rss {:.1} MB  schedule lag p99 {:.2} ms  threads {}{}{}{}",
        g.cpu_s,
        g.max_rss_mb,
        g.schedule_lag_ms_p99,
        g.threads,
        g.processor_cpu_s.map_or(String::new(), |c| format!(
            "  processor (Node.js) cpu {c:.2} s"
        )),
        g.pacing.as_ref().map_or(String::new(), pacing_words),
        if loadlab_analyze::health::generator_limited(g) {
            "  — the generator was the limit, not the service"
        } else {
            ""
        }
    );
    let c = &g.connect;
    if c.connections > 0 {
        let from = match c.source_addrs.len() {
            0 => String::new(),
            1 => format!(" from {}", c.source_addrs[0]),
            n => format!(" from {n} source addresses"),
        };
        let _ = writeln!(
            out,
            "  connect      {} of {} opened in {:.2} s before the load ({}/s{from}; in no latency)",
            thousands(c.opened),
            thousands(c.connections),
            c.duration_s,
            thousands(c.rate_per_s.round() as u64),
        );
    }
    for w in &g.warnings {
        let _ = writeln!(out, "  warning: {w}");
    }
}

/// How many requests were traced, and the slowest three with their trace IDs (all ten are
/// in summary.json), to look up in the tracing backend.
fn trace_lines(out: &mut String, t: &loadlab_run::summary::Traces, sent: u64) {
    let _ = writeln!(
        out,
        "  traces       {} of {} requests sampled (--trace-sample {}); the slowest:",
        thousands(t.sampled),
        thousands(sent),
        t.sample
    );
    for r in t.slowest.iter().take(3) {
        let outcome = match (&r.status, &r.error) {
            (Some(code), _) => code.to_string(),
            (None, Some(e)) => e.clone(),
            (None, None) => String::new(),
        };
        let _ = writeln!(
            out,
            "               {:>9.2} ms  trace {}  {} {} {outcome}",
            r.latency_ms, r.trace_id, r.method, r.name
        );
    }
}

/// Each named request: completed, errors, latency.
fn request_lines(out: &mut String, s: &Summary) {
    if !s.requests_by_name.is_empty() {
        let width = s
            .requests_by_name
            .keys()
            .map(String::len)
            .max()
            .unwrap_or(4)
            .max(7);
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "  {:<width$}{:>10}{:>9}{:>10}{:>10}{:>10}",
            "request", "completed", "errors", "p50 ms", "p99 ms", "max ms"
        );
        for (name, r) in &s.requests_by_name {
            let _ = writeln!(
                out,
                "  {:<width$}{:>10}{:>9}{:>10.2}{:>10.2}{:>10.2}",
                name,
                thousands(r.completed),
                thousands(r.errors),
                r.latency_ms.p50,
                r.latency_ms.p99,
                r.latency_ms.max
            );
        }
    }
}

/// Each phase of a run of several: its rate and latency.
fn phase_lines(out: &mut String, s: &Summary) {
    if s.phases.len() > 1 {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "  {:<16}{:>9}{:>9}{:>10}{:>10}{:>10}{:>10}",
            "phase", "start s", "length s", "offered/s", "req/s", "p50 ms", "p99 ms"
        );
        for p in &s.phases {
            let offered = p.offered_rps.map_or("-".to_string(), |o| format!("{o:.1}"));
            let _ = writeln!(
                out,
                "  {:<16}{:>9.1}{:>9.1}{:>10}{:>10.1}{:>10.2}{:>10.2}",
                p.name, p.start_s, p.duration_s, offered, p.rps, p.latency_ms.p50, p.latency_ms.p99
            );
        }
    }
}

/// The watched processes' CPU and memory, and the stores' load and queues.
fn server_lines(out: &mut String, server: &loadlab_run::summary::Server) {
    let _ = writeln!(out);
    if !server.processes.is_empty() {
        let _ = writeln!(
            out,
            "  {:<8}{:<18}{:>12}{:>12}{:>14}{:>14}",
            "pid", "process", "cpu avg %", "cpu max %", "cpu wait %", "rss max MB"
        );
    } else if server.stores.is_empty() {
        let _ = writeln!(out, "  (the watched processes had exited)");
    }
    for p in &server.processes {
        let _ = writeln!(
            out,
            "  {:<8}{:<18}{:>12.1}{:>12.1}{:>14.1}{:>14.1}",
            p.pid, p.name, p.cpu_pct_avg, p.cpu_pct_max, p.cpu_wait_pct_avg, p.rss_mb_max
        );
    }
    for b in &server.budgets {
        let _ = writeln!(out, "  {}: {}", b.name, budget_words(b));
    }
    for st in &server.stores {
        let _ = writeln!(
            out,
            "  {}: {:.0} commands/s on average (most {:.0}), memory up to {:.1} MB, up to {} clients",
            st.name, st.commands_per_s_avg, st.commands_per_s_max, st.memory_mb_max, st.clients_max
        );
        for q in &st.streams {
            let _ = writeln!(
                out,
                "    stream {}: up to {} entries; backlog up to {} undelivered, {} at the end; {} delivered but unacknowledged at the end",
                q.name, q.length_max, q.lag_max, q.lag_end, q.pending_end
            );
        }
    }
}

/// What a budgeted group used against its budget, in words: "98 % of its 0.25 CPU, throttled in
/// 38 % of 300 periods (1.20 s); memory up to 45.1 of 256 MB".
pub fn budget_words(b: &loadlab_run::summary::ServerBudget) -> String {
    let cpu = match (b.cpus, b.quota_used_pct) {
        (Some(cpus), Some(used)) => format!(
            "{used:.0} % of its {cpus} CPU, throttled in {:.0} % of {} periods ({:.2} s)",
            b.throttled_pct, b.periods, b.throttled_s
        ),
        _ => format!("{:.1} % of a core (no CPU quota)", b.cpu_pct_avg),
    };
    let memory = match b.memory_limit_mb {
        Some(limit) => format!("memory up to {:.1} of {limit:.0} MB", b.memory_peak_mb),
        None => format!("memory up to {:.1} MB (no limit)", b.memory_peak_mb),
    };
    let oom = match (b.oom_kills, b.oom_second) {
        (0, _) => String::new(),
        (n, Some(s)) => {
            format!("; {n} process(es) killed by the kernel's OOM killer, the first by second {s}")
        }
        (n, None) => format!("; {n} process(es) killed by the kernel's OOM killer"),
    };
    format!("{cpu}; {memory}{oom}")
}

/// The profile's top functions, or why none was recorded.
fn profile_lines(out: &mut String, p: &loadlab_run::summary::ProfileSummary) {
    let _ = writeln!(out);
    match &p.error {
        Some(why) => {
            let _ = writeln!(out, "  profile      not recorded: {why}");
        }
        None => {
            let _ = writeln!(
                out,
                "  profile      {} stacks by {} from {:.1} s for {:.1} s; top functions (self %, total %):",
                p.samples, p.backend, p.start_s, p.duration_s
            );
            for t in p.top.iter().take(5) {
                let _ = writeln!(
                    out,
                    "    {:>5.1} {:>5.1}  {}",
                    t.self_pct, t.total_pct, t.function
                );
            }
            for n in &p.notes {
                let _ = writeln!(out, "    note: {n}");
            }
        }
    }
}

/// One row of a side-by-side comparison of runs.
pub struct ComparisonRow {
    /// What the run was.
    pub label: String,
    /// Its summary.
    pub summary: Summary,
}

/// A compact table comparing several runs: throughput, latency percentiles, errors.
pub fn render_comparison(rows: &[ComparisonRow]) -> String {
    let mut out = String::new();
    let width = rows.iter().map(|r| r.label.len()).max().unwrap_or(0).max(4);
    let _ = writeln!(
        out,
        "  {:<width$}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>9}",
        "run", "req/s", "offered", "p50 ms", "p99 ms", "p99.9 ms", "svc p99", "errors"
    );
    for r in rows {
        let s = &r.summary;
        let offered = s
            .throughput
            .offered_rps
            .map_or("-".to_string(), |o| format!("{o:.0}"));
        let _ = writeln!(
            out,
            "  {:<width$}{:>10.0}{:>10}{:>10.2}{:>10.2}{:>10.2}{:>10.2}{:>9}",
            r.label,
            s.throughput.rps,
            offered,
            s.latency_ms.p50,
            s.latency_ms.p99,
            s.latency_ms.p99_9,
            s.service_latency_ms.p99,
            thousands(s.requests.errors)
        );
    }
    out
}

/// Each run against the baseline `base`, a line each: throughput ratio, and the median's and
/// p99's difference with whether it is more than noise.
pub fn render_versus(base: &str, versus: &[loadlab_analyze::compare::Versus]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  against {base} (per-second medians; 95 % bootstrap interval of the difference)"
    );
    let width = versus
        .iter()
        .map(|v| v.run.len())
        .chain([base.len()])
        .max()
        .unwrap_or(3)
        .max(3);
    let _ = writeln!(
        out,
        "  {:<width$}{:>10}   {:<34}{:<34}",
        "run", "req/s ×", "p50", "p99"
    );
    for v in versus {
        let _ = writeln!(
            out,
            "  {:<width$}{:>10.2}   {:<34}{:<34}",
            v.run,
            v.throughput_ratio,
            difference_words(&v.p50),
            difference_words(&v.p99)
        );
    }
    out
}

/// `×1.32 (+2.1..+4.0 ms) differs` or `×1.01 within noise`.
fn difference_words(d: &Option<loadlab_analyze::compare::Difference>) -> String {
    match d {
        None => "too few seconds to judge".to_string(),
        Some(d) => format!(
            "×{:.2} ({:+.2}..{:+.2} ms) {}",
            d.ratio,
            d.low,
            d.high,
            if d.significant {
                "differs"
            } else {
                "within noise"
            }
        ),
    }
}

/// The metrics a script's processor functions emitted, one line each: counters, rates, and
/// histograms' count, median, p95, p99 and max in the unit they were emitted in.
fn custom_metrics(out: &mut String, m: &loadlab_run::CustomSummary) {
    for (name, v) in &m.counters {
        let _ = writeln!(out, "  counter      {name}  {}", number(*v));
    }
    for (name, v) in &m.rates {
        let _ = writeln!(out, "  rate         {name}  {v:.1}/s");
    }
    for (name, h) in &m.histograms {
        let st = &h.stats;
        let _ = writeln!(
            out,
            "  histogram    {name}  count {}  p50 {}  p95 {}  p99 {}  max {}",
            thousands(h.count),
            number(st.p50),
            number(st.p95),
            number(st.p99),
            number(st.max)
        );
    }
}

/// A metric's value: whole numbers with thousands separators, others with two decimals.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        let n = thousands(v.abs() as u64);
        if v < 0.0 {
            format!("-{n}")
        } else {
            n
        }
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_logged_progress_line_reads_back_as_what_it_says() {
        let p = LoggedProgress {
            elapsed_s: 15,
            completed: 1_234_567,
            last_second: 1_000,
            p99_ms: 12.345,
            in_flight: 3,
            errors: 0,
        };
        let line = p.line();
        assert_eq!(
            line,
            "progress 15 s: 1,234,567 completed, 1,000 req/s, p99 12.35 ms, 3 in flight, 0 errors"
        );
        let back = LoggedProgress::parse(&format!("{line}\n")).unwrap();
        assert_eq!(
            (back.elapsed_s, back.completed, back.errors),
            (15, 1_234_567, 0)
        );
        assert_eq!((back.last_second, back.in_flight), (1_000, 3));
        assert!((back.p99_ms - 12.35).abs() < 1e-9);
        for other in [
            "",
            "progress",
            "waiting for the start time (--start-at)",
            "progress 15 s: many completed, 1 req/s, p99 1.00 ms, 0 in flight, 0 errors",
            "progress 15 s: 1 completed, 1 req/s",
        ] {
            assert_eq!(LoggedProgress::parse(other), None, "{other}");
        }
    }

    #[test]
    fn thousands_groups_digits_by_three() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
    }

    #[test]
    fn bytes_picks_a_readable_unit() {
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(1536.0), "1.5 KiB");
        assert_eq!(bytes(3.0 * 1024.0 * 1024.0), "3.0 MiB");
    }
}
