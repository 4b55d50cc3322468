//! Open-model scheduler (scheduling layer, pure): turns a rate curve into absolute send times
//! from a fixed origin, so timer jitter never accumulates and a late thread catches up at once
//! (plan → engine).
//!
//! An arrival happens when the cumulative rate Λ(t) reaches its `u`: `u = i` for the `i`-th of
//! evenly spaced arrivals, points of a unit-rate Poisson process for Poisson arrivals. Threads
//! and shards share the load by striping the unit slots of Λ: stripe `k` of `S` takes slots
//! `k, k+S, k+2S, …` ([`ArrivalClock`]), so their union is the one schedule.

use std::time::Duration;

use loadlab_run::{Arrival, RatePhase};

/// One linear stretch of a rate curve.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Segment {
    /// When it starts, seconds from the origin.
    start_s: f64,
    /// How long it lasts (may be infinite for a constant last stretch).
    duration_s: f64,
    start_rps: f64,
    end_rps: f64,
    /// Arrivals expected before it starts.
    cum_start: f64,
    /// How its arrivals are spaced, when not as the clock's.
    arrival: Option<Arrival>,
}

impl Segment {
    fn slope(&self) -> f64 {
        if self.duration_s.is_finite() && self.duration_s > 0.0 {
            (self.end_rps - self.start_rps) / self.duration_s
        } else {
            0.0
        }
    }

    /// Arrivals from its start to `t` seconds into it.
    fn cumulative(&self, t: f64) -> f64 {
        if t <= 0.0 {
            return 0.0;
        }
        self.start_rps * t + 0.5 * self.slope() * t * t
    }

    /// Arrivals over the whole segment.
    fn total(&self) -> f64 {
        match (self.duration_s.is_infinite(), self.start_rps > 0.0) {
            (true, true) => f64::INFINITY,
            (true, false) => 0.0,
            (false, _) => self.cumulative(self.duration_s),
        }
    }

    /// Seconds into the segment at which its own count reaches `u`, if within it.
    ///
    /// Solves `r0·t + a·t²/2 = u` as `t = 2u / (r0 + √(r0² + 2au))`, a form that stays exact
    /// when the slope `a` is zero or tiny and when the ramp starts from zero.
    fn time_of(&self, u: f64) -> Option<f64> {
        if u <= 0.0 {
            return Some(0.0);
        }
        let r0 = self.start_rps;
        let disc = r0 * r0 + 2.0 * self.slope() * u;
        if disc < 0.0 {
            return None;
        }
        let denom = r0 + disc.sqrt();
        if denom <= 0.0 {
            return None;
        }
        let t = 2.0 * u / denom;
        (t < self.duration_s).then_some(t)
    }
}

/// A stretch as given: its start and end rates, its length in seconds, and how its arrivals
/// are spaced when not as the clock's.
type Stretch = (f64, f64, f64, Option<Arrival>);

/// A rate over time made of linear stretches: constant rates, ramps and pauses in order.
#[derive(Debug, Clone, PartialEq)]
pub struct RateCurve {
    segments: Vec<Segment>,
}

impl RateCurve {
    /// A single linear ramp; `end_rps` equal to `start_rps` gives a constant rate, and an
    /// infinite `duration_s` a constant rate stopped by a count.
    pub fn new(start_rps: f64, end_rps: f64, duration_s: f64) -> Self {
        let end_rps = if duration_s.is_finite() {
            end_rps
        } else {
            start_rps
        };
        RateCurve::from_stretches(&[(start_rps, end_rps, duration_s, None)])
    }

    /// The curve of a plan's phases; a phase without a duration lasts until `end_s` (the
    /// run's duration, or infinity).
    pub fn from_phases(phases: &[RatePhase], end_s: f64) -> Self {
        let mut elapsed = 0.0;
        let stretches: Vec<Stretch> = phases
            .iter()
            .map(|p| {
                let d = p
                    .duration
                    .map_or((end_s - elapsed).max(0.0), |d| d.as_secs_f64());
                elapsed += d;
                (p.start_rps, p.end_rps, d, p.arrival)
            })
            .collect();
        RateCurve::from_stretches(&stretches)
    }

    fn from_stretches(stretches: &[Stretch]) -> Self {
        let mut segments = Vec::with_capacity(stretches.len());
        let (mut start_s, mut cum) = (0.0, 0.0);
        for &(start_rps, end_rps, duration_s, arrival) in stretches {
            let seg = Segment {
                start_s,
                duration_s,
                start_rps,
                end_rps,
                cum_start: cum,
                arrival,
            };
            start_s += duration_s;
            cum += seg.total();
            segments.push(seg);
        }
        RateCurve { segments }
    }

    /// Arrivals expected from 0 to `t` seconds: Λ(t).
    pub fn cumulative(&self, t: f64) -> f64 {
        let mut total = 0.0;
        for seg in &self.segments {
            if t <= seg.start_s {
                break;
            }
            total = seg.cum_start + seg.cumulative((t - seg.start_s).min(seg.duration_s));
        }
        total
    }

    /// Arrivals expected over the whole curve (infinite for an unbounded constant rate).
    pub fn total(&self) -> f64 {
        self.segments
            .last()
            .map_or(0.0, |s| s.cum_start + s.total())
    }

    /// How the arrivals around Λ = `u` are spaced, when their stretch says.
    fn arrival_at(&self, u: f64) -> Option<Arrival> {
        let seg = self
            .segments
            .iter()
            .find(|s| u < s.cum_start + s.total())
            .or(self.segments.last())?;
        seg.arrival
    }

    /// The time at which Λ(t) reaches `u`, or `None` past the end of the curve. An arrival
    /// exactly at a pause's count waits for the next stretch with a rate.
    pub fn time_of(&self, u: f64) -> Option<f64> {
        self.segments
            .iter()
            .find(|s| u < s.cum_start + s.total() || (u <= s.cum_start && s.start_rps > 0.0))
            .and_then(|s| s.time_of(u - s.cum_start).map(|t| s.start_s + t))
    }
}

/// One stripe's stream of arrival times, as offsets from the run's origin.
///
/// The schedule is cut into slots of one expected arrival each (slot `j` spans Λ from `j` to
/// `j + 1`): a uniform schedule has one arrival at the start of each slot, a Poisson schedule a
/// Poisson(1) number of them at uniform places inside it, drawn from the seed and the slot's
/// number alone. Stripe `s` of `S` takes slots `s, s+S, s+2S, …`, so any set of stripes that
/// covers `0..S` gives back the one schedule, whatever `S` is: generator threads and shards
/// (`--shard I/N`) split the same arrivals.
#[derive(Debug, Clone)]
pub struct ArrivalClock {
    curve: RateCurve,
    arrival: Arrival,
    seed: u64,
    /// Slots between this stripe's consecutive slots (the stripe count).
    stride: u64,
    /// The slot whose arrivals are in `due`.
    slot: u64,
    /// Λ values of the current slot's arrivals not yet released, latest first.
    due: Vec<f64>,
    /// Arrivals this stripe may still release (its share of the run's count).
    remaining: Option<u64>,
    next: Option<Duration>,
}

impl ArrivalClock {
    /// The clock of stripe `stripe` of `stripes`; `count` is this stripe's share of the run's
    /// request count, if the run has one.
    pub fn new(
        curve: RateCurve,
        arrival: Arrival,
        stripe: usize,
        stripes: usize,
        seed: u64,
        count: Option<u64>,
    ) -> Self {
        let mut clock = ArrivalClock {
            curve,
            arrival,
            seed,
            stride: stripes.max(1) as u64,
            slot: stripe as u64,
            due: Vec::new(),
            remaining: count,
            next: None,
        };
        clock.fill_slot();
        clock.next = clock.compute_next();
        clock
    }

    /// Puts the arrivals of `self.slot` into `due`, moving on past empty Poisson slots until
    /// one has an arrival or the curve has ended.
    fn fill_slot(&mut self) {
        loop {
            let start = self.slot as f64;
            match self.curve.arrival_at(start).unwrap_or(self.arrival) {
                Arrival::Uniform => self.due.push(start),
                Arrival::Poisson => {
                    let mut rng = fastrand::Rng::with_seed(slot_seed(self.seed, self.slot));
                    let n = poisson_one(&mut rng);
                    self.due.extend((0..n).map(|_| start + rng.f64()));
                    self.due.sort_by(|a, b| b.total_cmp(a));
                }
            }
            if !self.due.is_empty() || self.curve.time_of(start).is_none() {
                return;
            }
            self.slot += self.stride;
        }
    }

    fn compute_next(&self) -> Option<Duration> {
        if self.remaining == Some(0) {
            return None;
        }
        let u = *self.due.last()?;
        self.curve.time_of(u).map(Duration::from_secs_f64)
    }

    /// Offset of the next arrival from the origin, or `None` when the schedule is over.
    pub fn peek(&self) -> Option<Duration> {
        self.next
    }

    /// Moves past the next arrival.
    pub fn advance(&mut self) {
        if self.next.is_none() {
            return;
        }
        if let Some(r) = self.remaining.as_mut() {
            *r -= 1;
        }
        self.due.pop();
        if self.due.is_empty() {
            self.slot += self.stride;
            self.fill_slot();
        }
        self.next = self.compute_next();
    }

    /// Releases, in order, every arrival due at or before `now` (an offset from the origin),
    /// calling `release` with each one's intended offset. After a stall this releases the
    /// whole backlog at once, each with its original time, so the delay shows in latency.
    pub fn release_due(&mut self, now: Duration, mut release: impl FnMut(Duration)) {
        while let Some(t) = self.next {
            if t > now {
                break;
            }
            release(t);
            self.advance();
        }
    }
}

/// The stripe of generator thread `thread` of `threads` in shard `index` of `count` (`(0, 1)`
/// unsharded): shard `index` owns the slots `index` mod `count`, and its threads split those.
pub fn stripe(thread: usize, threads: usize, (index, count): (usize, usize)) -> (usize, usize) {
    (index + count * thread, count * threads)
}

/// The seed of slot `slot`'s random draws: the run's seed and the slot mixed (SplitMix64), so
/// neighbouring slots draw unrelated numbers.
fn slot_seed(seed: u64, slot: u64) -> u64 {
    let mut z = seed ^ slot.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A Poisson variate with mean 1 (Knuth's product of uniforms).
fn poisson_one(rng: &mut fastrand::Rng) -> usize {
    let limit = (-1.0f64).exp();
    let (mut n, mut product) = (0, rng.f64());
    while product > limit {
        n += 1;
        product *= rng.f64();
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(d: Duration) -> f64 {
        d.as_secs_f64() * 1000.0
    }

    fn times(clock: &mut ArrivalClock, until: Duration) -> Vec<Duration> {
        let mut out = Vec::new();
        clock.release_due(until, |t| out.push(t));
        out
    }

    #[test]
    fn constant_rate_sends_at_exact_multiples_of_the_interval() {
        let curve = RateCurve::new(100.0, 100.0, 1.0);
        let mut c = ArrivalClock::new(curve.clone(), Arrival::Uniform, 0, 1, 0, None);
        let t = times(&mut c, Duration::from_secs(5));
        assert_eq!(t.len(), 100, "100 req/s for 1 s");
        for (i, d) in t.iter().enumerate() {
            assert!(
                (ms(*d) - 10.0 * i as f64).abs() < 1e-6,
                "arrival {i} at {d:?}"
            );
        }
    }

    #[test]
    fn striped_threads_interleave_into_the_single_thread_schedule() {
        let curve = RateCurve::new(300.0, 900.0, 2.0);
        let mut one = ArrivalClock::new(curve.clone(), Arrival::Uniform, 0, 1, 0, None);
        let all = times(&mut one, Duration::from_secs(3));
        let mut merged: Vec<Duration> = (0..3)
            .flat_map(|k| {
                let mut c = ArrivalClock::new(curve.clone(), Arrival::Uniform, k, 3, 0, None);
                times(&mut c, Duration::from_secs(3))
            })
            .collect();
        merged.sort();
        assert_eq!(merged.len(), all.len());
        for (a, b) in merged.iter().zip(&all) {
            assert!((ms(*a) - ms(*b)).abs() < 1e-6);
        }
    }

    /// Every arrival of `shards` shards of `threads` threads each, in time order.
    fn union_of_shards(
        curve: &RateCurve,
        arrival: Arrival,
        shards: usize,
        threads: usize,
    ) -> Vec<Duration> {
        let mut all: Vec<Duration> = (0..shards)
            .flat_map(|i| (0..threads).map(move |t| stripe(t, threads, (i, shards))))
            .flat_map(|(k, of)| {
                let mut c = ArrivalClock::new(curve.clone(), arrival, k, of, 7, None);
                times(&mut c, Duration::from_secs(60))
            })
            .collect();
        all.sort();
        all
    }

    #[test]
    fn the_union_of_the_shards_is_the_unsharded_schedule_exactly() {
        use std::time::Duration as D;
        let phases = [
            RatePhase::ramp("up", 0.0, 900.0, D::from_secs(2)),
            RatePhase::pause("quiet", D::from_millis(500)),
            RatePhase::constant("hold", 700.0, Some(D::from_secs(1))),
            RatePhase::ramp("down", 700.0, 50.0, D::from_millis(1500)),
        ];
        let curve = RateCurve::from_phases(&phases, f64::INFINITY);
        for arrival in [Arrival::Uniform, Arrival::Poisson] {
            let one = union_of_shards(&curve, arrival, 1, 1);
            assert!(one.len() > 2000, "{arrival:?}: {} arrivals", one.len());
            for (shards, threads) in [(2, 1), (3, 2), (8, 3), (32, 1)] {
                let union = union_of_shards(&curve, arrival, shards, threads);
                assert_eq!(
                    union, one,
                    "{arrival:?}: {shards} shards x {threads} threads"
                );
            }
        }
    }

    #[test]
    fn arrival_k_goes_to_shard_k_mod_n() {
        let curve = RateCurve::new(100.0, 100.0, 1.0);
        for i in 0..3 {
            let (k, of) = stripe(0, 1, (i, 3));
            let mut c = ArrivalClock::new(curve.clone(), Arrival::Uniform, k, of, 0, None);
            let mine: Vec<u64> = times(&mut c, Duration::from_secs(2))
                .iter()
                .map(|d| (d.as_secs_f64() * 100.0).round() as u64)
                .collect();
            assert!(
                mine.iter().all(|k| k % 3 == i as u64),
                "shard {i}: {mine:?}"
            );
            assert_eq!(mine.len(), [34, 33, 33][i]);
        }
    }

    #[test]
    fn a_ramp_follows_its_line_second_by_second() {
        // 100 → 1100 req/s over 10 s: second s should hold about 150 + 100·s arrivals.
        let curve = RateCurve::new(100.0, 1100.0, 10.0);
        let mut c = ArrivalClock::new(curve.clone(), Arrival::Uniform, 0, 1, 0, None);
        let t = times(&mut c, Duration::from_secs(20));
        let mut per_second = [0u32; 10];
        for d in &t {
            per_second[d.as_secs() as usize] += 1;
        }
        for (s, n) in per_second.iter().enumerate() {
            let expected = 150.0 + 100.0 * s as f64;
            assert!(
                (f64::from(*n) - expected).abs() <= 1.0,
                "second {s}: {n} arrivals, expected {expected}"
            );
        }
        assert_eq!(t.len() as f64, curve.total());
    }

    #[test]
    fn a_ramp_from_zero_and_a_ramp_down_to_zero_are_solved() {
        let up = RateCurve::new(0.0, 200.0, 2.0);
        assert_eq!(up.time_of(0.0), Some(0.0));
        let t = up.time_of(100.0).unwrap();
        assert!((up.cumulative(t) - 100.0).abs() < 1e-9);
        let down = RateCurve::new(200.0, 0.0, 2.0);
        assert!((down.total() - 200.0).abs() < 1e-9);
        let t = down.time_of(199.0).unwrap();
        assert!((down.cumulative(t) - 199.0).abs() < 1e-6);
        assert_eq!(down.time_of(200.5), None);
    }

    #[test]
    fn a_count_caps_the_arrivals_even_without_a_duration() {
        let curve = RateCurve::new(1000.0, 1000.0, f64::INFINITY);
        let mut c = ArrivalClock::new(curve.clone(), Arrival::Uniform, 0, 1, 0, Some(250));
        let t = times(&mut c, Duration::from_secs(60));
        assert_eq!(t.len(), 250);
        assert_eq!(c.peek(), None);
        assert!((ms(*t.last().unwrap()) - 249.0).abs() < 1e-6);
    }

    #[test]
    fn after_a_stall_the_backlog_is_released_at_once_with_its_original_times() {
        let curve = RateCurve::new(200.0, 200.0, 10.0);
        let mut c = ArrivalClock::new(curve.clone(), Arrival::Uniform, 0, 1, 0, None);
        // The scheduler ran at 0 ms, then not again until 500 ms.
        assert_eq!(times(&mut c, Duration::ZERO).len(), 1);
        let backlog = times(&mut c, Duration::from_millis(500));
        assert_eq!(backlog.len(), 100, "arrivals at 5, 10, … 500 ms");
        assert!((ms(backlog[0]) - 5.0).abs() < 1e-6);
        assert!((ms(backlog[99]) - 500.0).abs() < 1e-6);
        // Then it is back on the original grid, not shifted by the stall.
        assert!((ms(c.peek().unwrap()) - 505.0).abs() < 1e-6);
    }

    #[test]
    fn phases_follow_one_another_and_a_pause_sends_nothing() {
        use std::time::Duration as D;
        let phases = [
            RatePhase::constant("warm", 100.0, Some(D::from_secs(2))),
            RatePhase::pause("quiet", D::from_secs(1)),
            RatePhase::ramp("up", 100.0, 300.0, D::from_secs(2)),
            RatePhase::constant("hold", 300.0, None),
        ];
        let curve = RateCurve::from_phases(&phases, 7.0);
        assert!((curve.total() - (200.0 + 0.0 + 400.0 + 600.0)).abs() < 1e-9);
        let mut c = ArrivalClock::new(curve.clone(), Arrival::Uniform, 0, 1, 0, None);
        let t = times(&mut c, Duration::from_secs(60));
        assert_eq!(t.len(), 1200);
        let in_range = |a: f64, b: f64| {
            t.iter()
                .filter(|d| (a..b).contains(&d.as_secs_f64()))
                .count()
        };
        assert_eq!(in_range(0.0, 2.0), 200);
        assert_eq!(in_range(2.0, 3.0), 0, "the pause sends nothing");
        assert_eq!(in_range(3.0, 5.0), 400);
        assert_eq!(in_range(5.0, 7.0), 600);
        // The first arrival after the pause is at its end, not during it.
        assert!((t[200].as_secs_f64() - 3.0).abs() < 1e-9, "{:?}", t[200]);
    }

    #[test]
    fn a_curve_that_starts_with_a_pause_starts_sending_after_it() {
        let phases = [
            RatePhase::pause("wait", Duration::from_secs(1)),
            RatePhase::constant("go", 10.0, Some(Duration::from_secs(1))),
        ];
        let curve = RateCurve::from_phases(&phases, f64::INFINITY);
        assert_eq!(curve.time_of(0.0), Some(1.0));
        assert_eq!(curve.time_of(9.0).map(|t| (t * 10.0).round()), Some(19.0));
        assert_eq!(curve.time_of(10.0), None);
        assert!((curve.cumulative(1.5) - 5.0).abs() < 1e-9);
    }

    #[test]
    fn poisson_arrivals_have_the_right_mean_rate_and_are_reproducible() {
        let curve = RateCurve::new(1000.0, 1000.0, 20.0);
        let run = |seed| {
            (0..2)
                .flat_map(|k| {
                    let mut c =
                        ArrivalClock::new(curve.clone(), Arrival::Poisson, k, 2, seed, None);
                    times(&mut c, Duration::from_secs(30))
                })
                .count()
        };
        let n = run(7);
        assert!(
            (19_400..=20_600).contains(&n),
            "{n} arrivals, expected ~20000"
        );
        assert_eq!(run(7), n, "same seed, same schedule");
    }
}
