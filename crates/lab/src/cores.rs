//! Which cores the generator and a topology run on: when the topology's CPU quotas leave whole
//! cores free, the generator takes those and the topology's processes the others, so the two
//! never compete for a core; a topology whose quotas and the generator do not fit the host is
//! refused, or run sharing the cores when the user says so.

use loadlab_run::Topology;

use crate::LabError;

/// Where a topology and the generator run.
#[derive(Debug, Clone, PartialEq)]
pub enum Placement {
    /// Both anywhere: the topology has no CPU quota (today's sharing of every core).
    Anywhere,
    /// On cores of their own.
    Split {
        /// The topology's processes' cores.
        topology: Vec<usize>,
        /// The generator's cores.
        generator: Vec<usize>,
    },
    /// Both anywhere although the quotas and the generator do not fit (`oversubscribe`): why,
    /// in words.
    Shared(String),
}

/// Where `topology` (named `name`) and the generator run on `host` (the cores this process
/// may use): split when the replicas' quotas leave whole cores free; an error with the
/// arithmetic when they do not, unless `oversubscribe`.
pub fn place(
    name: &str,
    topology: &Topology,
    host: &[usize],
    oversubscribe: bool,
) -> Result<Placement, String> {
    let quota = topology.quota_total();
    if topology.cpu_quota.is_none() || host.is_empty() {
        return Ok(Placement::Anywhere);
    }
    // A quota of 1.2 CPUs needs 2 cores; a hair over a whole number is rounding, not a core.
    let needed = ((quota - 1e-6).ceil() as usize).max(1);
    if needed < host.len() {
        return Ok(Placement::Split {
            topology: host[..needed].to_vec(),
            generator: host[needed..].to_vec(),
        });
    }
    let why = format!(
        "topology {name:?}: its CPU quotas add up to {} = {quota:.2} CPUs, {needed} core(s), and \
         the generator needs 1 more: {} cores, and this host gives loadlab {}",
        quota_sum(topology),
        needed + 1,
        host.len()
    );
    if oversubscribe {
        Ok(Placement::Shared(why))
    } else {
        Err(format!(
            "{why}; lower the budgets, or set `oversubscribe: true` to share the cores (the \
             verdicts then name the host as a cap)"
        ))
    }
}

/// The topology's quotas as a sum in words: `6 × 0.25 + nginx 0.5`.
fn quota_sum(t: &Topology) -> String {
    t.cpu_quotas()
        .iter()
        .filter_map(|(kind, n, cpus)| {
            let cpus = (*cpus)?;
            Some(match (*kind, n) {
                ("replica", _) => format!("{n} × {cpus}"),
                (_, 1) => format!("{kind} {cpus}"),
                _ => format!("{n} {kind}s × {cpus}"),
            })
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

/// The cores the calling thread may run on.
pub fn allowed() -> Result<Vec<usize>, LabError> {
    // SAFETY: sched_getaffinity fills the zeroed set it is given, of the size given.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
        return Err(LabError::Io(std::io::Error::last_os_error()));
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Makes the calling thread (and the threads it starts from now on) run on `cores` only;
/// given every core it had, undoes it.
pub fn pin_this_thread(cores: &[usize]) -> Result<(), LabError> {
    let set = cpu_set(cores);
    // SAFETY: the set is built above and passed with its size.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(LabError::Io(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// A request to the kernel that cores stay out of deep idle states while it is held (PM QoS
/// through `/dev/cpu_dma_latency`, as latency benchmarks and tuned's latency profiles ask
/// it); released when dropped, or when the process ends however it ends.
///
/// A replica throttled by a small quota leaves its core idle most of each period, and a core
/// that sleeps deeply makes the replica pay for waking it in every period. Measured on this
/// project's 2-core virtual machine, `/calc?n=50000` from 16 connections against one
/// `loadlab serve --cpus 0.2` alone on a core (0.2 of an unthrottled replica's 967 req/s is
/// 193): 172–200 req/s in four runs without the request and 197–205 in four with it (an
/// hour earlier, 113–169 in five runs without).
pub struct AwakeCores(#[allow(dead_code)] std::fs::File);

impl AwakeCores {
    /// Holds the request; `None` where it cannot be made (the file is root's, or absent).
    pub fn hold() -> Option<AwakeCores> {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/cpu_dma_latency")
            .ok()?;
        // The kernel reads a 32-bit number of µs of wake-up latency allowed: none.
        f.write_all(&0i32.to_ne_bytes()).ok()?;
        Some(AwakeCores(f))
    }
}

/// The kernel's set of `cores`, for `sched_setaffinity`.
pub(crate) fn cpu_set(cores: &[usize]) -> libc::cpu_set_t {
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET only writes bits inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cores {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    set
}

/// A list of cores in words: `core 1`, `cores 0-2`, `cores 0, 2`.
pub fn words(cores: &[usize]) -> String {
    let contiguous = cores.windows(2).all(|w| w[1] == w[0] + 1);
    match cores {
        [one] => format!("core {one}"),
        [first, .., last] if contiguous => format!("cores {first}-{last}"),
        many => format!(
            "cores {}",
            many.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology(replicas: usize, quota: Option<f64>) -> Topology {
        let mut t = every_default();
        t.replicas = replicas;
        t.cpu_quota = quota;
        t
    }

    /// A topology with every default.
    fn every_default() -> Topology {
        use loadlab_run::topology::defaults;
        Topology {
            workers: 1,
            replicas: 1,
            lb: defaults::LB,
            port: 0,
            command: None,
            runtime: defaults::RUNTIME,
            serve_args: Vec::new(),
            health_path: defaults::HEALTH_PATH.into(),
            ready_timeout: defaults::READY_TIMEOUT,
            proxy_timeout: defaults::PROXY_TIMEOUT,
            lb_connections: None,
            redis: false,
            consumers: 0,
            shards: None,
            profile: false,
            static_at_lb: false,
            shared_bbox: None,
            lb_alone: false,
            stdout: defaults::STDOUT,
            cpus: None,
            cpu_quota: None,
            memory_bytes: None,
            balancer_budget: Default::default(),
            store_budget: Default::default(),
            consumer_budget: Default::default(),
            on_cores: Vec::new(),
            autoscale: None,
        }
    }

    #[test]
    fn quotas_that_leave_a_core_free_give_it_to_the_generator() {
        let host = [0, 1];
        assert_eq!(
            place("one", &topology(4, Some(0.2)), &host, false),
            Ok(Placement::Split {
                topology: vec![0],
                generator: vec![1],
            })
        );
        // 5 × 0.2 is 1.0000000000000002 in floating point: still one core.
        assert_eq!(
            place("five", &topology(5, Some(0.2)), &host, false),
            Ok(Placement::Split {
                topology: vec![0],
                generator: vec![1],
            })
        );
        assert_eq!(
            place("free", &topology(6, None), &host, false),
            Ok(Placement::Anywhere)
        );
    }

    #[test]
    fn quotas_that_do_not_fit_are_refused_with_the_arithmetic_unless_shared_on_purpose() {
        let mut t = topology(6, Some(0.25));
        t.balancer_budget.cpus = Some(0.5);
        let err = place("six", &t, &[0, 1], false).unwrap_err();
        assert!(
            err.contains("topology \"six\": its CPU quotas add up to 6 × 0.25 + nginx 0.5 = 2.00 CPUs, 2 core(s), and the generator needs 1 more: 3 cores, and this host gives loadlab 2"),
            "{err}"
        );
        assert!(err.contains("oversubscribe: true"), "{err}");
        match place("six", &t, &[0, 1], true) {
            Ok(Placement::Shared(why)) => assert!(why.contains("3 cores"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn cores_are_said_as_ranges_or_lists() {
        assert_eq!(words(&[1]), "core 1");
        assert_eq!(words(&[0, 1, 2]), "cores 0-2");
        assert_eq!(words(&[0, 2]), "cores 0, 2");
    }
}
