//! Knative's Pod Autoscaler (KPA, the model of Cloud Run's) as Knative Serving decides: the
//! revision's metric (requests in flight or a second, summed over its instances and the
//! requests its activator holds) averaged over a stable and a panic window of one-second
//! buckets; the instances each average asks for at the target, within the scale-up and
//! scale-down rates; panic entered when the panic window asks for `panic_threshold` times the
//! ready instances, no scale-down while panicking, left a stable window after the last time
//! over; then `min` and `max`, and scale to zero after the stable window and the grace period.
//!
//! Written here from Knative Serving's source (`pkg/autoscaler/scaling/autoscaler.go`,
//! `pkg/autoscaler/aggregation/bucketing.go`, `pkg/reconciler/autoscaling/kpa/scaler.go`): no
//! Rust crate models it.

use std::collections::VecDeque;
use std::time::Duration;

/// A KPA's settings, with Knative's defaults from [`Settings::new`].
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Fewest instances (`min-scale`); 0 lets the revision scale to zero.
    pub min: u32,
    /// Most instances (`max-scale`).
    pub max: u32,
    /// The metric per instance aimed at before the utilization (`autoscaling.knative.dev/target`,
    /// at most `containerConcurrency` when that is set for the concurrency metric).
    pub target: f64,
    /// The share of `target` actually aimed at (`target-utilization-percentage`, 0.7).
    pub utilization: f64,
    /// The long window (`stable-window`, 60 s).
    pub stable_window: Duration,
    /// The short window (`panic-window-percentage` of the stable one, 10 %: 6 s).
    pub panic_window: Duration,
    /// Panic when the panic window asks for this many times the ready instances
    /// (`panic-threshold-percentage` / 100, 2.0).
    pub panic_threshold: f64,
    /// At most this many times the ready instances at a decision (`max-scale-up-rate`, 1000).
    pub max_scale_up_rate: f64,
    /// At least the ready instances divided by this (`max-scale-down-rate`, 2).
    pub max_scale_down_rate: f64,
    /// How long the revision must want no instance, once inactive, before its last one goes
    /// (`scale-to-zero-grace-period`, 30 s).
    pub scale_to_zero_grace: Duration,
    /// A scale-down waits until the higher decisions of this long before have passed
    /// (`scale-down-delay`, 0).
    pub scale_down_delay: Duration,
    /// Time between decisions (the autoscaler's tick, 2 s).
    pub tick: Duration,
}

impl Settings {
    /// Knative's defaults between `min` and `max` at `target` per instance: 70 % of it aimed at,
    /// windows of 60 s and 6 s, panic at 200 %, scale-up rate 1000, scale-down rate 2, a grace
    /// period of 30 s before zero, no scale-down delay, a decision every 2 s.
    pub fn new(min: u32, max: u32, target: f64) -> Self {
        Settings {
            min,
            max,
            target,
            utilization: 0.7,
            stable_window: Duration::from_secs(60),
            panic_window: Duration::from_secs(6),
            panic_threshold: 2.0,
            max_scale_up_rate: 1000.0,
            max_scale_down_rate: 2.0,
            scale_to_zero_grace: Duration::from_secs(30),
            scale_down_delay: Duration::ZERO,
            tick: Duration::from_secs(2),
        }
    }

    /// The metric per instance the decisions aim at: `target` × `utilization` (at least 0.01, as
    /// Knative's `TargetMin`).
    pub fn target_value(&self) -> f64 {
        (self.target * self.utilization).max(0.01)
    }
}

/// The average of one-second buckets over a window, as Knative's `TimedFloat64Buckets`: over
/// the seconds since the first reading while that is shorter than the window, over the window's
/// seconds not yet past the last reading when readings stop, nothing once a whole window has
/// none. A second without a reading between two that have one counts as 0.
#[derive(Debug, Clone)]
struct Window {
    /// Buckets in the window.
    len: u64,
    /// (second, total) of the last `len` seconds up to the last reading.
    buckets: VecDeque<(u64, f64)>,
    /// The first reading's second since the window was last empty.
    first: u64,
    /// The last reading's second, once there is one.
    last: Option<u64>,
}

impl Window {
    fn new(window: Duration) -> Window {
        Window {
            len: window.as_secs_f64().ceil().max(1.0) as u64,
            buckets: VecDeque::new(),
            first: 0,
            last: None,
        }
    }

    /// Adds `value` to the bucket of `second`; a reading a whole window or more after the last
    /// starts the window afresh, one a window or more before it is dropped.
    fn record(&mut self, second: u64, value: f64) {
        match self.last {
            Some(last) if second + self.len <= last => return,
            Some(last) if second >= last + self.len => {
                self.buckets.clear();
                self.first = second;
            }
            None => self.first = second,
            Some(_) => self.first = self.first.min(second),
        }
        let last = self.last.map_or(second, |l| l.max(second));
        self.last = Some(last);
        match self.buckets.iter_mut().find(|(s, _)| *s == second) {
            Some((_, total)) => *total += value,
            None => self.buckets.push_back((second, value)),
        }
        self.buckets.retain(|(s, _)| s + self.len > last);
    }

    /// Whether no reading is younger than the window at `now` (Knative's `IsEmpty`).
    fn is_empty(&self, now: u64) -> bool {
        self.last
            .is_none_or(|last| now.saturating_sub(last) > self.len)
    }

    /// The window's average at `now`.
    fn average(&self, now: u64) -> f64 {
        let Some(last) = self.last else { return 0.0 };
        let gap = now.saturating_sub(last);
        if gap >= self.len {
            return 0.0;
        }
        let sum: f64 = self
            .buckets
            .iter()
            .filter(|(s, _)| s + self.len > now)
            .map(|(_, v)| v)
            .sum();
        let valid = (last - self.first + 1).min(self.len - gap);
        sum / valid as f64
    }
}

/// What a decision saw and decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    /// The instances wanted now.
    pub desired: u32,
    /// The stable window's average of the revision's metric.
    pub stable: f64,
    /// The panic window's.
    pub panic: f64,
    /// Whether the decision was made in panic mode.
    pub panicking: bool,
}

/// A KPA's state between decisions.
#[derive(Debug, Clone)]
pub struct Kpa {
    settings: Settings,
    stable: Window,
    panic: Window,
    /// When panic mode was last entered or extended.
    panic_time: Option<Duration>,
    /// The most instances decided in this panic.
    max_panic: u32,
    /// (time, decision) within the scale-down delay.
    delayed: VecDeque<(Duration, u32)>,
    /// When the revision last became active (had a ready instance after none).
    active_since: Option<Duration>,
    /// When it was marked inactive (wanted no instance).
    inactive_since: Option<Duration>,
}

impl Kpa {
    /// A KPA with `settings` and no readings.
    pub fn new(settings: Settings) -> Self {
        Kpa {
            stable: Window::new(settings.stable_window),
            panic: Window::new(settings.panic_window),
            settings,
            panic_time: None,
            max_panic: 0,
            delayed: VecDeque::new(),
            active_since: None,
            inactive_since: None,
        }
    }

    /// The settings it decides by.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Records the revision's metric over the second `second` (from any fixed origin): the
    /// requests in flight on average (or completed) summed over its instances, with those its
    /// activator held.
    pub fn record(&mut self, second: u64, total: f64) {
        self.stable.record(second, total);
        self.panic.record(second, total);
    }

    /// The decision at `now` with `ready` instances ready and `current` wanted so far: `current`
    /// when there is no reading to decide on.
    pub fn decide(&mut self, now: Duration, ready: u32, current: u32) -> Decision {
        if ready > 0 && self.active_since.is_none() {
            self.active_since = Some(now);
        }
        let second = now.as_secs();
        let (stable, panic) = (self.stable.average(second), self.panic.average(second));
        let mut decision = Decision {
            desired: current,
            stable,
            panic,
            panicking: self.panic_time.is_some(),
        };
        if self.stable.is_empty(second) {
            return decision;
        }
        let wanted = self.scale(now, ready, stable, panic);
        decision.panicking = self.panic_time.is_some();
        let s = &self.settings;
        let bounded = wanted.max(s.min).min(s.max.max(s.min));
        decision.desired = self.scale_to_zero(now, bounded, current);
        if decision.desired == 0 {
            self.active_since = None;
        }
        decision
    }

    /// The autoscaler's `Scale`: the instances the windows ask for, before the bounds.
    fn scale(&mut self, now: Duration, ready: u32, stable: f64, panic: f64) -> u32 {
        let s = &self.settings;
        let ready = f64::from(ready.max(1));
        let max_up = (s.max_scale_up_rate * ready).ceil();
        let max_down = (ready / s.max_scale_down_rate).floor();
        let target = s.target_value();
        let (dspc, dppc) = ((stable / target).ceil(), (panic / target).ceil());
        let stable_count = dspc.max(max_down).min(max_up) as u32;
        let panic_count = dppc.max(max_down).min(max_up) as u32;
        let over = dppc / ready >= s.panic_threshold;
        match self.panic_time {
            _ if over => self.panic_time = Some(now),
            // Left once the surge has been in the stable window a whole window.
            Some(at) if at + s.stable_window < now => {
                self.panic_time = None;
                self.max_panic = 0;
            }
            _ => {}
        }
        let mut desired = stable_count;
        if self.panic_time.is_some() {
            // No scale-down while panicking; the larger of the two windows' asks.
            self.max_panic = self.max_panic.max(desired.max(panic_count));
            desired = self.max_panic;
        }
        if !s.scale_down_delay.is_zero() {
            let delay = s.scale_down_delay;
            self.delayed.retain(|&(at, _)| at + delay > now);
            self.delayed.push_back((now, desired));
            desired = self
                .delayed
                .iter()
                .map(|&(_, d)| d)
                .max()
                .unwrap_or(desired);
        }
        desired
    }

    /// The reconciler's scale to zero: a revision active for less than a stable window keeps one
    /// instance; after that, wanting none marks it inactive, and its last instance goes once it
    /// has been inactive for the grace period (`current` is kept meanwhile).
    fn scale_to_zero(&mut self, now: Duration, desired: u32, current: u32) -> u32 {
        if desired != 0 {
            self.inactive_since = None;
            return desired;
        }
        let s = &self.settings;
        if let Some(active) = self.active_since {
            if now.saturating_sub(active) < s.stable_window {
                return 1;
            }
        }
        let since = *self.inactive_since.get_or_insert(now);
        if now.saturating_sub(since) >= s.scale_to_zero_grace {
            0
        } else {
            current
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// Settings with the whole target aimed at, to read the arithmetic plainly.
    fn at_target(min: u32, max: u32, target: f64) -> Settings {
        Settings {
            utilization: 1.0,
            ..Settings::new(min, max, target)
        }
    }

    #[test]
    fn the_instances_are_the_concurrency_over_the_target_at_its_utilization() {
        // Knative's (and Alibaba's ACK) documentation: containerConcurrency 10 at a target
        // utilization of 70 %, 100 requests in flight ask for ceil(100 / 7) = 15 instances.
        let mut kpa = Kpa::new(Settings::new(1, 100, 10.0));
        for s in 0..60 {
            kpa.record(s, 100.0);
        }
        let d = kpa.decide(secs(60), 15, 15);
        assert_eq!(d.desired, 15);
        assert!((d.stable - 100.0).abs() < 1e-9, "{d:?}");
        assert!(!d.panicking);
        // Targets of 100 in flight at 70 % (Knative's default without containerConcurrency).
        assert!((Settings::new(1, 10, 100.0).target_value() - 70.0).abs() < 1e-9);
    }

    #[test]
    fn the_scale_up_rate_still_adds_an_instance_and_the_scale_down_rate_halves_at_most() {
        // Knative's own example in autoscaler.go: a rate of 1.1, 2 ready, 3 in flight at a
        // target of 1 asks for 3, and ceil(1.1 × 2) = 3 lets it.
        let mut kpa = Kpa::new(Settings {
            max_scale_up_rate: 1.1,
            ..at_target(1, 10, 1.0)
        });
        for s in 0..10 {
            kpa.record(s, 3.0);
        }
        assert_eq!(kpa.decide(secs(10), 2, 2).desired, 3);
        // From 10 ready, 1 in flight (1 instance's worth) brings them to 10 / 2 = 5 at most.
        let mut kpa = Kpa::new(at_target(1, 10, 1.0));
        for s in 0..10 {
            kpa.record(s, 1.0);
        }
        assert_eq!(kpa.decide(secs(10), 10, 10).desired, 5);
    }

    #[test]
    fn a_burst_in_the_panic_window_panics_and_panic_never_scales_down_until_a_stable_window_passes()
    {
        // 5 ready at a target of 10: a minute at 50, then a burst of 100 in flight. The stable
        // window barely moves; the 6 s panic window asks for 10 = 2 × 5 ready: panic.
        let mut kpa = Kpa::new(at_target(1, 100, 10.0));
        for s in 0..60 {
            kpa.record(s, 50.0);
        }
        assert_eq!(kpa.decide(secs(60), 5, 5).desired, 5);
        for s in 60..66 {
            kpa.record(s, 100.0);
        }
        let d = kpa.decide(secs(66), 5, 5);
        assert!(d.panicking, "{d:?}");
        assert!((d.panic - 100.0).abs() < 1e-9, "{d:?}");
        assert_eq!(d.desired, 10);
        // Just under twice the ready instances does not panic.
        let mut calm = Kpa::new(at_target(1, 100, 10.0));
        for s in 0..66 {
            calm.record(s, if s < 60 { 50.0 } else { 90.0 });
        }
        let d = calm.decide(secs(66), 5, 5);
        assert!(!d.panicking, "{d:?}");
        assert_eq!(d.desired, 6, "the stable window's ceil({} / 10)", d.stable);
        // The burst ends: the panic window falls but the count holds while panicking...
        for s in 66..80 {
            kpa.record(s, 20.0);
        }
        let d = kpa.decide(secs(80), 10, 10);
        assert!(d.panicking);
        assert_eq!(d.desired, 10);
        // ... and a stable window after the last decision over the threshold (66 s) it is left:
        // the stable window's average decides again, ceil(20 / 10) = 2 held at 10 / 2 = 5 by
        // the scale-down rate.
        for s in 80..127 {
            kpa.record(s, 20.0);
        }
        assert!(
            kpa.decide(secs(126), 10, 10).panicking,
            "66 + 60 is not yet past"
        );
        let d = kpa.decide(secs(127), 10, 10);
        assert!(!d.panicking, "{d:?}");
        assert!((d.stable - 20.0).abs() < 1e-9, "{d:?}");
        assert_eq!(d.desired, 5);
    }

    #[test]
    fn the_last_instance_goes_after_a_stable_window_without_traffic_and_the_grace_period() {
        // Knative's documentation: the last replica is removed only after no traffic for the
        // whole stable window; the reconciler then waits the grace period (30 s).
        let mut kpa = Kpa::new(Settings::new(0, 10, 100.0));
        let mut current = 1;
        let mut zero_at = None;
        for s in 0..200u64 {
            kpa.record(s, if s < 10 { 5.0 } else { 0.0 });
            if s % 2 == 0 {
                current = kpa.decide(secs(s), current.min(1), current).desired;
                if current == 0 && zero_at.is_none() {
                    zero_at = Some(s);
                }
            }
        }
        // The last second with traffic is 9: the stable window holds none of it from 69 on
        // (the tick at 70 marks the revision inactive), and 30 s later it goes.
        assert_eq!(zero_at, Some(100));
        // With `min` 1 it never goes.
        let mut kpa = Kpa::new(Settings::new(1, 10, 100.0));
        for s in 0..200u64 {
            kpa.record(s, if s < 10 { 5.0 } else { 0.0 });
        }
        assert_eq!(kpa.decide(secs(200), 1, 1).desired, 1);
    }

    #[test]
    fn held_requests_wake_a_revision_at_zero_which_then_keeps_an_instance_a_stable_window() {
        let mut kpa = Kpa::new(Settings::new(0, 10, 100.0));
        // No reading yet: the count stays.
        assert_eq!(kpa.decide(secs(0), 0, 0).desired, 0);
        // The activator holds 3 requests: one instance (the ready count taken as 1 at zero).
        kpa.record(1, 3.0);
        let d = kpa.decide(secs(1), 0, 0);
        assert_eq!(d.desired, 1);
        assert!(!d.panicking, "ceil(3 / 70) = 1 is not twice 1");
        // The instance is ready at 5 s; nothing more comes. At 61 s the stable window holds no
        // traffic, but a revision active for less than a stable window keeps one instance...
        for s in 2..=95 {
            kpa.record(s, 0.0);
        }
        assert_eq!(kpa.decide(secs(5), 1, 1).desired, 1);
        let d = kpa.decide(secs(61), 1, 1);
        assert_eq!((d.desired, d.stable), (1, 0.0));
        // ... then it is marked inactive (65 s) and its instance goes after the grace period.
        assert_eq!(kpa.decide(secs(65), 1, 1).desired, 1);
        assert_eq!(kpa.decide(secs(94), 1, 1).desired, 1);
        assert_eq!(kpa.decide(secs(95), 1, 1).desired, 0);
    }

    #[test]
    fn the_windows_average_over_what_they_have_seen_and_gaps_count_as_zero() {
        let mut w = Window::new(secs(60));
        assert_eq!(w.average(0), 0.0);
        assert!(w.is_empty(0));
        // Six seconds of data: the average of six buckets, not sixty.
        for s in 0..6 {
            w.record(s, 60.0);
        }
        assert_eq!(w.average(5), 60.0);
        // A gap: the seconds between count as 0.
        w.record(9, 60.0);
        assert_eq!(w.average(9), 420.0 / 10.0);
        // Readings stop: the window shrinks by the seconds since the last one, and its old
        // buckets fall out.
        assert_eq!(w.average(19), 420.0 / 10.0);
        assert_eq!(
            w.average(68),
            60.0,
            "only second 9 is left, and 1 valid second"
        );
        assert_eq!(w.average(69), 0.0);
        assert!(!w.is_empty(69));
        assert!(w.is_empty(70));
        // After a whole window without readings it starts again.
        w.record(100, 10.0);
        assert_eq!(w.average(100), 10.0);
    }
}
