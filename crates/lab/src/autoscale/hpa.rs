//! Kubernetes' Horizontal Pod Autoscaler as its controller decides (kube-controller-manager's
//! `podautoscaler` package): at each sync, the replica count the instances' metric asks for
//! (the ratio of their mean to the target, with the tolerance, and the conservative readings of
//! instances starting or without a metric), stabilized over the recent recommendations, then
//! bounded by the scaling policies' rate and by `min` and `max`.
//!
//! Written here rather than taken from a library: no Rust crate models the HPA's decisions, and
//! the controller itself is Go inside Kubernetes.

use std::collections::VecDeque;
use std::time::Duration;

/// How fast one direction may scale: Kubernetes' `HPAScalingRules`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    /// The recommendations of this long before are considered too (`stabilizationWindowSeconds`):
    /// the highest for a scale-down, the lowest for a scale-up.
    pub stabilization: Duration,
    /// The changes allowed per period.
    pub policies: Vec<Policy>,
    /// Which policy applies when several do.
    pub select: Select,
}

/// One scaling policy: at most this change over the last `period`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// The change allowed.
    pub change: Change,
    /// The period it is counted over (`periodSeconds`).
    pub period: Duration,
}

/// A policy's change.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    /// This many instances (`type: Pods`).
    Instances(u32),
    /// This percent of the instances at the period's start (`type: Percent`).
    Percent(u32),
}

/// `selectPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Select {
    /// The policy allowing the largest change (the default).
    Max,
    /// The one allowing the smallest.
    Min,
    /// No scaling in this direction.
    Disabled,
}

/// An HPA's settings, with Kubernetes' defaults from [`Settings::new`].
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Fewest instances.
    pub min: u32,
    /// Most instances.
    pub max: u32,
    /// The metric's target per instance (a CPU share of the budget such as 0.6, requests in
    /// flight, requests a second).
    pub target: f64,
    /// An instance's metric at its whole budget (1.0 for a CPU share), what an instance without a
    /// reading is taken to use on a scale-down, with the target when that is higher; `None` for
    /// a metric without a ceiling (the target is taken).
    pub full: Option<f64>,
    /// No change while the ratio of the mean to the target is within this of 1 (0.1).
    pub tolerance: f64,
    /// Scaling up.
    pub up: Rules,
    /// Scaling down.
    pub down: Rules,
}

impl Settings {
    /// Kubernetes' defaults between `min` and `max` at `target`: a tolerance of 0.1; up at once
    /// by the larger of 100 % and 4 instances per 15 s; down after the highest recommendation of
    /// the last 300 s, by up to 100 % per 15 s.
    pub fn new(min: u32, max: u32, target: f64) -> Self {
        let every_15s = |change| Policy {
            change,
            period: Duration::from_secs(15),
        };
        Settings {
            min,
            max,
            target,
            full: None,
            tolerance: 0.1,
            up: Rules {
                stabilization: Duration::ZERO,
                policies: vec![
                    every_15s(Change::Percent(100)),
                    every_15s(Change::Instances(4)),
                ],
                select: Select::Max,
            },
            down: Rules {
                stabilization: Duration::from_secs(300),
                policies: vec![every_15s(Change::Percent(100))],
                select: Select::Max,
            },
        }
    }
}

/// An instance at a sync.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reading {
    /// Ready, with its metric.
    Ready(f64),
    /// Not ready yet (starting): its metric is not read, and it counts as using nothing when
    /// the others ask for more.
    Starting,
    /// Ready but without a metric: taken as using its whole budget on a scale-down, nothing on
    /// a scale-up.
    Missing,
}

/// What a sync decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// The instances wanted now.
    pub desired: u32,
    /// What the metric alone asked for, before stabilization and the policies.
    pub recommended: u32,
}

/// An HPA's state between syncs: its recent recommendations and scale events.
#[derive(Debug, Clone)]
pub struct Hpa {
    settings: Settings,
    /// (time, recommendation before stabilization).
    recommendations: VecDeque<(Duration, u32)>,
    /// (time, instances added).
    ups: VecDeque<(Duration, u32)>,
    /// (time, instances removed).
    downs: VecDeque<(Duration, u32)>,
}

impl Hpa {
    /// An HPA with `settings` and no history.
    pub fn new(settings: Settings) -> Self {
        Hpa {
            settings,
            recommendations: VecDeque::new(),
            ups: VecDeque::new(),
            downs: VecDeque::new(),
        }
    }

    /// The sync at `now` (from any fixed origin), with `current` instances (starting ones
    /// included) and their `readings`; a change it decides is remembered as a scale event.
    pub fn sync(&mut self, now: Duration, current: u32, readings: &[Reading]) -> Decision {
        let s = &self.settings;
        // Outside its bounds the target is brought back first, whatever the metric says.
        if current > s.max || current < s.min {
            let desired = current.clamp(s.min, s.max);
            self.record(now, current, desired);
            return Decision {
                desired,
                recommended: desired,
            };
        }
        let recommended = recommend(s, current, readings);
        let stabilized = self.stabilize(now, current, recommended);
        let desired = self.limit(now, current, stabilized);
        self.record(now, current, desired);
        Decision {
            desired,
            recommended,
        }
    }

    /// The recommendation brought within the lowest recent one (up) and the highest (down).
    fn stabilize(&mut self, now: Duration, current: u32, recommended: u32) -> u32 {
        let s = &self.settings;
        // A sample counts while it is younger than the window (the controller's `After(now -
        // window)`).
        let within = |at: Duration, window: Duration| now.saturating_sub(at) < window;
        let (mut up, mut down) = (recommended, recommended);
        for &(at, r) in &self.recommendations {
            if within(at, s.up.stabilization) {
                up = up.min(r);
            }
            if within(at, s.down.stabilization) {
                down = down.max(r);
            }
        }
        let longest = s.up.stabilization.max(s.down.stabilization);
        self.recommendations
            .retain(|&(at, _)| now.saturating_sub(at) < longest);
        self.recommendations.push_back((now, recommended));
        current.max(up).min(down)
    }

    /// `desired` within the policies' rate, `min` and `max`.
    fn limit(&self, now: Duration, current: u32, desired: u32) -> u32 {
        let s = &self.settings;
        let changed = |events: &VecDeque<(Duration, u32)>, period: Duration| -> i64 {
            events
                .iter()
                .filter(|&&(at, _)| now.saturating_sub(at) < period)
                .map(|&(_, n)| i64::from(n))
                .sum()
        };
        let start_of = |p: &Policy| {
            i64::from(current) - changed(&self.ups, p.period) + changed(&self.downs, p.period)
        };
        if desired > current {
            let proposals = s.up.policies.iter().map(|p| match p.change {
                Change::Instances(n) => start_of(p) + i64::from(n),
                Change::Percent(n) => {
                    (start_of(p) as f64 * (1.0 + f64::from(n) / 100.0)).ceil() as i64
                }
            });
            let limit = match s.up.select {
                Select::Disabled => i64::from(current),
                Select::Max => proposals.max().unwrap_or(i64::from(current)),
                Select::Min => proposals.min().unwrap_or(i64::from(current)),
            };
            let allowed = limit.max(i64::from(current)).min(i64::from(s.max));
            desired.min(allowed as u32)
        } else if desired < current {
            let proposals = s.down.policies.iter().map(|p| match p.change {
                Change::Instances(n) => start_of(p) - i64::from(n),
                // Truncated, as the controller converts it.
                Change::Percent(n) => (start_of(p) as f64 * (1.0 - f64::from(n) / 100.0)) as i64,
            });
            let limit = match s.down.select {
                Select::Disabled => i64::from(current),
                Select::Max => proposals.min().unwrap_or(i64::from(current)),
                Select::Min => proposals.max().unwrap_or(i64::from(current)),
            };
            let allowed = limit.min(i64::from(current)).max(i64::from(s.min));
            desired.max(allowed.max(0) as u32)
        } else {
            desired
        }
    }

    /// Remembers a change from `current` to `desired` at `now`.
    fn record(&mut self, now: Duration, current: u32, desired: u32) {
        let longest = |r: &Rules| r.policies.iter().map(|p| p.period).max();
        let keep = longest(&self.settings.up)
            .max(longest(&self.settings.down))
            .unwrap_or_default();
        for events in [&mut self.ups, &mut self.downs] {
            events.retain(|&(at, _)| now.saturating_sub(at) < keep);
        }
        match desired.cmp(&current) {
            std::cmp::Ordering::Greater => self.ups.push_back((now, desired - current)),
            std::cmp::Ordering::Less => self.downs.push_back((now, current - desired)),
            std::cmp::Ordering::Equal => {}
        }
    }
}

/// What the readings ask for: the ratio of the ready instances' mean to the target times their
/// count, unless within the tolerance; with instances starting or without a metric, the ratio is
/// taken again with them at their conservative value (nothing on a scale-up, their whole budget
/// on a scale-down), and no change is made when that reverses the direction or falls within the
/// tolerance. With no reading at all, `current`.
fn recommend(s: &Settings, current: u32, readings: &[Reading]) -> u32 {
    let ready: Vec<f64> = readings
        .iter()
        .filter_map(|r| match r {
            Reading::Ready(v) => Some(*v),
            _ => None,
        })
        .collect();
    let starting = readings.iter().filter(|r| **r == Reading::Starting).count();
    let missing = readings.iter().filter(|r| **r == Reading::Missing).count();
    if ready.is_empty() || s.target <= 0.0 {
        return current;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let ratio = mean(&ready) / s.target;
    let up_with_starting = starting > 0 && ratio > 1.0;
    if !up_with_starting && missing == 0 {
        if (1.0 - ratio).abs() <= s.tolerance {
            return current;
        }
        return (ratio * ready.len() as f64).ceil() as u32;
    }
    let mut all = ready;
    if missing > 0 {
        let fill = if ratio < 1.0 {
            s.full.map_or(s.target, |f| f.max(s.target))
        } else {
            0.0
        };
        all.extend(std::iter::repeat_n(fill, missing));
    }
    if up_with_starting {
        all.extend(std::iter::repeat_n(0.0, starting));
    }
    let new_ratio = mean(&all) / s.target;
    if (1.0 - new_ratio).abs() <= s.tolerance
        || (ratio < 1.0 && new_ratio > 1.0)
        || (ratio > 1.0 && new_ratio < 1.0)
    {
        return current;
    }
    let wanted = (new_ratio * all.len() as f64).ceil() as u32;
    if (new_ratio < 1.0 && wanted > current) || (new_ratio > 1.0 && wanted < current) {
        return current;
    }
    wanted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn ready(values: &[f64]) -> Vec<Reading> {
        values.iter().map(|v| Reading::Ready(*v)).collect()
    }

    #[test]
    fn the_metric_over_its_target_scales_in_proportion_and_the_tolerance_holds_still() {
        // Kubernetes' documentation: at 200m against a target of 100m the replicas double, at
        // 50m they halve.
        let mut hpa = Hpa::new(Settings::new(1, 10, 100.0));
        assert_eq!(hpa.sync(secs(0), 2, &ready(&[200.0; 2])).desired, 4);
        let mut hpa = Hpa::new(Settings::new(1, 10, 100.0));
        assert_eq!(hpa.sync(secs(0), 4, &ready(&[50.0; 4])).desired, 2);
        // Its blog on the tolerance (v1.33): 50 replicas at 90 % against 75 % become 60; a ratio
        // within 10 % of 1 changes nothing.
        let mut hpa = Hpa::new(Settings::new(1, 100, 0.75));
        assert_eq!(hpa.sync(secs(0), 50, &ready(&[0.9; 50])).desired, 60);
        let mut hpa = Hpa::new(Settings::new(1, 100, 0.75));
        assert_eq!(hpa.sync(secs(0), 50, &ready(&[0.8; 50])).desired, 50);
        // And never past max.
        let mut hpa = Hpa::new(Settings::new(1, 3, 0.5));
        let d = hpa.sync(secs(0), 2, &ready(&[1.0; 2]));
        assert_eq!((d.recommended, d.desired), (4, 3));
    }

    #[test]
    fn starting_instances_and_missing_readings_count_against_the_change() {
        // Two busy instances at twice the target and two still starting: the starting ones count
        // as idle, the ratio is 1 and nothing changes.
        let mut hpa = Hpa::new(Settings::new(1, 10, 0.5));
        let mut readings = ready(&[1.0, 1.0]);
        readings.extend([Reading::Starting, Reading::Starting]);
        assert_eq!(hpa.sync(secs(0), 4, &readings).desired, 4);
        // Two idle-ish instances and one without a reading, on a scale-down: the missing one is
        // taken at its whole budget, which brings the ratio within the tolerance.
        let mut s = Settings::new(1, 10, 0.5);
        s.full = Some(1.0);
        let mut hpa = Hpa::new(s);
        let mut readings = ready(&[0.2, 0.2]);
        readings.push(Reading::Missing);
        assert_eq!(hpa.sync(secs(0), 3, &readings).desired, 3);
        // The same missing instance on a scale-up counts as idle: (1.5 + 1.5 + 0) / 3 is twice
        // the target, 6 instances rather than the 9 the ready ones alone ask for.
        let mut hpa = Hpa::new(Settings::new(1, 10, 0.5));
        let mut readings = ready(&[1.5, 1.5]);
        readings.push(Reading::Missing);
        assert_eq!(hpa.sync(secs(0), 3, &readings).desired, 6);
    }

    #[test]
    fn a_scale_down_waits_for_the_highest_recommendation_of_its_window() {
        let mut hpa = Hpa::new(Settings::new(1, 20, 0.5));
        assert_eq!(hpa.sync(secs(0), 10, &ready(&[0.5; 10])).desired, 10);
        // The load halves: the metric asks for 5, the window remembers 10 until it is 300 s
        // old (a sample counts while younger than the window).
        for t in (15..300).step_by(15) {
            let d = hpa.sync(secs(t), 10, &ready(&[0.25; 10]));
            assert_eq!((d.recommended, d.desired), (5, 10), "at {t} s");
        }
        assert_eq!(hpa.sync(secs(300), 10, &ready(&[0.25; 10])).desired, 5);
    }

    #[test]
    fn the_default_scale_up_adds_the_larger_of_100_percent_and_4_every_15_s() {
        let mut hpa = Hpa::new(Settings::new(1, 20, 0.1));
        // One instance at ten times the target asks for 10: 1 + max(100 %, 4) = 5.
        assert_eq!(hpa.sync(secs(0), 1, &ready(&[1.0])).desired, 5);
        // Within the same 15 s the 4 added count against the period: no more.
        let mut readings = ready(&[1.0]);
        readings.extend([Reading::Starting; 4]);
        assert_eq!(hpa.sync(secs(10), 5, &readings).desired, 5);
        // After it, doubling: 10.
        assert_eq!(hpa.sync(secs(16), 5, &ready(&[1.0; 5])).desired, 10);
    }

    #[test]
    fn scale_down_policies_limit_each_period_as_the_documentation_counts() {
        // Kubernetes' documentation: policies of 4 pods and 10 % per 60 s, the larger change
        // chosen; from 80 replicas wanting 10, the first step removes 8 (10 % of 80), the next,
        // once the period has passed, 8 again (10 % of 72 is 7.2, the count 64.8 truncated).
        let mut s = Settings::new(1, 100, 0.5);
        let per_minute = |change| Policy {
            change,
            period: secs(60),
        };
        s.down.policies = vec![
            per_minute(Change::Instances(4)),
            per_minute(Change::Percent(10)),
        ];
        let mut hpa = Hpa::new(s);
        let idle = |n: usize| ready(&vec![0.0625; n]);
        assert_eq!(hpa.sync(secs(0), 80, &idle(80)).desired, 72);
        assert_eq!(
            hpa.sync(secs(30), 72, &idle(72)).desired,
            72,
            "within the period"
        );
        assert_eq!(hpa.sync(secs(61), 72, &idle(72)).desired, 64);
    }

    #[test]
    fn a_count_outside_min_and_max_is_brought_back_first() {
        let mut hpa = Hpa::new(Settings::new(2, 5, 0.5));
        assert_eq!(hpa.sync(secs(0), 1, &ready(&[0.0])).desired, 2);
        assert_eq!(hpa.sync(secs(15), 7, &ready(&[1.0; 7])).desired, 5);
        let mut off = Settings::new(1, 10, 0.5);
        off.up.select = Select::Disabled;
        let mut hpa = Hpa::new(off);
        assert_eq!(hpa.sync(secs(0), 2, &ready(&[1.0; 2])).desired, 2);
    }
}
