//! Runs an autoscaled set of instances behind the [`Balancer`]: each second it reads the
//! balancer's report and each instance's CPU, feeds the policy (HPA or KPA), and starts or
//! drains instances as it decides; an instance joins the balancer once it answers (and not
//! before the cold-start floor), and one removed finishes its requests before it is stopped.
//! Every second's counts, every decision and every instance's life are recorded.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::balancer::{Balancer, Second};
use super::{hpa, kpa};
use crate::cgroup::Group;

/// What the policy scales on (`cpu`, `concurrency`, `rps`).
pub use loadlab_run::topology::ScaleMetric as Metric;

/// The policy deciding, with its settings.
#[derive(Debug, Clone)]
pub enum Policy {
    /// Kubernetes' Horizontal Pod Autoscaler, deciding every `sync`.
    Hpa {
        /// Its settings.
        settings: hpa::Settings,
        /// Time between decisions (`--horizontal-pod-autoscaler-sync-period`, 15 s).
        sync: Duration,
    },
    /// Knative's Pod Autoscaler, deciding every `tick` of its settings.
    Kpa(kpa::Settings),
}

impl Policy {
    /// Fewest and most instances.
    pub fn bounds(&self) -> (u32, u32) {
        match self {
            Policy::Hpa { settings, .. } => (settings.min, settings.max),
            Policy::Kpa(s) => (s.min, s.max),
        }
    }
}

/// How the set of instances is run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Who decides.
    pub policy: Policy,
    /// On what.
    pub metric: Metric,
    /// Instances at the start (Knative's `initial-scale`), brought within the policy's bounds.
    pub initial: u32,
    /// An instance joins no sooner than this after its process started (an image's pull, a
    /// runtime's start), however soon it answers.
    pub cold_start_floor: Duration,
    /// How long an instance may take to answer before it counts as failed.
    pub ready_timeout: Duration,
    /// How long a removed instance may take to finish its requests.
    pub drain_timeout: Duration,
}

/// An instance as its launcher started it.
pub struct Started {
    /// Where it serves.
    pub addr: SocketAddr,
    /// The CPUs' worth of time it may use (its quota), for the CPU metric's share.
    pub cpus: Option<f64>,
    /// Its processes, for the lab's sampler (none for an instance inside loadlab's process).
    pub pids: Vec<u32>,
    /// Its control group, when it has a budget: the CPU metric's counter, and what the lab's
    /// sampler reads.
    pub group: Option<Group>,
    /// Stops it when dropped (its processes, by PID).
    pub guard: Box<dyn Send>,
}

/// An instance's processes and control group, as a sampler watches them.
type Watched = (Vec<u32>, Option<Group>);

/// The processes and control groups of the instances alive now, by id: what a sampler
/// watches of an autoscaled set whose members come and go.
type Alive = Arc<Mutex<BTreeMap<u32, Watched>>>;

/// Starts instance `id`.
pub type Launch = Box<dyn FnMut(u32) -> Result<Started, String> + Send>;

/// Whether an instance on an address answers.
pub type Probe = Arc<dyn Fn(SocketAddr) -> bool + Send + Sync>;

/// One second of the autoscaled set.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleSecond {
    /// When the second ended, from the scaler's start.
    pub at: Duration,
    /// The report's span, seconds.
    pub span_s: f64,
    /// Instances ready (taking requests).
    pub ready: u32,
    /// Instances started and not ready yet.
    pub starting: u32,
    /// Instances finishing their requests before they stop.
    pub draining: u32,
    /// Instances the policy wants.
    pub desired: u32,
    /// Requests held at the balancer at the second's end.
    pub held: u32,
    /// Requests that waited for room and were passed on.
    pub waited: u64,
    /// Their waits, seconds.
    pub wait_s: f64,
    /// Requests answered 429 after waiting the hold timeout.
    pub refused: u64,
    /// Requests answered 502.
    pub failed: u64,
    /// Requests the instances finished.
    pub requests: u64,
    /// Each ready instance's (id, requests in flight on average).
    pub busy: Vec<(u32, f64)>,
}

/// One decision that changed the count.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleDecision {
    /// When, from the scaler's start.
    pub at: Duration,
    /// Instances wanted before.
    pub from: u32,
    /// Instances wanted after.
    pub to: u32,
    /// The metric the decision read: the HPA's mean per ready instance, the KPA's stable
    /// window's total.
    pub metric: f64,
    /// Whether the KPA decided in panic mode.
    pub panicking: bool,
}

/// One instance's life.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceLife {
    /// Its id.
    pub id: u32,
    /// When its process started, from the scaler's start.
    pub started: Duration,
    /// How long it took to join (its cold start), once it did.
    pub cold_start: Option<Duration>,
    /// When it was told to stop (drained first when ready).
    pub removed: Option<Duration>,
    /// Why it never joined, when it did not.
    pub failed: Option<String>,
}

/// Everything recorded so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Record {
    /// Each second.
    pub seconds: Vec<ScaleSecond>,
    /// Each change of the count wanted.
    pub decisions: Vec<ScaleDecision>,
    /// Each instance started.
    pub instances: Vec<InstanceLife>,
}

/// What the scaler's thread hears.
enum Event {
    Ready(u32, Instant),
    NotReady(u32, String),
    Drained(u32),
    Stop,
}

/// A running autoscaled set, stopped (every instance) by [`Autoscaler::finish`] or when dropped.
pub struct Autoscaler {
    recording: Recording,
    events: Sender<Event>,
    thread: Option<JoinHandle<()>>,
}

/// A handle on an autoscaler's record, from which a run takes its own seconds.
#[derive(Debug, Clone)]
pub struct Recording {
    started: Instant,
    record: Arc<Mutex<Record>>,
    alive: Alive,
    policy: &'static str,
    metric: Metric,
    bounds: (u32, u32),
}

impl Recording {
    /// The processes and control groups of the instances alive now (started, ready or
    /// draining), oldest instance first.
    pub fn members(&self) -> (Vec<i32>, Vec<Group>) {
        let alive = self.alive.lock().unwrap_or_else(|e| e.into_inner());
        let pids = alive.values().flat_map(|(p, _)| p).map(|&p| p as i32);
        let groups = alive.values().filter_map(|(_, g)| g.clone());
        (pids.collect(), groups.collect())
    }

    /// `row` with the instances of the scaler's latest second: what a live view shows while
    /// the run goes on (the run's own record takes each second's from [`Recording::during`]).
    pub fn mark(&self, row: &loadlab_run::TimelineRow) -> loadlab_run::TimelineRow {
        let record = self.record.lock().unwrap_or_else(|e| e.into_inner());
        let mut row = row.clone();
        if let Some(last) = record.seconds.last() {
            row.set_instances(last.ready, last.desired, last.starting, last.held);
        }
        row
    }

    /// What happened between `from` and `to`, on a run's clock starting at `from`: the seconds
    /// whose middle falls between them, the decisions made and the instances alive meanwhile.
    pub fn during(&self, from: Instant, to: Instant) -> loadlab_run::scaling::ScalingData {
        use loadlab_run::scaling as saved;
        let record = self.record.lock().unwrap_or_else(|e| e.into_inner());
        let at = |t: Duration| self.started + t;
        // Seconds from `from`, negative before it.
        let offset = |t: Duration| {
            let i = at(t);
            match i.checked_duration_since(from) {
                Some(d) => d.as_secs_f64(),
                None => -from.duration_since(i).as_secs_f64(),
            }
        };
        let seconds = record
            .seconds
            .iter()
            .filter_map(|s| {
                let end = at(s.at);
                let begin = end - Duration::from_secs_f64(s.span_s.min(s.at.as_secs_f64()));
                let middle = begin + (end - begin) / 2;
                if middle < from || middle >= to {
                    return None;
                }
                Some(saved::ScalingSecond {
                    second: crate::clock::span_second(from, begin, end),
                    ready: s.ready,
                    starting: s.starting,
                    draining: s.draining,
                    desired: s.desired,
                    idle: s.busy.iter().filter(|(_, c)| *c < 0.01).count() as u32,
                    held: s.held,
                    waited: s.waited,
                    wait_s: s.wait_s,
                    refused: s.refused,
                })
            })
            .collect();
        let decisions = record
            .decisions
            .iter()
            .filter(|d| at(d.at) >= from && at(d.at) <= to)
            .map(|d| saved::ScaleDecision {
                at_s: offset(d.at),
                from: d.from,
                to: d.to,
                metric: d.metric,
                panicking: d.panicking,
            })
            .collect();
        let instances = record
            .instances
            .iter()
            .filter(|l| at(l.started) <= to && l.removed.is_none_or(|r| at(r) >= from))
            .map(|l| saved::InstanceLife {
                id: l.id,
                started_s: offset(l.started),
                cold_start_s: l.cold_start.map(|c| c.as_secs_f64()),
                removed_s: l.removed.map(offset),
                failed: l.failed.clone(),
            })
            .collect();
        saved::ScalingData {
            policy: self.policy.into(),
            metric: self.metric.name().into(),
            min: self.bounds.0,
            max: self.bounds.1,
            seconds,
            decisions,
            instances,
        }
    }
}

impl Autoscaler {
    /// Starts the initial instances behind `balancer` and waits until they are ready; fails
    /// with why when one does not start or answer in time.
    pub fn start(
        settings: Settings,
        balancer: Arc<Balancer>,
        launch: Launch,
        probe: Probe,
    ) -> Result<Autoscaler, String> {
        let started = Instant::now();
        let record = Arc::new(Mutex::new(Record::default()));
        let (events, inbox) = mpsc::channel();
        let (min, max) = settings.policy.bounds();
        let initial = settings.initial.clamp(min, max.max(min));
        let mut scaler = Scaler {
            decider: match &settings.policy {
                Policy::Hpa { settings, sync } => {
                    Decider::Hpa(hpa::Hpa::new(settings.clone()), *sync)
                }
                Policy::Kpa(s) => Decider::Kpa(kpa::Kpa::new(s.clone())),
            },
            settings,
            balancer,
            launch,
            probe,
            members: Vec::new(),
            next_id: 1,
            started,
            desired: initial,
            last_decision: Duration::ZERO,
            record: Arc::clone(&record),
            alive: Alive::default(),
            events: events.clone(),
        };
        for _ in 0..initial {
            scaler.launch_one(Duration::ZERO)?;
        }
        // The initial instances are waited for here, so a deployment is ready when it returns.
        while scaler.members.iter().any(|m| m.ready.is_none()) {
            match inbox.recv_timeout(scaler.settings.ready_timeout + Duration::from_secs(1)) {
                Ok(Event::Ready(id, at)) => scaler.joined(id, at),
                Ok(Event::NotReady(_, why)) => return Err(why),
                Ok(_) => {}
                Err(_) => return Err("the initial instances were not ready in time".into()),
            }
        }
        let policy = match scaler.settings.policy {
            Policy::Hpa { .. } => "hpa",
            Policy::Kpa(_) => "kpa",
        };
        let recording = Recording {
            started,
            record,
            alive: Arc::clone(&scaler.alive),
            policy,
            metric: scaler.settings.metric,
            bounds: (min, max),
        };
        let thread = std::thread::Builder::new()
            .name("loadlab-autoscaler".into())
            .spawn(move || scaler.run(&inbox))
            .map_err(|e| e.to_string())?;
        Ok(Autoscaler {
            recording,
            events,
            thread: Some(thread),
        })
    }

    /// When the scaler started: the origin of its records' times.
    pub fn started(&self) -> Instant {
        self.recording.started
    }

    /// What it has recorded so far.
    pub fn record(&self) -> Record {
        let record = &self.recording.record;
        record.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The decisions made from the `from`th on (those not seen yet), without copying the
    /// rest of the record.
    pub fn decisions_from(&self, from: usize) -> Vec<ScaleDecision> {
        let record = &self.recording.record;
        let record = record.lock().unwrap_or_else(|e| e.into_inner());
        record.decisions.iter().skip(from).cloned().collect()
    }

    /// A handle on its record, for runs to take their seconds from.
    pub fn recording(&self) -> Recording {
        self.recording.clone()
    }

    /// Stops deciding and stops every instance; returns the whole record.
    pub fn finish(mut self) -> Record {
        self.stop();
        self.record()
    }

    fn stop(&mut self) {
        let _ = self.events.send(Event::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Autoscaler {
    fn drop(&mut self) {
        self.stop();
    }
}

/// An instance the scaler started.
struct Member {
    id: u32,
    instance: Started,
    /// When its process started.
    launched: Instant,
    ready: Option<Instant>,
    draining: bool,
    /// The last CPU reading (ns, when).
    cpu: Option<(u64, Instant)>,
    /// Its metric each second while ready, newest last (as many as an HPA sync holds).
    recent: VecDeque<f64>,
}

/// The policy's state between decisions.
enum Decider {
    /// The HPA, deciding every sync period.
    Hpa(hpa::Hpa, Duration),
    /// The KPA, deciding every tick of its settings.
    Kpa(kpa::Kpa),
}

/// The scaler's thread state.
struct Scaler {
    settings: Settings,
    balancer: Arc<Balancer>,
    launch: Launch,
    probe: Probe,
    members: Vec<Member>,
    next_id: u32,
    started: Instant,
    decider: Decider,
    /// The count wanted.
    desired: u32,
    last_decision: Duration,
    record: Arc<Mutex<Record>>,
    /// What the sampler watches: the members' processes and groups.
    alive: Alive,
    events: Sender<Event>,
}

impl Scaler {
    fn run(mut self, inbox: &Receiver<Event>) {
        let mut tick = 1u32;
        loop {
            let next = self.started + Duration::from_secs(1) * tick;
            match inbox.recv_timeout(next.saturating_duration_since(Instant::now())) {
                Ok(Event::Ready(id, at)) => self.joined(id, at),
                Ok(Event::NotReady(id, why)) => self.failed(id, why),
                Ok(Event::Drained(id)) => self.drained(id),
                Ok(Event::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    self.second();
                    tick += 1;
                }
            }
        }
        for m in self.members.drain(..) {
            self.balancer.remove(m.id);
        }
        self.alive().clear();
    }

    fn alive(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, Watched>> {
        self.alive.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes member `id` out of the set and stops it, off the scaler's clock (stopping waits
    /// for its processes to exit).
    fn stop_member(&mut self, id: u32) {
        self.alive().remove(&id);
        if let Some(at) = self.members.iter().position(|m| m.id == id) {
            let m = self.members.remove(at);
            std::thread::spawn(move || drop(m));
        }
    }

    fn since_start(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.started)
    }

    fn record(&self) -> std::sync::MutexGuard<'_, Record> {
        self.record.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts one instance and a thread that waits for it to answer.
    fn launch_one(&mut self, now: Duration) -> Result<(), String> {
        let id = self.next_id;
        self.next_id += 1;
        let launched = Instant::now();
        let instance = match (self.launch)(id) {
            Ok(i) => i,
            Err(why) => {
                self.record().instances.push(InstanceLife {
                    id,
                    started: now,
                    cold_start: None,
                    removed: None,
                    failed: Some(why.clone()),
                });
                return Err(why);
            }
        };
        let (addr, probe, events) = (instance.addr, Arc::clone(&self.probe), self.events.clone());
        let (floor, timeout) = (self.settings.cold_start_floor, self.settings.ready_timeout);
        std::thread::spawn(move || {
            let event = loop {
                if probe(addr) {
                    let at = Instant::now().max(launched + floor);
                    std::thread::sleep(at.saturating_duration_since(Instant::now()));
                    break Event::Ready(id, at);
                }
                if launched.elapsed() > timeout {
                    break Event::NotReady(
                        id,
                        format!("instance {id} did not answer on {addr} within {timeout:?}"),
                    );
                }
                std::thread::sleep(Duration::from_millis(10));
            };
            let _ = events.send(event);
        });
        self.record().instances.push(InstanceLife {
            id,
            started: self.since_start(launched),
            cold_start: None,
            removed: None,
            failed: None,
        });
        let watched = (instance.pids.clone(), instance.group.clone());
        self.alive().insert(id, watched);
        self.members.push(Member {
            id,
            instance,
            launched,
            ready: None,
            draining: false,
            cpu: None,
            recent: VecDeque::new(),
        });
        Ok(())
    }

    /// Instance `id` answered at `at`: it joins the balancer, unless it was removed meanwhile.
    fn joined(&mut self, id: u32, at: Instant) {
        let Some(m) = self.members.iter_mut().find(|m| m.id == id) else {
            return;
        };
        m.ready = Some(at);
        m.cpu = cpu_ns(m).map(|ns| (ns, Instant::now()));
        let cold = at.saturating_duration_since(m.launched);
        self.balancer.add(id, m.instance.addr);
        if let Some(life) = self.record().instances.iter_mut().find(|l| l.id == id) {
            life.cold_start = Some(cold);
        }
    }

    /// Instance `id` never answered: it is stopped, and the count wanted stays (the next
    /// decision starts another).
    fn failed(&mut self, id: u32, why: String) {
        eprintln!("autoscaler: {why}; it is stopped");
        self.stop_member(id);
        if let Some(life) = self.record().instances.iter_mut().find(|l| l.id == id) {
            life.failed = Some(why);
        }
    }

    /// Instance `id` finished its requests: it leaves the balancer and is stopped.
    fn drained(&mut self, id: u32) {
        self.balancer.remove(id);
        self.stop_member(id);
    }

    /// Instances wanted now: started and not draining.
    fn current(&self) -> u32 {
        self.members.iter().filter(|m| !m.draining).count() as u32
    }

    /// Ready instances taking requests.
    fn ready(&self) -> u32 {
        self.members
            .iter()
            .filter(|m| m.ready.is_some() && !m.draining)
            .count() as u32
    }

    /// One second: the balancer's report and the instances' CPU read, the policy fed and
    /// asked when its period has passed, the count applied, the second recorded.
    fn second(&mut self) {
        let report = self.balancer.report();
        let now = self.since_start(Instant::now());
        let sync_len = match &self.settings.policy {
            Policy::Hpa { sync, .. } => sync.as_secs().max(1) as usize,
            Policy::Kpa(_) => 1,
        };
        let metric = self.settings.metric;
        let mut busy = Vec::new();
        for m in self.members.iter_mut() {
            let seen = report.instances.iter().find(|i| i.id == m.id);
            let concurrency = seen.map_or(0.0, |i| i.concurrency);
            let share = cpu_share(m);
            if m.ready.is_none() || m.draining {
                continue;
            }
            busy.push((m.id, concurrency));
            let value = match metric {
                Metric::Cpu => share,
                Metric::Concurrency => Some(concurrency),
                Metric::Rps => seen.map(|i| i.requests as f64 / report.span_s),
            };
            if let Some(v) = value {
                m.recent.push_back(v);
                while m.recent.len() > sync_len {
                    m.recent.pop_front();
                }
            }
        }
        if let Decider::Kpa(kpa) = &mut self.decider {
            // As Knative's collector: what the instances and the activator reported, once there
            // is an instance or a held request to report it.
            let any = busy.len() as u32 + report.held_now > 0 || report.held_concurrency > 0.0;
            if any {
                let total = match metric {
                    Metric::Rps => (report.requests() + report.refused) as f64 / report.span_s,
                    _ => report.total_concurrency(),
                };
                kpa.record(now.as_secs(), total);
            }
        }
        self.decide(now, &report);
        self.record().seconds.push(ScaleSecond {
            at: now,
            span_s: report.span_s,
            ready: self.ready(),
            starting: self.members.iter().filter(|m| m.ready.is_none()).count() as u32,
            draining: self.members.iter().filter(|m| m.draining).count() as u32,
            desired: self.desired,
            held: report.held_now,
            waited: report.waited,
            wait_s: report.wait_s,
            refused: report.refused,
            failed: report.failed,
            requests: report.requests(),
            busy,
        });
    }

    /// Asks the policy when its period has passed (the KPA at once when requests wait at zero,
    /// as the activator pokes it) and applies its answer.
    fn decide(&mut self, now: Duration, report: &Second) {
        let (current, ready) = (self.current(), self.ready());
        let (wanted, metric, panicking) = match &mut self.decider {
            Decider::Hpa(hpa, sync) => {
                if now < self.last_decision + *sync && self.last_decision > Duration::ZERO {
                    return;
                }
                let readings: Vec<hpa::Reading> = self
                    .members
                    .iter()
                    .filter(|m| !m.draining)
                    .map(|m| match (m.ready, m.recent.is_empty()) {
                        (None, _) => hpa::Reading::Starting,
                        (Some(_), true) => hpa::Reading::Missing,
                        (Some(_), false) => hpa::Reading::Ready(
                            m.recent.iter().sum::<f64>() / m.recent.len() as f64,
                        ),
                    })
                    .collect();
                let mean = mean_ready(&readings);
                (hpa.sync(now, current, &readings).desired, mean, false)
            }
            Decider::Kpa(kpa) => {
                let poke = current == 0 && report.held_now > 0;
                if !poke && now < self.last_decision + kpa.settings().tick {
                    return;
                }
                let d = kpa.decide(now, ready, current);
                (d.desired, d.stable, d.panicking)
            }
        };
        self.last_decision = now;
        if wanted != self.desired {
            self.record().decisions.push(ScaleDecision {
                at: now,
                from: self.desired,
                to: wanted,
                metric,
                panicking,
            });
        }
        self.desired = wanted;
        self.apply(now);
    }

    /// Starts or drains instances until `desired` are wanted: starting ones go first, then the
    /// ready ones with the fewest requests in flight, newest first.
    fn apply(&mut self, now: Duration) {
        let current = self.current();
        for _ in current..self.desired {
            if let Err(why) = self.launch_one(now) {
                eprintln!("autoscaler: instance not started: {why}");
                break;
            }
        }
        if self.desired >= current {
            return;
        }
        let mut order: Vec<(bool, u32, Instant, u32)> = self
            .members
            .iter()
            .filter(|m| !m.draining)
            .map(|m| {
                (
                    m.ready.is_some(),
                    self.balancer.in_flight(m.id),
                    m.launched,
                    m.id,
                )
            })
            .collect();
        order.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)).then(b.2.cmp(&a.2)));
        for &(ready, _, _, id) in order.iter().take((current - self.desired) as usize) {
            if let Some(life) = self.record().instances.iter_mut().find(|l| l.id == id) {
                life.removed = Some(now);
            }
            if !ready {
                if let Some(at) = self.members.iter().position(|m| m.id == id) {
                    let m = self.members.remove(at);
                    std::thread::spawn(move || drop(m));
                }
                continue;
            }
            if let Some(m) = self.members.iter_mut().find(|m| m.id == id) {
                m.draining = true;
            }
            self.balancer.drain(id);
            let (balancer, events) = (Arc::clone(&self.balancer), self.events.clone());
            let timeout = self.settings.drain_timeout;
            std::thread::spawn(move || {
                let until = Instant::now() + timeout;
                while balancer.in_flight(id) > 0 && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let _ = events.send(Event::Drained(id));
            });
        }
    }
}

/// An instance's CPU time so far, ns, when its control group's counter can be read.
fn cpu_ns(m: &Member) -> Option<u64> {
    m.instance.group.as_ref()?.read().cpu_ns
}

/// An instance's CPU since its last reading as a share of its budget, and the reading kept.
fn cpu_share(m: &mut Member) -> Option<f64> {
    let (ns, at) = (cpu_ns(m)?, Instant::now());
    let (before, then) = m.cpu.replace((ns, at))?;
    let wall = at.duration_since(then).as_secs_f64().max(1e-3);
    let cpus = m.instance.cpus.filter(|c| *c > 0.0)?;
    Some(ns.saturating_sub(before) as f64 / 1e9 / wall / cpus)
}

/// The mean of the ready instances' readings (0 without any).
fn mean_ready(readings: &[hpa::Reading]) -> f64 {
    let values: Vec<f64> = readings
        .iter()
        .filter_map(|r| match r {
            hpa::Reading::Ready(v) => Some(*v),
            _ => None,
        })
        .collect();
    match values.len() {
        0 => 0.0,
        n => values.iter().sum::<f64>() / n as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autoscale::balancer;
    use crate::autoscale::testing::{backend, get, until};

    /// A balancer on 127.0.0.1 and an autoscaler of in-process instances behind it.
    fn autoscaled(
        policy: Policy,
        metric: Metric,
        concurrency: Option<u32>,
    ) -> (Autoscaler, SocketAddr) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let front = listener.local_addr().unwrap();
        let lb = Arc::new(
            Balancer::start(
                listener,
                balancer::Settings {
                    container_concurrency: concurrency,
                    hold_timeout: Duration::from_secs(10),
                },
            )
            .unwrap(),
        );
        let settings = Settings {
            policy,
            metric,
            initial: 1,
            cold_start_floor: Duration::from_millis(300),
            ready_timeout: Duration::from_secs(5),
            drain_timeout: Duration::from_secs(5),
        };
        let launch: Launch = Box::new(|id| {
            let b = backend(&format!("instance {id}"));
            Ok(Started {
                addr: b.addr,
                cpus: None,
                // Not a process of its own: a number for the members' list alone.
                pids: vec![1000 + id],
                group: None,
                guard: Box::new(b),
            })
        });
        let probe: Probe = Arc::new(|addr| std::net::TcpStream::connect(addr).is_ok());
        let scaler = Autoscaler::start(settings, lb, launch, probe).unwrap();
        (scaler, front)
    }

    /// `users` clients sending `/wait?ms=100` back to back for `length`: the statuses.
    fn load(front: SocketAddr, users: usize, length: Duration) -> Vec<u16> {
        let until = Instant::now() + length;
        let threads: Vec<_> = (0..users)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut statuses = Vec::new();
                    while Instant::now() < until && statuses.len() < 1000 {
                        statuses.push(get(front, "/wait?ms=100").0);
                    }
                    statuses
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect()
    }

    #[test]
    fn the_kpa_panics_on_a_burst_holds_requests_while_instances_start_and_scales_back_down() {
        // One request at a time per instance, a target of one in flight: 6 users asking for
        // 100 ms each put 6 in flight (5 held) on the one instance, twice the ready count:
        // panic, to the maximum of 4 at once.
        let kpa = kpa::Settings {
            utilization: 1.0,
            stable_window: Duration::from_secs(4),
            panic_window: Duration::from_secs(1),
            tick: Duration::from_secs(1),
            ..kpa::Settings::new(1, 4, 1.0)
        };
        let (scaler, front) = autoscaled(Policy::Kpa(kpa), Metric::Concurrency, Some(1));
        let recording = scaler.recording();
        assert_eq!(recording.members().0, [1001]);
        let statuses = load(front, 6, Duration::from_secs(4));
        assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
        until(|| scaler.record().seconds.last().is_some_and(|s| s.ready == 1));
        // The sampler's list follows the set: the instances drained and stopped leave it.
        until(|| recording.members().0.len() == 1);
        let record = scaler.finish();
        assert!(recording.members().0.is_empty(), "every instance stopped");
        let first = &record.decisions[0];
        assert_eq!(
            (first.from, first.to, first.panicking),
            (1, 4, true),
            "{record:?}"
        );
        let most = record.seconds.iter().map(|s| s.ready).max().unwrap();
        assert_eq!(most, 4, "{:?}", record.seconds);
        // Requests waited while the instances started, none was refused, every one counted.
        let waited: u64 = record.seconds.iter().map(|s| s.waited).sum();
        let refused: u64 = record.seconds.iter().map(|s| s.refused).sum();
        let served: u64 = record.seconds.iter().map(|s| s.requests).sum();
        assert!(waited > 0 && refused == 0, "{:?}", record.seconds);
        assert_eq!(served, statuses.len() as u64);
        // Each added instance joined after the cold-start floor, and all but one were removed
        // once the load had left the stable window.
        assert_eq!(record.instances.len(), 4, "{:?}", record.instances);
        for life in &record.instances[1..] {
            assert!(
                life.cold_start.unwrap() >= Duration::from_millis(300),
                "{life:?}"
            );
        }
        let removed = record
            .instances
            .iter()
            .filter(|l| l.removed.is_some())
            .count();
        assert_eq!(removed, 3, "{:?}", record.instances);
        let last = record.decisions.last().unwrap();
        assert_eq!(
            (last.to, last.panicking),
            (1, false),
            "{:?}",
            record.decisions
        );
    }

    #[test]
    fn the_hpa_scales_on_each_instances_concurrency_and_down_after_its_stabilization() {
        let mut hpa = hpa::Settings::new(1, 3, 1.0);
        hpa.down.stabilization = Duration::from_secs(3);
        let policy = Policy::Hpa {
            settings: hpa,
            sync: Duration::from_secs(1),
        };
        let (scaler, front) = autoscaled(policy, Metric::Concurrency, None);
        let statuses = load(front, 4, Duration::from_secs(3));
        assert!(statuses.iter().all(|s| *s == 200));
        until(|| scaler.record().seconds.last().is_some_and(|s| s.ready == 1));
        let record = scaler.finish();
        // About 4 in flight on one instance at a target of 1: up to the maximum of 3.
        let up = &record.decisions[0];
        assert_eq!((up.from, up.to), (1, 3), "{:?}", record.decisions);
        assert!(up.metric > 2.0, "{up:?}");
        // Back to 1 no sooner than the 3 s of stabilization after the load's last second.
        let down = record.decisions.last().unwrap();
        assert_eq!(down.to, 1, "{:?}", record.decisions);
        let busy_until = record
            .seconds
            .iter()
            .filter(|s| s.requests > 0)
            .map(|s| s.at)
            .max()
            .unwrap();
        assert!(down.at >= busy_until + Duration::from_secs(2), "{record:?}");
        assert_eq!(
            record.seconds.iter().map(|s| s.requests).sum::<u64>(),
            statuses.len() as u64
        );
    }
}
