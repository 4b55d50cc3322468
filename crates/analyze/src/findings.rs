//! Findings: what a run's numbers mean, one sentence each with the numbers behind it and what
//! to look at next — errors, saturation, queues building, idle connections or a connection cap
//! reached (Little's law), the service demand and the capacity it implies (seed 002's 1000/T
//! per CPU), the busiest tier and a queue falling behind, the visits application's books, the
//! generator's own limits, and how long a spike took to pass. A finding appears
//! only when it tells the user something to act on: a run whose requests mostly failed gets the
//! errors and nothing about the latency of those failures.

use std::collections::BTreeMap;

use loadlab_run::{Arrivals, Finding, Model, RunData, Summary, TimelineRow, TlsFailure};

/// Achieved/offered ratio under which an open-model run (or a lab's open-model cell) counts as
/// saturated.
pub(crate) const SATURATED: f64 = 0.95;
/// Growth of the median from the first to the last third that counts as rising.
const RISING: f64 = 1.5;
/// Smallest rise that counts, ms.
const RISING_MS: f64 = 1.0;
/// Latency within this factor of the base counts as recovered after a spike.
const RECOVERED: f64 = 1.2;
/// Share of failed requests over which the errors get a finding.
const ERRORS_WORTH_SAYING: f64 = 0.01;
/// Share of successful requests under which latency and throughput findings say nothing (they
/// would describe how fast the service failed).
const MOSTLY_OK: f64 = 0.5;
/// Share of a closed model's connections that, left idle on average, means the generator or
/// the network set the pace rather than the service.
const IDLE_CONNECTIONS: f64 = 0.8;
/// Share of the open model's connection cap that, in use on average, means the cap binds.
const NEAR_CAP: f64 = 0.8;

/// A finding of `kind` with its message, what to do next and its numbers.
pub(crate) fn finding(kind: &str, message: String, next: &str, values: &[(&str, f64)]) -> Finding {
    Finding {
        kind: kind.into(),
        message,
        next: next.into(),
        values: values
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect::<BTreeMap<_, _>>(),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The findings of a run; `cores` is the number of CPUs the service could use (for the
/// capacity that the service demand implies).
pub fn findings(run: &RunData, s: &Summary, cores: usize) -> Vec<Finding> {
    let mut out = Vec::new();
    errors(run, s, &mut out);
    let mostly_ok =
        s.requests.completed > 0 && s.requests.ok as f64 >= MOSTLY_OK * s.requests.completed as f64;
    if mostly_ok {
        saturation(run, s, &mut out);
        let spans = run.plan.phase_spans();
        for (name, start, length) in &spans {
            let end = length.map_or(f64::INFINITY, |l| start + l);
            let phase: Vec<&TimelineRow> = run
                .timeline
                .iter()
                .filter(|r| r.second as f64 >= *start && (r.second as f64) < end)
                .collect();
            let label = if spans.len() > 1 {
                format!(" in phase {name:?}")
            } else {
                String::new()
            };
            trends(&phase, &label, &run.plan.model, &mut out);
        }
        littles_law(run, s, &mut out);
        service_demand(run, cores, &mut out);
        busiest_process(s, &mut out);
    }
    queue_backlog(run, &mut out);
    if crate::health::generator_limited(&s.generator) {
        out.push(finding(
            "generator",
            format!(
                "the generator itself was near its limit (busiest thread {}, schedule lag p99 \
                 {:.1} ms): the service may have more to give",
                if s.generator.saturated {
                    "saturated"
                } else {
                    "busy"
                },
                s.generator.schedule_lag_ms_p99
            ),
            "add generator threads (-t) or give the generator a core of its own, then run again",
            &[("schedule_lag_ms_p99", s.generator.schedule_lag_ms_p99)],
        ));
    }
    if mostly_ok {
        spike_recovery(run, &mut out);
    }
    out
}

/// Failed requests, when more than 1 % failed (or any was dropped), with the commonest cause
/// and where to look for it.
fn errors(run: &RunData, s: &Summary, out: &mut Vec<Finding>) {
    let failed = s.requests.errors + s.requests.dropped;
    let total = s.requests.completed + s.requests.dropped;
    if total == 0
        || (failed as f64) <= ERRORS_WORTH_SAYING * total as f64 && s.requests.dropped == 0
    {
        return;
    }
    // Causes by count: transport errors by kind, HTTP statuses of 400 and over, and drops.
    let mut causes: Vec<(String, u64)> = s
        .errors
        .by_kind()
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| (k.as_str().replace('_', " "), *n))
        .collect();
    causes.extend(
        s.status
            .iter()
            .filter(|(code, n)| code.parse::<u16>().is_ok_and(|c| c >= 400) && **n > 0)
            .map(|(code, n)| (format!("HTTP {code}"), *n)),
    );
    // gRPC calls by their status: the cause a call answered with HTTP 200 carries.
    causes.extend(
        s.grpc
            .iter()
            .filter(|(code, n)| code.as_str() != "OK" && **n > 0)
            .map(|(code, n)| (format!("gRPC {code}"), *n)),
    );
    if s.requests.dropped > 0 {
        causes.push(("dropped (no free connection)".into(), s.requests.dropped));
    }
    causes.sort_by_key(|c| std::cmp::Reverse(c.1));
    let Some((top, _)) = causes.first() else {
        return;
    };
    let addr = run
        .plan
        .endpoints
        .first()
        .map_or(String::from("the target"), |e| e.addr.to_string());
    let next = if top == "connect refused" {
        format!(
            "nothing accepted connections at {addr}: check that the service is up and listening \
             on that port; if only some were refused, its listen backlog overflowed"
        )
    } else if top == "connect timeout" {
        format!("connections to {addr} did not open in time: check the address and any firewall")
    } else if top == "timeout" {
        "the service is past its capacity or stalled: find the rate it sustains with \
         `loadlab capacity`, or raise --timeout if such answers are expected"
            .into()
    } else if top == "reset" || top == "closed" {
        "the service closed connections under load: read its logs for crashes, restarts or \
         connection limits (a proxy's keep-alive or max-connections settings)"
            .into()
    } else if top == "tls" {
        let commonest = s
            .tls
            .as_ref()
            .and_then(|t| t.failures.iter().max_by_key(|(_, n)| **n))
            .and_then(|(why, _)| TlsFailure::ALL.into_iter().find(|f| f.as_str() == why));
        match commonest {
            Some(cause) => format!("tls: {}", cause.message()),
            None => "the TLS handshakes failed: check the certificate, or pass --cacert FILE \
                     or --insecure"
                .into(),
        }
    } else if top == "protocol" && s.http2.as_ref().is_some_and(|h| h.cleartext) {
        "the server did not speak HTTP/2 with prior knowledge (h2c): check that the port \
         serves HTTP/2 in the clear (nginx: `listen PORT http2`), or drop --http2"
            .into()
    } else if top == "protocol" {
        "the answers were not valid HTTP: check that the port serves plain HTTP".into()
    } else if top == "stream reset" {
        "the server reset HTTP/2 streams (RST_STREAM) instead of answering: read its logs \
         for why (a handler that aborts, a limit on request size, headers or rate)"
            .into()
    } else if top == "unresolved" {
        let hosts: Vec<&str> = run
            .plan
            .endpoints
            .iter()
            .filter(|e| e.unresolved.is_some())
            .map(|e| e.authority.as_str())
            .collect();
        format!(
            "{} did not resolve when the run started, so nothing was sent there: check the \
             name (a typo, or a host this machine's DNS does not know)",
            hosts.join(", ")
        )
    } else if top == "goaway" {
        "the server shut HTTP/2 connections down with an error (GOAWAY): read its logs; a \
         server that closes busy connections for flow control or limits shows here"
            .into()
    } else if top == "HTTP 429" || top == "HTTP 503" {
        "the service shed load past a cap: that cap is its capacity; compare it with the rate \
         offered"
            .into()
    } else if top.starts_with("HTTP 5") {
        "the service failed: read its logs (a proxy's 502 or 504 means the upstream failed or \
         was too slow)"
            .into()
    } else if top == "gRPC UNAVAILABLE" || top == "gRPC RESOURCE_EXHAUSTED" {
        "the service shed load or was not ready to serve: that cap is its capacity; compare it \
         with the rate offered"
            .into()
    } else if top == "gRPC DEADLINE_EXCEEDED" {
        "calls ran past their deadline (--timeout sends it as grpc-timeout): the service is \
         past its capacity, or the deadline is shorter than its service time"
            .into()
    } else if top == "gRPC UNIMPLEMENTED" {
        "the server does not serve this method: check the package, service and method names \
         against its .proto (grpc://HOST:PORT/package.Service/Method)"
            .into()
    } else if top == "gRPC INTERNAL" || top == "gRPC UNKNOWN" || top == "gRPC DATA_LOSS" {
        "the service failed the calls: read its logs".into()
    } else if top.starts_with("gRPC ") {
        "the calls are wrong for this service: check the request message (-b) against the \
         method's input type, and the metadata (-H)"
            .into()
    } else if top.starts_with("dropped") {
        "raise --max-connections, or lower the rate: every connection was busy".into()
    } else {
        "the requests are wrong for this service: check the URL, method, headers and body".into()
    };
    let listed = causes
        .iter()
        .take(3)
        .map(|(c, n)| format!("{n} {c}"))
        .collect::<Vec<_>>()
        .join(", ");
    out.push(finding(
        "errors",
        format!(
            "{failed} of {total} requests failed ({:.1} %): {listed}",
            100.0 * failed as f64 / total as f64
        ),
        &next,
        &[
            ("failed", failed as f64),
            ("total", total as f64),
            ("error_pct", 100.0 * failed as f64 / total as f64),
        ],
    ));
}

fn saturation(run: &RunData, s: &Summary, out: &mut Vec<Finding>) {
    let (Some(offered), Model::Open { .. }) = (s.throughput.offered_rps, &run.plan.model) else {
        return;
    };
    if run.users.is_some() || offered <= 0.0 {
        return;
    }
    let achieved = s.requests.completed as f64 / run.schedule_secs();
    if achieved < SATURATED * offered {
        out.push(finding(
            "saturation",
            format!(
                "saturated: the service completed {achieved:.0} req/s of the {offered:.0} \
                 offered ({:.0} %); past its capacity the rest waited, timed out or was dropped",
                100.0 * achieved / offered
            ),
            "find the highest rate that meets your objective with `loadlab capacity URL --slo …`; \
             `loadlab probe URL` tells whether workers or the CPU limit it",
            &[("achieved_rps", achieved), ("offered_rps", offered)],
        ));
    }
}

/// Latency rising and requests in flight climbing from the first third of `rows` to the
/// last (the first second, a warm-up, left out).
fn trends(rows: &[&TimelineRow], label: &str, model: &Model, out: &mut Vec<Finding>) {
    let rows: Vec<&&TimelineRow> = rows.iter().skip(1).filter(|r| r.completed > 0).collect();
    if rows.len() < 6 {
        return;
    }
    let third = rows.len() / 3;
    let (first, last) = (&rows[..third], &rows[rows.len() - third..]);
    let p50 = |rs: &[&&TimelineRow]| median(rs.iter().map(|r| r.p50_ms).collect());
    let (a, b) = (p50(first), p50(last));
    if b > RISING * a + RISING_MS {
        // With a fixed number of clients a queue cannot grow: the service itself slowed down.
        let (why, next) = match model {
            Model::Closed { .. } => (
                "the service slowed down under a constant number of clients",
                "watch its CPU and memory (--watch-pid) for a leak, garbage collection or a \
                 resource filling up",
            ),
            _ => (
                "a queue was building, so no steady state was reached",
                "the load is past what the service sustains: lower the rate, or find the \
                 highest steady one with `loadlab capacity`",
            ),
        };
        out.push(finding(
            "rising_latency",
            format!(
                "latency rose through the run{label}: median {a:.1} ms in the first third, \
                 {b:.1} ms in the last; {why}"
            ),
            next,
            &[("p50_first_ms", a), ("p50_last_ms", b)],
        ));
    }
    let flight =
        |rs: &[&&TimelineRow]| mean(&rs.iter().map(|r| r.in_flight as f64).collect::<Vec<_>>());
    let (a, b) = (flight(first), flight(last));
    if b > 2.0 * a && b > 10.0 {
        out.push(finding(
            "climbing_in_flight",
            format!(
                "requests in flight climbed{label} from {a:.0} to {b:.0} on average: arrivals \
                 outpaced answers"
            ),
            "the service's concurrency limit (workers, a pool, a proxy's upstream connections) \
             is below what this rate needs: `loadlab probe URL` counts its workers",
            &[("in_flight_first", a), ("in_flight_last", b)],
        ));
    }
}

/// Little's law (L = X·R), said only when it points at a limit: a closed model whose
/// connections sat idle (the generator or the network set the pace, not the service), or an
/// open model that needed most of its connection cap.
fn littles_law(run: &RunData, s: &Summary, out: &mut Vec<Finding>) {
    let x = s.throughput.rps;
    let r = s.latency_ms.mean / 1000.0;
    let l = x * r;
    if l <= 0.0 {
        return;
    }
    let values = [
        ("in_flight", l),
        ("throughput_rps", x),
        ("latency_mean_ms", r * 1000.0),
    ];
    let said = format!(
        "on average {l:.1} requests were in flight ({x:.0} req/s × {:.2} ms, Little's law)",
        r * 1000.0
    );
    // What a connection holds at once: its pipeline over HTTP/1.1, its streams over HTTP/2.
    let streams = run.plan.protocol.streams();
    let per_connection = |n: usize| match streams {
        1 => format!("{n} connections"),
        s => format!("{n} connections × {s} streams"),
    };
    match &run.plan.model {
        Model::Closed {
            connections,
            pipeline,
        } if l < IDLE_CONNECTIONS * (connections * pipeline * streams) as f64 => {
            let slots = connections * pipeline * streams;
            let idle = 100.0 * (1.0 - l / slots as f64);
            out.push(finding(
                "littles_law",
                format!(
                    "{said} of {slots} the connections could hold: they waited {idle:.0} % of \
                     the time on the generator or the network, so the service was not what set \
                     the pace"
                ),
                "check the generator's CPU in this summary; add threads (-t) or pipelining (-p), \
                 or run the generator on another machine",
                &values,
            ));
        }
        Model::Open {
            arrivals: Arrivals::Requests {
                max_connections, ..
            },
            ..
        } if l >= NEAR_CAP * (max_connections * streams) as f64 => out.push(finding(
            "littles_law",
            format!(
                "{said}: {:.0} % of the cap of {}",
                100.0 * l / (max_connections * streams) as f64,
                per_connection(*max_connections)
            ),
            "raise --max-connections (or --streams), or arrivals will wait for a connection \
             (and count as dropped after their timeout)",
            &values,
        )),
        _ => {}
    }
}

fn service_demand(run: &RunData, cores: usize, out: &mut Vec<Finding>) {
    // CPU and requests over the same seconds: those the sampler read (it may miss the first
    // or last partial second of a run).
    let sampled = run
        .timeline
        .iter()
        .filter_map(|r| r.server_cpu_pct.map(|c| (c, r.completed)));
    let (cpu_pct, requests, seconds) = sampled.fold((0.0, 0u64, 0u64), |(c, n, k), (rc, rn)| {
        (c + rc, n + rn, k + 1)
    });
    let cpu_s = cpu_pct / 100.0;
    if run.server.is_none() || requests == 0 || cpu_s <= 0.0 || seconds == 0 {
        return;
    }
    let demand_ms = 1000.0 * cpu_s / requests as f64;
    let per_core = 1000.0 / demand_ms;
    let max_rps = cores as f64 * per_core;
    // U = X·D over the same seconds as the CPU: the cores the service kept busy on average,
    // which the host's cores bound (a sample can read a little over a second's CPU).
    let busy_cores = (cpu_s / seconds as f64).min(cores as f64);
    let utilization = busy_cores / cores as f64;
    let next = if utilization >= 0.8 {
        "the CPU is the bottleneck: profile the service to see where it goes, or give it more \
         cores or replicas"
    } else {
        "the CPU was not the limit here; if throughput stopped growing, look for a worker cap, \
         a lock or I/O (`loadlab probe URL`)"
    };
    out.push(finding(
        "service_demand",
        format!(
            "each request took {demand_ms:.2} ms of server CPU ({cpu_s:.1} CPU-s over \
             {requests} requests): the service can serve at most ~{per_core:.0} req/s per core \
             it keeps busy (1000/D, seed 002's 1000/T), ~{max_rps:.0} req/s on all {cores} \
             core(s); it kept {busy_cores:.2} core(s) busy (utilization law U = X·D)"
        ),
        next,
        &[
            ("demand_ms", demand_ms),
            ("cpu_s", cpu_s),
            ("max_rps_per_core", per_core),
            ("predicted_max_rps", max_rps),
            ("busy_cores", busy_cores),
            ("utilization", utilization),
            ("cores", cores as f64),
        ],
    ));
}

/// CPU of a process, percent of one core, from which it counts as the busy tier.
const BUSY_PROCESS_PCT: f64 = 85.0;

/// Among several watched processes (tiers: balancer, replicas, consumers, store), the one
/// that wanted the most CPU (what it ran plus what it waited for on a shared machine), when
/// that was near a full core: by the utilization law it is the first to saturate as the load
/// grows.
fn busiest_process(s: &Summary, out: &mut Vec<Finding>) {
    let Some(server) = &s.server else { return };
    if server.processes.len() < 2 {
        return;
    }
    let wanted = |p: &loadlab_run::summary::ServerProcess| p.cpu_pct_avg + p.cpu_wait_pct_avg;
    let Some(top) = server
        .processes
        .iter()
        .max_by(|a, b| wanted(a).total_cmp(&wanted(b)))
    else {
        return;
    };
    if wanted(top) < BUSY_PROCESS_PCT {
        return;
    }
    let total: f64 = server.processes.iter().map(|p| p.cpu_pct_avg).sum();
    let waited = match top.cpu_wait_pct_avg {
        w if w >= 5.0 => format!(" and waited for one {w:.0} % of the time"),
        _ => String::new(),
    };
    out.push(finding(
        "busiest_process",
        format!(
            "{} (pid {}) was the busiest of the {} watched processes at {:.0} % of a core on \
             average{waited} ({:.0} % of all their CPU): its tier saturates first",
            top.name,
            top.pid,
            server.processes.len(),
            top.cpu_pct_avg,
            100.0 * top.cpu_pct_avg / total.max(1e-9)
        ),
        "scale that tier (more replicas, workers or consumers) or make it cheaper, then run \
         again to see which tier saturates next",
        &[
            ("cpu_pct_avg", top.cpu_pct_avg),
            ("cpu_wait_pct_avg", top.cpu_wait_pct_avg),
            ("pid", top.pid as f64),
        ],
    ));
}

/// Undelivered entries this many or more at the end of a run count as a backlog left behind.
const BACKLOG_LEFT: u64 = 10;

/// A watched stream whose consumer group fell behind: a backlog still growing at the end (the
/// consumers are the bottleneck), or one that built up and drained (they recovered).
fn queue_backlog(run: &RunData, out: &mut Vec<Finding>) {
    let Some(server) = &run.server else { return };
    for store in &server.stores {
        let mut names: Vec<&str> = Vec::new();
        for q in store.samples.iter().flat_map(|s| &s.streams) {
            if !names.contains(&q.stream.as_str()) {
                names.push(&q.stream);
            }
        }
        for name in names {
            let lags: Vec<(u64, u64)> = store
                .samples
                .iter()
                .filter_map(|s| {
                    let q = s.streams.iter().find(|q| q.stream == name)?;
                    Some((s.second, q.lag?))
                })
                .collect();
            let (Some(&(_, first)), Some(&(end_s, last))) = (lags.first(), lags.last()) else {
                continue;
            };
            let (max_s, max) = lags
                .iter()
                .copied()
                .max_by_key(|&(_, l)| l)
                .unwrap_or((0, 0));
            if last >= BACKLOG_LEFT && last > first {
                let growth =
                    (last - first) as f64 / (end_s.saturating_sub(lags[0].0)).max(1) as f64;
                out.push(finding(
                    "queue_backlog",
                    format!(
                        "the queue {name} on {} fell behind: {last} entries were still \
                         undelivered at the end, growing by ~{growth:.0} a second: its \
                         consumers are the bottleneck, not the web tier",
                        store.name
                    ),
                    "add consumers (--consumers) or make each one cheaper, and watch the \
                     consumers' CPU beside the stream's lag",
                    &[("lag_end", last as f64), ("lag_growth_per_s", growth)],
                ));
            } else if max >= BACKLOG_LEFT && last < BACKLOG_LEFT {
                out.push(finding(
                    "queue_backlog",
                    format!(
                        "the queue {name} on {} built a backlog of {max} undelivered entries \
                         (second {max_s}) and its consumers caught up by the end",
                        store.name
                    ),
                    "if a consumer stopped or restarted then, this is the backlog it recovered \
                     from; otherwise the consumers are close to their capacity",
                    &[("lag_max", max as f64), ("lag_end", last as f64)],
                ));
            }
        }
    }
}

/// The `/site` page views a run was answered 200 for, per page: from the requests named
/// `GET /site/PAGE…` (not their static resources), or from a single `/site/PAGE` target.
pub fn site_views(s: &Summary) -> BTreeMap<String, u64> {
    fn page(path: &str) -> Option<String> {
        let rest = path.split("/site/").nth(1)?;
        let page: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        (!page.is_empty()).then_some(page)
    }
    let mut views = BTreeMap::new();
    if s.requests_by_name.is_empty() {
        if let (Some(target), Some(ok)) = (s.targets.first(), s.status.get("200")) {
            if let Some(p) = page(target) {
                views.insert(p, *ok);
            }
        }
        return views;
    }
    for (name, r) in &s.requests_by_name {
        if name.ends_with(" static") {
            continue;
        }
        if let (Some(p), Some(ok)) = (page(name), r.status.get("200")) {
            *views.entry(p).or_insert(0) += ok;
        }
    }
    views
}

/// The visits application's books after a run: every page view answered 200 (`answered`)
/// against the views its consumers counted during the run (`counted`), once the queue drained
/// (`drained`, `None` if it did not within the wait). Requests still in flight when the run
/// stopped (`unfinished`) may have been counted without their answer being read, so a page
/// may count up to that many more than were answered, never fewer.
pub fn visits_reconciled(
    answered: &BTreeMap<String, u64>,
    counted: &BTreeMap<String, u64>,
    unfinished: u64,
    drained: Option<std::time::Duration>,
) -> Finding {
    let total_answered: u64 = answered.values().sum();
    let total_counted: u64 = counted.values().sum();
    let pages: std::collections::BTreeSet<&String> =
        answered.keys().chain(counted.keys()).collect();
    let pair = |p: &String| {
        (
            answered.get(p).copied().unwrap_or(0),
            counted.get(p).copied().unwrap_or(0),
        )
    };
    let lost: Vec<String> = pages
        .iter()
        .filter_map(|p| {
            let (a, c) = pair(p);
            (c < a).then(|| format!("{p}: {a} answered, {c} counted"))
        })
        .collect();
    let extra = total_counted.saturating_sub(total_answered);
    let waited = match drained {
        Some(d) => format!("the queue drained {:.1} s after the load", d.as_secs_f64()),
        None => "the queue had not drained when the wait ended".into(),
    };
    let books_hold = lost.is_empty() && extra <= unfinished && drained.is_some();
    let (message, next) = if books_hold {
        let in_flight = match extra {
            0 => String::new(),
            n => format!(
                "; {n} more were counted for requests still in flight when the run stopped, \
                 whose answers it did not wait for"
            ),
        };
        (
            format!(
                "visits: all {total_answered} page views answered 200 were counted, none twice \
                 ({waited}{in_flight})"
            ),
            "nothing lost: the queue and the consumers kept up with the web tier's answers",
        )
    } else {
        let why = if !lost.is_empty() {
            lost.join(", ")
        } else {
            format!(
                "{extra} more counted than answered, with only {unfinished} in flight at the end"
            )
        };
        (
            format!(
                "visits: {total_answered} page views answered 200 but {total_counted} counted \
                 ({waited}; {why})"
            ),
            "look at the consumers (did one die without a restart, or count a view twice?) \
             and the stream's backlog in stores.csv",
        )
    };
    finding(
        "visits_reconciled",
        message,
        next,
        &[
            ("answered", total_answered as f64),
            ("counted", total_counted as f64),
            ("unfinished", unfinished as f64),
            ("drained_s", drained.map_or(f64::NAN, |d| d.as_secs_f64())),
        ],
    )
}

/// For each spike phase (a `spike` shape's phases are named `… spike k`), how long after it
/// ended the median latency took to return near the base before it.
fn spike_recovery(run: &RunData, out: &mut Vec<Finding>) {
    let spans = run.plan.phase_spans();
    for (i, (name, start, length)) in spans.iter().enumerate() {
        let Some(length) = length else { continue };
        if !name.contains(" spike ") || i == 0 {
            continue;
        }
        let (_, base_start, base_len) = &spans[i - 1];
        let base_end = base_start + base_len.unwrap_or(0.0);
        let row_p50 = |from: f64, to: f64| -> Vec<(f64, f64)> {
            run.timeline
                .iter()
                .filter(|r| r.completed > 0)
                .filter(|r| r.second as f64 >= from && (r.second as f64) < to)
                .map(|r| (r.second as f64, r.p50_ms))
                .collect()
        };
        let base = median(
            row_p50(*base_start + 1.0, base_end)
                .iter()
                .map(|r| r.1)
                .collect(),
        );
        if base <= 0.0 {
            continue;
        }
        let end = start + length;
        let after = row_p50(end, f64::INFINITY);
        let back = after
            .iter()
            .find(|(_, p)| *p <= RECOVERED * base + RISING_MS)
            .map(|(sec, _)| sec - end);
        let message = match back {
            Some(0.0) => format!(
                "{name}: latency was back at the base ({base:.1} ms median) as soon as the spike ended"
            ),
            Some(t) => format!(
                "{name}: latency took {t:.0} s after the spike to return to the base ({base:.1} ms median)"
            ),
            None => format!(
                "{name}: latency did not return to the base ({base:.1} ms median) before the run ended"
            ),
        };
        let next = match back {
            Some(0.0) => "the service absorbed this spike: try a higher or longer one",
            Some(_) => {
                "a backlog took that long to drain: look at what queues in the service (worker \
                 pools, retries, connection pools) and how fast it scales"
            }
            None => {
                "the service did not recover: look for a backlog that never drains (retries, \
                 a stuck pool) in its logs and metrics"
            }
        };
        let mut values = vec![("base_p50_ms", base)];
        if let Some(t) = back {
            values.push(("recovery_s", t));
        }
        out.push(finding("spike_recovery", message, next, &values));
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::time::Duration;

    use loadlab_run::{
        ErrorKind, Interval, Plan, ProcessSample, ProcessSeries, RatePhase, ServerData, Stop,
        StoreSample, StoreSeries, StreamReading,
    };

    use super::*;

    /// One second: `completed` responses at `p50_ms`, `in_flight` left at its end.
    fn second(second: u64, completed: u64, p50_ms: f64, in_flight: u64) -> Interval {
        let mut iv = Interval::new(second);
        iv.in_flight = in_flight;
        for _ in 0..completed {
            iv.counts.record_status(200);
        }
        iv.latency
            .record_n((p50_ms * 1000.0) as u64, completed.max(1))
            .unwrap();
        iv
    }

    /// A run of these seconds under `model`, each offering `offered_per_s` arrivals.
    fn run(model: Model, mut seconds: Vec<Interval>, offered_per_s: u64) -> RunData {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        for iv in &mut seconds {
            iv.counts.offered = offered_per_s;
        }
        RunData::from_intervals(Plan::get(addr, "/x", model, Stop::default()), &seconds)
    }

    fn open(phases: Vec<RatePhase>) -> Model {
        Model::open_phases(phases, 1, 100)
    }

    fn kinds(f: &[Finding]) -> Vec<&str> {
        f.iter().map(|f| f.kind.as_str()).collect()
    }

    #[test]
    fn an_overloaded_open_run_is_saturated_with_a_queue_building() {
        let rows = (0..12)
            .map(|s| second(s, 60, 10.0 + 80.0 * s as f64, 5 + 20 * s))
            .collect();
        let r = run(
            open(vec![RatePhase::constant(
                "main",
                100.0,
                Some(Duration::from_secs(12)),
            )]),
            rows,
            100,
        );
        let s = Summary::from_run(&r);
        let f = findings(&r, &s, 2);
        assert_eq!(
            kinds(&f),
            vec!["saturation", "rising_latency", "climbing_in_flight"]
        );
        assert!(f.iter().all(|f| !f.next.is_empty()), "{f:?}");
        assert_eq!(f[0].values["achieved_rps"], 60.0);
        assert!(
            f[0].message.contains("60 req/s of the 100 offered (60 %)"),
            "{}",
            f[0].message
        );
        assert!(f[1].values["p50_last_ms"] > 4.0 * f[1].values["p50_first_ms"]);
    }

    #[test]
    fn a_steady_run_within_its_limits_has_nothing_to_say() {
        let rows = (0..10).map(|s| second(s, 1000, 20.0, 20)).collect();
        let r = run(
            open(vec![RatePhase::constant("main", 1000.0, None)]),
            rows,
            1000,
        );
        let s = Summary::from_run(&r);
        assert_eq!(kinds(&findings(&r, &s, 2)), Vec::<&str>::new());
        // Closed, every connection busy: the service set the pace, as it should.
        let rows = (0..10).map(|s| second(s, 500, 20.0, 10)).collect();
        let r = run(Model::closed(10, 1), rows, 0);
        let s = Summary::from_run(&r);
        assert_eq!(kinds(&findings(&r, &s, 2)), Vec::<&str>::new());
    }

    #[test]
    fn littles_law_speaks_only_of_idle_connections_or_a_cap_reached() {
        // 50 connections, 500 req/s × 20 ms = 10 in flight: 80 % of the time idle.
        let rows = (0..10).map(|s| second(s, 500, 20.0, 10)).collect();
        let r = run(Model::closed(50, 1), rows, 0);
        let s = Summary::from_run(&r);
        let f = findings(&r, &s, 2);
        assert_eq!(kinds(&f), vec!["littles_law"]);
        assert!((f[0].values["in_flight"] - 10.0).abs() < 0.2, "{:?}", f[0]);
        assert!(
            f[0].message.contains("80 % of the time"),
            "{}",
            f[0].message
        );
        // Open, 1000 req/s × 90 ms = 90 in flight of a cap of 100.
        let rows = (0..10).map(|s| second(s, 1000, 90.0, 90)).collect();
        let r = run(
            Model::open_phases(vec![RatePhase::constant("main", 1000.0, None)], 1, 100),
            rows,
            1000,
        );
        let s = Summary::from_run(&r);
        let f = findings(&r, &s, 2);
        assert_eq!(kinds(&f), vec!["littles_law"]);
        assert!(f[0].next.contains("--max-connections"), "{:?}", f[0]);
        // Over HTTP/2 with 10 streams a connection, 100 connections hold 1000: far from it.
        let mut h2 = r.clone();
        h2.plan.protocol = loadlab_run::Protocol::Http2 { streams: 10 };
        let s = Summary::from_run(&h2);
        assert!(findings(&h2, &s, 2).is_empty());
        // And 10 connections × 10 streams are 90 % used.
        h2.plan.model = Model::open_phases(vec![RatePhase::constant("main", 1000.0, None)], 1, 10);
        let s = Summary::from_run(&h2);
        let f = findings(&h2, &s, 2);
        assert!(
            f[0].message
                .contains("90 % of the cap of 10 connections × 10 streams"),
            "{}",
            f[0].message
        );
    }

    #[test]
    fn grpc_calls_failed_with_http_200_are_named_by_their_status() {
        let rows = (0..10)
            .map(|sec| {
                let mut iv = Interval::new(sec);
                for i in 0..100 {
                    let code = if i < 30 { 8 } else { 0 };
                    iv.counts
                        .record_grpc(200, loadlab_run::GrpcCode::from_number(code));
                }
                iv.latency.record_n(50, 100).unwrap();
                iv
            })
            .collect();
        let r = run(Model::closed(10, 1), rows, 0);
        let s = Summary::from_run(&r);
        let f = findings(&r, &s, 2);
        let errors = f
            .iter()
            .find(|f| f.kind == "errors")
            .expect("an errors finding");
        assert!(
            errors
                .message
                .contains("300 of 1000 requests failed (30.0 %): 300 gRPC RESOURCE_EXHAUSTED"),
            "{}",
            errors.message
        );
        assert!(errors.next.contains("shed load"), "{}", errors.next);
    }

    #[test]
    fn a_run_where_every_connection_was_refused_gets_only_its_errors() {
        let rows = (0..10)
            .map(|sec| {
                let mut iv = Interval::new(sec);
                for _ in 0..200 {
                    iv.counts.record_error(ErrorKind::ConnectRefused);
                }
                iv.latency.record_n(50, 200).unwrap();
                iv
            })
            .collect();
        let r = run(Model::closed(10, 1), rows, 0);
        let s = Summary::from_run(&r);
        let f = findings(&r, &s, 2);
        assert_eq!(kinds(&f), vec!["errors"]);
        assert!(
            f[0].message
                .contains("2000 of 2000 requests failed (100.0 %): 2000 connect refused"),
            "{}",
            f[0].message
        );
        assert!(f[0].next.contains("127.0.0.1:9"), "{}", f[0].next);
        // One failure in a thousand is not worth a line.
        let rows = (0..10)
            .map(|sec| {
                let mut iv = second(sec, 1000, 5.0, 5);
                if sec == 3 {
                    iv.counts.record_status(500);
                }
                iv
            })
            .collect();
        let r = run(Model::closed(5, 1), rows, 0);
        let s = Summary::from_run(&r);
        assert_eq!(kinds(&findings(&r, &s, 2)), Vec::<&str>::new());
    }

    #[test]
    fn server_cpu_gives_the_service_demand_and_its_capacity() {
        let rows = (0..10).map(|s| second(s, 1000, 1.0, 1)).collect();
        let mut r = run(
            open(vec![RatePhase::constant("main", 1000.0, None)]),
            rows,
            1000,
        );
        for row in &mut r.timeline {
            row.server_cpu_pct = Some(50.0);
        }
        r.server = Some(ServerData {
            host: Vec::new(),
            groups: Vec::new(),
            cores: None,
            processes: vec![ProcessSeries {
                pid: 1,
                name: "svc".into(),
                samples: vec![ProcessSample {
                    second: 0,
                    cpu_pct: 50.0,
                    cpu_wait_pct: 0.0,
                    rss_mb: 1.0,
                }],
            }],
            stores: Vec::new(),
        });
        let s = Summary::from_run(&r);
        let f = findings(&r, &s, 2);
        let d = f.iter().find(|f| f.kind == "service_demand").unwrap();
        // 5 CPU-s over 10,000 requests: 0.5 ms each; 2 cores serve at most 4,000 req/s.
        assert!((d.values["demand_ms"] - 0.5).abs() < 1e-9, "{d:?}");
        assert!((d.values["predicted_max_rps"] - 4000.0).abs() < 1e-6);
        assert!((d.values["max_rps_per_core"] - 2000.0).abs() < 1e-6);
        assert!((d.values["busy_cores"] - 0.5).abs() < 1e-9);
        assert!((d.values["utilization"] - 0.25).abs() < 1e-9);
    }

    #[test]
    fn busy_cores_come_from_the_seconds_the_cpu_was_sampled_and_never_exceed_the_host() {
        // Seed 003's short cell: the sampler read one second of two, which held fewer of the
        // requests than the run's average second; the whole run's rate times the demand read
        // 2.41 busy cores on a 2-core host while the processes used 1.26.
        let rows = (0..2).map(|s| second(s, 1000 * (s + 1), 1.0, 1)).collect();
        let mut r = run(
            open(vec![RatePhase::constant("main", 2000.0, None)]),
            rows,
            2000,
        );
        r.timeline[0].server_cpu_pct = Some(126.0);
        r.server = Some(ServerData {
            host: Vec::new(),
            groups: Vec::new(),
            cores: None,
            processes: vec![ProcessSeries {
                pid: 1,
                name: "svc".into(),
                samples: Vec::new(),
            }],
            stores: Vec::new(),
        });
        let s = Summary::from_run(&r);
        let d = findings(&r, &s, 2)
            .into_iter()
            .find(|f| f.kind == "service_demand")
            .unwrap();
        assert!((d.values["busy_cores"] - 1.26).abs() < 1e-9, "{d:?}");
        assert!(
            d.message.contains("kept 1.26 core(s) busy"),
            "{}",
            d.message
        );
        assert!(!d.next.contains("the CPU is the bottleneck"), "{}", d.next);
        r.timeline[0].server_cpu_pct = Some(260.0);
        let d = findings(&r, &s, 2)
            .into_iter()
            .find(|f| f.kind == "service_demand")
            .unwrap();
        assert!(d.values["busy_cores"] <= 2.0, "{d:?}");
    }

    fn process(pid: u32, name: &str, cpu_pct: f64) -> ProcessSeries {
        ProcessSeries {
            pid,
            name: name.into(),
            samples: vec![ProcessSample {
                second: 0,
                cpu_pct,
                cpu_wait_pct: 0.0,
                rss_mb: 1.0,
            }],
        }
    }

    /// A store whose stream `visits` read these lags, one a second.
    fn store_with_lags(lags: &[u64]) -> StoreSeries {
        StoreSeries {
            name: "redis 127.0.0.1:1".into(),
            samples: lags
                .iter()
                .enumerate()
                .map(|(i, &lag)| StoreSample {
                    second: i as u64,
                    commands_per_s: 100.0,
                    memory_mb: 1.0,
                    clients: 2,
                    streams: vec![StreamReading {
                        stream: "visits".into(),
                        length: 1000,
                        pending: 0,
                        lag: Some(lag),
                    }],
                })
                .collect(),
        }
    }

    #[test]
    fn the_busiest_of_several_processes_is_named_and_a_growing_queue_blamed_on_its_consumers() {
        let rows = (0..6).map(|s| second(s, 1000, 1.0, 1)).collect();
        let mut r = run(
            open(vec![RatePhase::constant("main", 1000.0, None)]),
            rows,
            1000,
        );
        r.server = Some(ServerData {
            host: Vec::new(),
            groups: Vec::new(),
            cores: None,
            processes: vec![process(1, "loadlab", 40.0), process(2, "consumer", 97.0)],
            stores: vec![store_with_lags(&[0, 50, 120, 200, 260, 330])],
        });
        let s = Summary::from_run(&r);
        let f = findings(&r, &s, 2);
        let busy = f.iter().find(|f| f.kind == "busiest_process").unwrap();
        assert!(
            busy.message.starts_with("consumer (pid 2)"),
            "{}",
            busy.message
        );
        let q = f.iter().find(|f| f.kind == "queue_backlog").unwrap();
        assert!(
            q.message.contains("330 entries were still undelivered"),
            "{}",
            q.message
        );
        assert_eq!(q.values["lag_growth_per_s"], 66.0);

        // A backlog that drained is what a restarted consumer recovered from.
        r.server = Some(ServerData {
            host: Vec::new(),
            groups: Vec::new(),
            cores: None,
            processes: vec![process(1, "loadlab", 40.0), process(2, "consumer", 30.0)],
            stores: vec![store_with_lags(&[0, 0, 400, 90, 0, 0])],
        });
        let s = Summary::from_run(&r);
        let f = findings(&r, &s, 2);
        assert!(f.iter().all(|f| f.kind != "busiest_process"), "{f:?}");
        let q = f.iter().find(|f| f.kind == "queue_backlog").unwrap();
        assert!(q.message.contains("backlog of 400") && q.message.contains("caught up"));

        // A tier starved of CPU by other work wanted a core even though it ran 60 % of one.
        let mut starved = process(2, "consumer", 60.0);
        starved.samples[0].cpu_wait_pct = 35.0;
        r.server = Some(ServerData {
            host: Vec::new(),
            groups: Vec::new(),
            cores: None,
            processes: vec![process(1, "loadlab", 40.0), starved],
            stores: Vec::new(),
        });
        let s = Summary::from_run(&r);
        let f = findings(&r, &s, 2);
        let busy = f.iter().find(|f| f.kind == "busiest_process").unwrap();
        assert!(
            busy.message
                .contains("60 % of a core on average and waited for one 35 %"),
            "{}",
            busy.message
        );
    }

    #[test]
    fn the_visits_books_compare_page_views_answered_with_views_counted() {
        let mut s = Summary::default();
        for (name, ok) in [
            ("GET /site/home", 7u64),
            ("GET /site/home static", 28),
            ("GET /site/news?work_ms=20", 3),
        ] {
            let mut r = loadlab_run::summary::NamedRequests::default();
            r.status.insert("200".into(), ok);
            s.requests_by_name.insert(name.into(), r);
        }
        let answered = site_views(&s);
        assert_eq!(
            answered,
            BTreeMap::from([("home".into(), 7), ("news".into(), 3)])
        );
        let drained = Some(Duration::from_millis(300));
        let ok = visits_reconciled(&answered, &answered.clone(), 0, drained);
        assert!(
            ok.message.starts_with("visits: all 10 page views"),
            "{}",
            ok.message
        );
        let short = BTreeMap::from([("home".into(), 6), ("news".into(), 3)]);
        let lost = visits_reconciled(&answered, &short, 0, drained);
        assert!(
            lost.message.contains("home: 7 answered, 6 counted"),
            "{}",
            lost.message
        );
        // Two more counted than answered: fine with two in flight at the end, not with one.
        let more = BTreeMap::from([("home".into(), 9), ("news".into(), 3)]);
        let ok = visits_reconciled(&answered, &more, 2, drained);
        assert!(
            ok.message
                .contains("2 more were counted for requests still in flight"),
            "{}",
            ok.message
        );
        let twice = visits_reconciled(&answered, &more, 1, drained);
        assert!(
            twice.message.contains("2 more counted than answered"),
            "{}",
            twice.message
        );
        let stuck = visits_reconciled(&answered, &answered.clone(), 0, None);
        assert!(
            stuck.message.contains("had not drained"),
            "{}",
            stuck.message
        );
    }

    #[test]
    fn a_spike_reports_how_long_latency_took_to_come_back() {
        let s10 = Some(Duration::from_secs(10));
        let s5 = Some(Duration::from_secs(5));
        let phases = vec![
            RatePhase::constant("t base 1", 100.0, s10),
            RatePhase::constant("t spike 1", 1000.0, s5),
            RatePhase::constant("t base 2", 100.0, s10),
        ];
        // Base 10 ms; 400 ms in the spike; 300, 200, 100 then 11 ms after it.
        let mut p50 = vec![10.0; 10];
        p50.extend([400.0; 5]);
        p50.extend([
            300.0, 200.0, 100.0, 11.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0,
        ]);
        let rows = p50
            .iter()
            .enumerate()
            .map(|(s, p)| second(s as u64, 100, *p, 1))
            .collect();
        let r = run(open(phases), rows, 100);
        let s = Summary::from_run(&r);
        let f = findings(&r, &s, 2);
        let spike = f.iter().find(|f| f.kind == "spike_recovery").unwrap();
        assert_eq!(spike.values["recovery_s"], 3.0, "{spike:?}");
        assert!(spike.message.contains("took 3 s"));
    }
}
