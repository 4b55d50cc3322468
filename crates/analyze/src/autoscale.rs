//! What an autoscaled topology's scaling cost during a run, one finding each: the requests
//! that waited or were refused while instances started, and the instances left idle after the
//! load had passed.

use loadlab_run::interval::TimelineRow;
use loadlab_run::scaling::ScalingData;
use loadlab_run::summary::Finding;

use crate::findings::finding;

/// A ready instance counts as idle in a second it had under 1 % of it in flight.
const IDLE: &str = "served next to nothing (under 1 % of the second in flight)";

/// The findings of an autoscaled run, with its `timeline`.
pub fn findings(data: &ScalingData, timeline: &[TimelineRow], out: &mut Vec<Finding>) {
    scale_ups(data, timeline, out);
    idle_after(data, out);
}

/// For each time the autoscaler asked for more instances: the requests that waited at the
/// balancer or got 429 until the instances asked for were ready (or the count stopped rising),
/// and the slowest second's p99 meanwhile (requests also wait inside a busy instance).
fn scale_ups(data: &ScalingData, timeline: &[TimelineRow], out: &mut Vec<Finding>) {
    let seconds = &data.seconds;
    for d in data.decisions.iter().filter(|d| d.to > d.from) {
        let from = d.at_s.max(0.0).floor() as u64;
        // The first second from the decision on with the instances asked for ready, or with
        // fewer wanted again.
        let Some(reached) = seconds
            .iter()
            .filter(|s| s.second >= from)
            .find(|s| s.ready >= d.to || s.desired < d.to)
        else {
            continue;
        };
        let span: Vec<_> = seconds
            .iter()
            .filter(|s| s.second >= from && s.second <= reached.second)
            .collect();
        let waited: u64 = span.iter().map(|s| s.waited).sum();
        let refused: u64 = span.iter().map(|s| s.refused).sum();
        let wait_s: f64 = span.iter().map(|s| s.wait_s).sum();
        let p99 = timeline
            .iter()
            .filter(|r| r.second >= from && r.second <= reached.second && r.completed > 0)
            .map(|r| r.p99_ms)
            .fold(0.0, f64::max);
        // Ready when it decided: the last second before the decision's (an instance may join
        // within the decision's own second).
        let start_ready = seconds
            .iter()
            .rev()
            .find(|s| s.second < from)
            .or(span.first().copied())
            .map_or(0, |s| s.ready);
        let took = joined_after(data, d.at_s, reached.ready.saturating_sub(start_ready))
            .unwrap_or((reached.second + 1) as f64 - d.at_s.max(0.0));
        let cost = match (waited, refused) {
            (0, 0) => "no request waited at the balancer".to_string(),
            (w, 0) => format!(
                "{w} requests waited for an instance with room ({:.0} ms on average)",
                1000.0 * wait_s / w as f64
            ),
            (0, r) => format!("{r} requests got 429"),
            (w, r) => format!(
                "{r} requests got 429 and {w} waited ({:.0} ms on average)",
                1000.0 * wait_s / w as f64
            ),
        };
        let mode = if d.panicking { " (in panic mode)" } else { "" };
        out.push(finding(
            "autoscale_up",
            format!(
                "{cost} during the {} it took to go from {start_ready} to {} ready \
                 instances{mode}, decided at {:.0} s on a metric of {:.2}; the slowest second's \
                 p99 was {p99:.0} ms",
                took_words(took),
                reached.ready,
                d.at_s,
                d.metric
            ),
            if refused > 0 {
                "start instances sooner (a lower target, a higher min, a shorter cold start) or \
                 let requests wait longer for room (hold_timeout)"
            } else {
                "a lower target or a higher min would have had the instances ready before the \
                 load"
            },
            &[
                ("waited", waited as f64),
                ("refused", refused as f64),
                ("seconds", took),
                ("from_ready", f64::from(start_ready)),
                ("to_ready", f64::from(reached.ready)),
                ("p99_ms", p99),
            ],
        ));
    }
}

/// A scale-up's time in words: milliseconds under a second (a cold start of 30 ms is not
/// "0.0 s"), seconds to a tenth above.
fn took_words(seconds: f64) -> String {
    if seconds < 1.0 {
        format!("{:.0} ms", seconds * 1000.0)
    } else {
        format!("{seconds:.1} s")
    }
}

/// How long after `at_s` the `n`th instance started from then on joined (its start and cold
/// start), seconds; `None` when fewer than `n` did (or `n` is 0).
fn joined_after(data: &ScalingData, at_s: f64, n: u32) -> Option<f64> {
    let mut joined: Vec<f64> = data
        .instances
        .iter()
        .filter(|i| i.started_s >= at_s - 1e-3)
        .filter_map(|i| Some(i.started_s + i.cold_start_s?))
        .collect();
    joined.sort_by(f64::total_cmp);
    let nth = joined.get((n as usize).checked_sub(1)?)?;
    Some(nth - at_s)
}

/// After the last second the most instances were ready and busy: how many stayed ready while
/// idle, and for how long, against the instance-seconds paid for.
fn idle_after(data: &ScalingData, out: &mut Vec<Finding>) {
    let seconds = &data.seconds;
    let Some(most) = seconds.iter().map(|s| s.ready).max().filter(|m| *m > 1) else {
        return;
    };
    let Some(peak) = seconds.iter().rposition(|s| s.ready == most && s.idle == 0) else {
        return;
    };
    let after = &seconds[peak + 1..];
    let idle_s: f64 = after.iter().map(|s| f64::from(s.idle)).sum();
    let Some(most_idle) = after.iter().map(|s| s.idle).max().filter(|k| *k > 0) else {
        return;
    };
    let lasted = after.iter().filter(|s| s.idle > 0).count();
    let total = data.instance_seconds();
    out.push(finding(
        "autoscale_idle",
        format!(
            "{most_idle} instance(s) stayed ready but idle after the busiest second, for {lasted} \
             s ({idle_s:.0} instance-seconds, {:.0} % of the {total:.0} paid for in the run); an \
             idle instance {IDLE}",
            100.0 * idle_s / total.max(1.0)
        ),
        "a shorter scale-down window (the HPA's stabilization, the KPA's stable window) gives \
         idle instances back sooner, at the risk of scaling up again on the next burst",
        &[
            ("idle_instances", f64::from(most_idle)),
            ("idle_seconds", lasted as f64),
            ("idle_instance_seconds", idle_s),
            ("instance_seconds", total),
        ],
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadlab_run::scaling::{InstanceLife, ScaleDecision, ScalingSecond};

    fn second(second: u64, ready: u32, desired: u32, idle: u32) -> ScalingSecond {
        ScalingSecond {
            second,
            ready,
            desired,
            idle,
            ..ScalingSecond::default()
        }
    }

    #[test]
    fn a_scale_up_counts_what_waited_and_what_was_refused_until_the_instances_were_ready() {
        let mut seconds: Vec<ScalingSecond> = (0..20).map(|s| second(s, 1, 1, 0)).collect();
        for s in &mut seconds[5..9] {
            s.desired = 4;
            s.waited = 10;
            s.wait_s = 2.0;
            s.refused = 3;
        }
        for s in &mut seconds[9..] {
            (s.ready, s.desired) = (4, 4);
        }
        seconds[9].waited = 5;
        seconds[9].wait_s = 0.5;
        let data = ScalingData {
            seconds,
            decisions: vec![ScaleDecision {
                at_s: 5.2,
                from: 1,
                to: 4,
                metric: 6.0,
                panicking: true,
            }],
            ..ScalingData::default()
        };
        let timeline: Vec<TimelineRow> = (0..20)
            .map(|s| TimelineRow {
                second: s,
                completed: 10,
                p99_ms: if s == 7 { 900.0 } else { 50.0 },
                ..TimelineRow::default()
            })
            .collect();
        let mut out = Vec::new();
        findings(&data, &timeline, &mut out);
        let up = out.iter().find(|f| f.kind == "autoscale_up").unwrap();
        // Seconds 5 to 9: 45 waited (8.5 s of waits), 12 refused, 4.8 s from 5.2 s to the end
        // of second 9.
        assert_eq!(up.values["waited"], 45.0, "{up:?}");
        assert_eq!(up.values["refused"], 12.0);
        assert!((up.values["seconds"] - 4.8).abs() < 1e-9, "{up:?}");
        assert!(
            up.message
                .starts_with("12 requests got 429 and 45 waited (189 ms"),
            "{}",
            up.message
        );
        assert!(
            up.message
                .contains("from 1 to 4 ready instances (in panic mode)"),
            "{}",
            up.message
        );
        // With the instances' lives, the time is the third new one's join; an instance that
        // joins within the decision's own second is still counted from the one ready before.
        let life = |id, started_s, cold_start_s| InstanceLife {
            id,
            started_s,
            cold_start_s: Some(cold_start_s),
            ..InstanceLife::default()
        };
        let mut data = data;
        data.instances = vec![
            life(1, -30.0, 0.1),
            life(2, 5.2, 1.0),
            life(3, 5.21, 2.0),
            life(4, 5.22, 3.88),
        ];
        let mut out = Vec::new();
        findings(&data, &timeline, &mut out);
        let up = out.iter().find(|f| f.kind == "autoscale_up").unwrap();
        assert!((up.values["seconds"] - 3.9).abs() < 1e-9, "{up:?}");
        assert!(
            up.message.contains("during the 3.9 s it took"),
            "{}",
            up.message
        );
        for s in &mut data.seconds[5..] {
            s.ready = 4;
        }
        data.instances.truncate(2);
        data.instances[1].cold_start_s = Some(0.03);
        let mut out = Vec::new();
        findings(&data, &timeline, &mut out);
        let up = out.iter().find(|f| f.kind == "autoscale_up").unwrap();
        assert!(
            up.message
                .contains("during the 800 ms it took to go from 1 to 4 ready instances"),
            "{}",
            up.message
        );
    }

    #[test]
    fn instances_idle_after_the_busiest_second_are_counted_against_what_was_paid_for() {
        // 3 ready and busy until 10 s, then 2 of them idle for 5 s, then scaled down.
        let mut seconds: Vec<ScalingSecond> = (0..20).map(|s| second(s, 3, 3, 0)).collect();
        for s in &mut seconds[11..16] {
            s.idle = 2;
        }
        for s in &mut seconds[16..] {
            (s.ready, s.desired) = (1, 1);
        }
        let data = ScalingData {
            seconds,
            ..ScalingData::default()
        };
        let mut out = Vec::new();
        findings(&data, &[], &mut out);
        let idle = out.iter().find(|f| f.kind == "autoscale_idle").unwrap();
        assert_eq!(idle.values["idle_instances"], 2.0, "{idle:?}");
        assert_eq!(idle.values["idle_seconds"], 5.0);
        assert_eq!(idle.values["idle_instance_seconds"], 10.0);
        assert_eq!(idle.values["instance_seconds"], 16.0 * 3.0 + 4.0);
        // Never more than one instance: nothing to say.
        let calm = ScalingData {
            seconds: (0..10).map(|s| second(s, 1, 1, 1)).collect(),
            ..ScalingData::default()
        };
        let mut out = Vec::new();
        findings(&calm, &[], &mut out);
        assert!(out.is_empty(), "{out:?}");
    }
}
