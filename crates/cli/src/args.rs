//! Command-line flags, as clap parses them: the load flags of `loadlab run` are
//! [`LoadFlags`] from the input crate, which lowers them into a plan; the rest say what each
//! subcommand does with it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use loadlab_input::values::{parse_duration, positive_count, positive_duration, whole_seconds};
use loadlab_input::{CapacityFlags, LoadFlags};
use loadlab_run::topology::{self, Lb, Runtime};

/// The command line with `--dashboard ADDR` (a space, as users write it) rewritten as
/// `--dashboard=ADDR`. The flag's value is optional, so clap needs the `=`; without this the
/// address would be taken for the URL. A next argument counts as an address when it has no
/// scheme and no `/` and ends in `:PORT` (URLs always have a scheme; scenario files have no
/// port), so `--dashboard run.yaml` and `--dashboard http://…` keep their meaning.
pub fn join_dashboard_addr(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::new();
    let mut args = args.into_iter().peekable();
    while let Some(arg) = args.next() {
        let addr = (arg == "--dashboard")
            .then(|| args.next_if(|next| next.to_str().is_some_and(is_listen_addr)))
            .flatten();
        match addr {
            Some(addr) => {
                let mut joined = OsString::from("--dashboard=");
                joined.push(addr);
                out.push(joined);
            }
            None => out.push(arg),
        }
    }
    out
}

/// True for `HOST:PORT` and `[IPV6]:PORT`: what a listening address looks like.
fn is_listen_addr(s: &str) -> bool {
    let Some((host, port)) = s.rsplit_once(':') else {
        return false;
    };
    !host.is_empty() && !s.contains('/') && !host.starts_with('-') && port.parse::<u16>().is_ok()
}

/// The exit codes, as `loadlab --help` lists them (docs/flags.md has the same table).
const EXIT_CODES: &str = "\
Exit codes:
  0    done; nothing it was asked to check failed
  1    bad input or a failure to run (also a failed `ensure` of an Artillery script)
  2    a flag the command line refuses
  3    capacity: no rate met the objective
  4    run: not one request reached the target
  5    run at a rate: the generator saturated and fell behind the rate asked for
  6    lab or report --baseline: verdicts changed against the baseline lab
  11   an Artillery processor crashed the run, as Artillery exits
  21   a check of Artillery's expect plugin failed
  99   a strict threshold (--slo) failed, as k6 exits
  130  stopped by Ctrl-C or SIGTERM; partial results written";

/// A load-testing laboratory for HTTP services.
#[derive(Debug, Parser)]
#[command(
    name = "loadlab",
    version,
    about,
    propagate_version = true,
    after_long_help = EXIT_CODES
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Drive load at URLs (closed model by default, open with -R) or run a scenario file.
    Run(Box<RunArgs>),
    /// Serve the reference service (/ping, /delay, /block, /calc, /heavy, /info, /bbox/*, /turno/NAME, /health).
    Serve(ServeArgs),
    /// Check a scenario file without running it, and show the load it describes.
    Validate(ValidateArgs),
    /// Run every workload of an experiment file against every topology and compare.
    Lab(LabArgs),
    /// Start the reference service in-process and run a short tour against it.
    Demo(DemoArgs),
    /// Characterize a black box: sync or async, its workers, its service time.
    Probe(ProbeArgs),
    /// Find the highest constant arrival rate whose steady state meets an SLO.
    Capacity(CapacityArgs),
    /// Compare run directories side by side, with the noise between them.
    Compare(CompareArgs),
    /// Write the HTML report of run directories (several are overlaid on the same axes).
    Report(ReportArgs),
    /// Merge the run directories of a plan's shards (`run --shard I/N`) into one, exactly.
    Merge(MergeArgs),
    /// Print Kubernetes objects that run a plan as shards on a cluster.
    K8s(K8sArgs),
    /// The visits application's counter: count page views from a Redis stream into sharded
    /// counters (started by `serve --visits`; run it by hand to restart one).
    #[command(hide = true)]
    Consume(ConsumeArgs),
    /// Run a locustfile unchanged, with Locust's command line; loadlab's engine sends the
    /// requests (headless; Python with gevent runs the users).
    Locust(Box<LocustArgs>),
    /// Print the completion script of a shell (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
    /// Print loadlab's manual page, or write one page per subcommand into a directory.
    Man(ManArgs),
}

/// `loadlab completions` flags.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell, e.g. `loadlab completions bash > /etc/bash_completion.d/loadlab`.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `loadlab man` flags.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write loadlab.1 and one page per subcommand (loadlab-run.1 …) here instead of printing
    /// loadlab.1.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// `loadlab locust` flags: Locust's own names, then loadlab's outputs.
#[derive(Debug, Args)]
pub struct LocustArgs {
    /// The locustfile: a file, a folder of them, or a comma-separated list.
    #[arg(
        short = 'f',
        long = "locustfile",
        value_name = "FILE",
        default_value = "locustfile.py"
    )]
    pub locustfile: String,
    /// The host users send to when their class gives none (http://HOST[:PORT]).
    #[arg(short = 'H', long, value_name = "URL")]
    pub host: Option<String>,
    /// Users at once (peak).
    #[arg(short = 'u', long, value_name = "N", default_value_t = 1)]
    pub users: usize,
    /// Users started per second until there are --users.
    #[arg(
        short = 'r',
        long = "spawn-rate",
        value_name = "RATE",
        default_value_t = 1.0
    )]
    pub spawn_rate: f64,
    /// How long to run (300s, 20m, 1h30m; a bare number is seconds); without it, until
    /// stopped (Ctrl-C) or the file's shape ends.
    #[arg(short = 't', long = "run-time", value_name = "TIME", value_parser = locust_timespan)]
    pub run_time: Option<Duration>,
    /// User classes to run (default: every class of the file).
    #[arg(value_name = "USER_CLASS")]
    pub classes: Vec<String>,
    /// Only run tasks with one of these tags.
    #[arg(short = 'T', long, value_name = "TAG", num_args = 1..)]
    pub tags: Option<Vec<String>>,
    /// Do not run tasks with one of these tags.
    #[arg(short = 'E', long = "exclude-tags", value_name = "TAG", num_args = 1..)]
    pub exclude_tags: Option<Vec<String>>,
    /// Seconds users get to finish their task and run on_stop when the run ends.
    #[arg(
        short = 's',
        long = "stop-timeout",
        value_name = "SECONDS",
        default_value_t = 0.0
    )]
    pub stop_timeout: f64,
    /// Stop after this many task iterations (each helper its share).
    #[arg(short = 'i', long, value_name = "N")]
    pub iterations: Option<u64>,
    /// Write Locust's CSV files: PREFIX_stats.csv, PREFIX_failures.csv,
    /// PREFIX_exceptions.csv, PREFIX_stats_history.csv.
    #[arg(long, value_name = "PREFIX")]
    pub csv: Option<String>,
    /// Accepted as Locust's; the history file has a row a second either way.
    #[arg(long = "csv-full-history")]
    pub csv_full_history: bool,
    /// Print the final statistics as JSON on standard output, as Locust's --json.
    #[arg(long)]
    pub json: bool,
    /// Write the final statistics as JSON to FILE.json, as Locust's --json-file.
    #[arg(long = "json-file", value_name = "FILE")]
    pub json_file: Option<String>,
    /// Write loadlab's HTML report of the run here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Exit code when a request failed or a task raised an error (Locust's default, 1).
    #[arg(long = "exit-code-on-error", value_name = "CODE", default_value_t = 1)]
    pub exit_code_on_error: u8,
    /// Generator threads, each with one Python helper running its share of the users
    /// (default one, as Locust; like Locust's --processes, each has its module state).
    #[arg(long = "processes", value_name = "N", value_parser = positive_count)]
    pub processes: Option<usize>,
    /// Seed of the users' choices.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Request timeout.
    #[arg(long, value_name = "DUR", value_parser = positive_duration)]
    pub timeout: Option<Duration>,
    /// Fail the run (exit 99) unless these hold, as run's --slo.
    #[arg(long = "slo", value_name = "THRESHOLDS", value_parser = loadlab_input::values::threshold_list)]
    pub slo: Vec<loadlab_input::values::ThresholdList>,
    /// Write the run directory (summary.json, timeline, histograms) here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Serve a live dashboard at ADDR, as run's --dashboard.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, require_equals = true, default_missing_value = "127.0.0.1:0")]
    pub dashboard: Option<String>,
    /// Where the run's series go while it runs, as run's.
    #[command(flatten)]
    pub export: ExportFlags,
    /// Locust's mode flags, accepted: loadlab runs headless, its --dashboard is the live view.
    #[arg(long, hide = true)]
    pub headless: bool,
    /// Accepted (loadlab starts at once).
    #[arg(long, hide = true)]
    pub autostart: bool,
    /// Accepted (loadlab has no web UI; --dashboard is the live view).
    #[arg(long = "web-host", hide = true, value_name = "HOST")]
    pub web_host: Option<String>,
    /// Accepted (loadlab has no web UI; --dashboard is the live view).
    #[arg(short = 'P', long = "web-port", hide = true, value_name = "PORT")]
    pub web_port: Option<String>,
    /// Accepted (loadlab prints its summary at the end).
    #[arg(long = "only-summary", hide = true)]
    pub only_summary: bool,
    /// Accepted (loadlab's statistics are from the start).
    #[arg(long = "reset-stats", hide = true)]
    pub reset_stats: bool,
    /// Accepted (the Python side logs errors and tracebacks to stderr).
    #[arg(short = 'L', long = "loglevel", hide = true, value_name = "LEVEL")]
    pub loglevel: Option<String>,
    /// The words of the command line that are not these flags' (see
    /// [`split_locust_file_args`]): the file's own options, for its parser.
    #[arg(skip)]
    pub file_args: Vec<String>,
}

/// `loadlab locust`'s command line split in two, as Locust's parser reads a file's own options
/// beside its own: the words clap knows (the program, `locust`, this command's flags with their
/// values, user class names), and the others — an unknown `--name[=VALUE]` with the word after
/// it when that word is no flag — which the helpers' parser reads once the file has added its
/// options (a word it does not take back as a value is a user class name there). Any other
/// command's line is returned whole.
pub fn split_locust_file_args(args: Vec<OsString>) -> (Vec<OsString>, Vec<String>) {
    if args.get(1).is_none_or(|a| a != "locust") {
        return (args, Vec::new());
    }
    let mut command = <LocustOnly as clap::CommandFactory>::command();
    command.build();
    let known: Vec<&clap::Arg> = command.get_arguments().collect();
    let find = |word: &str| -> Option<&clap::Arg> {
        if let Some(long) = word.strip_prefix("--") {
            let name = long.split('=').next().unwrap_or_default();
            known.iter().copied().find(|a| {
                a.get_long_and_visible_aliases()
                    .is_some_and(|l| l.contains(&name))
            })
        } else {
            let short = word.strip_prefix('-')?.chars().next()?;
            known.iter().copied().find(|a| a.get_short() == Some(short))
        }
    };
    let is_flag = |w: &OsString| {
        w.to_str()
            .is_some_and(|s| s.len() > 1 && s.starts_with('-') && s.parse::<f64>().is_err())
    };
    let mut kept: Vec<OsString> = args[..2].to_vec();
    let mut file: Vec<String> = Vec::new();
    let mut rest = args[2..].iter().peekable();
    while let Some(word) = rest.next() {
        if word == "--" {
            kept.push(word.clone());
            kept.extend(rest.cloned());
            break;
        }
        let Some(text) = word.to_str().filter(|_| is_flag(word)) else {
            kept.push(word.clone());
            continue;
        };
        let inline = text.starts_with("--") && text.contains('=')
            || !text.starts_with("--") && text.len() > 2;
        match find(text) {
            Some(arg) => {
                kept.push(word.clone());
                // A value after a space: not for a flag whose value must follow `=`; one that
                // looks like a flag only as the one value a flag requires (`-r -1`).
                let takes = arg.get_action().takes_values() && !arg.is_require_equals_set();
                let (least, most) = arg
                    .get_num_args()
                    .map_or((1, 1), |n| (n.min_values(), n.max_values()));
                if takes && !inline {
                    let mut taken = 0;
                    while taken < most {
                        let required = taken == 0 && least >= 1 && most == 1;
                        match rest.next_if(|next| required || !is_flag(next)) {
                            Some(value) => kept.push(value.clone()),
                            None => break,
                        }
                        taken += 1;
                    }
                }
            }
            None => {
                file.push(text.to_string());
                if !inline {
                    if let Some(value) = rest.next_if(|next| !is_flag(next)) {
                        file.push(value.to_string_lossy().into_owned());
                    }
                }
            }
        }
    }
    (kept, file)
}

impl LocustArgs {
    /// Locust's defaults, for the locustfile `file` (what `validate` imports).
    pub fn for_file(file: &str) -> LocustArgs {
        LocustOnly::parse_from(["locust", "-f", file]).args
    }
}

/// Parses `loadlab locust`'s flags alone.
#[derive(Debug, Parser)]
struct LocustOnly {
    #[command(flatten)]
    args: LocustArgs,
}

/// A time span as Locust writes one: `20s`, `3m`, `1h30m`, or a bare number of seconds.
fn locust_timespan(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if let Ok(secs) = t.parse::<f64>() {
        if secs.is_finite() && secs > 0.0 {
            return Ok(Duration::from_secs_f64(secs));
        }
    }
    humantime::parse_duration(t)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{text:?} is not a time span such as 300s, 20m or 1h30m"))
}

/// `loadlab consume` flags.
#[derive(Debug, Args)]
pub struct ConsumeArgs {
    /// The Redis server holding the visits stream and the counters.
    #[arg(long = "redis-url", value_name = "URL")]
    pub redis_url: String,
    /// This consumer's name in the group; restarted under the same name it first takes back
    /// what it had not acknowledged.
    #[arg(long, default_value = "counter-1")]
    pub name: String,
    /// Counters per page; each view goes to one at random.
    #[arg(long, default_value_t = loadlab_service::DEFAULT_SHARDS, value_parser = positive_count)]
    pub shards: usize,
}

/// `loadlab merge` flags.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shards' run directories (each from `run --shard I/N --out DIR`).
    #[arg(required = true, value_name = "RUN_DIR")]
    pub runs: Vec<PathBuf>,
    /// Where to write the merged run directory.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Wait up to DUR for every shard's run to end (its directory's `summary.json`), then merge
    /// those that did; the others count as missing shards (as a merge Job does while its pods
    /// still run).
    #[arg(long, value_name = "DUR", value_parser = positive_duration)]
    pub wait: Option<Duration>,
    /// Also print the merged directory on stdout, as a gzipped tar in base64 between marker
    /// lines: how a merge pod hands it over through its log (`loadlab k8s run` reads it).
    #[arg(long)]
    pub print_archive: bool,
}

/// `loadlab k8s` subcommands.
#[derive(Debug, Args)]
pub struct K8sArgs {
    /// What to print.
    #[command(subcommand)]
    pub what: K8sCommand,
}

/// What `loadlab k8s` prints.
#[derive(Debug, Subcommand)]
pub enum K8sCommand {
    /// An Indexed Job of N shards of `loadlab run FLAGS` (or a scenario file) from a common
    /// start, the ConfigMap of its files, a results volume and the Job that merges the shards.
    Job(K8sJobArgs),
    /// The objects of `k8s job` created on the cluster a kubeconfig names (no kubectl needed):
    /// each shard's state shown as its pod reports it, the merge waited for, and the merged run
    /// directory copied out; the objects are deleted at the end (and on Ctrl-C).
    Run(K8sRunArgs),
}

/// `loadlab k8s run` flags: those of `k8s job`, and where the cluster is and the results go.
/// They may also follow the run's flags.
#[derive(Debug, Args)]
pub struct K8sRunArgs {
    /// The kubeconfig naming the cluster and its credentials [default: $KUBECONFIG, else
    /// ~/.kube/config].
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The namespace the objects go to [default: the kubeconfig context's, else default].
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Where to copy the merged run directory [default: k8s-NAME].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Keep the objects on the cluster at the end (the results volume among them).
    #[arg(long)]
    pub keep: bool,
    /// The Job's flags, and the run's.
    #[command(flatten)]
    pub job: K8sJobArgs,
}

/// `loadlab k8s job` flags; they may also follow the run's flags, as in
/// `loadlab k8s job URL -R 1000 -d 60s --shards 4`.
#[derive(Debug, Args)]
pub struct K8sJobArgs {
    /// Shards, one pod each.
    #[arg(long, value_name = "N", value_parser = positive_count)]
    pub shards: Option<usize>,
    /// Container image with `loadlab` on its PATH (build it from the Dockerfile) [default:
    /// loadlab:VERSION].
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// Time from now to the shards' common start: long enough for every pod to be scheduled
    /// and pull the image [default: 60s].
    #[arg(long = "start-in", value_name = "DUR", value_parser = positive_duration)]
    pub start_in: Option<Duration>,
    /// Name of the Job (the other objects' names start with it) [default: loadlab].
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Size of the results volume [default: 1Gi].
    #[arg(long, value_name = "SIZE")]
    pub storage: Option<String>,
    /// When the nodes pull the image: `always`, `if-not-present` or `never` (an image imported
    /// into the nodes' container runtime) [default: the cluster's].
    #[arg(long, value_name = "POLICY", value_parser = pull_policy)]
    pub pull: Option<String>,
    /// Run the pods on their node's network: the load leaves from the node's addresses (a
    /// target on its loopback is reachable); the shards then have no dashboard.
    #[arg(long)]
    pub host_network: bool,
    /// CPU each shard's pod asks for, a Kubernetes quantity (`2`, `500m`) [default: 1].
    #[arg(long, value_name = "QUANTITY", value_parser = cpu_quantity)]
    pub cpu: Option<String>,
    /// `loadlab run`'s flags and URLs, or a scenario file and its flags.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "FLAGS | SCENARIO.yaml"
    )]
    pub run: Vec<String>,
}

/// `--pull`'s value as Kubernetes spells the policy.
pub fn pull_policy(s: &str) -> Result<String, String> {
    match s {
        "always" | "Always" => Ok("Always".into()),
        "if-not-present" | "IfNotPresent" => Ok("IfNotPresent".into()),
        "never" | "Never" => Ok("Never".into()),
        _ => Err(format!(
            "{s:?} is not a pull policy: give always, if-not-present or never"
        )),
    }
}

/// `--cpu`'s value: a CPU quantity as Kubernetes writes one (`1`, `0.5`, `250m`), above zero.
pub fn cpu_quantity(s: &str) -> Result<String, String> {
    let number = s.strip_suffix('m').unwrap_or(s);
    // Digits with at most one inner point; millicores are whole.
    let digits = !number.is_empty() && number.chars().all(|c| c.is_ascii_digit() || c == '.');
    let point_ok = match number.split_once('.') {
        None => true,
        Some((whole, part)) => {
            !whole.is_empty() && !part.is_empty() && !part.contains('.') && !s.ends_with('m')
        }
    };
    let well_formed = digits && point_ok;
    match number.parse::<f64>() {
        Ok(v) if well_formed && v > 0.0 => Ok(s.to_string()),
        _ => Err(format!(
            "{s:?} is not a CPU quantity: give cores (1, 0.5) or millicores (250m)"
        )),
    }
}

/// `--autoscale POLICY,KEY=VALUE…`: an experiment topology's `autoscale:` keys on one flag.
fn autoscale_setting(s: &str) -> Result<loadlab_run::topology::Autoscale, String> {
    loadlab_input::experiment::autoscale_flag(s).map_err(|e| e.to_string())
}

/// `--otlp`'s value: an `http://` or `https://` collector URL, or `env` for where the
/// OpenTelemetry environment variables say (returned as the empty string, which the exporter
/// reads so). A value is always required, so the flag never takes the next argument by
/// accident: an optional one took a run's target URL for the collector's.
fn otlp_endpoint(s: &str) -> Result<String, String> {
    if s == "env" {
        return Ok(String::new());
    }
    if s.starts_with("http://") || s.starts_with("https://") {
        return Ok(s.to_string());
    }
    Err(format!(
        "{s:?} is not a collector URL: give one (http://127.0.0.1:4318), or `env` to use \
         OTEL_EXPORTER_OTLP_ENDPOINT"
    ))
}

/// `loadlab report` flags.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Run directories (from --out, lab or demo), or one lab directory (from `lab --out`) to
    /// judge again from its cells, rewriting its lab.json, comparison.csv and report.html.
    #[arg(required = true, value_name = "RUN_DIR|LAB_DIR")]
    pub runs: Vec<PathBuf>,
    /// Where to write the report, `--html=FILE` (default: RUN_DIR/report.html for one run,
    /// ./report.html for several).
    #[arg(long, value_name = "FILE", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub html: Option<String>,
    /// Also write the main charts as one image (.png or .svg).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Check each run against these thresholds (as `run --slo`) instead of the ones it was
    /// run with; a failed one sets exit code 99.
    #[arg(long = "slo", value_name = "THRESHOLDS", value_parser = loadlab_input::values::threshold_list)]
    pub slo: Vec<loadlab_input::values::ThresholdList>,
    /// Write the thresholds' results as a JUnit XML report to FILE (for CI).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// With a lab directory: an earlier lab of the same experiment; print the verdicts whose
    /// answer changed and exit 6 when any did.
    #[arg(long, value_name = "LAB_DIR")]
    pub baseline: Option<PathBuf>,
}

/// `loadlab probe` flags.
#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The URL and the probe's bounds.
    #[command(flatten)]
    pub flags: loadlab_input::probe::ProbeFlags,
    /// Watch this process and its children (CPU) to tell CPU-bound from synchronous.
    #[arg(long = "watch-pid", value_name = "PID", value_parser = clap::value_parser!(i32).range(1..))]
    pub watch_pid: Vec<i32>,
    /// Write the verdict and its steps as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// `loadlab capacity` flags.
#[derive(Debug, Args)]
pub struct CapacityArgs {
    /// The URL, the objective and the search's bounds.
    #[command(flatten)]
    pub search: CapacityFlags,
    /// Write the result and its steps as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// `loadlab compare` flags.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Run directories (from --out, lab or demo); the first is the baseline.
    #[arg(required = true, num_args = 2.., value_name = "RUN_DIR")]
    pub runs: Vec<PathBuf>,
    /// Write the comparison as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write an HTML report overlaying the runs: `--html` to ./report.html, `--html=FILE` to
    /// FILE.
    #[arg(long, value_name = "FILE", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub html: Option<String>,
}

/// `loadlab validate` flags.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The scenario file (Artillery YAML).
    #[arg(value_name = "SCENARIO.yaml")]
    pub file: PathBuf,
    /// Check the load as sent here instead of to `config.target` (as run's --target).
    #[arg(long, value_name = "URL")]
    pub target: Option<String>,
    /// --config, -e, -v and --strict, as `run` takes them.
    #[command(flatten)]
    pub script: loadlab_input::flags::ScriptFlags,
}

/// `loadlab lab` flags.
#[derive(Debug, Args)]
pub struct LabArgs {
    /// The experiment file (YAML: name, topologies, workloads).
    #[arg(value_name = "EXPERIMENT.yaml")]
    pub file: PathBuf,
    /// Where to write the run directories and comparison.csv (default: ./runs/<name>-<time>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Also write the HTML report, overlaying every cell, into the lab directory
    /// (report.html; each cell's own report beside its run).
    #[arg(long)]
    pub html: bool,
    /// Serve a live dashboard (charts every second, a stop button, /metrics) at ADDR
    /// (default 127.0.0.1 on a free port, printed at the start).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, require_equals = true, default_missing_value = "127.0.0.1:0")]
    pub dashboard: Option<String>,
    /// Keep the dashboard up this long after the run ends (to read its last numbers).
    #[arg(long = "dashboard-keep", value_name = "DUR", requires = "dashboard", default_value = "0s", value_parser = parse_duration)]
    pub dashboard_keep: Duration,
    /// Write the thresholds' results as a JUnit XML report to FILE (for CI).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// An earlier lab directory of the same experiment: print the verdicts whose answer
    /// changed (no difference, higher, lower) and exit 6 when any did.
    #[arg(long, value_name = "LAB_DIR")]
    pub baseline: Option<PathBuf>,
    /// Check the experiment and every workload, print the cells and how long the lab takes
    /// at most, and run nothing.
    #[arg(long)]
    pub check: bool,
    /// Continue the lab in --out DIR that stopped (Ctrl-C, a crash, a kill): its finished cells
    /// are kept, the others run. Refused when the experiment changed since it began.
    #[arg(long, requires = "out")]
    pub resume: bool,
    /// Where each cell's series go while it runs.
    #[command(flatten)]
    pub export: ExportFlags,
}

/// Where a run's series go while it runs, besides its own files: Prometheus and OpenTelemetry
/// backends, once a second.
#[derive(Debug, Clone, Default, Args)]
pub struct ExportFlags {
    /// Send the run's series every second to this Prometheus remote-write receiver
    /// (protocol 1.0), e.g. http://127.0.0.1:9090/api/v1/write.
    #[arg(long = "remote-write", value_name = "URL")]
    pub remote_write: Option<String>,
    /// A header on every remote-write request, "Name: value" or "name=value" (repeatable).
    #[arg(
        long = "remote-write-header",
        value_name = "HEADER",
        requires = "remote_write"
    )]
    pub remote_write_header: Vec<String>,
    /// Send the run's series every second as OpenTelemetry metrics (OTLP/HTTP, protobuf) to
    /// URL's /v1/metrics; `--otlp env` sends them where OTEL_EXPORTER_OTLP_ENDPOINT says
    /// (default http://localhost:4318). OTEL_EXPORTER_OTLP_HEADERS and
    /// OTEL_RESOURCE_ATTRIBUTES are read as the SDKs read them.
    #[arg(long, value_name = "URL|env", value_parser = otlp_endpoint)]
    pub otlp: Option<String>,
    /// A header on every OTLP request, "name=value" or "Name: value" (repeatable; after
    /// OTEL_EXPORTER_OTLP_HEADERS).
    #[arg(long = "otlp-header", value_name = "HEADER", requires = "otlp")]
    pub otlp_header: Vec<String>,
    /// Send a W3C traceparent on this share of the requests (0.01 = one in a hundred) and
    /// record each as a client span: exported to the OTLP endpoint's /v1/traces with --otlp,
    /// the slowest listed with their trace IDs in the summary.
    #[arg(long = "trace-sample", value_name = "RATIO")]
    pub trace_sample: Option<f64>,
    /// A tracestate header sent with each traceparent (vendor data, e.g. "dd=s:1").
    #[arg(long = "trace-state", value_name = "STATE", requires = "trace_sample")]
    pub trace_state: Option<String>,
}

impl ExportFlags {
    /// The tracing `--trace-sample` and `--trace-state` ask for.
    pub fn tracing(&self) -> Option<loadlab_run::Tracing> {
        self.trace_sample.map(|sample| loadlab_run::Tracing {
            sample,
            state: self.trace_state.clone(),
        })
    }
}

/// `loadlab run` flags: the load ([`LoadFlags`]) and where its results go.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The load.
    #[command(flatten)]
    pub load: LoadFlags,
    /// Write summary.json to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a run directory: summary.json, timeline.csv, latency.hlog.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Write the thresholds' results as a JUnit XML report to FILE (for CI).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Watch this process and its children (CPU %, RSS) during the run (repeatable).
    #[arg(long = "watch-pid", value_name = "PID", value_parser = clap::value_parser!(i32).range(1..))]
    pub watch_pid: Vec<i32>,
    /// Watch this Redis server (commands/s, memory, clients, each stream's backlog) during
    /// the run, e.g. redis://127.0.0.1:6379/ (repeatable).
    #[arg(long = "watch-redis", value_name = "URL")]
    pub watch_redis: Vec<String>,
    /// Profile the watched processes' CPU during the steady state (after the first fifth of
    /// the run, for up to three fifths or 30 s) with perf: profile.folded and flame.svg in
    /// the --out directory, the top functions in the output.
    #[arg(long, requires = "watch_pid")]
    pub profile: bool,
    /// Serve a live dashboard (charts every second, a stop button, /metrics) at ADDR
    /// (default 127.0.0.1 on a free port, printed at the start).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, require_equals = true, default_missing_value = "127.0.0.1:0")]
    pub dashboard: Option<String>,
    /// Keep the dashboard up this long after the run ends (to read its last numbers).
    #[arg(long = "dashboard-keep", value_name = "DUR", requires = "dashboard", default_value = "0s", value_parser = parse_duration)]
    pub dashboard_keep: Duration,
    /// Where the run's series go while it runs.
    #[command(flatten)]
    pub export: ExportFlags,
    /// Write the HTML report: `--html` into the --out directory (report.html), `--html=FILE`
    /// to FILE.
    #[arg(long, value_name = "FILE", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub html: Option<String>,
    /// Write the main charts as one image (.png or .svg).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// No live progress line.
    #[arg(short = 'q', long, conflicts_with = "progress")]
    pub quiet: bool,
    /// A progress line every DUR (whole seconds) on stderr instead of the live one: completed
    /// so far, the last second's req/s and p99, errors so far, for a log no terminal redraws (a
    /// pod's, CI's).
    #[arg(long, value_name = "DUR", value_parser = whole_seconds)]
    pub progress: Option<Duration>,
}

/// `loadlab serve` flags.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Worker threads of the service's runtime: one by default, like a single-threaded Node
    /// process or a synchronous gunicorn worker, so blocking endpoints hold the whole process.
    #[arg(long, default_value = "1", value_parser = positive_count)]
    pub threads: usize,
    /// Delay of /bbox/sync, and of /bbox/async unless --bbox-async-delay says.
    #[arg(long = "bbox-delay", value_name = "DUR", default_value = "1s", value_parser = positive_duration)]
    pub bbox_delay: Duration,
    /// Delay of /bbox/async [default: --bbox-delay].
    #[arg(long = "bbox-async-delay", value_name = "DUR", value_parser = positive_duration)]
    pub bbox_async_delay: Option<Duration>,
    /// A black box every instance shares (http://127.0.0.1:PORT, another `loadlab serve`):
    /// /bbox/async and /bbox/sync call it and answer what it answers, instead of serving
    /// their own (experiments: a topology's `shared_bbox`).
    #[arg(long = "bbox-url", value_name = "URL")]
    pub bbox_url: Option<String>,
    /// Requests /bbox/sync serves at once; the rest queue.
    #[arg(long = "bbox-workers", value_name = "N", default_value = "3", value_parser = positive_count)]
    pub bbox_workers: usize,
    /// Worker processes sharing the port (SO_REUSEPORT), like a Node cluster or gunicorn -w N.
    #[arg(long, default_value_t = topology::defaults::WORKERS, value_parser = positive_count)]
    pub workers: usize,
    /// Replicas on their own ports behind a load balancer on --port.
    #[arg(long, default_value_t = topology::defaults::REPLICAS, value_parser = positive_count)]
    pub replicas: usize,
    /// Load balancer in front of replicas [default: nginx] (builtin: a round-robin TCP proxy,
    /// when nginx is missing; client: none, the replicas' URLs are printed for clients to
    /// balance over).
    #[arg(long, value_enum)]
    pub lb: Option<LbArg>,
    /// Run your own server instead (it must listen on $PORT), in the same topologies.
    #[arg(long, value_name = "COMMAND")]
    pub cmd: Option<String>,
    /// Path polled for readiness of --cmd servers; any HTTP response counts [default: /health].
    #[arg(long = "health-path")]
    pub health_path: Option<String>,
    /// How long a replica may take to answer its first request [default: 15s].
    #[arg(long = "ready-timeout", value_name = "DUR", value_parser = positive_duration)]
    pub ready_timeout: Option<Duration>,
    /// nginx's connect/send/read timeouts towards the replicas [default: 60s].
    #[arg(long = "proxy-timeout", value_name = "DUR", value_parser = positive_duration)]
    pub proxy_timeout: Option<Duration>,
    /// Requests nginx serves at once; past them it closes a new request's connection without
    /// an answer, as a front out of connections does [default: no limit].
    #[arg(long = "lb-connections", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub lb_connections: Option<u64>,
    /// Runtime of the reference service [default: rust]: rust (loadlab itself), node (Express;
    /// --workers are cluster workers) or python (gunicorn; --workers are sync workers unless
    /// --async). The first use installs node's or python's pinned dependencies under targets/.
    #[arg(long, value_enum)]
    pub runtime: Option<RuntimeArg>,
    /// With --runtime python: gevent workers instead of sync ones, so /delay and the black
    /// boxes stop holding a worker.
    #[arg(long = "async")]
    pub async_workers: bool,
    /// Bind with SO_REUSEPORT (used by worker processes).
    #[arg(long = "reuse-port", hide = true)]
    pub reuse_port: bool,
    /// Where /turno counts: memory (each process alone) or redis (a redis-server loadlab
    /// starts and stops, shared by every worker and replica; --cmd servers get $REDIS_URL).
    #[arg(long, value_enum, default_value = "memory")]
    pub store: StoreArg,
    /// An existing Redis server for /turno instead of one loadlab starts (implies --store
    /// redis).
    #[arg(long = "redis-url", value_name = "URL")]
    pub redis_url: Option<String>,
    /// The visits application: each /site view is queued on a Redis stream and
    /// counted by --consumers `loadlab consume` processes into sharded counters;
    /// /visits/PAGE tells the count. Implies --store redis.
    #[arg(long)]
    pub visits: bool,
    /// Counter consumers started with --visits.
    #[arg(long, default_value = "1", value_parser = positive_count, requires = "visits")]
    pub consumers: usize,
    /// Counters per page with --visits.
    #[arg(long, default_value_t = loadlab_service::DEFAULT_SHARDS, value_parser = positive_count)]
    pub shards: usize,
    /// nginx serves /static/ itself (copies of the service's files), taking the static files
    /// off the web tier; with --replicas and --lb nginx.
    #[arg(long = "static-at-lb")]
    pub static_at_lb: bool,
    /// Where the topology's service processes write their standard output [default: pipe]:
    /// pipe (drained by loadlab, as a container runtime's log driver reads a container's), null
    /// (/dev/null), file (one per process, removed at the end) or tty (a terminal loadlab
    /// drains, as a service started in a shell writes to).
    #[arg(long, value_name = "null|pipe|file|tty")]
    pub stdout: Option<String>,
    /// CPUs each replica may use: a whole number pins it to that many cores round robin over
    /// the host's, as a container given that many CPUs; a fraction (0.25) sets a control
    /// group's CPU quota, as `docker run --cpus 0.25` [default: every core].
    #[arg(long, value_name = "CPUS", value_parser = loadlab_input::values::cpus)]
    pub cpus: Option<f64>,
    /// Memory each replica may hold (256M, 1G), without swap, as `docker run --memory`; past
    /// it the kernel's OOM killer ends the replica.
    #[arg(long, value_name = "SIZE", value_parser = loadlab_input::values::memory_size)]
    pub memory: Option<u64>,
    /// Instances that scale themselves behind loadlab's balancer on --port, set as an
    /// experiment topology's `autoscale:` keys: `kpa,max=5,container_concurrency=10` (Knative's
    /// KPA, Cloud Run's model) or `hpa,max=4,target=60` with --cpus 0.2 (Kubernetes' HPA on
    /// each instance's CPU). Each decision is printed as it is made (docs/autoscaling.md).
    #[arg(long, value_name = "POLICY,KEY=VALUE…", value_parser = autoscale_setting, conflicts_with_all = ["replicas", "lb", "static_at_lb"])]
    pub autoscale: Option<loadlab_run::topology::Autoscale>,
    /// Most requests each process serves at once; past it it answers 429 (a per-instance
    /// concurrency limit, as Cloud Run's).
    #[arg(long = "max-in-flight", value_name = "N", value_parser = positive_count)]
    pub max_in_flight: Option<usize>,
    /// Continue the traces of requests that come with a sampled W3C traceparent: a server
    /// span each (and, in the Rust service, /turno's store call under it) sent over OTLP/HTTP to URL's
    /// /v1/traces; with `env`, where OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
    /// OTEL_EXPORTER_OTLP_ENDPOINT say (`--otlp env`; default http://localhost:4318). The
    /// service's name is OTEL_SERVICE_NAME, else loadlab-serve.
    #[arg(long, value_name = "URL|env", value_parser = otlp_endpoint)]
    pub otlp: Option<String>,
}

/// Where the service keeps `/turno`'s counters.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum StoreArg {
    /// In each process.
    Memory,
    /// In Redis.
    Redis,
}

/// Load balancer choice.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum LbArg {
    /// The real nginx.
    Nginx,
    /// loadlab's round-robin TCP proxy.
    Builtin,
    /// No balancer: every replica on its own port, for clients that balance themselves.
    Client,
}

/// Runtime choice of `loadlab serve`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum RuntimeArg {
    /// loadlab's own service.
    Rust,
    /// Express on Node's http (targets/node).
    Node,
    /// A WSGI app under gunicorn (targets/python).
    Python,
}

impl From<RuntimeArg> for Runtime {
    fn from(r: RuntimeArg) -> Self {
        match r {
            RuntimeArg::Rust => Runtime::Rust,
            RuntimeArg::Node => Runtime::Node,
            RuntimeArg::Python => Runtime::Python,
        }
    }
}

impl From<LbArg> for Lb {
    fn from(l: LbArg) -> Self {
        match l {
            LbArg::Nginx => Lb::Nginx,
            LbArg::Builtin => Lb::Builtin,
            LbArg::Client => Lb::Client,
        }
    }
}

/// `loadlab demo` flags.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Length of each run of the tour (whole seconds).
    #[arg(short = 'd', long, value_name = "DUR", default_value = "5s", value_parser = positive_duration)]
    pub duration: Duration,
    /// Where to write the tour's run directories (default: ./runs/demo-<time>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k8s_flags_take_kubernetes_quantities_and_pull_policies() {
        for ok in ["1", "2", "0.5", "250m", "1500m"] {
            assert_eq!(cpu_quantity(ok).as_deref(), Ok(ok));
        }
        for bad in [
            "", "0", "0m", ".5", "1.", "1.5m", "1.2.3", "one", "-1", "1e3",
        ] {
            assert!(cpu_quantity(bad).is_err(), "{bad:?}");
        }
        assert_eq!(pull_policy("never").as_deref(), Ok("Never"));
        assert_eq!(pull_policy("if-not-present").as_deref(), Ok("IfNotPresent"));
        assert!(pull_policy("sometimes").is_err());
    }

    #[test]
    fn otlp_takes_a_collector_url_or_env_and_nothing_else() {
        assert_eq!(otlp_endpoint("env").unwrap(), "");
        assert_eq!(
            otlp_endpoint("http://127.0.0.1:4318").unwrap(),
            "http://127.0.0.1:4318"
        );
        // A target's path or a file is not taken for the collector.
        for not in ["/ping", "script.yml", "127.0.0.1:4318", ""] {
            assert!(otlp_endpoint(not).is_err(), "{not}");
        }
    }

    fn joined(args: &[&str]) -> Vec<String> {
        join_dashboard_addr(args.iter().map(OsString::from))
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn a_dashboard_address_after_a_space_is_joined_to_its_flag() {
        let url = "http://127.0.0.1:8080/ping";
        assert_eq!(
            joined(&["loadlab", "run", "--dashboard", "127.0.0.1:9000", url]),
            ["loadlab", "run", "--dashboard=127.0.0.1:9000", url]
        );
        assert_eq!(
            joined(&["loadlab", "run", "--dashboard", "[::1]:0", url]),
            ["loadlab", "run", "--dashboard=[::1]:0", url]
        );
        assert_eq!(
            joined(&["loadlab", "run", "--dashboard", "localhost:9000", url]),
            ["loadlab", "run", "--dashboard=localhost:9000", url]
        );
        // The URL, a scenario file and another flag are not addresses.
        for next in [url, "scenario.yaml", "-c", "dir/a:1"] {
            let args = ["loadlab", "run", "--dashboard", next];
            assert_eq!(joined(&args), args, "{next}");
        }
        let parsed = Cli::try_parse_from(join_dashboard_addr(
            ["loadlab", "run", "--dashboard", "127.0.0.1:0", url].map(OsString::from),
        ))
        .unwrap();
        let Command::Run(run) = parsed.command else {
            panic!("not a run")
        };
        assert_eq!(run.dashboard.as_deref(), Some("127.0.0.1:0"));
    }

    #[test]
    fn a_locustfiles_own_options_are_set_apart_from_loadlabs_flags() {
        let split = |args: &[&str]| {
            let (kept, file) = split_locust_file_args(args.iter().map(OsString::from).collect());
            let kept: Vec<String> = kept.into_iter().map(|a| a.into_string().unwrap()).collect();
            (kept, file)
        };
        let (kept, file) = split(&[
            "loadlab",
            "locust",
            "-f",
            "a.py",
            "--queue",
            "q1",
            "-u",
            "5",
            "--mode=fast",
            "--flag",
            "-T",
            "x",
            "y",
            "WebUser",
            "-t",
            "10s",
            "--headless",
        ]);
        assert_eq!(
            kept,
            [
                "loadlab",
                "locust",
                "-f",
                "a.py",
                "-u",
                "5",
                "-T",
                "x",
                "y",
                "WebUser",
                "-t",
                "10s",
                "--headless"
            ]
        );
        assert_eq!(file, ["--queue", "q1", "--mode=fast", "--flag"]);
        // A flag's value that looks like an option is the flag's; other commands are left whole.
        let (kept, file) = split(&[
            "loadlab",
            "locust",
            "-H",
            "http://h:1",
            "--spawn-rate",
            "-1",
        ]);
        assert_eq!(kept.len(), 6);
        assert!(file.is_empty());
        let (kept, file) = split(&["loadlab", "locust", "--dashboard", "--x", "1", "-u", "2"]);
        assert_eq!(kept, ["loadlab", "locust", "--dashboard", "-u", "2"]);
        assert_eq!(file, ["--x", "1"]);
        let (kept, file) = split(&["loadlab", "run", "--queue", "q"]);
        assert_eq!(kept, ["loadlab", "run", "--queue", "q"]);
        assert!(file.is_empty());
        let parsed =
            Cli::try_parse_from(split(&["loadlab", "locust", "--my-arg", "v", "-u", "2"]).0)
                .unwrap();
        let Command::Locust(a) = parsed.command else {
            panic!("not locust")
        };
        assert_eq!(a.users, 2);
    }
}
