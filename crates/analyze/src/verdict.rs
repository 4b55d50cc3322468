//! An experiment's verdicts: for each factor it varies (the topology, or a pair of workloads
//! named with `compare:`), one ratio per measure that means something for the cells' model —
//! the breaking point of capacity cells, the throughput of closed-model cells, latency
//! percentiles of open-model cells under their capacity (their throughput is the offered rate)
//! — with a 95 % interval over the rounds, `differs` only when the interval leaves out 1, and
//! why each side performed as it did.
//!
//! The interval is Student's t on the logarithms of the per-round ratios (the rounds run
//! interleaved, so round r of each side shared the machine's state). A percentile bootstrap
//! over so few rounds is too narrow: with 3 rounds its 95 % interval is the lowest to the
//! highest ratio, which leaves out 1 a quarter of the time when nothing differs.

pub use loadlab_run::lab::judged::{CellResult, Factor, Limit, Measured, Verdict};
use loadlab_run::Summary;

use crate::findings::SATURATED;

/// Share of the host's cores the generator and the watched processes used together over which
/// the host, not the topology, capped the result.
const HOST_BUSY: f64 = 0.9;
/// Share of responses with status 429 worth naming as a limit.
const RATE_LIMITED: f64 = 0.01;
/// Share of failed requests worth naming.
const FAILING: f64 = 0.01;
/// Other processes' share of the host's CPU worth naming in a verdict, percent of one core.
const OTHERS_WORTH_SAYING: f64 = 5.0;
/// A budgeted group using this much of its CPU quota counts as CPU-bound at its budget (a
/// capacity cell keeps the highest rate that met its objective, a step under saturation).
const AT_QUOTA_PCT: f64 = 85.0;
/// A process using this much of one core (used plus waited) counts as CPU-bound.
const BUSY_PROCESS_PCT: f64 = 85.0;

/// True when the service, not the offered load, set the throughput: a breaking point was
/// reached, a closed model kept every connection busy, or an open model fell behind its
/// offered rate.
pub fn saturated(m: &Measured) -> bool {
    match m {
        Measured::Capacity { .. } | Measured::Closed { .. } => true,
        // An asynchronous service showed no limit: the probe's top is its own bound.
        Measured::Probe { behaviour, .. } => *behaviour != crate::probe::Kind::Async,
        Measured::Open {
            offered_rps,
            ok_rps,
            ..
        } => *ok_rps < SATURATED * offered_rps,
    }
}

/// The verdicts of an experiment's cells: every topology against the first for each
/// workload, and each `compare` pair (baseline, variant) on each topology. Cells left out, or
/// missing a round on one side, do not count; a comparison with no round left gives none.
/// Every verdict of an experiment: each topology against its baseline (`baselines`: (variant,
/// baseline) topology names; every topology against the first when empty), workload by
/// workload, and each workload pair `(baseline, variant)` on every topology.
pub fn verdicts(
    cells: &[CellResult],
    baselines: &[(String, String)],
    pairs: &[(String, String)],
) -> Vec<Verdict> {
    let mut topologies: Vec<&str> = Vec::new();
    let mut workloads: Vec<&str> = Vec::new();
    for c in cells {
        if !topologies.contains(&c.topology.as_str()) {
            topologies.push(&c.topology);
        }
        if !workloads.contains(&c.workload.as_str()) {
            workloads.push(&c.workload);
        }
    }
    let mut out = Vec::new();
    let against: Vec<(&str, &str)> = if baselines.is_empty() {
        match topologies.split_first() {
            Some((first, others)) => others.iter().map(|t| (*t, *first)).collect(),
            None => Vec::new(),
        }
    } else {
        baselines
            .iter()
            .map(|(v, b)| (v.as_str(), b.as_str()))
            .collect()
    };
    for w in &workloads {
        for (t, first) in &against {
            let base = side(cells, first, w);
            let var = side(cells, t, w);
            out.extend(compare(
                Factor::Topology,
                (first, &base),
                (t, &var),
                w,
                None,
            ));
        }
    }
    for (a, b) in pairs {
        for t in &topologies {
            let base = side(cells, t, a);
            let var = side(cells, t, b);
            out.extend(compare(Factor::Workload, (a, &base), (b, &var), a, Some(t)));
        }
    }
    out
}

/// The cells of `topology` × `workload` that count, by round.
fn side<'a>(cells: &'a [CellResult], topology: &str, workload: &str) -> Vec<&'a CellResult> {
    cells
        .iter()
        .filter(|c| c.topology == topology && c.workload == workload && c.excluded.is_none())
        .collect()
}

/// The measures both sides' cells support, with each cell's value of it.
fn measures(base: &[&CellResult], var: &[&CellResult]) -> Vec<(&'static str, Vec<(f64, f64)>)> {
    let rounds: Vec<(&CellResult, &CellResult)> = base
        .iter()
        .filter_map(|b| var.iter().find(|v| v.round == b.round).map(|v| (*b, *v)))
        .collect();
    let both: Vec<&CellResult> = rounds.iter().flat_map(|(b, v)| [*b, *v]).collect();
    let Some((plan, _)) = measures_of(&both) else {
        return Vec::new();
    };
    let usable = |(b, v): &(f64, f64)| *b > 0.0 && *v > 0.0 && b.is_finite() && v.is_finite();
    let mut out: Vec<(&'static str, Vec<(f64, f64)>)> = plan
        .into_iter()
        .map(|(name, read)| {
            let values = rounds
                .iter()
                .filter_map(|(b, v)| Some((read(&b.measured)?, read(&v.measured)?)))
                .filter(usable)
                .collect();
            (name, values)
        })
        .collect();
    // Autoscaled topologies on both sides: what each paid for, beside what its load got.
    let scaled: Option<Vec<(f64, f64)>> = rounds
        .iter()
        .map(|(b, v)| Some((b.autoscale?.instance_seconds, v.autoscale?.instance_seconds)))
        .collect();
    if let Some(values) = scaled.filter(|v| !v.is_empty()) {
        out.push((
            "instance_seconds",
            values.into_iter().filter(usable).collect(),
        ));
    }
    out
}

/// What an autoscaled side's cells failed and held, over its rounds, in words: `None` for a
/// side that was not autoscaled.
fn scaled_words(name: &str, cells: &[&CellResult]) -> Option<String> {
    let costs: Vec<_> = cells.iter().filter_map(|c| c.autoscale).collect();
    if costs.is_empty() {
        return None;
    }
    let sum =
        |f: fn(&loadlab_run::lab::judged::ScaledCell) -> u64| -> u64 { costs.iter().map(f).sum() };
    let (requests, failed) = (sum(|c| c.requests), sum(|c| c.failed));
    let share = 100.0 * failed as f64 / requests.max(1) as f64;
    Some(format!(
        "{name}: {failed} of {requests} requests failed ({share:.1} %), {} waited for an \
         instance and {} got 429 at the balancer",
        sum(|c| c.waited),
        sum(|c| c.refused)
    ))
}

/// How a figure is read from what a cell measured (`None` when the cell has no such figure).
pub type Reading = fn(&Measured) -> Option<f64>;

/// The measures that mean something for `cells` (of one kind; `None` without cells or with
/// mixed kinds), in the verdicts' order, and which of them leads (the one a chart shows):
/// the breaking point of searches; the throughput and p99 of closed models and of open ones
/// some cell fell behind; the median and p99 of an open load every cell kept up with (its
/// offered rate is its throughput), led by the p99; a probe's top throughput only where every
/// cell hit a limit (an asynchronous service's top is the probe's own bound), and its service
/// time.
fn measures_of(cells: &[&CellResult]) -> Option<(Vec<(&'static str, Reading)>, usize)> {
    let first = &cells.first()?.measured;
    let same = cells
        .iter()
        .all(|c| std::mem::discriminant(&c.measured) == std::mem::discriminant(first));
    if !same {
        return None;
    }
    let breaking_point: Reading = |m| match m {
        Measured::Capacity { breaking_point_rps } => *breaking_point_rps,
        _ => None,
    };
    Some(match first {
        Measured::Capacity { .. } => (vec![("breaking_point", breaking_point)], 0),
        Measured::Closed { .. } => (vec![("throughput", ok_rps), ("latency_p99", p99)], 0),
        Measured::Probe { .. } if cells.iter().all(|c| saturated(&c.measured)) => (
            vec![
                ("max_throughput", probe_max),
                ("service_time", probe_service_time),
            ],
            0,
        ),
        Measured::Probe { .. } => (vec![("service_time", probe_service_time)], 0),
        Measured::Open { .. } if cells.iter().any(|c| saturated(&c.measured)) => {
            (vec![("throughput", ok_rps), ("latency_p99", p99)], 0)
        }
        Measured::Open { .. } => (vec![("latency_p50", p50), ("latency_p99", p99)], 1),
    })
}

/// The figure that says most about cells of one workload (the measure the verdicts judge it
/// by that a chart shows): its name, as the verdicts' `measure`, and how to read it; `None`
/// without cells or with mixed kinds.
pub fn lead_measure(cells: &[&CellResult]) -> Option<(&'static str, Reading)> {
    let (plan, lead) = measures_of(cells)?;
    plan.get(lead).copied()
}

fn probe_max(m: &Measured) -> Option<f64> {
    match m {
        Measured::Probe {
            max_throughput_rps, ..
        } => Some(*max_throughput_rps),
        _ => None,
    }
}

fn probe_service_time(m: &Measured) -> Option<f64> {
    match m {
        Measured::Probe {
            service_time_ms, ..
        } => Some(*service_time_ms),
        _ => None,
    }
}

fn ok_rps(m: &Measured) -> Option<f64> {
    match m {
        Measured::Closed { ok_rps, .. } | Measured::Open { ok_rps, .. } => Some(*ok_rps),
        Measured::Capacity { .. } | Measured::Probe { .. } => None,
    }
}

fn p50(m: &Measured) -> Option<f64> {
    match m {
        Measured::Closed { p50_ms, .. } | Measured::Open { p50_ms, .. } => Some(*p50_ms),
        Measured::Capacity { .. } | Measured::Probe { .. } => None,
    }
}

fn p99(m: &Measured) -> Option<f64> {
    match m {
        Measured::Closed { p99_ms, .. } | Measured::Open { p99_ms, .. } => Some(*p99_ms),
        Measured::Capacity { .. } | Measured::Probe { .. } => None,
    }
}

/// The verdicts of one comparison, one per measure with at least one round on both sides.
fn compare(
    factor: Factor,
    (base_name, base): (&str, &[&CellResult]),
    (var_name, var): (&str, &[&CellResult]),
    workload: &str,
    topology: Option<&str>,
) -> Vec<Verdict> {
    let mut out = Vec::new();
    for (measure, pairs) in measures(base, var) {
        let ratios: Vec<f64> = pairs.iter().map(|(b, v)| v / b).collect();
        let Some(interval) = Interval::of_ratios(&ratios) else {
            continue;
        };
        let mut why = describe(measure, base_name, var_name, &interval);
        let higher_is_better =
            matches!(measure, "breaking_point" | "throughput" | "max_throughput");
        let scaling = match factor {
            Factor::Topology if higher_is_better => scaling(base, var, &interval),
            _ => None,
        };
        if let Some(words) = &scaling {
            why.push_str(&format!("; {words}"));
        }
        if measure == "instance_seconds" {
            for (name, cells) in [(base_name, base), (var_name, var)] {
                if let Some(words) = scaled_words(name, cells) {
                    why.push_str(&format!("; {words}"));
                }
            }
        }
        let mut limited = Vec::new();
        for (name, cells) in [(base_name, base), (var_name, var)] {
            let limits = limits_of(cells);
            if !limits.is_empty() {
                why.push_str(&format!("; {name}: {}", limits.join(", ")));
                limited.push((name.to_string(), limits));
            }
        }
        out.push(Verdict {
            factor: factor.clone(),
            measure: measure.into(),
            baseline: base_name.into(),
            variant: var_name.into(),
            workload: workload.into(),
            topology: topology.map(String::from),
            ratio: interval.ratio,
            ci_low: interval.low,
            ci_high: interval.high,
            rounds: ratios.len(),
            differs: interval.differs(),
            why,
            scaling,
            limited,
        });
    }
    out
}

/// A ratio with its 95 % interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// The geometric mean of the ratios.
    pub ratio: f64,
    /// Lower end.
    pub low: f64,
    /// Upper end.
    pub high: f64,
    /// Ratios it was made from.
    pub n: usize,
}

impl Interval {
    /// The geometric mean of `ratios` with Student's t 95 % interval on their logarithms;
    /// one ratio gives a point (no interval). `None` without a finite, positive ratio.
    pub fn of_ratios(ratios: &[f64]) -> Option<Interval> {
        let logs: Vec<f64> = ratios
            .iter()
            .filter(|r| r.is_finite() && **r > 0.0)
            .map(|r| r.ln())
            .collect();
        let n = logs.len();
        if n == 0 {
            return None;
        }
        let mean = logs.iter().sum::<f64>() / n as f64;
        if n == 1 {
            let r = mean.exp();
            return Some(Interval {
                ratio: r,
                low: r,
                high: r,
                n,
            });
        }
        let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half = t_975(n - 1) * (var / n as f64).sqrt();
        Some(Interval {
            ratio: mean.exp(),
            low: (mean - half).exp(),
            high: (mean + half).exp(),
            n,
        })
    }

    /// True when there is an interval and it leaves out 1.
    pub fn differs(&self) -> bool {
        self.n > 1 && (self.low > 1.0 || self.high < 1.0)
    }
}

/// Student's t 97.5th percentile for `df` degrees of freedom.
fn t_975(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        d if d <= TABLE.len() => TABLE[d - 1],
        _ => 1.96,
    }
}

/// The verdict's first words: the measure's ratio, its interval, and what it means.
/// A verdict's measure in words: `breaking_point` → "breaking point".
pub fn measure_name(measure: &str) -> &'static str {
    match measure {
        "breaking_point" => "breaking point",
        "throughput" => "throughput",
        "latency_p50" => "median latency",
        "max_throughput" => "the probe's top throughput",
        "service_time" => "service time",
        "instance_seconds" => "instance-seconds paid for",
        _ => "p99 latency",
    }
}

fn describe(measure: &str, base: &str, var: &str, i: &Interval) -> String {
    let what = measure_name(measure);
    let mut s = format!("{what} ×{:.2} ({var} over {base}", i.ratio);
    if i.n > 1 {
        s.push_str(&format!(
            "; 95 % interval ×{:.2}–×{:.2} over {} rounds): ",
            i.low, i.high, i.n
        ));
        s.push_str(if i.differs() {
            "a real difference"
        } else {
            "no difference beyond the rounds' noise"
        });
    } else {
        s.push_str("; one round: no interval, run rounds: 3 or more to judge)");
    }
    s
}

/// For a topology with more processes than the baseline, the gain against the ideal — only
/// when the baseline saturated (otherwise the load, not the topology, set the throughput).
fn scaling(base: &[&CellResult], var: &[&CellResult], i: &Interval) -> Option<String> {
    let (b, v) = (base.first()?, var.first()?);
    if !base.iter().all(|c| saturated(&c.measured)) {
        return None;
    }
    // With quotas on both sides the ideal is the ratio of budgets, not of processes.
    if let (Some(bc), Some(vc)) = (b.cpus, v.cpus) {
        if vc <= bc || bc <= 0.0 {
            return None;
        }
        let ideal = vc / bc;
        let demand = match (mean_demand(base), mean_demand(var)) {
            (Some(x), Some(y)) => {
                format!(
                    "; CPU per response {} → {}",
                    duration_words(x),
                    duration_words(y)
                )
            }
            _ => String::new(),
        };
        return Some(format!(
            "{} → {} CPUs of quota: {:.0} % of the ideal ×{}{demand}",
            trim_float(bc),
            trim_float(vc),
            100.0 * i.ratio / ideal,
            trim_float(ideal)
        ));
    }
    if v.processes <= b.processes || b.processes == 0 {
        return None;
    }
    let ideal = v.processes as f64 / b.processes as f64;
    Some(format!(
        "{} → {} processes: {:.0} % of the ideal ×{ideal:.0}",
        b.processes,
        v.processes,
        100.0 * i.ratio / ideal
    ))
}

/// Milliseconds in words with three significant digits: `1.15 ms`, `14.2 µs`.
fn duration_words(ms: f64) -> String {
    if ms >= 1.0 {
        format!("{ms:.2} ms")
    } else if ms >= 0.1 {
        format!("{ms:.3} ms")
    } else {
        format!("{:.1} µs", ms * 1000.0)
    }
}

/// The mean CPU per response over a side's cells that have it.
fn mean_demand(cells: &[&CellResult]) -> Option<f64> {
    let v: Vec<f64> = cells.iter().filter_map(|c| c.cpu_ms_per_request).collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// A ratio as few digits as it needs: 4, 1.5, 2.33.
fn trim_float(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Several limits of one kind as one: their figures averaged (`None` without any).
fn mean_of(same: &[&Limit]) -> Option<Limit> {
    let mean = |f: &dyn Fn(&Limit) -> Option<f64>| {
        let v: Vec<f64> = same.iter().filter_map(|l| f(l)).collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    Some(match same.first()? {
        Limit::Host { cores, .. } => Limit::Host {
            cores: *cores,
            generator_pct: mean(&|l| match l {
                Limit::Host { generator_pct, .. } => Some(*generator_pct),
                _ => None,
            }),
            service_pct: mean(&|l| match l {
                Limit::Host { service_pct, .. } => Some(*service_pct),
                _ => None,
            }),
            other_pct: mean(&|l| match l {
                Limit::Host { other_pct, .. } => Some(*other_pct),
                _ => None,
            }),
        },
        Limit::CpuBound { name, of, .. } => Limit::CpuBound {
            name: name.clone(),
            of: *of,
            busy: mean(&|l| match l {
                Limit::CpuBound { busy, .. } => Some(*busy as f64),
                _ => None,
            })
            .round() as usize,
            used_pct: mean(&|l| match l {
                Limit::CpuBound { used_pct, .. } => Some(*used_pct),
                _ => None,
            }),
            waited_pct: mean(&|l| match l {
                Limit::CpuBound { waited_pct, .. } => Some(*waited_pct),
                _ => None,
            }),
        },
        Limit::RateLimited { .. } => Limit::RateLimited {
            pct: mean(&|l| match l {
                Limit::RateLimited { pct } => Some(*pct),
                _ => None,
            }),
        },
        Limit::Failing { .. } => Limit::Failing {
            pct: mean(&|l| match l {
                Limit::Failing { pct } => Some(*pct),
                _ => None,
            }),
        },
        Limit::Generator => Limit::Generator,
        Limit::Probed {
            behaviour,
            workers,
            observed,
            ..
        } => Limit::Probed {
            behaviour: *behaviour,
            workers: *workers,
            observed: *observed,
            service_time_ms: mean(&|l| match l {
                Limit::Probed {
                    service_time_ms, ..
                } => Some(*service_time_ms),
                _ => None,
            }),
        },
        Limit::AtQuota { name, of, cpus, .. } => Limit::AtQuota {
            name: name.clone(),
            busy: mean(&|l| match l {
                Limit::AtQuota { busy, .. } => Some(*busy as f64),
                _ => None,
            })
            .round() as usize,
            of: *of,
            cpus: *cpus,
            used_low_pct: same
                .iter()
                .filter_map(|l| match l {
                    Limit::AtQuota { used_low_pct, .. } => Some(*used_low_pct),
                    _ => None,
                })
                .fold(f64::INFINITY, f64::min),
            used_high_pct: same
                .iter()
                .filter_map(|l| match l {
                    Limit::AtQuota { used_high_pct, .. } => Some(*used_high_pct),
                    _ => None,
                })
                .fold(0.0, f64::max),
            throttled_pct: mean(&|l| match l {
                Limit::AtQuota { throttled_pct, .. } => Some(*throttled_pct),
                _ => None,
            }),
        },
        Limit::Backlog { stream, .. } => Limit::Backlog {
            stream: stream.clone(),
            waiting: mean(&|l| match l {
                Limit::Backlog { waiting, .. } => Some(*waiting as f64),
                _ => None,
            })
            .round() as u64,
        },
        Limit::NotCpu { .. } => Limit::NotCpu {
            service_pct: mean(&|l| match l {
                Limit::NotCpu { service_pct } => Some(*service_pct),
                _ => None,
            }),
        },
    })
}

/// A limit in words, with its figures.
pub fn limit_words(limit: &Limit) -> String {
    match limit {
        Limit::Host {
            cores,
            generator_pct,
            service_pct,
            other_pct,
        } => {
            let others = if *other_pct >= OTHERS_WORTH_SAYING {
                format!(", other processes {other_pct:.0} %")
            } else {
                String::new()
            };
            format!(
                "the host's {cores} cores were busy (generator {generator_pct:.0} %, service \
                     {service_pct:.0} %{others} of {} %): the host, not the topology, capped it",
                100 * cores
            )
        }
        Limit::CpuBound {
            name,
            busy,
            of,
            used_pct,
            waited_pct,
        } => format!(
            "{busy} of {of} {name} process(es) CPU-bound (each used {used_pct:.0} % of a core \
                 and waited {waited_pct:.0} % more for one)"
        ),
        Limit::AtQuota {
            name,
            busy,
            of,
            cpus,
            used_low_pct,
            used_high_pct,
            throttled_pct,
        } => {
            let used = if (used_high_pct - used_low_pct).abs() < 0.5 {
                format!("{used_high_pct:.0} %")
            } else {
                format!("{used_low_pct:.0}–{used_high_pct:.0} %")
            };
            let who = match (busy, of) {
                (1, 1) if name == "service" => "the service".to_string(),
                (1, 1) => name.clone(),
                (b, o) if b == o => format!("each of {o} {name}s"),
                (b, o) => format!("{b} of {o} {name}s"),
            };
            format!(
                "{who} used {used} of its {cpus} CPU quota (throttled in {throttled_pct:.0} % of \
                 periods): CPU-bound at its budget"
            )
        }
        Limit::RateLimited { pct } => format!("{pct:.0} % answered 429 (too many requests)"),
        Limit::Failing { pct } => format!("{pct:.0} % of requests failed"),
        Limit::Generator => "the generator saturated a thread".to_string(),
        Limit::Probed {
            behaviour,
            workers,
            observed,
            service_time_ms,
        } => {
            let how = match (behaviour, workers) {
                (crate::probe::Kind::RateLimited, _) => {
                    "a rate limit (429 beyond it, not a worker pool)".to_string()
                }
                (crate::probe::Kind::Contended, _) => {
                    "contention (throughput peaks, then falls; no worker pool)".to_string()
                }
                (crate::probe::Kind::Unclassified, _) => {
                    "no shape it knows (no model explained its steps)".to_string()
                }
                (crate::probe::Kind::Async, _) | (_, None) => {
                    "asynchronous (no worker limit)".to_string()
                }
                (crate::probe::Kind::Sync, Some(k)) if *observed => format!("{k} worker(s)"),
                (crate::probe::Kind::Sync, Some(k)) => format!("about {k} worker(s)"),
                (crate::probe::Kind::Cpu, Some(k)) => format!("CPU-bound on {k} core(s)"),
            };
            format!("the probe read {how}, S = {service_time_ms:.1} ms")
        }
        Limit::Backlog { stream, waiting } => format!(
            "{waiting} entries still waiting on the {stream} stream at the end (the tier \
                 reading it fell behind)"
        ),
        Limit::NotCpu { service_pct } => format!(
            "not the CPU ({service_pct:.0} % of a core in all): a worker cap, a lock, a rate \
                 limit or I/O set the limit (`loadlab probe` counts workers)"
        ),
    }
}

/// One side's limits in words: each kind once, its figures the mean over the cells that had
/// it, and in how many of the side's rounds when not in all.
/// True when two limits are of one kind: the same variant, and for limits naming what they
/// are about (a process, a budgeted group), the same name.
fn same_kind(a: &Limit, b: &Limit) -> bool {
    match (a, b) {
        (Limit::CpuBound { name: x, .. }, Limit::CpuBound { name: y, .. })
        | (Limit::AtQuota { name: x, .. }, Limit::AtQuota { name: y, .. }) => x == y,
        (Limit::Backlog { stream: x, .. }, Limit::Backlog { stream: y, .. }) => x == y,
        _ => std::mem::discriminant(a) == std::mem::discriminant(b),
    }
}

fn limits_of(cells: &[&CellResult]) -> Vec<String> {
    let n = cells.len();
    let mut kinds: Vec<Vec<&Limit>> = Vec::new();
    for l in cells.iter().flat_map(|c| &c.limits) {
        match kinds.iter_mut().find(|k| same_kind(k[0], l)) {
            Some(k) => k.push(l),
            None => kinds.push(vec![l]),
        }
    }
    kinds
        .iter()
        .filter_map(|k| {
            let mut text = limit_words(&mean_of(k)?);
            if k.len() < n {
                text.push_str(&format!(" in {} of {n} rounds", k.len()));
            }
            Some(text)
        })
        .collect()
}

/// What limited a run, from what the lab watched: the host's cores (the generator and the
/// watched processes together), CPU-bound processes (used plus waited), 429s, errors, the
/// generator itself, a queue left behind, and — for a cell that `saturated` with none of
/// those — that the limit was not the CPU. `cores` is the host's.
pub fn limits(s: &Summary, cores: usize, saturated: bool) -> Vec<Limit> {
    let mut out = Vec::new();
    let secs = s.duration_s.max(1e-9);
    let completed = s.requests.completed.max(1) as f64;
    let processes = s.server.as_ref().map_or(&[][..], |x| &x.processes[..]);
    let budgets = s.server.as_ref().map_or(&[][..], |x| &x.budgets[..]);
    let service_pct: f64 = processes.iter().map(|p| p.cpu_pct_avg).sum();
    let generator_pct = 100.0 * s.generator.cpu_s / secs;
    // The host's own total, when read, also holds what the lab does not watch (another
    // program, a build beside the run).
    let host_pct = s
        .server
        .as_ref()
        .and_then(|x| x.host_cpu_pct_avg)
        .unwrap_or(0.0)
        .max(service_pct + generator_pct);
    let quotas_bound = !at_quota(budgets).is_empty();
    match s.server.as_ref().and_then(|x| x.cores.as_ref()) {
        // On cores of their own, the service's capped it only when its processes filled them
        // before the quotas bound (a quota reached first is the limit, however busy the core);
        // the generator's own core is judged by its saturation.
        Some(split) => {
            if !quotas_bound && service_pct >= HOST_BUSY * 100.0 * split.service.len().max(1) as f64
            {
                out.push(Limit::Host {
                    cores: split.service.len(),
                    generator_pct: 0.0,
                    service_pct,
                    other_pct: 0.0,
                });
            }
        }
        None => {
            if host_pct >= HOST_BUSY * 100.0 * cores.max(1) as f64 {
                out.push(Limit::Host {
                    cores,
                    generator_pct,
                    service_pct,
                    other_pct: host_pct - service_pct - generator_pct,
                });
            }
        }
    }
    out.extend(at_quota(budgets));
    // A process with a CPU quota is judged against it (above), not against a whole core: its
    // throttled time reads as waiting for one.
    let quota_pids: Vec<u32> = budgets
        .iter()
        .filter(|b| b.cpus.is_some())
        .flat_map(|b| b.pids.iter().copied())
        .collect();
    let processes: Vec<&loadlab_run::summary::ServerProcess> = processes
        .iter()
        .filter(|p| !quota_pids.contains(&p.pid))
        .collect();
    let mut names: Vec<&str> = Vec::new();
    for p in &processes {
        if !names.contains(&p.name.as_str()) {
            names.push(&p.name);
        }
    }
    for name in names {
        let of: Vec<&loadlab_run::summary::ServerProcess> = processes
            .iter()
            .copied()
            .filter(|p| p.name == name)
            .collect();
        let busy: Vec<&&loadlab_run::summary::ServerProcess> = of
            .iter()
            .filter(|p| p.cpu_pct_avg + p.cpu_wait_pct_avg >= BUSY_PROCESS_PCT)
            .collect();
        if !busy.is_empty() {
            let n = busy.len() as f64;
            out.push(Limit::CpuBound {
                name: name.to_string(),
                busy: busy.len(),
                of: of.len(),
                used_pct: busy.iter().map(|p| p.cpu_pct_avg).sum::<f64>() / n,
                waited_pct: busy.iter().map(|p| p.cpu_wait_pct_avg).sum::<f64>() / n,
            });
        }
    }
    let limited = s.status.get("429").copied().unwrap_or(0) as f64;
    if limited / completed >= RATE_LIMITED {
        out.push(Limit::RateLimited {
            pct: 100.0 * limited / completed,
        });
    }
    // Dropped arrivals never completed: the share is of every request that was due (a
    // 600/s cell whose service answered 100 would otherwise read "17,900 % failed").
    let failed = (s.requests.errors as f64 - limited).max(0.0) + s.requests.dropped as f64;
    let due = (s.requests.completed + s.requests.dropped).max(1) as f64;
    if failed / due >= FAILING {
        out.push(Limit::Failing {
            pct: 100.0 * failed / due,
        });
    }
    if s.generator.saturated {
        out.push(Limit::Generator);
    }
    for store in s.server.iter().flat_map(|x| &x.stores) {
        for q in store.streams.iter().filter(|q| q.lag_end > 0) {
            out.push(Limit::Backlog {
                stream: q.name.clone(),
                waiting: q.lag_end,
            });
        }
    }
    if saturated && out.is_empty() && !(processes.is_empty() && budgets.is_empty()) {
        out.push(Limit::NotCpu { service_pct });
    }
    out
}

/// The kinds of budgeted groups at their CPU quota: replicas (`replica 3`), the only replica
/// (`service`), nginx, redis-server, consumers.
fn at_quota(budgets: &[loadlab_run::summary::ServerBudget]) -> Vec<Limit> {
    let kind = |name: &str| {
        name.trim_end_matches(|c: char| c.is_ascii_digit() || c == ' ')
            .to_string()
    };
    let mut kinds: Vec<String> = Vec::new();
    for b in budgets.iter().filter(|b| b.cpus.is_some()) {
        if !kinds.contains(&kind(&b.name)) {
            kinds.push(kind(&b.name));
        }
    }
    kinds
        .into_iter()
        .filter_map(|k| {
            let of: Vec<_> = budgets
                .iter()
                .filter(|b| b.cpus.is_some() && kind(&b.name) == k)
                .collect();
            let busy: Vec<_> = of
                .iter()
                .filter(|b| b.quota_used_pct.unwrap_or(0.0) >= AT_QUOTA_PCT)
                .collect();
            let used = |b: &&&loadlab_run::summary::ServerBudget| b.quota_used_pct.unwrap_or(0.0);
            (!busy.is_empty()).then(|| Limit::AtQuota {
                name: k,
                busy: busy.len(),
                of: of.len(),
                cpus: busy[0].cpus.unwrap_or(0.0),
                used_low_pct: busy.iter().map(used).fold(f64::INFINITY, f64::min),
                used_high_pct: busy.iter().map(used).fold(0.0, f64::max),
                throttled_pct: busy.iter().map(|b| b.throttled_pct).sum::<f64>()
                    / busy.len() as f64,
            })
        })
        .collect()
}

/// CPU the budgeted replicas used per successful response, ms: their CPU together over the
/// successful responses per second (`None` without quotas or responses).
pub fn cpu_ms_per_request(s: &Summary) -> Option<f64> {
    let budgets = &s.server.as_ref()?.budgets;
    let replicas: Vec<_> = budgets
        .iter()
        .filter(|b| b.cpus.is_some() && (b.name == "service" || b.name.starts_with("replica")))
        .collect();
    if replicas.is_empty() || s.duration_s <= 0.0 || s.requests.ok == 0 {
        return None;
    }
    let cpu_s_per_s: f64 = replicas.iter().map(|b| b.cpu_pct_avg / 100.0).sum();
    let ok_per_s = s.requests.ok as f64 / s.duration_s;
    Some(1000.0 * cpu_s_per_s / ok_per_s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadlab_run::lab::judged::ScaledCell;

    fn cell(
        topology: &str,
        processes: usize,
        workload: &str,
        round: usize,
        m: Measured,
    ) -> CellResult {
        CellResult {
            topology: topology.into(),
            processes,
            cpus: None,
            cpu_ms_per_request: None,
            workload: workload.into(),
            round,
            measured: m,
            excluded: None,
            limits: Vec::new(),
            autoscale: None,
        }
    }

    fn capacity(rps: f64) -> Measured {
        Measured::Capacity {
            breaking_point_rps: Some(rps),
        }
    }

    fn open(offered: f64, ok: f64, p50: f64, p99: f64) -> Measured {
        Measured::Open {
            offered_rps: offered,
            ok_rps: ok,
            p50_ms: p50,
            p99_ms: p99,
        }
    }

    #[test]
    fn three_times_the_workers_triple_the_breaking_point_and_it_differs() {
        let cells: Vec<CellResult> = (0..3)
            .flat_map(|r| {
                let jitter = [0.97, 1.02, 1.0][r];
                [
                    cell("1 worker", 1, "block", r, capacity(50.0 * jitter)),
                    cell("3 workers", 3, "block", r, capacity(150.0 / jitter)),
                ]
            })
            .collect();
        let v = verdicts(&cells, &[], &[]);
        assert_eq!(v.len(), 1, "{v:?}");
        let v = &v[0];
        assert_eq!(v.measure, "breaking_point");
        assert!((v.ratio - 3.0).abs() < 0.2, "{v:?}");
        assert!(v.differs && v.ci_low > 1.0, "{v:?}");
        assert!(v.why.contains("ideal ×3"), "{}", v.why);
    }

    #[test]
    fn an_open_load_under_capacity_gets_latency_verdicts_and_no_throughput_or_scaling() {
        let cells: Vec<CellResult> = (0..3)
            .flat_map(|r| {
                [
                    cell(
                        "1",
                        1,
                        "ping 500/s",
                        r,
                        open(500.0, 500.0, 0.2, 1.0 + r as f64 * 0.1),
                    ),
                    cell("3", 3, "ping 500/s", r, open(500.0, 499.0, 0.25, 1.1)),
                ]
            })
            .collect();
        let v = verdicts(&cells, &[], &[]);
        let measures: Vec<&str> = v.iter().map(|v| v.measure.as_str()).collect();
        assert_eq!(measures, ["latency_p50", "latency_p99"]);
        assert!(v.iter().all(|v| !v.why.contains("ideal")), "{v:?}");
    }

    #[test]
    fn a_paired_workload_factor_compares_on_each_topology() {
        let cells: Vec<CellResult> = (0..3)
            .flat_map(|r| {
                let noise = 1.0 + 0.02 * r as f64;
                [
                    cell(
                        "t",
                        1,
                        "calc 100k",
                        r,
                        Measured::Closed {
                            ok_rps: 200.0 * noise,
                            p50_ms: 5.0,
                            p99_ms: 9.0,
                        },
                    ),
                    cell(
                        "t",
                        1,
                        "calc 200k",
                        r,
                        Measured::Closed {
                            ok_rps: 100.0 * noise,
                            p50_ms: 10.0,
                            p99_ms: 18.0,
                        },
                    ),
                ]
            })
            .collect();
        let pairs = [("calc 100k".to_string(), "calc 200k".to_string())];
        let v = verdicts(&cells, &[], &pairs);
        let t = v.iter().find(|v| v.measure == "throughput").unwrap();
        assert_eq!(t.factor, Factor::Workload);
        assert_eq!(t.topology.as_deref(), Some("t"));
        assert!(
            (t.ratio - 0.5).abs() < 0.01 && t.differs && t.ci_high < 1.0,
            "{t:?}"
        );
    }

    #[test]
    fn the_same_cell_twice_says_no_difference_nine_times_in_ten() {
        // A/A: both sides draw from the same noise (±10 % uniform per round), 3 rounds.
        let mut honest = 0;
        for seed in 0..200u64 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut draw = || 100.0 * (1.0 + 0.2 * (rng.f64() - 0.5));
            let cells: Vec<CellResult> = (0..3)
                .flat_map(|r| {
                    [
                        cell("a", 1, "w", r, capacity(draw())),
                        cell("b", 1, "w", r, capacity(draw())),
                    ]
                })
                .collect();
            let v = verdicts(&cells, &[], &[]);
            if !v[0].differs {
                honest += 1;
            }
        }
        assert!(honest >= 180, "{honest} of 200 said no difference");
    }

    #[test]
    fn a_topology_is_judged_against_its_own_baseline_when_it_names_one() {
        let closed = |ok: f64| Measured::Closed {
            ok_rps: ok,
            p50_ms: 1.0,
            p99_ms: 2.0,
        };
        let cells: Vec<CellResult> = (0..3)
            .flat_map(|r| {
                [
                    cell("python 1", 1, "calc", r, closed(100.0)),
                    cell("python 6", 6, "calc", r, closed(200.0)),
                    cell("node 1", 1, "calc", r, closed(400.0)),
                    cell("node 6", 6, "calc", r, closed(800.0)),
                ]
            })
            .collect();
        let baselines: Vec<(String, String)> = [
            ("python 6", "python 1"),
            ("node 1", "python 1"),
            ("node 6", "node 1"),
        ]
        .map(|(v, b)| (v.to_string(), b.to_string()))
        .to_vec();
        let v = verdicts(&cells, &baselines, &[]);
        let throughput = |variant: &str| {
            v.iter()
                .find(|x| x.variant == variant && x.measure == "throughput")
                .map(|x| (x.baseline.clone(), x.ratio))
                .unwrap()
        };
        assert_eq!(throughput("node 6").0, "node 1");
        assert!((throughput("node 6").1 - 2.0).abs() < 1e-9);
        assert!((throughput("node 1").1 - 4.0).abs() < 1e-9);
        // Without baselines every topology is judged against the first.
        let first = verdicts(&cells, &[], &[]);
        assert!(first
            .iter()
            .filter(|x| x.measure == "throughput")
            .all(|x| x.baseline == "python 1"));
    }

    #[test]
    fn replicas_with_quotas_are_judged_at_their_quota_and_the_host_only_when_their_cores_filled() {
        use loadlab_run::summary::{Server, ServerBudget, ServerCores, ServerProcess};
        let mut s = Summary {
            duration_s: 10.0,
            ..Summary::default()
        };
        s.requests.completed = 4000;
        s.requests.ok = 4000;
        s.generator.cpu_s = 9.5;
        let replica = |i: u32, used: f64| ServerBudget {
            name: format!("replica {i}"),
            cpus: Some(0.2),
            cpu_pct_avg: 0.2 * used,
            quota_used_pct: Some(used),
            periods: 100,
            throttled_pct: if used > 90.0 { 40.0 } else { 0.0 },
            pids: vec![i],
            ..ServerBudget::default()
        };
        // Throttled, each replica reads as waiting for a core most of the time.
        let process = |pid: u32| ServerProcess {
            name: "loadlab-serve".into(),
            pid,
            cpu_pct_avg: 20.0,
            cpu_pct_max: 21.0,
            cpu_wait_pct_avg: 75.0,
            rss_mb_max: 1.0,
        };
        s.server = Some(Server {
            // The generator's core full and the service's at 80 %: 180 % of 2 cores.
            host_cpu_pct_avg: Some(180.0),
            processes: (1..=4).map(process).collect(),
            budgets: vec![
                replica(1, 99.0),
                replica(2, 97.0),
                replica(3, 98.0),
                replica(4, 50.0),
            ],
            cores: Some(ServerCores {
                service: vec![0],
                generator: vec![1],
            }),
            ..Server::default()
        });
        let l = limits(&s, 2, true);
        assert_eq!(
            l,
            vec![Limit::AtQuota {
                name: "replica".into(),
                busy: 3,
                of: 4,
                cpus: 0.2,
                used_low_pct: 97.0,
                used_high_pct: 99.0,
                throttled_pct: 40.0,
            }],
            "no host, no process CPU-bound against a whole core"
        );
        assert_eq!(
            limit_words(&l[0]),
            "3 of 4 replicas used 97–99 % of its 0.2 CPU quota (throttled in 40 % of periods): \
             CPU-bound at its budget"
        );
        // 0.2 × (99 + 97 + 98 + 50) % = 0.688 CPU over 400 responses a second: 1.72 ms each.
        let demand = cpu_ms_per_request(&s).unwrap();
        assert!((demand - 1.72).abs() < 1e-9, "{demand}");
        // Its core full (nginx beside the replicas) with the quotas bound: the quotas, not the
        // core, capped it.
        if let Some(server) = s.server.as_mut() {
            for p in &mut server.processes {
                p.cpu_pct_avg = 24.0;
            }
        }
        assert!(
            !limits(&s, 2, true)
                .iter()
                .any(|l| matches!(l, Limit::Host { .. })),
            "{:?}",
            limits(&s, 2, true)
        );
        // The same cell sharing the host's cores: the host is named, as before budgets.
        if let Some(server) = s.server.as_mut() {
            server.cores = None;
        }
        assert!(matches!(limits(&s, 2, true)[0], Limit::Host { .. }));
    }

    #[test]
    fn limits_of_one_kind_about_different_things_are_said_apart() {
        let quota = |name: &str, busy: usize, of: usize| Limit::AtQuota {
            name: name.into(),
            busy,
            of,
            cpus: 0.2,
            used_low_pct: 98.0,
            used_high_pct: 99.0,
            throttled_pct: 90.0,
        };
        let mut a = cell("three", 3, "turno", 0, capacity(100.0));
        a.limits = vec![quota("replica", 3, 3), quota("redis-server", 1, 1)];
        let mut b = cell("three", 3, "turno", 1, capacity(100.0));
        b.limits = vec![quota("redis-server", 1, 1)];
        let words = limits_of(&[&a, &b]);
        assert_eq!(
            words,
            vec![
                "each of 3 replicas used 98–99 % of its 0.2 CPU quota (throttled in 90 % of \
                 periods): CPU-bound at its budget in 1 of 2 rounds",
                "redis-server used 98–99 % of its 0.2 CPU quota (throttled in 90 % of \
                 periods): CPU-bound at its budget",
            ]
        );
    }

    #[test]
    fn the_ideal_scaling_of_budgeted_topologies_is_the_ratio_of_their_quotas() {
        let side = |t: &str, cpus: f64, rps: f64, demand: f64| {
            (0..2)
                .map(|r| {
                    let mut c = cell(t, 4, "calc", r, capacity(rps * (1.0 + 0.01 * r as f64)));
                    c.cpus = Some(cpus);
                    c.cpu_ms_per_request = Some(demand);
                    c
                })
                .collect::<Vec<_>>()
        };
        let cells: Vec<CellResult> = side("one", 0.2, 100.0, 2.0)
            .into_iter()
            .chain(side("four", 0.8, 380.0, 2.1))
            .collect();
        let v = verdicts(&cells, &[], &[]);
        let words = v[0].scaling.as_deref().unwrap();
        assert_eq!(
            words,
            "0.2 → 0.8 CPUs of quota: 95 % of the ideal ×4; CPU per response 2.00 ms → 2.10 ms"
        );
    }

    #[test]
    fn a_host_busy_with_other_work_is_said_with_that_works_share() {
        use loadlab_run::summary::{Server, ServerProcess};
        let mut s = Summary {
            duration_s: 10.0,
            ..Summary::default()
        };
        s.requests.completed = 1000;
        s.requests.ok = 1000;
        s.generator.cpu_s = 2.0;
        let web = ServerProcess {
            name: "loadlab-serve".into(),
            pid: 1,
            cpu_pct_avg: 40.0,
            cpu_pct_max: 60.0,
            cpu_wait_pct_avg: 70.0,
            rss_mb_max: 1.0,
        };
        // 20 % generator + 40 % service on 2 cores: not busy by themselves; a build beside
        // them filled the rest.
        s.server = Some(Server {
            host_cpu_pct_avg: Some(190.0),
            processes: vec![web],
            stores: Vec::new(),
            ..Server::default()
        });
        let l = limits(&s, 2, true);
        let Some(Limit::Host { other_pct, .. }) = l.first() else {
            panic!("{l:?}");
        };
        assert!((other_pct - 130.0).abs() < 1e-9, "{other_pct}");
        let words = limit_words(&l[0]);
        assert!(words.contains("other processes 130 %"), "{words}");
        assert!(
            limit_words(&l[1]).contains("each used 40 % of a core and waited 70 % more"),
            "{l:?}"
        );
        // Without the host's total, the same cell is not said to be host-bound.
        if let Some(server) = s.server.as_mut() {
            server.host_cpu_pct_avg = None;
        }
        assert!(!limits(&s, 2, true)
            .iter()
            .any(|l| matches!(l, Limit::Host { .. })));
    }

    #[test]
    fn failures_are_a_share_of_the_requests_due_dropped_ones_included() {
        // Seed 001's calc at 600/s for 30 s on one replica: 113 answered, 17,887 dropped.
        let mut s = Summary {
            duration_s: 30.0,
            ..Summary::default()
        };
        (s.requests.completed, s.requests.ok, s.requests.dropped) = (113, 113, 17_887);
        let failing: Vec<f64> = limits(&s, 2, true)
            .into_iter()
            .filter_map(|l| match l {
                Limit::Failing { pct } => Some(pct),
                _ => None,
            })
            .collect();
        assert_eq!(failing.len(), 1);
        assert!(
            (failing[0] - 100.0 * 17_887.0 / 18_000.0).abs() < 1e-9,
            "{failing:?}"
        );
    }

    #[test]
    fn a_saturated_cell_whose_processes_idled_was_not_limited_by_the_cpu() {
        use loadlab_run::summary::{Server, ServerProcess};
        let mut s = Summary {
            duration_s: 10.0,
            ..Summary::default()
        };
        s.requests.completed = 1000;
        s.requests.ok = 1000;
        let process = |cpu: f64| ServerProcess {
            name: "loadlab".into(),
            pid: 1,
            cpu_pct_avg: cpu,
            cpu_pct_max: cpu,
            cpu_wait_pct_avg: 0.0,
            rss_mb_max: 1.0,
        };
        s.server = Some(Server {
            host_cpu_pct_avg: None,
            processes: vec![process(12.0), process(15.0)],
            stores: Vec::new(),
            ..Server::default()
        });
        assert_eq!(
            limits(&s, 2, true),
            vec![Limit::NotCpu { service_pct: 27.0 }]
        );
        assert!(
            limits(&s, 2, false).is_empty(),
            "under capacity nothing limited it"
        );
        s.server = Some(Server {
            host_cpu_pct_avg: None,
            processes: vec![process(97.0)],
            stores: Vec::new(),
            ..Server::default()
        });
        let l = limits(&s, 2, true);
        assert!(
            matches!(l[..], [Limit::CpuBound { busy: 1, of: 1, .. }]),
            "{l:?}"
        );
    }

    #[test]
    fn random_cells_never_give_a_number_that_is_not_one() {
        // Zeros, missing breaking points, huge and tiny values, left-out cells, mixed models
        // for one workload: every verdict's figures stay finite.
        let mut rng = fastrand::Rng::with_seed(7);
        let value = |rng: &mut fastrand::Rng| match rng.u8(..6) {
            0 => 0.0,
            1 => 1e-12,
            2 => 1e12,
            _ => rng.f64() * 1000.0,
        };
        for _ in 0..500 {
            let mut cells = Vec::new();
            for round in 0..1 + rng.usize(..4) {
                for (t, processes) in [("a", 1), ("b", 3)] {
                    for w in ["x", "y"] {
                        let r = &mut rng;
                        let measured = match r.u8(..4) {
                            0 => Measured::Capacity {
                                breaking_point_rps: r.bool().then(|| value(r)),
                            },
                            1 => Measured::Closed {
                                ok_rps: value(r),
                                p50_ms: value(r),
                                p99_ms: value(r),
                            },
                            _ => open(value(r), value(r), value(r), value(r)),
                        };
                        let mut c = cell(t, processes, w, round, measured);
                        if rng.u8(..10) == 0 {
                            c.excluded = Some("exited".into());
                        }
                        cells.push(c);
                    }
                }
            }
            let pairs = [("x".to_string(), "y".to_string())];
            for v in verdicts(&cells, &[], &pairs) {
                for x in [v.ratio, v.ci_low, v.ci_high] {
                    assert!(x.is_finite() && x > 0.0, "{v:?}");
                }
                assert!(
                    !v.why.contains("NaN") && !v.why.contains("inf"),
                    "{}",
                    v.why
                );
            }
        }
    }

    #[test]
    fn one_round_has_no_interval_and_never_differs() {
        let cells = [
            cell("a", 1, "w", 0, capacity(100.0)),
            cell("b", 2, "w", 0, capacity(300.0)),
        ];
        let v = &verdicts(&cells, &[], &[])[0];
        assert_eq!((v.ci_low, v.ci_high), (v.ratio, v.ratio));
        assert!(!v.differs && v.why.contains("one round"), "{v:?}");
    }

    #[test]
    fn autoscaled_topologies_are_also_set_against_each_other_on_what_they_paid_for() {
        // A minimum of 2 against 1 under the same spike: fewer failures for more instance-time.
        let scaled = |t: &str, round, instance_seconds, failed, p99| CellResult {
            autoscale: Some(ScaledCell {
                instance_seconds,
                requests: 1000,
                failed,
                waited: failed * 2,
                refused: failed,
            }),
            ..cell(t, 1, "spike", round, open(30.0, 30.0, 20.0, p99))
        };
        let cells: Vec<CellResult> = (0..3)
            .flat_map(|r| {
                let jitter = 1.0 + 0.01 * r as f64;
                [
                    scaled("min 1", r, 100.0 * jitter, 40, 900.0),
                    scaled("min 2", r, 160.0 / jitter, 2, 300.0 * jitter),
                ]
            })
            .collect();
        let all = verdicts(&cells, &[], &[]);
        let paid = all
            .iter()
            .find(|v| v.measure == "instance_seconds")
            .expect("an instance-seconds verdict");
        assert!((paid.ratio - 1.6).abs() < 0.05 && paid.differs, "{paid:?}");
        assert!(
            paid.why
                .starts_with("instance-seconds paid for ×1.57 (min 2 over min 1"),
            "{}",
            paid.why
        );
        assert!(
            paid.why.contains("min 1: 120 of 3000 requests failed (4.0 %), 240 waited for an instance and 120 got 429")
                && paid.why.contains("min 2: 6 of 3000 requests failed (0.2 %)"),
            "{}",
            paid.why
        );
        let p99 = all.iter().find(|v| v.measure == "latency_p99").unwrap();
        assert!(p99.ratio < 0.4 && p99.differs, "{p99:?}");
        // Fixed topologies have no such measure.
        let fixed: Vec<CellResult> = cells
            .iter()
            .map(|c| CellResult {
                autoscale: None,
                ..c.clone()
            })
            .collect();
        assert!(verdicts(&fixed, &[], &[])
            .iter()
            .all(|v| v.measure != "instance_seconds"));
    }

    #[test]
    fn left_out_cells_and_empty_measures_give_no_nan() {
        let mut cells = vec![
            cell("a", 1, "w", 0, capacity(100.0)),
            cell(
                "b",
                2,
                "w",
                0,
                Measured::Capacity {
                    breaking_point_rps: None,
                },
            ),
            cell("a", 1, "x", 0, open(10.0, 0.0, 0.0, 0.0)),
            cell("b", 2, "x", 0, open(10.0, 0.0, 0.0, 0.0)),
        ];
        cells.push(CellResult {
            excluded: Some("a replica exited".into()),
            ..cell("b", 2, "w", 1, capacity(5.0))
        });
        for v in verdicts(&cells, &[], &[]) {
            assert!(v.ratio.is_finite() && v.ci_low.is_finite() && v.ci_high.is_finite());
        }
        let json = serde_json::to_string(&verdicts(&cells, &[], &[])).unwrap();
        assert!(!json.contains("NaN") && !json.contains("inf"), "{json}");
    }
}
