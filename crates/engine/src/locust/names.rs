//! Results by Locust name: each request type and name (`GET /`, `POST login`) with its counts,
//! latency and response sizes, and the failures by message, as Locust's statistics keep them.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use loadlab_run::Interval;

/// One request's outcome, as recorded under its name.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The request type: the method, or a custom client's type.
    pub method: String,
    /// The name it is recorded under.
    pub name: String,
    /// Its latency: from its intended start where its user paces, else from its send.
    pub latency: Duration,
    /// The response's status; 0 when none came.
    pub status: u16,
    /// The response body's length, bytes.
    pub length: u64,
    /// Why it failed; `None` when it did not.
    pub error: Option<String>,
    /// The user's pacing period, when it paces: a latency past it also stands for the
    /// requests the wait kept from being sent (see [`missed`]).
    pub interval: Option<Duration>,
}

/// The latencies of the requests a paced user would have sent, one every `interval`, while
/// waiting `latency` for an answer: `latency − k·interval` for each k ≥ 1 that stays positive
/// (HdrHistogram's correction for an expected interval, which wrk2 applies). A user that
/// paces never catches up (Locust's pacing), so without them a stall counts once.
pub fn missed(latency: Duration, interval: Option<Duration>) -> impl Iterator<Item = Duration> {
    let step = interval.filter(|i| !i.is_zero());
    let mut k = 0u32;
    std::iter::from_fn(move || {
        let step = step?;
        k += 1;
        latency
            .checked_sub(step.checked_mul(k)?)
            .filter(|d| !d.is_zero())
    })
    // A bound on pathological ratios (a day's stall at a millisecond's pacing).
    .take(100_000)
}

/// A thread's results by name, in the order names were first seen.
#[derive(Debug, Default)]
pub struct NameStats {
    index: HashMap<String, usize>,
    names: Vec<(String, Interval)>,
    /// Failures by request type, name and message.
    pub failures: BTreeMap<(String, String, String), u64>,
}

impl NameStats {
    /// Records `o` under `TYPE name`.
    pub fn record(&mut self, o: &Outcome) {
        let key = format!("{} {}", o.method, o.name);
        let i = match self.index.get(&key) {
            Some(i) => *i,
            None => {
                self.names.push((key.clone(), Interval::new(0)));
                self.index.insert(key, self.names.len() - 1);
                self.names.len() - 1
            }
        };
        let iv = &mut self.names[i].1;
        let us = o.latency.as_micros().min(u64::MAX as u128) as u64;
        let c = &mut iv.counts;
        c.sent += 1;
        c.completed += 1;
        c.bytes += o.length;
        if o.status > 0 {
            let slots = c.status.len();
            c.status[usize::from(o.status) % slots] += 1;
        }
        iv.latency.saturating_record(us);
        iv.service.saturating_record(us);
        for m in missed(o.latency, o.interval) {
            iv.latency
                .saturating_record(m.as_micros().min(u64::MAX as u128) as u64);
        }
        match &o.error {
            None => c.ok += 1,
            // A failure counts as an error whatever its status (a `failure()` of a 200 too).
            Some(why) => {
                *self
                    .failures
                    .entry((o.method.clone(), o.name.clone(), why.clone()))
                    .or_default() += 1;
            }
        }
    }

    /// Takes the results by `TYPE name`, in first-seen order; the failures by message stay,
    /// for the run's record (taken apart, in either order).
    pub fn take_intervals(&mut self) -> Vec<(String, Interval)> {
        self.index.clear();
        std::mem::take(&mut self.names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_are_kept_by_type_and_name_with_failures_by_message() {
        let mut s = NameStats::default();
        let o = |method: &str, name: &str, ms: u64, error: Option<&str>| Outcome {
            method: method.into(),
            name: name.into(),
            latency: Duration::from_millis(ms),
            status: if error.is_some() { 500 } else { 200 },
            length: 10,
            error: error.map(str::to_string),
            interval: None,
        };
        s.record(&o("GET", "/", 5, None));
        s.record(&o("POST", "/", 7, Some("HTTPError 500")));
        s.record(&o("GET", "/", 9, Some("HTTPError 500")));
        s.record(&o("POST", "/", 3, Some("HTTPError 500")));
        let names = s.take_intervals();
        // Taking the names leaves the failures by message for the run's record.
        let failures = std::mem::take(&mut s.failures);
        let keys: Vec<&str> = names.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["GET /", "POST /"]);
        let get = &names[0].1;
        assert_eq!((get.counts.completed, get.counts.ok), (2, 1));
        assert_eq!(get.counts.bytes, 20);
        assert_eq!(get.latency.len(), 2);
        assert!(get.latency.max() >= 9000 && get.latency.min() <= 5000);
        let key = (
            "POST".to_string(),
            "/".to_string(),
            "HTTPError 500".to_string(),
        );
        assert_eq!(failures[&key], 2);
    }

    #[test]
    fn a_paced_users_long_wait_stands_for_the_requests_it_kept_from_being_sent() {
        let ms = Duration::from_millis;
        let m: Vec<Duration> = missed(ms(1000), Some(ms(300))).collect();
        assert_eq!(m, [ms(700), ms(400), ms(100)]);
        assert_eq!(missed(ms(250), Some(ms(300))).count(), 0);
        assert_eq!(missed(ms(1000), None).count(), 0);
        assert_eq!(
            missed(ms(900), Some(ms(300))).count(),
            2,
            "no zero-length sample"
        );
    }
}
