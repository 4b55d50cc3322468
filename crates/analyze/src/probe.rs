//! The probe's logic, as pure functions of the steps run so far: which concurrency to try
//! next (or why to stop), and what the steps say about the service — asynchronous, synchronous
//! with K workers, or CPU-bound — as seed 000 found by hand with `ab -c 1..4`.
//!
//! The reasoning: in a closed loop with c clients and no think time, throughput is
//! `X = c / R` (Little's law). A service that takes S per request on K workers answers with
//! `R ≈ S` while `c ≤ K` (X grows as c/S) and queues past that: X stays at K/S and R grows as
//! cS/K — one request in K+1 waits a whole S, so p99 doubles at c = K+1. Hence
//! `K ≈ X_max · S`. An asynchronous service keeps R ≈ S and X ≈ c/S as far as the probe goes.

use std::time::Duration;

use serde::Serialize;

use crate::usl::Usl;

/// The concurrencies the probe climbs: every count up to 12 (worker counts are small and must
/// be exact), then about 1.3× a step.
pub const LADDER: &[usize] = &[
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 20, 24, 32, 40, 48, 64,
];

/// What one step measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeStep {
    /// Connections kept busy.
    pub concurrency: usize,
    /// Completed requests per second.
    pub throughput_rps: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
    /// Mean latency, ms.
    pub mean_ms: f64,
    /// Requests completed.
    pub requests: u64,
    /// Percent of completed requests that failed.
    pub error_pct: f64,
    /// CPU of the watched server during the step, percent of one core (summed over processes).
    pub server_cpu_pct: Option<f64>,
}

/// Limits of a probe.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeLimits {
    /// Highest concurrency tried.
    pub max_concurrency: usize,
    /// Time the whole probe may take.
    pub max_time: Duration,
    /// Stop when a step's median latency passes this.
    pub max_latency_ms: f64,
    /// Stop when a step's errors pass this percentage.
    pub max_error_pct: f64,
}

impl Default for ProbeLimits {
    fn default() -> Self {
        ProbeLimits {
            max_concurrency: 64,
            max_time: Duration::from_secs(60),
            max_latency_ms: 10_000.0,
            max_error_pct: 1.0,
        }
    }
}

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Run this concurrency for this long.
    Run {
        /// Connections.
        concurrency: usize,
        /// Length of the step.
        duration: Duration,
    },
    /// Stop, and why.
    Stop(String),
}

/// Shortest and longest step.
const MIN_STEP: Duration = Duration::from_millis(1000);
const MAX_STEP: Duration = Duration::from_secs(8);
/// Latency cycles a step should hold, so each client sends several requests.
const CYCLES: f64 = 5.0;
/// Throughput gain under which a step counts as no gain.
const FLAT: f64 = 1.10;

/// The next step, given the steps so far and the time they took.
pub fn next_step(steps: &[ProbeStep], elapsed: Duration, limits: &ProbeLimits) -> Next {
    let Some(last) = steps.last() else {
        return Next::Run {
            concurrency: 1,
            duration: MIN_STEP,
        };
    };
    if last.error_pct > limits.max_error_pct {
        return Next::Stop(format!(
            "{:.1} % of the requests failed at concurrency {}",
            last.error_pct, last.concurrency
        ));
    }
    if last.requests == 0 {
        return Next::Stop(format!(
            "no request completed at concurrency {} within its step",
            last.concurrency
        ));
    }
    if last.p50_ms > limits.max_latency_ms {
        return Next::Stop(format!(
            "the median latency passed {:.0} ms at concurrency {}",
            limits.max_latency_ms, last.concurrency
        ));
    }
    if plateaued(steps) {
        return Next::Stop("throughput stopped growing for two steps".into());
    }
    // Past the ladder's end, about 1.3× a step.
    let next = LADDER
        .iter()
        .copied()
        .find(|c| *c > last.concurrency)
        .unwrap_or_else(|| (last.concurrency as f64 * 1.3).ceil() as usize);
    let Some(next) = Some(next).filter(|c| *c <= limits.max_concurrency) else {
        return Next::Stop(format!(
            "reached the probe's bound of {} connections",
            limits.max_concurrency
        ));
    };
    // Expect latency to grow with concurrency at worst in proportion.
    let expected_ms = last.mean_ms * next as f64 / last.concurrency as f64;
    let duration = Duration::from_secs_f64(CYCLES * expected_ms / 1000.0).clamp(MIN_STEP, MAX_STEP);
    if elapsed + duration > limits.max_time {
        return Next::Stop(format!(
            "the probe's time ({:.0} s) is up",
            limits.max_time.as_secs_f64()
        ));
    }
    Next::Run {
        concurrency: next,
        duration,
    }
}

/// True when the last two steps gained less than 10 % throughput over the best before them.
fn plateaued(steps: &[ProbeStep]) -> bool {
    if steps.len() < 3 {
        return false;
    }
    let (before, last_two) = steps.split_at(steps.len() - 2);
    let best = before.iter().map(|s| s.throughput_rps).fold(0.0, f64::max);
    last_two.iter().all(|s| s.throughput_rps < FLAT * best)
}

/// How the service behaves under concurrency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Latency stays flat as concurrency grows: no worker limit found.
    Async,
    /// A fixed number of workers; requests past them queue.
    Sync,
    /// Throughput plateaus with the server's CPU saturated.
    Cpu,
}

/// The probe's conclusion, with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// `async`, `sync` or `cpu`.
    pub kind: Kind,
    /// Workers (requests served at once), for `sync` and `cpu`.
    pub workers: Option<usize>,
    /// Service time at minimum load (median latency with one connection), ms.
    pub service_time_ms: f64,
    /// Highest throughput seen, requests per second.
    pub max_throughput_rps: f64,
    /// The sentence that explains the verdict with its numbers.
    pub explanation: String,
    /// The Universal Scalability Law fitted to the steps, when there are enough.
    pub usl: Option<UslFit>,
}

/// The USL fitted to a probe, with its predicted peak.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UslFit {
    /// The law's parameters.
    #[serde(flatten)]
    pub law: Usl,
    /// Concurrency where throughput peaks (none when it only flattens).
    pub peak_concurrency: Option<f64>,
    /// Throughput at the peak (or the law's limit as concurrency grows), req/s.
    pub peak_throughput_rps: f64,
}

/// Server CPU over which a plateau counts as CPU-bound, percent of one core per worker.
const CPU_SATURATED_PCT: f64 = 80.0;
/// Share of perfect scaling (c/S) under which a step is no longer scaling.
const SCALING: f64 = 0.8;

/// What the steps say. `None` without a step at concurrency 1.
pub fn verdict(steps: &[ProbeStep]) -> Option<Verdict> {
    let first = steps
        .iter()
        .find(|s| s.concurrency == 1 && s.requests > 0)?;
    let s_ms = first.p50_ms.max(1e-3);
    let ideal = |c: usize| c as f64 * 1000.0 / s_ms;
    let best = steps
        .iter()
        .filter(|s| s.requests > 0)
        .max_by(|a, b| a.throughput_rps.total_cmp(&b.throughput_rps))?;
    let x_max = best.throughput_rps;
    let last = steps.iter().rev().find(|s| s.requests > 0)?;
    let usl = Usl::fit(
        &steps
            .iter()
            .filter(|s| s.requests > 0)
            .map(|s| (s.concurrency as f64, s.throughput_rps))
            .collect::<Vec<_>>(),
    )
    .map(|law| {
        let peak = law.peak_concurrency();
        let peak_x = match peak {
            Some(n) => law.throughput(n),
            None if law.sigma > 0.0 => law.lambda / law.sigma,
            None => f64::INFINITY,
        };
        UslFit {
            law,
            peak_concurrency: peak,
            peak_throughput_rps: peak_x,
        }
    });
    let scaling = last.throughput_rps / ideal(last.concurrency);
    // Still growing at the end: the last step gained at least half of what its extra
    // connections would give a service with no limit.
    let growing = match steps.iter().rev().filter(|s| s.requests > 0).nth(1) {
        Some(prev) => {
            let more = last.concurrency as f64 / prev.concurrency as f64;
            last.throughput_rps >= prev.throughput_rps * (1.0 + 0.5 * (more - 1.0))
        }
        None => true,
    };
    if growing && scaling >= SCALING && last.p50_ms <= 1.5 * s_ms {
        return Some(Verdict {
            kind: Kind::Async,
            workers: None,
            service_time_ms: s_ms,
            max_throughput_rps: x_max,
            explanation: format!(
                "asynchronous: at {} connections the median latency is still {:.1} ms \
                 (S = {s_ms:.1} ms alone) and throughput {:.0} req/s is {:.0} % of {} × 1/S; \
                 no worker limit up to {} connections",
                last.concurrency,
                last.p50_ms,
                last.throughput_rps,
                100.0 * scaling,
                last.concurrency,
                last.concurrency
            ),
            usl,
        });
    }
    let k = workers(steps, x_max * s_ms / 1000.0);
    let plateau_cpu = steps
        .iter()
        .filter(|s| s.concurrency > k)
        .filter_map(|s| s.server_cpu_pct)
        .fold(None, |m: Option<f64>, c| Some(m.map_or(c, |m| m.max(c))));
    let cpu = plateau_cpu.is_some_and(|c| c >= CPU_SATURATED_PCT * k as f64);
    let after = steps.iter().find(|s| s.concurrency == k + 1);
    let doubling = after.map_or(String::new(), |a| {
        format!(
            "; at {} connections p99 is {:.1} ms ({:.1}× S)",
            a.concurrency,
            a.p99_ms,
            a.p99_ms / s_ms
        )
    });
    let (kind, what) = if cpu {
        (
            Kind::Cpu,
            format!(
                "CPU-bound: the server's CPU reached {:.0} % while throughput stayed at",
                plateau_cpu.unwrap_or(0.0)
            ),
        )
    } else {
        (
            Kind::Sync,
            format!("synchronous with {k} worker(s): throughput plateaus at"),
        )
    };
    Some(Verdict {
        kind,
        workers: Some(k),
        service_time_ms: s_ms,
        max_throughput_rps: x_max,
        explanation: format!(
            "{what} {x_max:.1} req/s ≈ {k} / S (S = {s_ms:.1} ms), and latency grows with \
             each connection past {k}{doubling}"
        ),
        usl,
    })
}

/// p99 over the service time alone (the median at one connection) that marks the first
/// queued request: it waits a whole service time, so it takes about twice as long.
const P99_JUMP: f64 = 1.6;

/// The worker count. The first step whose p99 jumps marks the first queued request (it waits
/// a whole service time), so the workers are at least the concurrency before it and fewer than
/// its own: exact on the ladder's consecutive counts, where the throughput estimate still
/// carries the warm-up of short steps. Between farther steps, and without a jump, `X_max · S`
/// rounded (kept within the jump's range). A jump before throughput nears its plateau is noise.
fn workers(steps: &[ProbeStep], from_throughput: f64) -> usize {
    let by_x = (from_throughput.round() as usize).max(1);
    let Some(alone) = steps.iter().find(|s| s.concurrency == 1) else {
        return by_x;
    };
    let x_max = steps.iter().map(|s| s.throughput_rps).fold(0.0, f64::max);
    // A jump counts only once throughput is near its plateau: earlier p99 noise is no queue.
    let jump = steps
        .windows(2)
        .find(|w| w[1].p99_ms >= P99_JUMP * alone.p50_ms && w[0].throughput_rps >= 0.8 * x_max);
    match jump {
        Some(w) => by_x.clamp(w[0].concurrency, w[1].concurrency - 1),
        None => by_x,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The steps a service with `workers` workers (None: unlimited) of `s_ms` would give, with
    /// a CPU figure per busy worker.
    fn synthetic(
        workers: Option<usize>,
        s_ms: f64,
        cpu_per_worker: f64,
        upto: usize,
    ) -> Vec<ProbeStep> {
        LADDER
            .iter()
            .take_while(|c| **c <= upto)
            .map(|&c| {
                let k = workers.unwrap_or(usize::MAX).min(c) as f64;
                let x = k * 1000.0 / s_ms;
                let mean = c as f64 * 1000.0 / x;
                let queued = c as f64 > k;
                ProbeStep {
                    concurrency: c,
                    throughput_rps: x,
                    p50_ms: if queued { mean.max(s_ms) } else { s_ms },
                    p99_ms: if queued {
                        2.0 * s_ms * (c as f64 / k).ceil()
                    } else {
                        s_ms * 1.05
                    },
                    mean_ms: mean,
                    requests: 100,
                    error_pct: 0.0,
                    server_cpu_pct: Some(cpu_per_worker * k),
                }
            })
            .collect()
    }

    #[test]
    fn a_synchronous_service_gives_its_workers_and_service_time() {
        for (k, s) in [(1, 200.0), (3, 905.0), (4, 50.0), (8, 20.0)] {
            let steps = synthetic(Some(k), s, 1.0, k + 2);
            let v = verdict(&steps).unwrap();
            assert_eq!(v.kind, Kind::Sync, "{v:?}");
            assert_eq!(v.workers, Some(k), "{v:?}");
            assert!((v.service_time_ms - s).abs() < 1e-6);
            assert!((v.max_throughput_rps - k as f64 * 1000.0 / s).abs() < 1e-6);
        }
    }

    #[test]
    fn the_p99_jump_corrects_a_throughput_that_short_steps_overestimate() {
        // Short steps leave out the queue's build-up: throughput reads 8 % high, X·S = 8.6.
        let mut steps = synthetic(Some(8), 20.0, 1.0, 12);
        for s in &mut steps {
            s.throughput_rps *= 1.08;
        }
        let v = verdict(&steps).unwrap();
        assert_eq!(v.workers, Some(8), "{v:?}");
        // A p99 outlier at 2 connections, far from the plateau, is noise.
        steps[1].p99_ms *= 3.0;
        assert_eq!(verdict(&steps).unwrap().workers, Some(8));
    }

    #[test]
    fn an_asynchronous_service_has_no_worker_limit() {
        let v = verdict(&synthetic(None, 1100.0, 0.0, 16)).unwrap();
        assert_eq!(v.kind, Kind::Async);
        assert_eq!(v.workers, None);
        assert!(v.explanation.contains("no worker limit up to 16"));
    }

    #[test]
    fn a_saturated_cpu_makes_a_plateau_cpu_bound() {
        let v = verdict(&synthetic(Some(1), 100.0, 99.0, 4)).unwrap();
        assert_eq!((v.kind, v.workers), (Kind::Cpu, Some(1)));
        let v = verdict(&synthetic(Some(2), 100.0, 3.0, 4)).unwrap();
        assert_eq!((v.kind, v.workers), (Kind::Sync, Some(2)));
    }

    #[test]
    fn the_probe_climbs_until_throughput_stops_growing() {
        let limits = ProbeLimits::default();
        let all = synthetic(Some(3), 100.0, 1.0, 64);
        let mut steps: Vec<ProbeStep> = Vec::new();
        let mut ran = Vec::new();
        loop {
            match next_step(&steps, Duration::ZERO, &limits) {
                Next::Run {
                    concurrency,
                    duration,
                } => {
                    assert!(duration >= MIN_STEP && duration <= MAX_STEP);
                    ran.push(concurrency);
                    steps.push(
                        all.iter()
                            .find(|s| s.concurrency == concurrency)
                            .unwrap()
                            .clone(),
                    );
                }
                Next::Stop(why) => {
                    assert!(why.contains("stopped growing"), "{why}");
                    break;
                }
            }
        }
        assert_eq!(ran, vec![1, 2, 3, 4, 5]);
        assert_eq!(
            LADDER.windows(2).take_while(|w| w[1] == w[0] + 1).count(),
            11
        );
    }

    #[test]
    fn errors_latency_and_time_stop_the_probe() {
        let limits = ProbeLimits {
            max_time: Duration::from_secs(10),
            ..ProbeLimits::default()
        };
        let mut steps = synthetic(None, 100.0, 0.0, 2);
        steps[1].error_pct = 5.0;
        assert!(
            matches!(next_step(&steps, Duration::ZERO, &limits), Next::Stop(w) if w.contains("failed"))
        );
        steps[1].error_pct = 0.0;
        steps[1].p50_ms = 20_000.0;
        assert!(
            matches!(next_step(&steps, Duration::ZERO, &limits), Next::Stop(w) if w.contains("median"))
        );
        steps[1].p50_ms = 100.0;
        assert!(matches!(
            next_step(&steps, Duration::from_millis(9500), &limits),
            Next::Stop(w) if w.contains("time")
        ));
        let async_steps = synthetic(None, 1.0, 0.0, 64);
        assert!(matches!(
            next_step(&async_steps, Duration::ZERO, &limits),
            Next::Stop(w) if w.contains("bound of 64")
        ));
        let wider = ProbeLimits {
            max_concurrency: 100,
            ..limits.clone()
        };
        assert!(matches!(
            next_step(&async_steps, Duration::ZERO, &wider),
            Next::Run {
                concurrency: 84,
                ..
            }
        ));
    }
}
