//! What the operating system must allow before a run starts (a leaf, called by `run`): an open
//! file for every connection (the soft `RLIMIT_NOFILE` raised to the hard one when the plan
//! needs more), a local port for every connection to one destination from one source
//! address, and source addresses that are this machine's.

use std::net::{IpAddr, SocketAddr, UdpSocket};

use loadlab_run::{Arrivals, Model, Plan};

/// Files a process holds besides its connections: standard streams, the run directory's
/// files, the sampler's `/proc` reads, the collector.
const FILE_OVERHEAD: u64 = 64;
/// Files each generator thread holds besides its connections: its event loop's epoll and
/// waker, the precise timer.
const FILES_PER_THREAD: u64 = 8;

/// Where the kernel keeps the range of ephemeral ports.
const PORT_RANGE: &str = "/proc/sys/net/ipv4/ip_local_port_range";

/// The operating system would not let the plan run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LimitError {
    /// More files than the hard limit allows.
    #[error(
        "{connections} connections need about {files} open files, but this process may open at \
         most {hard}: that is the hard limit (RLIMIT_NOFILE), and raising it needs \
         CAP_SYS_RESOURCE or a higher `ulimit -Hn` where loadlab is started; use fewer \
         connections, raise the hard limit, or split the load over several loadlab processes, \
         each with its own --source-addr"
    )]
    Files {
        /// Connections the plan may hold at once.
        connections: u64,
        /// Files they need, with the process's own.
        files: u64,
        /// The hard limit.
        hard: u64,
    },
    /// The soft limit could not be raised.
    #[error("cannot raise the open-file limit from {soft} to {to}: {why}")]
    Raise {
        /// The soft limit.
        soft: u64,
        /// What it was to become.
        to: u64,
        /// The system's reason.
        why: String,
    },
    /// More connections to one destination than the source addresses have ports.
    #[error(
        "{connections} connections to {target} need more local ports than {sources} source \
         address(es) have ({ports} each, from ip_local_port_range): add source addresses with \
         --source-addr (e.g. 127.0.0.2-127.0.0.5) or use fewer connections"
    )]
    Ports {
        /// Connections to the destination.
        connections: u64,
        /// The destination.
        target: SocketAddr,
        /// Source addresses (1 when the plan names none).
        sources: u64,
        /// Ephemeral ports per source address.
        ports: u64,
    },
    /// A source address that is not this machine's.
    #[error("cannot bind to source address {addr}: {why} (it must be an address of this machine)")]
    Source {
        /// The address.
        addr: IpAddr,
        /// The system's reason.
        why: String,
    },
}

/// What the checks found, for the run's report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Open files the process may hold (the soft limit, after raising it).
    pub file_limit: u64,
}

/// Checks, and raises where it can, what the plan needs of the system on `threads` threads.
pub fn prepare(plan: &Plan, threads: usize) -> Result<Limits, LimitError> {
    let (per_endpoint, total) = connections(plan, threads);
    check_sources(&plan.source_addrs)?;
    if let Some(ports) = ephemeral_ports() {
        let sources = plan.source_addrs.len().max(1) as u64;
        if per_endpoint > ports * sources {
            return Err(LimitError::Ports {
                connections: per_endpoint,
                target: plan.endpoints[0].addr,
                sources,
                ports,
            });
        }
    }
    let files =
        total + threads as u64 * (FILES_PER_THREAD + plan.endpoints.len() as u64) + FILE_OVERHEAD;
    let file_limit = match nofile() {
        Some((soft, hard)) => match file_limit_for(total, files, soft, hard)? {
            Some(to) => {
                raise_nofile(to, hard).map_err(|e| LimitError::Raise {
                    soft,
                    to,
                    why: e.to_string(),
                })?;
                to
            }
            None => soft,
        },
        None => 0,
    };
    Ok(Limits { file_limit })
}

/// The soft limit to set so that `files` files fit under (`soft`, `hard`), or `None` when the
/// soft limit already holds them: the hard limit itself (or `files`, when the hard limit is
/// infinite), and an error in words when the hard limit is too low.
pub fn file_limit_for(
    connections: u64,
    files: u64,
    soft: u64,
    hard: u64,
) -> Result<Option<u64>, LimitError> {
    if files <= soft {
        return Ok(None);
    }
    if hard == libc::RLIM_INFINITY {
        return Ok(Some(files));
    }
    if files > hard {
        return Err(LimitError::Files {
            connections,
            files,
            hard,
        });
    }
    Ok(Some(hard))
}

/// Connections the plan may hold at once to its busiest endpoint and in all, on `threads`
/// threads (each thread rounds its share of an open-model cap up).
fn connections(plan: &Plan, threads: usize) -> (u64, u64) {
    let endpoints = plan.endpoints.len().max(1) as u64;
    let threads = threads.max(1) as u64;
    let (_, most) = plan.model.connection_bounds();
    let most = most as u64;
    match &plan.model {
        Model::Closed { .. } => (most.div_ceil(endpoints), most),
        Model::Open {
            arrivals: Arrivals::Requests { .. },
            ..
        } => {
            let per_endpoint = most.div_ceil(threads * endpoints).max(1) * threads;
            (per_endpoint, per_endpoint * endpoints)
        }
        // Each user holds a connection to every endpoint it uses.
        _ => (most, most * endpoints),
    }
}

/// Every distinct source address must be one a socket can bind to.
fn check_sources(sources: &[IpAddr]) -> Result<(), LimitError> {
    let mut distinct = sources.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    for addr in distinct {
        UdpSocket::bind(SocketAddr::new(addr, 0)).map_err(|e| LimitError::Source {
            addr,
            why: e.to_string(),
        })?;
    }
    Ok(())
}

/// Ephemeral ports per source address and destination, when the system says.
fn ephemeral_ports() -> Option<u64> {
    let text = std::fs::read_to_string(PORT_RANGE).ok()?;
    let mut bounds = text.split_whitespace().map(|w| w.parse::<u64>().ok());
    let (low, high) = (bounds.next()??, bounds.next()??);
    (high >= low).then(|| high - low + 1)
}

/// The soft and hard limits on open files.
fn nofile() -> Option<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    (rc == 0).then_some((lim.rlim_cur, lim.rlim_max))
}

/// Sets the soft limit on open files to `soft`, keeping the hard limit `hard`.
fn raise_nofile(soft: u64, hard: u64) -> std::io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: soft as libc::rlim_t,
        rlim_max: hard as libc::rlim_t,
    };
    // SAFETY: setrlimit reads the struct we own.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_soft_limit_that_holds_the_plan_is_left_alone() {
        assert_eq!(file_limit_for(900, 1000, 1024, 4096), Ok(None));
    }

    #[test]
    fn a_soft_limit_too_low_is_raised_to_the_hard_limit() {
        assert_eq!(file_limit_for(5000, 5100, 1024, 20_000), Ok(Some(20_000)));
        let infinite = libc::RLIM_INFINITY;
        assert_eq!(file_limit_for(5000, 5100, 1024, infinite), Ok(Some(5100)));
    }

    #[test]
    fn a_plan_past_the_hard_limit_is_refused_in_one_line_that_says_what_to_do() {
        let e = file_limit_for(100_000, 100_100, 20_000, 20_000).unwrap_err();
        let text = e.to_string();
        assert!(!text.contains('\n'), "{text}");
        for part in [
            "100000 connections",
            "at most 20000",
            "hard limit",
            "CAP_SYS_RESOURCE",
            "ulimit -Hn",
            "fewer connections",
            "several loadlab processes",
        ] {
            assert!(text.contains(part), "{part:?} missing from: {text}");
        }
    }

    #[test]
    fn an_address_of_another_machine_is_refused_as_a_source() {
        assert!(check_sources(&["127.0.0.2".parse().unwrap()]).is_ok());
        let e = check_sources(&["192.0.2.1".parse().unwrap()]).unwrap_err();
        assert!(matches!(e, LimitError::Source { .. }), "{e}");
    }
}
