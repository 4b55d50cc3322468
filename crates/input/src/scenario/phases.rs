//! A scenario file's `config.phases` as written (arrival rates, counts, pauses, spikes,
//! steps, users) and their lowering into the plan's rate phases or user phases.

use std::time::Duration;

use loadlab_run::{Arrival, RatePhase, UserPhase};
use serde::Deserialize;

use super::error::PhaseError;
use crate::yaml::Seconds;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseSpec {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    duration: Option<Seconds>,
    #[serde(default)]
    arrival_rate: Option<Num>,
    #[serde(default)]
    ramp_to: Option<Num>,
    #[serde(default)]
    arrival_count: Option<Num>,
    /// Artillery's cap on the users in a session at once: an arrival past it is skipped.
    #[serde(default)]
    max_vusers: Option<Num>,
    /// Artillery's spacing of a constant `arrivalRate`'s arrivals: `uniform` or `poisson`.
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    pause: Option<Seconds>,
    /// loadlab's shape: a base rate with periodic spikes.
    #[serde(default)]
    spike: Option<SpikeSpec>,
    /// loadlab's shape: equal steps from one rate to another.
    #[serde(default)]
    step: Option<StepShape>,
    /// Closed model: virtual users running during the phase.
    #[serde(default)]
    users: Option<usize>,
    /// Closed model: users started (or stopped) per second on the way to `users`.
    #[serde(default)]
    spawn_rate: Option<f64>,
}

impl PhaseSpec {
    /// `over`'s keys laid over this phase's, as Artillery's deep merge of an environment (or a
    /// `--config` file) lays a phase over the phase at the same position.
    pub fn merge(&mut self, over: PhaseSpec) {
        macro_rules! replace {
            ($($f:ident),*) => {$( if over.$f.is_some() { self.$f = over.$f; } )*};
        }
        replace!(
            name,
            duration,
            arrival_rate,
            ramp_to,
            arrival_count,
            max_vusers,
            mode,
            pause,
            spike,
            step,
            users,
            spawn_rate
        );
        // A merge can leave keys of two kinds in one phase; Artillery then runs the first kind
        // it knows of pause, arrivalCount, arrivalRate, and so does the merged phase.
        if self.pause.is_some() {
            self.duration = None;
            (self.arrival_rate, self.ramp_to, self.arrival_count) = (None, None, None);
        } else if self.arrival_count.is_some() {
            (self.arrival_rate, self.ramp_to) = (None, None);
        }
    }

    /// `config.mode`, which Artillery's runner gives every phase that names no mode of its own.
    pub fn default_mode(&mut self, mode: &str) {
        self.mode.get_or_insert_with(|| mode.to_string());
    }

    /// The phase Artillery runs when a script has none: one arrival within one second.
    pub fn one_user() -> Self {
        PhaseSpec {
            name: Some("one user".into()),
            duration: Some(Seconds::Number(1.0)),
            arrival_rate: None,
            ramp_to: None,
            arrival_count: Some(Num::Number(1.0)),
            max_vusers: None,
            mode: None,
            pause: None,
            spike: None,
            step: None,
            users: None,
            spawn_rate: None,
        }
    }
}

/// A number as written: a number, or text holding one or an environment variable's template
/// (`"{{ $processEnvironment.RATE }}"`, `"{{ $env.RATE }}"`), read when the phase is lowered so
/// an environment that is not chosen needs none of its variables.
#[derive(Debug, Clone)]
pub enum Num {
    /// A number.
    Number(f64),
    /// Text: a number or an environment template.
    Text(String),
}

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Num;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number, or a template such as \"{{ $processEnvironment.RATE }}\"")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num::Number(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num::Number(v as f64))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num::Number(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Num, E> {
                Ok(Num::Text(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl Num {
    /// The number, its template rendered as the config's are (the environment, `-v`); the
    /// error in words.
    pub fn number(&self) -> Result<f64, String> {
        match self {
            Num::Number(n) => Ok(*n),
            Num::Text(t) => {
                let text = crate::config_templates::render(t, Some("1"))?;
                text.trim()
                    .parse()
                    .map_err(|_| format!("{text:?} is not a number"))
            }
        }
    }

    /// [`Num::number`], with `phase` and `key` named in its error.
    fn value(&self, phase: &str, key: &str) -> Result<f64, PhaseError> {
        self.number().map_err(|reason| PhaseError::Template {
            phase: phase.into(),
            key: key.into(),
            reason,
        })
    }
}

/// A phase's numbers, read.
#[derive(Clone)]
struct Numbers {
    arrival_rate: Option<f64>,
    ramp_to: Option<f64>,
    arrival_count: Option<f64>,
}

/// How phase `name` spaces its arrivals when not as the run's: as Artillery, its `mode`
/// spaces the arrivals of a constant `arrivalRate` only.
fn arrival_of(name: &str, p: &PhaseSpec) -> Result<Option<Arrival>, PhaseError> {
    let arrival = match p.mode.as_deref() {
        None | Some("uniform") => None,
        Some("poisson") => Some(Arrival::Poisson),
        Some(other) => {
            return Err(PhaseError::Mode {
                phase: name.into(),
                mode: other.into(),
            })
        }
    };
    Ok(arrival.filter(|_| p.arrival_rate.is_some() && p.ramp_to.is_none()))
}

/// Phase `name`'s `maxVusers`, read and checked.
fn max_users(name: &str, p: &PhaseSpec) -> Result<Option<usize>, PhaseError> {
    let Some(m) = &p.max_vusers else {
        return Ok(None);
    };
    let m = m.value(name, "maxVusers")?;
    if !(m.is_finite() && m >= 1.0 && m <= loadlab_run::plan::MAX_CONNECTIONS as f64) {
        return Err(PhaseError::MaxVusers(name.into()));
    }
    Ok(Some(m as usize))
}

/// The largest `maxVusers` of the phases: room for that many sessions at once.
pub fn max_vusers<'a>(
    specs: impl IntoIterator<Item = &'a PhaseSpec>,
) -> Result<Option<usize>, PhaseError> {
    let mut most: Option<usize> = None;
    for (i, p) in specs.into_iter().enumerate() {
        let name = p.name.clone().unwrap_or_else(|| format!("phase {}", i + 1));
        if let Some(m) = max_users(&name, p)? {
            most = Some(most.map_or(m, |c| c.max(m)));
        }
    }
    Ok(most)
}

/// A base rate with spikes of `length` to `to`, one every `every` (the first at `every`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpikeSpec {
    base: f64,
    to: f64,
    length: Seconds,
    every: Seconds,
}

/// `steps` constant rates of equal length, from `from` to `to`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepShape {
    from: f64,
    to: f64,
    steps: u32,
}

/// Most phases a `spike` or `step` shape may expand to.
const MAX_SHAPE_PHASES: u64 = 10_000;

/// A phase as lowered: arrival rates, a user count, or a pause that fits either model.
#[derive(Debug, Clone, PartialEq)]
enum Lowered {
    Rates(Vec<RatePhase>),
    Users(UserPhase),
    Pause(String, Duration),
}

/// The phases of a file: all arrival phases (open model) or all user phases (closed model).
#[derive(Debug, Clone, PartialEq)]
pub enum Phases {
    /// Arrival rates, phase after phase.
    Rates(Vec<RatePhase>),
    /// User counts, phase after phase.
    Users(Vec<UserPhase>),
}

/// The phases of a file: all arrival phases (the open model) or all user phases (the closed
/// model with virtual users); pauses fit either.
pub fn lower<'a>(specs: impl IntoIterator<Item = &'a PhaseSpec>) -> Result<Phases, PhaseError> {
    let mut lowered = Vec::new();
    for (i, p) in specs.into_iter().enumerate() {
        lowered.push(phases_of(i, p)?);
    }
    let users = lowered.iter().any(|l| matches!(l, Lowered::Users(_)));
    let rates = lowered.iter().any(|l| matches!(l, Lowered::Rates(_)));
    if users && rates {
        return Err(PhaseError::Mixed);
    }
    let phases = if users {
        Phases::Users(
            lowered
                .into_iter()
                .map(|l| match l {
                    Lowered::Users(u) => u,
                    Lowered::Pause(name, duration) => UserPhase {
                        name,
                        duration,
                        users: 0,
                        spawn_rate: None,
                    },
                    Lowered::Rates(_) => unreachable!("checked above"),
                })
                .collect(),
        )
    } else {
        let mut rates: Vec<RatePhase> = lowered
            .into_iter()
            .flat_map(|l| match l {
                Lowered::Rates(r) => r,
                Lowered::Pause(name, d) => vec![RatePhase::pause(&name, d)],
                Lowered::Users(_) => unreachable!("checked above"),
            })
            .collect();
        // Nothing runs after a phase with no end.
        if let Some(endless) = rates.iter().position(|p| p.duration.is_none()) {
            rates.truncate(endless + 1);
        }
        Phases::Rates(rates)
    };
    Ok(phases)
}

/// Checks phase `i` alone, so that its error can be placed at it.
pub fn check(i: usize, p: &PhaseSpec) -> Result<(), PhaseError> {
    phases_of(i, p).map(|_| ())
}

fn phases_of(i: usize, p: &PhaseSpec) -> Result<Lowered, PhaseError> {
    let name = p.name.clone().unwrap_or_else(|| format!("phase {}", i + 1));
    let read = |n: &Option<Num>, key: &str| n.as_ref().map(|n| n.value(&name, key)).transpose();
    let numbers = Numbers {
        arrival_rate: read(&p.arrival_rate, "arrivalRate")?,
        ramp_to: read(&p.ramp_to, "rampTo")?,
        arrival_count: read(&p.arrival_count, "arrivalCount")?,
    };
    if let Some(pause) = &p.pause {
        if p.arrival_rate.is_some()
            || p.arrival_count.is_some()
            || p.duration.is_some()
            || p.users.is_some()
        {
            return Err(PhaseError::PauseWithLoad(name));
        }
        return Ok(Lowered::Pause(name, pause.duration()?));
    }
    // Artillery runs a constant arrivalRate whose duration is not positive (`-1`) with no
    // end: its arrivals go on until the run is stopped, and later phases never start.
    let endless = matches!(p.duration, Some(Seconds::Number(d)) if d <= 0.0)
        && p.users.is_none()
        && p.ramp_to.is_none()
        && p.arrival_count.is_none()
        && p.spike.is_none()
        && p.step.is_none();
    if let (true, Some(rate)) = (endless, numbers.arrival_rate) {
        if !(rate.is_finite() && rate >= 0.0) {
            return Err(PhaseError::Rates(name));
        }
        let mut phase = RatePhase::constant(&name, rate, None);
        phase.max_users = max_users(&name, p)?;
        phase.arrival = arrival_of(&name, p)?;
        return Ok(Lowered::Rates(vec![phase]));
    }
    let duration = p
        .duration
        .as_ref()
        .ok_or_else(|| PhaseError::NoDuration(name.clone()))?
        .duration()?;
    if let Some(users) = p.users {
        let other = p.arrival_rate.is_some()
            || p.arrival_count.is_some()
            || p.spike.is_some()
            || p.step.is_some()
            || p.ramp_to.is_some();
        if other {
            return Err(PhaseError::UsersWithRates(name));
        }
        if users > loadlab_run::plan::MAX_CONNECTIONS {
            return Err(PhaseError::TooManyUsers {
                phase: name,
                max: loadlab_run::plan::MAX_CONNECTIONS,
            });
        }
        if let Some(r) = p.spawn_rate {
            if !(r.is_finite() && r > 0.0) {
                return Err(PhaseError::SpawnRate(name));
            }
        }
        return Ok(Lowered::Users(UserPhase {
            name,
            duration,
            users,
            spawn_rate: p.spawn_rate,
        }));
    }
    if p.spawn_rate.is_some() {
        return Err(PhaseError::SpawnRateWithoutUsers(name));
    }
    let cap = max_users(&name, p)?;
    let arrival = arrival_of(&name, p)?;
    let mut phases = rate_phases(&name, p, &numbers, duration)?;
    for phase in &mut phases {
        phase.max_users = cap;
        phase.arrival = arrival;
    }
    Ok(Lowered::Rates(phases))
}

fn rate_phases(
    name: &str,
    p: &PhaseSpec,
    n: &Numbers,
    duration: Duration,
) -> Result<Vec<RatePhase>, PhaseError> {
    let rate_ok = |r: f64| r.is_finite() && r >= 0.0;
    // As Artillery runs it, `rampTo` without `arrivalRate` ramps from 0.
    let n = &Numbers {
        arrival_rate: n
            .arrival_rate
            .or(n.ramp_to.filter(|_| n.arrival_count.is_none()).map(|_| 0.0)),
        ..n.clone()
    };
    let kinds = [
        n.arrival_rate.is_some() || n.arrival_count.is_some(),
        p.spike.is_some(),
        p.step.is_some(),
    ];
    if kinds.iter().filter(|k| **k).count() != 1 {
        return Err(PhaseError::Shape(name.into()));
    }
    if let Some(sp) = &p.spike {
        let (length, every) = (sp.length.duration()?, sp.every.duration()?);
        if !(rate_ok(sp.base) && rate_ok(sp.to)) || length >= every {
            return Err(PhaseError::Spike(name.into()));
        }
        if duration.as_secs_f64() / every.as_secs_f64() > MAX_SHAPE_PHASES as f64 / 2.0 {
            return Err(PhaseError::TooManySpikes {
                phase: name.into(),
                max: MAX_SHAPE_PHASES / 2,
            });
        }
        return Ok(spikes(name, sp.base, sp.to, length, every, duration));
    }
    if let Some(st) = &p.step {
        if !(rate_ok(st.from) && rate_ok(st.to))
            || st.steps == 0
            || u64::from(st.steps) > MAX_SHAPE_PHASES
        {
            return Err(PhaseError::Steps {
                phase: name.into(),
                max: MAX_SHAPE_PHASES,
            });
        }
        let each = duration / st.steps;
        return Ok((0..st.steps)
            .map(|k| {
                let f = if st.steps == 1 {
                    0.0
                } else {
                    f64::from(k) / f64::from(st.steps - 1)
                };
                RatePhase::constant(
                    &format!("{name} step {}", k + 1),
                    st.from + (st.to - st.from) * f,
                    Some(each),
                )
            })
            .collect());
    }
    match (n.arrival_rate, n.ramp_to, n.arrival_count) {
        (Some(r), to, None) if rate_ok(r) && to.is_none_or(rate_ok) => {
            Ok(vec![RatePhase::ramp(name, r, to.unwrap_or(r), duration)])
        }
        (None, None, Some(n)) if rate_ok(n) => Ok(vec![RatePhase::constant(
            name,
            n / duration.as_secs_f64(),
            Some(duration),
        )]),
        _ => Err(PhaseError::Rates(name.into())),
    }
}

/// A base rate over `duration` with a spike of `length` at every multiple of `every`.
fn spikes(
    name: &str,
    base: f64,
    to: f64,
    length: Duration,
    every: Duration,
    duration: Duration,
) -> Vec<RatePhase> {
    let mut out = Vec::new();
    let mut t = Duration::ZERO;
    let mut k = 1;
    while t < duration {
        let spike_at = every * k;
        let base_end = spike_at.min(duration);
        if base_end > t {
            out.push(RatePhase::constant(
                &format!("{name} base {k}"),
                base,
                Some(base_end - t),
            ));
        }
        if spike_at >= duration {
            break;
        }
        let spike_end = (spike_at + length).min(duration);
        out.push(RatePhase::constant(
            &format!("{name} spike {k}"),
            to,
            Some(spike_end - spike_at),
        ));
        t = spike_end;
        k += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn seed_000s_spike_test_becomes_base_and_spike_phases() {
        // Base 100 req/s, 15 s spikes to 1000 every 45 s, over 120 s: two spikes.
        let p = spikes("s", 100.0, 1000.0, secs(15), secs(45), secs(120));
        let shape: Vec<(f64, u64)> = p
            .iter()
            .map(|ph| (ph.start_rps, ph.duration.unwrap().as_secs()))
            .collect();
        assert_eq!(
            shape,
            vec![
                (100.0, 45),
                (1000.0, 15),
                (100.0, 30),
                (1000.0, 15),
                (100.0, 15)
            ]
        );
        assert_eq!(p[1].name, "s spike 1");
    }

    #[test]
    fn steps_split_the_duration_evenly_from_one_rate_to_another() {
        let spec = PhaseSpec {
            name: Some("up".into()),
            duration: Some(Seconds::Number(40.0)),
            arrival_rate: None,
            ramp_to: None,
            arrival_count: None,
            max_vusers: None,
            mode: None,
            pause: None,
            spike: None,
            users: None,
            spawn_rate: None,
            step: Some(StepShape {
                from: 100.0,
                to: 400.0,
                steps: 4,
            }),
        };
        let Lowered::Rates(p) = phases_of(0, &spec).unwrap() else {
            panic!("a step phase gives rates");
        };
        let rates: Vec<f64> = p.iter().map(|ph| ph.start_rps).collect();
        assert_eq!(rates, vec![100.0, 200.0, 300.0, 400.0]);
        assert!(p.iter().all(|ph| ph.duration == Some(secs(10))));
    }

    fn read(yaml: &str) -> Vec<PhaseSpec> {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn a_phase_of_no_positive_duration_runs_until_stopped_and_ends_the_phases() {
        let specs = read("- { duration: -1, arrivalRate: 3, mode: poisson }\n- { duration: 5, arrivalRate: 9 }\n");
        let Phases::Rates(p) = lower(&specs).unwrap() else {
            panic!("rates")
        };
        assert_eq!(p.len(), 1, "nothing runs after a phase with no end");
        assert_eq!((p[0].duration, p[0].start_rps), (None, 3.0));
        assert_eq!(p[0].arrival, Some(Arrival::Poisson));
        // A ramp or a count of no positive duration is refused, as before.
        assert!(lower(&read("- { duration: -1, arrivalRate: 3, rampTo: 4 }\n")).is_err());
    }

    #[test]
    fn mode_spaces_only_a_constant_arrival_rate_and_is_checked() {
        let specs = read("- { duration: 2, arrivalRate: 3, mode: poisson }\n- { duration: 2, arrivalRate: 3, rampTo: 5, mode: poisson }\n- { duration: 2, arrivalCount: 3, mode: poisson }\n- { duration: 2, arrivalRate: 3, mode: uniform }\n");
        let Phases::Rates(p) = lower(&specs).unwrap() else {
            panic!("rates")
        };
        let modes: Vec<Option<Arrival>> = p.iter().map(|ph| ph.arrival).collect();
        assert_eq!(modes, [Some(Arrival::Poisson), None, None, None]);
        let e = lower(&read("- { duration: 2, arrivalRate: 3, mode: bursty }\n")).unwrap_err();
        assert!(e.to_string().contains("not one of uniform, poisson"), "{e}");
    }
}
