//! Shards of a plan: shard I of N's exact share of the load (`--shard I/N`), so that N
//! generators together run the one plan, and the plan's fingerprint that ties them together.
//!
//! The open model's arrivals are striped by the engine (arrival k of the schedule goes to shard
//! k mod N), so a shard keeps the whole rate curve and only learns its index here. Counts are
//! split as evenly as possible: closed-model connections, the request count, users per phase,
//! and payload rows (shard I takes rows I, I+N, I+2N, … so no two shards share a row).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::plan::{Arrivals, Model, Plan, PlanError, Shard, ValidPlan};
use crate::users::UserModel;

/// Most shards a plan may be split into.
pub const MAX_SHARDS: usize = 10_000;

/// A plan that cannot be split as asked.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ShardError {
    /// An index outside 0..N, or N out of range.
    #[error("--shard {index}/{count}: the index must be from 0 to {count} minus 1, and the count from 1 to 10000")]
    OutOfRange {
        /// The index given.
        index: usize,
        /// The count given.
        count: usize,
    },
    /// Fewer of something than shards: some shard would get none.
    #[error("{what} ({have}) cannot be split over {count} shards; give at least {count}, or fewer shards")]
    TooFew {
        /// What is split (connections, the request count, users, payload rows).
        what: &'static str,
        /// How many the plan has.
        have: u64,
        /// Shards asked for.
        count: usize,
    },
    /// The shard's own plan does not check.
    #[error(transparent)]
    Plan(#[from] PlanError),
}

/// How `count` things are split over `parts`: part `k` gets `count / parts`, plus one for the
/// first `count % parts` parts.
pub fn share_of(count: u64, part: usize, parts: usize) -> u64 {
    let p = parts as u64;
    count / p + u64::from((part as u64) < count % p)
}

/// [`share_of`] for `usize` counts.
fn share(count: usize, part: usize, parts: usize) -> usize {
    share_of(count as u64, part, parts) as usize
}

impl ValidPlan {
    /// Shard `index` of `count` of this plan, which records the whole plan's fingerprint.
    pub fn shard(self, index: usize, count: usize) -> Result<ValidPlan, ShardError> {
        if count == 0 || count > MAX_SHARDS || index >= count {
            return Err(ShardError::OutOfRange { index, count });
        }
        let plan_hash = self.fingerprint();
        let mut plan = self.into_inner();
        let too_few = |what, have: usize| ShardError::TooFew {
            what,
            have: have as u64,
            count,
        };
        if let Some(n) = plan.stop.count {
            if n < count as u64 {
                return Err(ShardError::TooFew {
                    what: "the request count (-n)",
                    have: n,
                    count,
                });
            }
            plan.stop.count = Some(share_of(n, index, count));
        }
        let cap = |n: usize| n.div_ceil(count).max(1);
        match &mut plan.model {
            Model::Closed { connections, .. } => {
                if *connections < count {
                    return Err(too_few("connections (-c)", *connections));
                }
                *connections = share(*connections, index, count);
            }
            Model::Open {
                arrivals, phases, ..
            } => match arrivals {
                Arrivals::Requests {
                    connections,
                    max_connections,
                } => {
                    let endpoints = plan.endpoints.len();
                    *connections = cap(*connections);
                    *max_connections = cap(*max_connections).max(endpoints).max(*connections);
                }
                Arrivals::Sessions {
                    users,
                    max_sessions,
                } => {
                    *max_sessions = cap(*max_sessions);
                    *users = Arc::new(own_rows(users, index, count)?);
                    // Artillery splits a phase's maxVusers over its workers the same way.
                    for p in phases.iter_mut() {
                        p.max_users = p.max_users.map(|m| share(m, index, count));
                    }
                }
            },
            Model::Users { phases, users } => {
                let most = phases.iter().map(|p| p.users).max().unwrap_or(0);
                if most < count {
                    return Err(too_few("users", most));
                }
                for p in phases.iter_mut() {
                    let mine = share(p.users, index, count);
                    p.spawn_rate = p.spawn_rate.map(|r| match p.users {
                        0 => r / count as f64,
                        all => r * mine as f64 / all as f64,
                    });
                    p.users = mine;
                }
                *users = Arc::new(own_rows(users, index, count)?);
            }
        }
        plan.shard = Some(Shard {
            index,
            count,
            plan_hash,
        });
        Ok(plan.check()?)
    }
}

/// The plan a set of shards ran together, from the plans they recorded (each run directory's
/// `plan.json`): the first shard's plan with what [`ValidPlan::shard`] split summed back —
/// connections, connection caps, the request count, users per phase and their spawn rates,
/// the phases' caps on users at once —
/// and the payload rows interleaved in their original order. With every shard present it is
/// the whole plan (the open model's caps, rounded up per shard, sum to what the shards had
/// together); `None` without shards.
pub fn join_shards(parts: &[&Plan]) -> Option<Plan> {
    let mut parts: Vec<&Plan> = parts.to_vec();
    parts.sort_by_key(|p| p.shard.map_or(0, |s| s.index));
    let mut whole = (*parts.first()?).clone();
    whole.shard = None;
    whole.stop.count = parts
        .iter()
        .map(|p| p.stop.count)
        .try_fold(0u64, |sum, n| n.map(|n| sum + n));
    let models: Vec<&Model> = parts.iter().map(|p| &p.model).collect();
    match &mut whole.model {
        Model::Closed { connections, .. } => {
            *connections = models.iter().map(|m| m.connection_bounds().0).sum();
        }
        Model::Open {
            arrivals, phases, ..
        } => match arrivals {
            Arrivals::Requests {
                connections,
                max_connections,
            } => {
                *connections = models.iter().map(|m| m.connection_bounds().0).sum();
                *max_connections = models.iter().map(|m| m.connection_bounds().1).sum();
            }
            Arrivals::Sessions {
                users,
                max_sessions,
            } => {
                *max_sessions = models.iter().map(|m| m.connection_bounds().1).sum();
                *users = Arc::new(joined_rows(&models));
                for (k, phase) in phases.iter_mut().enumerate() {
                    phase.max_users = phase.max_users.map(|_| {
                        let caps = models.iter().filter_map(|m| match m {
                            Model::Open { phases, .. } => phases.get(k)?.max_users,
                            _ => None,
                        });
                        caps.sum()
                    });
                }
            }
        },
        Model::Users { phases, users } => {
            for (k, phase) in phases.iter_mut().enumerate() {
                let theirs = models.iter().filter_map(|m| match m {
                    Model::Users { phases, .. } => phases.get(k),
                    _ => None,
                });
                let (mut count, mut rate) = (0, None::<f64>);
                for p in theirs {
                    count += p.users;
                    rate = p.spawn_rate.map(|r| rate.unwrap_or(0.0) + r);
                }
                phase.users = count;
                phase.spawn_rate = rate;
            }
            *users = Arc::new(joined_rows(&models));
        }
    }
    Some(whole)
}

/// The user model of the first of `models` with every model's payload rows interleaved back:
/// row `k` of shard `i` of `n` was row `i + k·n`.
fn joined_rows(models: &[&Model]) -> UserModel {
    let users: Vec<&UserModel> = models.iter().filter_map(|m| m.users()).collect();
    let mut whole = users
        .first()
        .map_or_else(UserModel::default, |u| (*u).clone());
    for (i, payload) in whole.payloads.iter_mut().enumerate() {
        let longest = users
            .iter()
            .map(|u| u.payloads.get(i).map_or(0, |p| p.rows.len()))
            .max()
            .unwrap_or(0);
        payload.rows = (0..longest)
            .flat_map(|k| {
                users
                    .iter()
                    .filter_map(move |u| u.payloads.get(i).and_then(|p| p.rows.get(k)))
            })
            .cloned()
            .collect();
    }
    whole
}

/// The user model with shard `index`'s payload rows only: rows `index`, `index + count`, ….
fn own_rows(users: &UserModel, index: usize, count: usize) -> Result<UserModel, ShardError> {
    let mut mine = users.clone();
    for p in &mut mine.payloads {
        if p.rows.len() < count {
            return Err(ShardError::TooFew {
                what: "payload rows",
                have: p.rows.len() as u64,
                count,
            });
        }
        p.rows = p.rows.iter().skip(index).step_by(count).cloned().collect();
    }
    Ok(mine)
}

/// A start time that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum StartAtError {
    /// Neither RFC 3339 nor Unix seconds.
    #[error(
        "--start-at {0:?} is not a time: give RFC 3339 (2026-11-23T15:00:00Z) or Unix seconds"
    )]
    Unreadable(String),
    /// Already past by more than the tolerance.
    #[error("--start-at is {0:.1} s in the past; give a time in the future (every shard must wait for it)")]
    Past(f64),
}

/// How far in the past a start time may be and still be taken as "now".
pub const START_TOLERANCE: Duration = Duration::from_secs(1);

/// Parses `--start-at`: RFC 3339 (`2026-11-23T15:00:00Z`, `…+02:00`, fractions allowed) or
/// Unix seconds (`1795000000`, `1795000000.5`).
pub fn parse_start_at(text: &str) -> Result<SystemTime, StartAtError> {
    let bad = || StartAtError::Unreadable(text.to_string());
    let t = text.trim();
    if let Ok(secs) = t.parse::<f64>() {
        if !(0.0..1e11).contains(&secs) {
            return Err(bad());
        }
        return Ok(SystemTime::UNIX_EPOCH + Duration::from_secs_f64(secs));
    }
    // humantime reads UTC times; an offset (+HH:MM or -HH:MM) is applied here.
    let (local, offset_s) = match t.len().checked_sub(6).map(|i| t.split_at(i)) {
        Some((head, tail))
            if (tail.starts_with('+') || tail.starts_with('-'))
                && tail.as_bytes()[3] == b':'
                && head.contains('T') =>
        {
            let hours: i64 = tail[1..3].parse().map_err(|_| bad())?;
            let minutes: i64 = tail[4..6].parse().map_err(|_| bad())?;
            let sign = if tail.starts_with('-') { -1 } else { 1 };
            (format!("{head}Z"), sign * (hours * 3600 + minutes * 60))
        }
        _ => (t.to_string(), 0),
    };
    let utc = humantime::parse_rfc3339_weak(&local).map_err(|_| bad())?;
    let shift = Duration::from_secs(offset_s.unsigned_abs());
    let at = if offset_s >= 0 {
        utc.checked_sub(shift)
    } else {
        utc.checked_add(shift)
    };
    at.ok_or_else(bad)
}

/// Checks that `at` is not more than [`START_TOLERANCE`] before `now`.
pub fn check_start_at(at: SystemTime, now: SystemTime) -> Result<(), StartAtError> {
    match now.duration_since(at) {
        Ok(late) if late > START_TOLERANCE => Err(StartAtError::Past(late.as_secs_f64())),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Stop, UserPhase};
    use crate::users::{Payload, PayloadOrder};

    fn closed(connections: usize, count: Option<u64>) -> ValidPlan {
        Plan::get(
            "127.0.0.1:8080".parse().unwrap(),
            "/",
            Model::closed(connections, 1),
            Stop {
                duration: None,
                count,
            },
        )
        .check()
        .unwrap()
    }

    #[test]
    fn closed_connections_and_the_count_are_split_to_their_totals() {
        for (connections, count, shards) in [(10, 1001, 3), (7, 7, 7), (100, 5000, 8)] {
            let parts: Vec<ValidPlan> = (0..shards)
                .map(|i| closed(connections, Some(count)).shard(i, shards).unwrap())
                .collect();
            let conns: usize = parts.iter().map(|p| p.model.connection_bounds().0).sum();
            let sent: u64 = parts.iter().map(|p| p.stop.count.unwrap()).sum();
            assert_eq!(conns, connections);
            assert_eq!(sent, count);
            let sizes: Vec<usize> = parts
                .iter()
                .map(|p| p.model.connection_bounds().0)
                .collect();
            let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(hi - lo <= 1, "as even as possible: {sizes:?}");
            let recorded: Vec<&Plan> = parts.iter().map(|p| &**p).collect();
            assert_eq!(
                join_shards(&recorded).unwrap(),
                *closed(connections, Some(count)),
                "joined back whole"
            );
        }
    }

    #[test]
    fn every_shard_records_the_same_fingerprint_of_the_whole_plan() {
        let whole = closed(12, None).fingerprint();
        let hashes: Vec<u64> = (0..4)
            .map(|i| {
                closed(12, None)
                    .shard(i, 4)
                    .unwrap()
                    .shard
                    .unwrap()
                    .plan_hash
            })
            .collect();
        assert!(hashes.iter().all(|h| *h == whole), "{hashes:?}");
        assert_ne!(
            whole,
            closed(13, None).fingerprint(),
            "another plan, another hash"
        );
    }

    #[test]
    fn a_shard_outside_the_count_or_too_small_a_plan_is_refused_in_one_line() {
        let e = closed(10, None).shard(3, 3).unwrap_err();
        assert!(matches!(e, ShardError::OutOfRange { .. }), "{e}");
        let e = closed(2, None).shard(0, 3).unwrap_err();
        assert_eq!(
            e.to_string(),
            "connections (-c) (2) cannot be split over 3 shards; give at least 3, or fewer shards"
        );
        assert!(closed(10, Some(2)).shard(0, 3).is_err());
    }

    #[test]
    fn users_are_split_per_phase_and_payload_rows_are_disjoint() {
        let users = UserModel {
            scenarios: Vec::new(),
            pattern: vec![0],
            variables: Vec::new(),
            variable_objects: Vec::new(),
            pool: None,
            payloads: vec![Payload {
                fields: vec!["id".into()],
                rows: (0..10).map(|i| vec![i.to_string()]).collect(),
                order: PayloadOrder::Sequence,
            }],
            seed: 1,
            ..Default::default()
        };
        let phase = |users| UserPhase {
            name: "p".into(),
            duration: Duration::from_secs(1),
            users,
            spawn_rate: Some(10.0),
        };
        let mut plan = closed(1, None).into_inner();
        plan.model = Model::Users {
            phases: vec![phase(5), phase(0)],
            users: Arc::new(users),
        };
        let plan = plan.check().unwrap();
        let mut rows = Vec::new();
        let mut first_phase = 0;
        for i in 0..3 {
            let s = plan.clone().shard(i, 3).unwrap();
            let Model::Users { phases, users } = &s.model else {
                panic!("still users")
            };
            first_phase += phases[0].users;
            rows.extend(users.payloads[0].rows.iter().map(|r| r[0].clone()));
        }
        assert_eq!(first_phase, 5);
        let shards: Vec<ValidPlan> = (0..3).map(|i| plan.clone().shard(i, 3).unwrap()).collect();
        let recorded: Vec<&Plan> = shards.iter().rev().map(|s| &**s).collect();
        let joined = join_shards(&recorded).unwrap();
        assert_eq!(
            &joined, &*plan,
            "the shards' plans join back into the whole plan"
        );
        rows.sort_by_key(|r| r.parse::<u32>().unwrap());
        let all: Vec<String> = (0..10).map(|i| i.to_string()).collect();
        assert_eq!(rows, all, "each row in exactly one shard");
    }

    #[test]
    fn start_times_read_as_rfc3339_with_offsets_or_unix_seconds() {
        let z = parse_start_at("2026-11-23T15:00:00Z").unwrap();
        assert_eq!(parse_start_at("2026-11-23T17:00:00+02:00").unwrap(), z);
        assert_eq!(parse_start_at("2026-11-23T14:30:00-00:30").unwrap(), z);
        let unix = z.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
        assert_eq!(parse_start_at(&unix.to_string()).unwrap(), z);
        assert!(parse_start_at("tomorrow").is_err());
        let now = SystemTime::now();
        assert!(check_start_at(now - Duration::from_millis(500), now).is_ok());
        let e = check_start_at(now - Duration::from_secs(5), now).unwrap_err();
        assert!(e.to_string().contains("5.0 s in the past"), "{e}");
    }
}
