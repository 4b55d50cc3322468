//! What the lab saw of the service: CPU and memory per process per second, and the stores'
//! own figures (a Redis server's commands, memory, clients and stream backlogs) per second.

use std::io::{self, Write};

/// One reading of one process.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSample {
    /// Second of the sampling, from its start.
    pub second: u64,
    /// CPU used since the previous sample, percent of one core.
    pub cpu_pct: f64,
    /// Time its threads were runnable but waiting for a CPU since the previous sample,
    /// percent of one core: with `cpu_pct`, the CPU it wanted.
    pub cpu_wait_pct: f64,
    /// Resident memory, MB.
    pub rss_mb: f64,
}

/// Every reading of one process.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSeries {
    /// Process id.
    pub pid: u32,
    /// Command name.
    pub name: String,
    /// Readings in time order.
    pub samples: Vec<ProcessSample>,
}

impl ProcessSeries {
    /// Mean CPU percent over the samples.
    pub fn cpu_pct_avg(&self) -> f64 {
        self.mean_over(0, |s| s.cpu_pct)
    }

    /// Mean percent of one core its threads waited for a CPU over the samples.
    pub fn cpu_wait_pct_avg(&self) -> f64 {
        self.mean_over(0, |s| s.cpu_wait_pct)
    }

    /// Mean CPU percent over a run's `readings`, those it missed (it started late or ended
    /// early, as an autoscaled instance) counting 0: so the processes' means add up to what
    /// they used together.
    pub fn cpu_pct_avg_over(&self, readings: usize) -> f64 {
        self.mean_over(readings, |s| s.cpu_pct)
    }

    /// Like [`ProcessSeries::cpu_pct_avg_over`] for the time it waited for a CPU.
    pub fn cpu_wait_pct_avg_over(&self, readings: usize) -> f64 {
        self.mean_over(readings, |s| s.cpu_wait_pct)
    }

    /// Mean of `value` over `readings`, or over its samples when it has more (0 without any).
    fn mean_over(&self, readings: usize, value: impl Fn(&ProcessSample) -> f64) -> f64 {
        match readings.max(self.samples.len()) {
            0 => 0.0,
            n => self.samples.iter().map(value).sum::<f64>() / n as f64,
        }
    }

    /// Highest CPU percent of any sample.
    pub fn cpu_pct_max(&self) -> f64 {
        self.samples.iter().map(|s| s.cpu_pct).fold(0.0, f64::max)
    }

    /// Highest resident memory of any sample, MB.
    pub fn rss_mb_max(&self) -> f64 {
        self.samples.iter().map(|s| s.rss_mb).fold(0.0, f64::max)
    }
}

/// One reading of a stream (a queue) in a store.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamReading {
    /// The stream's key.
    pub stream: String,
    /// Entries in the stream.
    pub length: u64,
    /// Entries delivered to its consumer group and not yet acknowledged.
    pub pending: u64,
    /// Entries not yet delivered to the consumer group (Redis 7's `lag`), when known.
    pub lag: Option<u64>,
}

/// One reading of a store.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreSample {
    /// Second of the sampling, from its start.
    pub second: u64,
    /// Commands processed per second since the previous reading.
    pub commands_per_s: f64,
    /// Memory used, MB.
    pub memory_mb: f64,
    /// Clients connected.
    pub clients: u64,
    /// Its streams with a consumer group.
    pub streams: Vec<StreamReading>,
}

/// Every reading of one store.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreSeries {
    /// What it is: `redis 127.0.0.1:PORT`.
    pub name: String,
    /// Readings in time order.
    pub samples: Vec<StoreSample>,
}

/// A reading the sampler hands out as it takes it, for the live dashboard and the metric
/// exporters (the run's record keeps every reading besides).
#[derive(Debug, Clone, PartialEq)]
pub enum LiveReading {
    /// A watched store's reading.
    Store {
        /// The store's name (`redis HOST:PORT`).
        name: String,
        /// What was read.
        sample: StoreSample,
    },
    /// A watched process's reading.
    Process {
        /// Process id.
        pid: u32,
        /// Command name.
        name: String,
        /// What was read.
        sample: ProcessSample,
    },
}

/// One reading of the whole host's CPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostSample {
    /// Second of the sampling, from its start.
    pub second: u64,
    /// CPU every process of the host used since the previous reading, percent of one core
    /// (up to 100 × the host's cores).
    pub busy_pct: f64,
}

/// One reading of a control group (a budgeted replica, balancer or store).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GroupSample {
    /// Second of the sampling, from its start.
    pub second: u64,
    /// CPU its processes used since the previous reading, percent of one core.
    pub cpu_pct: f64,
    /// Percent of the CFS periods since the previous reading in which it was throttled
    /// (stopped for having used its quota); 0 without a quota.
    pub throttled_pct: f64,
    /// Memory charged to it (resident memory and page cache), MB.
    pub memory_mb: f64,
}

/// What a control group used over a whole run, from its counters at the start and the end.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GroupTotals {
    /// CPU time its processes used, seconds.
    pub cpu_s: f64,
    /// Wall time between the two readings, seconds.
    pub wall_s: f64,
    /// CFS periods in which it ran.
    pub periods: u64,
    /// Those in which it was throttled.
    pub throttled_periods: u64,
    /// Time its threads spent throttled, seconds (summed over CPUs, as the kernel counts).
    pub throttled_s: f64,
    /// Most memory charged to it during the run, MB.
    pub memory_peak_mb: f64,
    /// Processes of it the kernel's OOM killer ended during the run.
    pub oom_kills: u64,
    /// Second of the run by which the first OOM kill was seen, when one was.
    pub first_oom_second: Option<u64>,
}

/// Every reading of one control group, with its budget.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GroupSeries {
    /// Whose group it is: `replica 1`, `service`, `nginx`, `redis-server`, `consumer 1`.
    pub name: String,
    /// Its CPU quota, CPUs (0.25: a quarter of a core per period).
    pub cpus: Option<f64>,
    /// Its memory limit, bytes.
    pub memory_bytes: Option<u64>,
    /// Readings in time order.
    pub samples: Vec<GroupSample>,
    /// The processes seen in it, by PID.
    pub pids: Vec<u32>,
    /// The run's totals (`None` when read back from `groups.csv`, which keeps the series only).
    pub totals: Option<GroupTotals>,
}

/// The watched processes and stores of a run, and the host's CPU beside them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerData {
    /// One series per process, by PID.
    pub processes: Vec<ProcessSeries>,
    /// One series per store.
    pub stores: Vec<StoreSeries>,
    /// The host's CPU, every process's together, per reading (empty when not read).
    pub host: Vec<HostSample>,
    /// The budgeted processes' control groups, one series each.
    pub groups: Vec<GroupSeries>,
    /// The cores the service and the generator were given, when the lab split them.
    pub cores: Option<ServerCores>,
}

/// Which cores the service's processes and the generator were pinned to.
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct ServerCores {
    /// The service's processes' cores.
    pub service: Vec<usize>,
    /// The generator's cores.
    pub generator: Vec<usize>,
}

impl ServerData {
    /// The host's mean CPU over the readings, percent of one core (`None` without any).
    pub fn host_cpu_pct_avg(&self) -> Option<f64> {
        if self.host.is_empty() {
            return None;
        }
        Some(self.host.iter().map(|h| h.busy_pct).sum::<f64>() / self.host.len() as f64)
    }

    /// Writes `host.csv`: the host's CPU per second.
    pub fn write_host_csv(&self, w: &mut impl Write) -> io::Result<()> {
        writeln!(w, "second,busy_pct")?;
        for h in &self.host {
            writeln!(w, "{},{:.1}", h.second, h.busy_pct)?;
        }
        Ok(())
    }

    /// Reads what `write_host_csv` wrote (lines it cannot read are skipped).
    pub fn read_host_csv(text: &str) -> Vec<HostSample> {
        text.lines()
            .skip(1)
            .filter_map(|l| {
                let (second, busy) = l.split_once(',')?;
                Some(HostSample {
                    second: second.trim().parse().ok()?,
                    busy_pct: busy.trim().parse().ok().filter(|b: &f64| b.is_finite())?,
                })
            })
            .collect()
    }

    /// Writes `server.csv`: one line per process per second.
    pub fn write_csv(&self, w: &mut impl Write) -> io::Result<()> {
        writeln!(w, "second,pid,name,cpu_pct,rss_mb,cpu_wait_pct")?;
        for p in &self.processes {
            for s in &p.samples {
                writeln!(
                    w,
                    "{},{},{},{:.1},{:.2},{:.1}",
                    s.second,
                    p.pid,
                    p.name.replace(',', "_"),
                    s.cpu_pct,
                    s.rss_mb,
                    s.cpu_wait_pct
                )?;
            }
        }
        Ok(())
    }

    /// Writes `groups.csv`: one line per control group per second.
    pub fn write_groups_csv(&self, w: &mut impl Write) -> io::Result<()> {
        writeln!(
            w,
            "second,group,cpus,memory_limit_mb,cpu_pct,throttled_pct,memory_mb"
        )?;
        for g in &self.groups {
            let cpus = g.cpus.map_or(String::new(), |c| c.to_string());
            let limit = g.memory_bytes.map_or(String::new(), |b| {
                format!("{:.2}", b as f64 / (1024.0 * 1024.0))
            });
            for s in &g.samples {
                writeln!(
                    w,
                    "{},{},{cpus},{limit},{:.1},{:.1},{:.2}",
                    s.second,
                    g.name.replace(',', "_"),
                    s.cpu_pct,
                    s.throttled_pct,
                    s.memory_mb
                )?;
            }
        }
        Ok(())
    }

    /// Reads what `write_groups_csv` wrote (lines it cannot read are skipped; no totals).
    pub fn read_groups_csv(text: &str) -> Vec<GroupSeries> {
        let mut groups: Vec<GroupSeries> = Vec::new();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split(',').collect();
            let [second, name, cpus, limit, cpu, throttled, memory] = f.as_slice() else {
                continue;
            };
            let Ok(second) = second.parse() else {
                continue;
            };
            let sample = GroupSample {
                second,
                cpu_pct: cpu.parse().unwrap_or(0.0),
                throttled_pct: throttled.parse().unwrap_or(0.0),
                memory_mb: memory.parse().unwrap_or(0.0),
            };
            match groups.iter_mut().find(|g| g.name == *name) {
                Some(g) => g.samples.push(sample),
                None => groups.push(GroupSeries {
                    name: name.to_string(),
                    cpus: cpus.parse().ok(),
                    memory_bytes: limit
                        .parse::<f64>()
                        .ok()
                        .map(|mb| (mb * 1024.0 * 1024.0).round() as u64),
                    samples: vec![sample],
                    pids: Vec::new(),
                    totals: None,
                }),
            }
        }
        groups
    }

    /// Writes `stores.csv`: one line per store per second, and one more per stream.
    pub fn write_stores_csv(&self, w: &mut impl Write) -> io::Result<()> {
        writeln!(
            w,
            "second,store,commands_per_s,memory_mb,clients,stream,length,pending,lag"
        )?;
        for st in &self.stores {
            let name = st.name.replace(',', "_");
            for s in &st.samples {
                writeln!(
                    w,
                    "{},{name},{:.1},{:.2},{},,,,",
                    s.second, s.commands_per_s, s.memory_mb, s.clients
                )?;
                for q in &s.streams {
                    let lag = q.lag.map_or(String::new(), |l| l.to_string());
                    writeln!(
                        w,
                        "{},{name},,,,{},{},{},{lag}",
                        s.second,
                        q.stream.replace(',', "_"),
                        q.length,
                        q.pending
                    )?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_cpu_is_averaged_and_written_and_read_back() {
        let host = ServerData {
            host: vec![
                HostSample {
                    second: 0,
                    busy_pct: 150.0,
                },
                HostSample {
                    second: 1,
                    busy_pct: 190.0,
                },
            ],
            ..ServerData::default()
        };
        assert_eq!(host.host_cpu_pct_avg(), Some(170.0));
        assert_eq!(ServerData::default().host_cpu_pct_avg(), None);
        let mut out = Vec::new();
        host.write_host_csv(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(ServerData::read_host_csv(&text), host.host);
        assert!(ServerData::read_host_csv("second,busy_pct\nx,y\n3,NaN\n").is_empty());
    }

    #[test]
    fn a_series_summarizes_its_samples() {
        let p = ProcessSeries {
            pid: 7,
            name: "node,app".into(),
            samples: vec![
                ProcessSample {
                    second: 0,
                    cpu_pct: 50.0,
                    cpu_wait_pct: 0.0,
                    rss_mb: 10.0,
                },
                ProcessSample {
                    second: 1,
                    cpu_pct: 100.0,
                    cpu_wait_pct: 20.0,
                    rss_mb: 12.5,
                },
            ],
        };
        assert_eq!(p.cpu_pct_avg(), 75.0);
        assert_eq!(p.cpu_pct_max(), 100.0);
        assert_eq!(p.rss_mb_max(), 12.5);
        assert_eq!(p.cpu_wait_pct_avg(), 10.0);
        // Over a run of 5 readings, of which it lived 2, it used 30 % of a core on average.
        assert_eq!(p.cpu_pct_avg_over(5), 30.0);
        assert_eq!(p.cpu_wait_pct_avg_over(5), 4.0);
        assert_eq!(
            p.cpu_pct_avg_over(1),
            75.0,
            "never fewer than its own samples"
        );
        let mut out = Vec::new();
        ServerData {
            processes: vec![p],
            ..ServerData::default()
        }
        .write_csv(&mut out)
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().nth(2), Some("1,7,node_app,100.0,12.50,20.0"));
        let stores = ServerData {
            processes: Vec::new(),
            stores: vec![StoreSeries {
                name: "redis 127.0.0.1:1".into(),
                samples: vec![StoreSample {
                    second: 3,
                    commands_per_s: 250.0,
                    memory_mb: 1.5,
                    clients: 4,
                    streams: vec![StreamReading {
                        stream: "visits".into(),
                        length: 90,
                        pending: 2,
                        lag: None,
                    }],
                }],
            }],
            host: Vec::new(),
            ..ServerData::default()
        };
        let mut out = Vec::new();
        stores.write_stores_csv(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text.lines().skip(1).collect::<Vec<_>>(),
            [
                "3,redis 127.0.0.1:1,250.0,1.50,4,,,,",
                "3,redis 127.0.0.1:1,,,,visits,90,2,"
            ]
        );
    }
}
