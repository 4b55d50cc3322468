//! User-phase scheduler (scheduling layer, pure): how many virtual users should be running at
//! each moment, as Locust steps its user count. Each phase moves the count from where the last one left it to its own
//! number, `spawn_rate` users per second (at once without a rate).

use loadlab_run::UserPhase;

/// One phase, solved: from `from` users to `to` at `rate` per second, over `[start, end)`.
#[derive(Debug, Clone, PartialEq)]
struct Segment {
    start: f64,
    end: f64,
    from: f64,
    to: f64,
    rate: Option<f64>,
}

impl Segment {
    /// Users wanted `t` seconds into the run (`t` within the segment).
    fn users_at(&self, t: f64) -> f64 {
        match self.rate {
            None => self.to,
            Some(r) => {
                let moved = (r * (t - self.start)).floor();
                if self.to >= self.from {
                    (self.from + moved).min(self.to)
                } else {
                    (self.from - moved).max(self.to)
                }
            }
        }
    }
}

/// The user count over the run.
#[derive(Debug, Clone, PartialEq)]
pub struct UserCurve {
    segments: Vec<Segment>,
}

impl UserCurve {
    /// Solves the phases, each starting from the count the last one reached by its end.
    pub fn new(phases: &[UserPhase]) -> Self {
        let mut segments: Vec<Segment> = Vec::new();
        let (mut start, mut level) = (0.0, 0.0);
        for p in phases {
            let end = start + p.duration.as_secs_f64();
            let seg = Segment {
                start,
                end,
                from: level,
                to: p.users as f64,
                rate: p.spawn_rate,
            };
            level = seg.users_at(end);
            segments.push(seg);
            start = end;
        }
        UserCurve { segments }
    }

    /// Users wanted `t` seconds into the run; after the last phase, its final count.
    pub fn users_at(&self, t: f64) -> u64 {
        let seg = self
            .segments
            .iter()
            .find(|s| t < s.end)
            .or(self.segments.last());
        seg.map_or(0, |s| s.users_at(t.max(s.start)) as u64)
    }

    /// The next time after `t` at which the count may change, if any.
    pub fn next_change(&self, t: f64) -> Option<f64> {
        let i = self.segments.iter().position(|s| t < s.end)?;
        let seg = &self.segments[i];
        let phase_end = (i + 1 < self.segments.len()).then_some(seg.end);
        let step = match seg.rate {
            Some(r) if seg.users_at(t) != seg.to => {
                let done = (r * (t - seg.start)).floor();
                Some(seg.start + (done + 1.0) / r)
            }
            _ => None,
        };
        match (step, phase_end) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn phase(secs: u64, users: usize, rate: Option<f64>) -> UserPhase {
        UserPhase {
            name: format!("{users} users"),
            duration: Duration::from_secs(secs),
            users,
            spawn_rate: rate,
        }
    }

    #[test]
    fn steps_without_a_rate_change_at_phase_starts() {
        // Seed 002's stepped plateaus: 10, 20, 40, 30 users.
        let c = UserCurve::new(&[
            phase(10, 10, None),
            phase(10, 20, None),
            phase(10, 40, None),
            phase(10, 30, None),
        ]);
        let at: Vec<u64> = [0.0, 9.9, 10.0, 25.0, 30.0, 39.0, 50.0]
            .iter()
            .map(|t| c.users_at(*t))
            .collect();
        assert_eq!(at, vec![10, 10, 20, 40, 30, 30, 30]);
        assert_eq!(c.next_change(0.0), Some(10.0));
        assert_eq!(c.next_change(25.0), Some(30.0));
        assert_eq!(c.next_change(35.0), None);
    }

    #[test]
    fn a_spawn_rate_ramps_users_one_at_a_time() {
        let c = UserCurve::new(&[phase(10, 10, Some(2.0)), phase(10, 4, Some(1.0))]);
        assert_eq!(c.users_at(0.0), 0);
        assert_eq!(c.users_at(0.49), 0);
        assert_eq!(c.users_at(0.5), 1);
        assert_eq!(c.users_at(2.6), 5);
        assert_eq!(c.users_at(5.0), 10);
        assert_eq!(c.users_at(9.0), 10);
        // Down from 10 to 4 at one per second.
        assert_eq!(c.users_at(10.0), 10);
        assert_eq!(c.users_at(11.0), 9);
        assert_eq!(c.users_at(16.5), 4);
        assert_eq!(c.next_change(0.0), Some(0.5));
        assert_eq!(c.next_change(6.0), Some(10.0));
        assert_eq!(c.next_change(10.2), Some(11.0));
        assert_eq!(c.next_change(17.0), None);
    }

    #[test]
    fn a_slow_ramp_carries_its_level_into_the_next_phase() {
        // 1 user/s for 3 s reaches only 3 of 10; the next phase starts from 3.
        let c = UserCurve::new(&[phase(3, 10, Some(1.0)), phase(3, 0, None)]);
        assert_eq!(c.users_at(2.99), 2);
        assert_eq!(c.users_at(3.0), 0);
        let c = UserCurve::new(&[phase(3, 10, Some(1.0)), phase(3, 5, Some(1.0))]);
        assert_eq!(c.users_at(3.0), 3);
        assert_eq!(c.users_at(5.0), 5);
    }
}
