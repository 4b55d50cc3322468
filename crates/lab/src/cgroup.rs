//! CPU and memory budgets through the kernel's control groups, as a container runtime sets
//! them: a group per replica under one parent group this loadlab process owns
//! (`loadlab-<pid>`), on cgroup v2 (`cpu.max`, `memory.max`, `memory.swap.max`) or v1
//! (`cpu.cfs_quota_us`/`cpu.cfs_period_us`, `memory.limit_in_bytes`), removed when the budgets
//! are dropped, and, for a loadlab that was killed, by the next one.
//!
//! The cgroup files are written directly: a budget is a few lines of text in a few files, and
//! the crates that wrap them (cgroups-rs) bring a whole container runtime's model for that; a
//! process joins its group between fork and exec by writing `0` to `cgroup.procs` through a
//! file opened beforehand, so it never runs a moment outside its budget.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the kernel's control groups are mounted.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The CFS period a CPU quota is enforced over, µs: the kernel's and Docker's default (a
/// replica of 0.25 CPU runs at most 25 ms in each 100 ms).
pub const CPU_PERIOD_US: u64 = 100_000;

pub use loadlab_run::topology::Budget;

/// Which cgroup hierarchy the machine runs, and where its controllers are.
#[derive(Debug, Clone, PartialEq)]
pub enum Hierarchy {
    /// cgroup v2: one tree, controllers enabled per subtree.
    V2(PathBuf),
    /// cgroup v1: a tree per controller.
    V1 {
        /// The `cpu` controller's tree.
        cpu: PathBuf,
        /// The `memory` controller's tree.
        memory: PathBuf,
        /// The `cpuacct` controller's tree, where a group's CPU time is counted: `cpu`'s own
        /// when they are mounted together, `None` when it is not mounted.
        cpuacct: Option<PathBuf>,
    },
}

/// A budget that could not be set.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// Neither hierarchy is mounted where it should be.
    #[error(
        "no control groups at {0} (neither cgroup v2 nor v1's cpu and memory controllers): \
         budgets need a Linux host with cgroups mounted there"
    )]
    Missing(PathBuf),
    /// A cgroup file or folder could not be written.
    #[error(
        "cannot {action} {path}: {error}; budgets need root or a cgroup delegated to this user \
         (run as root, or `systemd-run --user --scope -p Delegate=yes loadlab …`)"
    )]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// Why.
        error: io::Error,
    },
}

fn io_error<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> CgroupError + 'a {
    move |error| CgroupError::Io {
        action,
        path: path.to_path_buf(),
        error,
    }
}

fn write(path: &Path, text: &str) -> Result<(), CgroupError> {
    fs::write(path, text).map_err(io_error("write", path))
}

impl Hierarchy {
    /// The hierarchy mounted at `root` (the machine's is [`CGROUP_ROOT`]).
    pub fn detect(root: &Path) -> Result<Hierarchy, CgroupError> {
        if root.join("cgroup.controllers").is_file() {
            return Ok(Hierarchy::V2(root.to_path_buf()));
        }
        // v1 mounts cpu alone, or with cpuacct under either name.
        let cpu = ["cpu", "cpu,cpuacct", "cpuacct,cpu"]
            .iter()
            .map(|n| root.join(n))
            .find(|p| p.join("cpu.cfs_quota_us").is_file());
        let memory = root.join("memory");
        match cpu {
            Some(cpu) if memory.join("memory.limit_in_bytes").is_file() => {
                let cpuacct = [cpu.clone(), root.join("cpuacct")]
                    .into_iter()
                    .find(|p| p.join("cpuacct.usage").is_file());
                Ok(Hierarchy::V1 {
                    cpu,
                    memory,
                    cpuacct,
                })
            }
            _ => Err(CgroupError::Missing(root.to_path_buf())),
        }
    }

    /// The trees' roots, each once.
    fn roots(&self) -> Vec<PathBuf> {
        match self {
            Hierarchy::V2(root) => vec![root.clone()],
            Hierarchy::V1 {
                cpu,
                memory,
                cpuacct,
            } => {
                let mut roots = vec![cpu.clone(), memory.clone()];
                roots.extend(cpuacct.iter().filter(|a| *a != cpu).cloned());
                roots
            }
        }
    }

    /// The folders a group named `rel` has, one per tree.
    fn dirs(&self, rel: &Path) -> Vec<PathBuf> {
        self.roots().into_iter().map(|r| r.join(rel)).collect()
    }

    /// `cgroup.procs` of every tree the group `rel` is in.
    fn procs(&self, rel: &Path) -> Vec<PathBuf> {
        self.dirs(rel)
            .into_iter()
            .map(|d| d.join("cgroup.procs"))
            .collect()
    }
}

/// The name of the parent group of loadlab process `pid`.
fn parent_name(pid: u32) -> String {
    format!("loadlab-{pid}")
}

/// The budgets of one loadlab process: its parent group, created on first use, and the
/// groups under it, all removed on drop.
#[derive(Debug)]
pub struct Budgets {
    hierarchy: Hierarchy,
    parent: PathBuf,
    groups: Vec<PathBuf>,
}

impl Budgets {
    /// The budgets of this process in the hierarchy at `root`, after removing the groups a
    /// killed loadlab left behind.
    pub fn new(root: &Path) -> Result<Budgets, CgroupError> {
        let hierarchy = Hierarchy::detect(root)?;
        remove_stale(&hierarchy);
        let parent = PathBuf::from(parent_name(std::process::id()));
        for dir in hierarchy.dirs(&parent) {
            fs::create_dir_all(&dir).map_err(io_error("create", &dir))?;
        }
        if let Hierarchy::V2(root) = &hierarchy {
            // A v2 group's children get a controller only where their parent enables it.
            write(&root.join("cgroup.subtree_control"), "+cpu +memory")?;
            write(
                &root.join(&parent).join("cgroup.subtree_control"),
                "+cpu +memory",
            )?;
        }
        Ok(Budgets {
            hierarchy,
            parent,
            groups: Vec::new(),
        })
    }

    /// The hierarchy the budgets are set in.
    pub fn hierarchy(&self) -> &Hierarchy {
        &self.hierarchy
    }

    /// A group for `name`'s processes (`replica 1`: its folder is `replica-1`) with `budget`.
    pub fn group(&mut self, name: &str, budget: &Budget) -> Result<Group, CgroupError> {
        let folder: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let rel = self.parent.join(folder);
        for dir in self.hierarchy.dirs(&rel) {
            fs::create_dir_all(&dir).map_err(io_error("create", &dir))?;
        }
        self.groups.push(rel.clone());
        match &self.hierarchy {
            Hierarchy::V2(root) => {
                let dir = root.join(&rel);
                if let Some(cpus) = budget.cpus {
                    write(
                        &dir.join("cpu.max"),
                        &format!("{} {CPU_PERIOD_US}", quota_us(cpus)),
                    )?;
                }
                if let Some(bytes) = budget.memory_bytes {
                    write(&dir.join("memory.max"), &bytes.to_string())?;
                    write(&dir.join("memory.swap.max"), "0")?;
                }
            }
            Hierarchy::V1 { cpu, memory, .. } => {
                if let Some(cpus) = budget.cpus {
                    let dir = cpu.join(&rel);
                    write(&dir.join("cpu.cfs_period_us"), &CPU_PERIOD_US.to_string())?;
                    write(&dir.join("cpu.cfs_quota_us"), &quota_us(cpus).to_string())?;
                }
                if let Some(bytes) = budget.memory_bytes {
                    let dir = memory.join(&rel);
                    write(&dir.join("memory.limit_in_bytes"), &bytes.to_string())?;
                    // Without swap, as `docker run --memory` with `--memory-swap` equal to it;
                    // only where the kernel accounts swap (swapaccount=1).
                    let swap = dir.join("memory.memsw.limit_in_bytes");
                    if swap.is_file() {
                        write(&swap, &bytes.to_string())?;
                    }
                }
            }
        }
        let counters = match &self.hierarchy {
            Hierarchy::V2(root) => Counters::V2(root.join(&rel)),
            Hierarchy::V1 {
                cpu,
                memory,
                cpuacct,
            } => Counters::V1 {
                cpu: cpu.join(&rel),
                memory: memory.join(&rel),
                cpuacct: cpuacct.as_ref().map(|a| a.join(&rel)),
            },
        };
        Ok(Group {
            name: name.to_string(),
            budget: *budget,
            procs: self.hierarchy.procs(&rel),
            dirs: self.hierarchy.dirs(&rel),
            counters,
        })
    }
}

impl Drop for Budgets {
    fn drop(&mut self) {
        for rel in self.groups.iter().chain(std::iter::once(&self.parent)) {
            for dir in self.hierarchy.dirs(rel) {
                remove_group(&dir);
            }
        }
    }
}

/// A CPU quota of `cpus` in µs per [`CPU_PERIOD_US`] (the kernel's least is 1 ms).
fn quota_us(cpus: f64) -> u64 {
    ((cpus * CPU_PERIOD_US as f64).round() as u64).max(1_000)
}

/// Removes a group folder: the kernel refuses while a process is in it, so its processes are
/// moved to the tree's root first (they are being stopped anyway).
fn remove_group(dir: &Path) {
    if let (Ok(procs), Some(root)) = (fs::read_to_string(dir.join("cgroup.procs")), tree_root(dir))
    {
        for pid in procs.split_whitespace() {
            let _ = fs::write(root.join("cgroup.procs"), pid);
        }
    }
    let _ = fs::remove_dir(dir);
}

/// The root of the tree `dir` is in: the nearest ancestor not named like a loadlab group or a
/// group under one.
fn tree_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|a| {
            a.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("loadlab-"))
        })
        .and_then(Path::parent)
        .map(Path::to_path_buf)
}

/// Removes the groups of loadlab processes that no longer run (killed before they could).
pub fn remove_stale(hierarchy: &Hierarchy) {
    for root in hierarchy.roots() {
        let Ok(entries) = fs::read_dir(&root) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name
                .strip_prefix("loadlab-")
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            if Path::new(&format!("/proc/{pid}")).exists() {
                continue;
            }
            if let Ok(children) = fs::read_dir(e.path()) {
                for c in children.flatten().filter(|c| c.path().is_dir()) {
                    remove_group(&c.path());
                }
            }
            remove_group(&e.path());
        }
    }
}

/// A group processes join.
#[derive(Debug, Clone)]
pub struct Group {
    /// Whose group it is, in words (`replica 1`, `nginx`).
    pub name: String,
    /// What its processes may use together.
    pub budget: Budget,
    procs: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
    counters: Counters,
}

/// Where a group's counters are read.
#[derive(Debug, Clone)]
enum Counters {
    /// cgroup v2: every counter in the group's folder.
    V2(PathBuf),
    /// cgroup v1: a folder per controller.
    V1 {
        cpu: PathBuf,
        memory: PathBuf,
        cpuacct: Option<PathBuf>,
    },
}

/// A group's counters at one moment, as the kernel keeps them since the group was made.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Reading {
    /// CPU time its processes used, ns (`None` where the kernel does not count it).
    pub cpu_ns: Option<u64>,
    /// CFS periods in which it ran.
    pub periods: u64,
    /// Those in which it was throttled.
    pub throttled_periods: u64,
    /// Time it spent throttled, ns.
    pub throttled_ns: u64,
    /// Memory charged to it now, bytes.
    pub memory_bytes: u64,
    /// Most memory ever charged to it, bytes (`None` where the kernel does not keep it).
    pub memory_peak_bytes: Option<u64>,
    /// Its processes the OOM killer ended.
    pub oom_kills: u64,
}

/// The number after `key` on its line of a `key value` file such as `cpu.stat`.
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

/// The number a one-number file holds.
fn number(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

impl Group {
    /// The processes in it now.
    pub fn pids(&self) -> Vec<u32> {
        self.procs
            .first()
            .and_then(|p| fs::read_to_string(p).ok())
            .map(|t| {
                t.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Its counters now (a counter that cannot be read reads 0, or `None` where optional).
    pub fn read(&self) -> Reading {
        let text = |p: PathBuf| fs::read_to_string(p).unwrap_or_default();
        match &self.counters {
            Counters::V2(dir) => {
                let cpu = text(dir.join("cpu.stat"));
                let events = text(dir.join("memory.events"));
                Reading {
                    cpu_ns: keyed(&cpu, "usage_usec").map(|us| us * 1000),
                    periods: keyed(&cpu, "nr_periods").unwrap_or(0),
                    throttled_periods: keyed(&cpu, "nr_throttled").unwrap_or(0),
                    throttled_ns: keyed(&cpu, "throttled_usec").unwrap_or(0) * 1000,
                    memory_bytes: number(&dir.join("memory.current")).unwrap_or(0),
                    // Kept since Linux 5.19.
                    memory_peak_bytes: number(&dir.join("memory.peak")),
                    oom_kills: keyed(&events, "oom_kill").unwrap_or(0),
                }
            }
            Counters::V1 {
                cpu,
                memory,
                cpuacct,
            } => {
                let stat = text(cpu.join("cpu.stat"));
                let oom = text(memory.join("memory.oom_control"));
                Reading {
                    cpu_ns: cpuacct
                        .as_ref()
                        .and_then(|a| number(&a.join("cpuacct.usage"))),
                    periods: keyed(&stat, "nr_periods").unwrap_or(0),
                    throttled_periods: keyed(&stat, "nr_throttled").unwrap_or(0),
                    throttled_ns: keyed(&stat, "throttled_time").unwrap_or(0),
                    memory_bytes: number(&memory.join("memory.usage_in_bytes")).unwrap_or(0),
                    memory_peak_bytes: number(&memory.join("memory.max_usage_in_bytes")),
                    // Counted since Linux 4.13.
                    oom_kills: keyed(&oom, "oom_kill").unwrap_or(0),
                }
            }
        }
    }

    /// The group's folders, one per tree (where its figures are read).
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// Makes `cmd`'s process join the group before it runs anything: the group's
    /// `cgroup.procs` files are opened here, and the child writes `0` (itself) to each between
    /// fork and exec.
    pub fn join_on_spawn(&self, cmd: &mut Command) -> Result<(), CgroupError> {
        let files: Vec<OwnedFd> = self
            .procs
            .iter()
            .map(|p| {
                fs::OpenOptions::new()
                    .write(true)
                    .open(p)
                    .map(OwnedFd::from)
                    .map_err(io_error("open", p))
            })
            .collect::<Result<_, _>>()?;
        // SAFETY: write(2) is async-signal-safe; the descriptors stay open in the closure,
        // which the child runs between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                for f in &files {
                    if libc::write(f.as_raw_fd(), b"0".as_ptr().cast(), 1) != 1 {
                        return Err(io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v1 tree as the kernel lays it out, in a temporary folder.
    fn fake_v1() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let cpu = dir.path().join("cpu,cpuacct");
        let memory = dir.path().join("memory");
        fs::create_dir_all(&cpu).unwrap();
        fs::create_dir_all(&memory).unwrap();
        fs::write(cpu.join("cpu.cfs_quota_us"), "-1").unwrap();
        fs::write(cpu.join("cpuacct.usage"), "0").unwrap();
        fs::write(memory.join("memory.limit_in_bytes"), "9223372036854771712").unwrap();
        dir
    }

    /// A v2 tree as the kernel lays it out, in a temporary folder.
    fn fake_v2() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("cgroup.controllers"), "cpu memory pids").unwrap();
        dir
    }

    #[test]
    fn the_hierarchy_is_read_from_what_is_mounted() {
        let v2 = fake_v2();
        assert_eq!(
            Hierarchy::detect(v2.path()).unwrap(),
            Hierarchy::V2(v2.path().to_path_buf())
        );
        let v1 = fake_v1();
        assert_eq!(
            Hierarchy::detect(v1.path()).unwrap(),
            Hierarchy::V1 {
                cpu: v1.path().join("cpu,cpuacct"),
                memory: v1.path().join("memory"),
                cpuacct: Some(v1.path().join("cpu,cpuacct")),
            }
        );
        let none = tempfile::tempdir().unwrap();
        let err = Hierarchy::detect(none.path()).unwrap_err().to_string();
        assert!(err.contains("no control groups"), "{err}");
    }

    #[test]
    fn a_v2_budget_writes_cpu_max_and_memory_max_without_swap_and_is_removed_on_drop() {
        let v2 = fake_v2();
        let mut budgets = Budgets::new(v2.path()).unwrap();
        let budget = Budget {
            cpus: Some(0.25),
            memory_bytes: Some(256 << 20),
        };
        let group = budgets.group("replica 1", &budget).unwrap();
        let dir = v2
            .path()
            .join(format!("loadlab-{}", std::process::id()))
            .join("replica-1");
        assert_eq!(group.dirs(), std::slice::from_ref(&dir));
        let read = |f: &str| fs::read_to_string(dir.join(f)).unwrap();
        assert_eq!(read("cpu.max"), "25000 100000");
        assert_eq!(read("memory.max"), (256u64 << 20).to_string());
        assert_eq!(read("memory.swap.max"), "0");
        let enabled = fs::read_to_string(v2.path().join("cgroup.subtree_control")).unwrap();
        assert_eq!(enabled, "+cpu +memory");
        // A fake tree's folders hold the files written above, which the kernel's do not; the
        // kernel removes a group's files with it, so here they go first.
        for f in ["cpu.max", "memory.max", "memory.swap.max"] {
            fs::remove_file(dir.join(f)).unwrap();
        }
        fs::remove_file(dir.parent().unwrap().join("cgroup.subtree_control")).unwrap();
        drop(budgets);
        assert!(!dir.parent().unwrap().exists(), "the parent group is left");
    }

    #[test]
    fn a_v1_budget_writes_the_cfs_quota_and_the_memory_limit_in_their_trees() {
        let v1 = fake_v1();
        let mut budgets = Budgets::new(v1.path()).unwrap();
        let budget = Budget {
            cpus: Some(1.5),
            memory_bytes: Some(64 << 20),
        };
        let group = budgets.group("replica-2", &budget).unwrap();
        let parent = format!("loadlab-{}", std::process::id());
        let cpu = v1
            .path()
            .join("cpu,cpuacct")
            .join(&parent)
            .join("replica-2");
        let memory = v1.path().join("memory").join(&parent).join("replica-2");
        assert_eq!(group.dirs(), [cpu.clone(), memory.clone()]);
        assert_eq!(
            fs::read_to_string(cpu.join("cpu.cfs_quota_us")).unwrap(),
            "150000"
        );
        assert_eq!(
            fs::read_to_string(cpu.join("cpu.cfs_period_us")).unwrap(),
            "100000"
        );
        assert_eq!(
            fs::read_to_string(memory.join("memory.limit_in_bytes")).unwrap(),
            (64u64 << 20).to_string()
        );
    }

    #[test]
    fn a_groups_counters_are_read_from_each_hierarchys_own_files() {
        let v2 = fake_v2();
        let mut budgets = Budgets::new(v2.path()).unwrap();
        let group = budgets.group("replica-1", &Budget::default()).unwrap();
        let dir = &group.dirs()[0];
        let put = |f: &str, t: &str| fs::write(dir.join(f), t).unwrap();
        put(
            "cpu.stat",
            "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\nnr_periods 40\n\
             nr_throttled 10\nthrottled_usec 750000\n",
        );
        put("memory.current", "1048576\n");
        put("memory.peak", "4194304\n");
        put(
            "memory.events",
            "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n",
        );
        assert_eq!(
            group.read(),
            Reading {
                cpu_ns: Some(2_500_000_000),
                periods: 40,
                throttled_periods: 10,
                throttled_ns: 750_000_000,
                memory_bytes: 1 << 20,
                memory_peak_bytes: Some(4 << 20),
                oom_kills: 1,
            }
        );
        for f in ["cpu.stat", "memory.current", "memory.peak", "memory.events"] {
            fs::remove_file(dir.join(f)).unwrap();
        }

        let v1 = fake_v1();
        let mut budgets = Budgets::new(v1.path()).unwrap();
        let group = budgets.group("replica-1", &Budget::default()).unwrap();
        let (cpu, memory) = (&group.dirs()[0], &group.dirs()[1]);
        fs::write(
            cpu.join("cpu.stat"),
            "nr_periods 40\nnr_throttled 10\nthrottled_time 750000000\nnr_bursts 0\n",
        )
        .unwrap();
        fs::write(cpu.join("cpuacct.usage"), "2500000000\n").unwrap();
        fs::write(memory.join("memory.usage_in_bytes"), "1048576\n").unwrap();
        fs::write(memory.join("memory.max_usage_in_bytes"), "4194304\n").unwrap();
        fs::write(
            memory.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        )
        .unwrap();
        let r = group.read();
        assert_eq!(
            (r.cpu_ns, r.periods, r.throttled_periods, r.throttled_ns),
            (Some(2_500_000_000), 40, 10, 750_000_000)
        );
        assert_eq!(
            (r.memory_bytes, r.memory_peak_bytes, r.oom_kills),
            (1 << 20, Some(4 << 20), 2)
        );
    }

    #[test]
    fn a_quota_is_at_least_the_kernels_least() {
        assert_eq!(quota_us(0.25), 25_000);
        assert_eq!(quota_us(0.001), 1_000);
        assert_eq!(quota_us(2.0), 200_000);
    }

    #[test]
    fn the_groups_of_a_loadlab_that_no_longer_runs_are_removed_and_a_running_ones_kept() {
        let v2 = fake_v2();
        // PIDs over the kernel's maximum (4,194,304) never run.
        let dead = v2.path().join("loadlab-4999999");
        fs::create_dir_all(dead.join("replica-1")).unwrap();
        let alive = v2.path().join(format!("loadlab-{}", std::process::id()));
        fs::create_dir_all(alive.join("replica-1")).unwrap();
        let other = v2.path().join("system.slice");
        fs::create_dir_all(&other).unwrap();
        remove_stale(&Hierarchy::detect(v2.path()).unwrap());
        assert!(!dead.exists());
        assert!(alive.join("replica-1").exists());
        assert!(other.exists());
    }
}
