//! `loadlab locust`: locustfiles run unchanged against the reference service on 127.0.0.1 —
//! their users in Python helpers, their requests sent by loadlab's engine — with Locust's
//! command line, its statistics by type and name, its CSV files and its exit codes.

use crate::support::{loadlab, read_json, write_file};
use loadlab_service::TestServer;
use serde_json::Value;
use std::path::Path;

/// A shop's users as Locust users write them: a login in `on_start` whose token the tasks
/// send, weighted tasks, a `name=` that groups URLs, `catch_response` turning a 200 into a
/// failure, and a task that raises.
const SHOP: &str = r#"
from locust import HttpUser, task, constant, tag


class Shopper(HttpUser):
    wait_time = constant(0.01)

    def on_start(self):
        r = self.client.post("/login", json={"user": "ana"})
        self.token = r.json()["token"]

    @task(3)
    def browse(self):
        self.client.get(f"/visits/page{self.environment.runner.user_count % 3}", name="/visits/[page]")

    @task(1)
    def account(self):
        with self.client.get("/account", headers={"Authorization": f"Bearer {self.token}"},
                             catch_response=True) as r:
            if r.json().get("user") != "ana":
                r.failure("wrong user")

    @tag("broken")
    @task(1)
    def broken(self):
        raise ValueError("this task is broken")
"#;

/// Runs `loadlab locust` with `args` in `dir`; its exit code, stdout and stderr.
fn run_in(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .arg("locust")
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Failures as Locust keys them (`--csv PREFIX_failures.csv`, the exception's repr): a
/// `failure("...")`, an HTTP error status, an `events.request.fire(exception=...)`; a
/// request whose `catch_response` block another exception left is not recorded at all.
const FAILURES: &str = r#"
from locust import HttpUser, task, constant, events


class Failing(HttpUser):
    wait_time = constant(0.05)

    @task
    def all_kinds(self):
        with self.client.get("/ping", catch_response=True) as r:
            r.failure("wrong thing")
        self.client.get("/nope")
        events.request.fire(request_type="X", name="custom", response_time=1,
                            response_length=0, exception=ValueError("bad"), context={})
        try:
            with self.client.get("/ping", catch_response=True, name="left") as r:
                raise KeyError("k")
        except KeyError:
            pass
"#;

#[test]
fn a_locustfile_runs_unchanged_with_its_users_tasks_names_and_failures() {
    let _shared = crate::support::shared();
    let server = TestServer::start(2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "locustfile.py", SHOP);
    let host = server.url("").trim_end_matches('/').to_string();
    let (code, stdout, stderr) = run_in(
        dir.path(),
        &[
            "-H",
            &host,
            "-u",
            "4",
            "-r",
            "100",
            "-t",
            "3s",
            "--headless",
            "--csv",
            "shop",
            "--json-file",
            "shop",
            "--out",
            "run",
            "--exclude-tags",
            "broken",
        ],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let s: Value = read_json(&dir.path().join("run/summary.json"));
    let by_name = &s["requests_by_name"];
    // on_start once per user.
    assert_eq!(by_name["POST /login"]["completed"], 4, "{by_name:#}");
    let browse = by_name["GET /visits/[page]"]["completed"].as_u64().unwrap();
    let account = by_name["GET /account"]["completed"].as_u64().unwrap();
    assert!(account > 20, "{by_name:#}");
    let ratio = browse as f64 / account as f64;
    assert!(
        (2.4..3.6).contains(&ratio),
        "weights 3:1, got {browse}:{account}"
    );
    assert_eq!(by_name["GET /account"]["errors"], 0, "{by_name:#}");
    assert!(stdout.contains("Aggregated"), "{stdout}");
    let csv = std::fs::read_to_string(dir.path().join("shop_stats.csv")).unwrap();
    assert!(
        csv.starts_with("Type,Name,Request Count,Failure Count,Median Response Time"),
        "{csv}"
    );
    assert!(csv.contains("GET,/visits/[page],"), "{csv}");
    assert!(dir.path().join("shop_failures.csv").is_file());
    // Locust's --json-file: an entry per type and name, its response times in rounded buckets.
    let json: Value = read_json(&dir.path().join("shop.json"));
    let entry = json
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["method"] == "GET" && e["name"] == "/account")
        .unwrap_or_else(|| panic!("{json:#}"));
    assert_eq!(entry["num_requests"].as_u64(), Some(account), "{entry}");
    let bucketed: u64 = entry["response_times"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(Value::as_u64)
        .sum();
    assert_eq!(bucketed, account, "{entry}");
}

#[test]
fn a_task_error_and_a_failed_request_give_locusts_exit_code() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "locustfile.py", SHOP);
    let host = server.url("").trim_end_matches('/').to_string();
    let (code, stdout, stderr) = run_in(
        dir.path(),
        &[
            "-H", &host, "-u", "2", "-r", "100", "-t", "2s", "--tags", "broken",
        ],
    );
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("ValueError: this task is broken"),
        "{stdout}"
    );
    assert_eq!(
        stderr.matches("Traceback (most recent call last)").count(),
        1,
        "one traceback per distinct error: {stderr}"
    );
    let (code, _, _) = run_in(
        dir.path(),
        &[
            "-H",
            &host,
            "-u",
            "2",
            "-r",
            "100",
            "-t",
            "1s",
            "--tags",
            "broken",
            "--exit-code-on-error",
            "0",
        ],
    );
    assert_eq!(code, Some(0));
}

#[test]
fn a_file_that_does_not_import_is_one_line_naming_what_is_missing() {
    let _shared = crate::support::shared();
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "locustfile.py",
        "from locust import HttpUser, NoSuchThing\n",
    );
    let out = loadlab(&[
        "locust",
        "-f",
        dir.path().join("locustfile.py").to_str().unwrap(),
        "-H",
        "http://127.0.0.1:9",
        "-t",
        "1s",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("NoSuchThing"), "{stderr}");
}

#[test]
fn validate_shows_a_locustfiles_classes_and_run_takes_it_with_its_own_flags() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(dir.path(), "locustfile.py", SHOP);
    let out = loadlab(&["validate", file.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("user class Shopper"), "{stdout}");
    assert!(stdout.contains("task browse (weight 3)"), "{stdout}");
    let host = server.url("").trim_end_matches('/').to_string();
    let out = loadlab(&[
        "run",
        file.to_str().unwrap(),
        "--target",
        &host,
        "-c",
        "2",
        "-d",
        "1s",
        "--out",
        dir.path().join("run").to_str().unwrap(),
    ]);
    // The file's `broken` task raises: Locust's exit code on errors.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: Value = read_json(&dir.path().join("run/summary.json"));
    assert_eq!(
        s["requests_by_name"]["POST /login"]["completed"], 2,
        "{s:#}"
    );
    assert_eq!(s["users"]["started"], 2, "{s:#}");
}

/// A server that freezes for 1 s of every 1.5 s, under users who pace a request every 0.1 s:
/// Locust's users wait out the freeze and send nothing meanwhile, so timed from the send
/// the freeze is one slow request in fifteen. loadlab's latency counts the requests the wait
/// kept back (one per period, from the intended start), and shows it.
#[test]
fn a_paced_users_latency_shows_a_stall_that_timing_from_the_send_hides() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "locustfile.py",
        "from locust import HttpUser, task, constant_pacing\n\n\nclass Paced(HttpUser):\n    wait_time = constant_pacing(0.1)\n\n    @task\n    def stalls(self):\n        self.client.get(\"/stall?every_ms=1500&for_ms=1000\", name=\"stall\")\n",
    );
    let host = server.url("").trim_end_matches('/').to_string();
    let (code, stdout, stderr) = run_in(
        dir.path(),
        &[
            "-H", &host, "-u", "2", "-r", "100", "-t", "4s", "--out", "run",
        ],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let s: Value = read_json(&dir.path().join("run/summary.json"));
    let (intended, sent) = (&s["latency_ms"], &s["service_latency_ms"]);
    assert!(sent["p50"].as_f64().unwrap() < 50.0, "{s:#}");
    assert!(intended["p50"].as_f64().unwrap() > 100.0, "{s:#}");
    assert!(intended["max"].as_f64().unwrap() > 500.0, "{s:#}");
}

/// Seed 002's users as a locustfile (`examples/seed-002-site.locustfile.py`) visit the site's
/// pages in the shares of its `markov` model's chain (`examples/scenarios/seed-002-site.yml`,
/// whose long-run share of each state `validate` prints), think times shrunk a thousandfold.
#[test]
fn seed_002s_locustfile_visits_pages_in_the_markov_models_shares() {
    let _shared = crate::support::shared();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let out = loadlab(&[
        "validate",
        examples
            .join("scenarios/seed-002-site.yml")
            .to_str()
            .unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let pages = ["home", "news", "events", "institution", "contact", "legal"];
    let share = |page: &str| -> f64 {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{page} ")))
            .unwrap_or_else(|| panic!("{page}: {stdout}"));
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    let expected: Vec<f64> = pages.iter().map(|p| share(p)).collect();
    let total: f64 = expected.iter().sum();

    let server = TestServer::start(2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let host = server.url("").trim_end_matches('/').to_string();
    let file = examples.join("seed-002-site.locustfile.py");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args(["locust", "-f", file.to_str().unwrap(), "-H", &host])
        .args(["-u", "20", "-r", "100", "-t", "4s", "--out", "run"])
        .env("SEED002_THINK_SCALE", "0.001")
        .env("SEED002_WORK_MS", "0")
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: Value = read_json(&dir.path().join("run/summary.json"));
    let seen: Vec<f64> = pages
        .iter()
        .map(|p| {
            s["requests_by_name"][format!("GET /site/{p}")]["completed"]
                .as_f64()
                .unwrap_or(0.0)
        })
        .collect();
    let visits: f64 = seen.iter().sum();
    assert!(visits > 1000.0, "{s:#}");
    for ((page, e), n) in pages.iter().zip(&expected).zip(&seen) {
        let (want, got) = (e / total, n / visits);
        assert!(
            (want - got).abs() < 0.03,
            "{page}: {got:.3} of visits, the chain's {want:.3}"
        );
    }
}

#[test]
fn a_run_without_a_run_time_goes_on_until_its_iterations_are_done() {
    let _shared = crate::support::shared();
    // Without -t a run lasts until it is stopped, as Locust's; ten years was refused as longer
    // than a plan may be, so every run without -t failed before it started.
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "locustfile.py",
        "from locust import HttpUser, task, constant\n\n\nclass U(HttpUser):\n    wait_time = constant(0)\n\n    @task\n    def ping(self):\n        self.client.get(\"/ping\")\n",
    );
    let host = server.url("").trim_end_matches('/').to_string();
    let (code, stdout, stderr) = run_in(
        dir.path(),
        &["-H", &host, "-u", "2", "-i", "6", "--processes", "1"],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("GET      /ping"), "{stdout}");
}

#[test]
fn failure_messages_reach_the_failures_csv_as_locust_words_them() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "locustfile.py", FAILURES);
    let host = server.url("").trim_end_matches('/').to_string();
    let (code, stdout, stderr) = run_in(
        dir.path(),
        &[
            "-H", &host, "-u", "2", "-r", "100", "-t", "2s", "--csv", "f",
        ],
    );
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    let csv = std::fs::read_to_string(dir.path().join("f_failures.csv")).unwrap();
    for line in [
        "GET,/ping,CatchResponseError('wrong thing'),",
        "GET,/nope,HTTPError('404 Client Error: Not Found for url: /nope'),",
        "X,custom,ValueError('bad'),",
    ] {
        assert!(csv.contains(line), "{line} in {csv}");
    }
    // The console as Locust's error report: a failure() message as given, others as repr.
    assert!(stdout.contains("GET /ping: wrong thing\n"), "{stdout}");
    assert!(
        stdout.contains("GET /nope: HTTPError('404 Client Error: Not Found for url: /nope')"),
        "{stdout}"
    );
    let stats = std::fs::read_to_string(dir.path().join("f_stats.csv")).unwrap();
    assert!(!stats.contains(",left,"), "{stats}");
}

#[test]
fn failures_only_the_users_code_reports_give_locusts_exit_code() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Every response is a 200: the failures are the code's verdicts alone.
    for (file, body) in [
        (
            "caught.py",
            "        with self.client.get(\"/ping\", catch_response=True) as r:\n            r.failure(\"no\")\n",
        ),
        (
            "fired.py",
            "        events.request.fire(request_type=\"X\", name=\"x\", response_time=1, response_length=0, exception=RuntimeError(\"no\"), context={})\n",
        ),
        (
            "saved.py",
            "        with self.client.get(\"/nope\", catch_response=True) as r:\n            r.success()\n",
        ),
    ] {
        write_file(
            dir.path(),
            file,
            &format!("from locust import HttpUser, task, constant, events\n\n\nclass U(HttpUser):\n    wait_time = constant(0.05)\n\n    @task\n    def t(self):\n{body}"),
        );
        let host = server.url("").trim_end_matches('/').to_string();
        let (code, stdout, stderr) = run_in(
            dir.path(),
            &["-f", file, "-H", &host, "-u", "1", "-r", "100", "-t", "1s"],
        );
        let want = if file == "saved.py" { 0 } else { 1 };
        assert_eq!(code, Some(want), "{file}: {stdout}\n{stderr}");
    }
}

#[test]
fn process_exit_code_set_in_quitting_is_the_exit_code_and_quitting_runs_once() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "locustfile.py",
        r#"
from locust import HttpUser, task, constant, events


@events.quitting.add_listener
def _(environment, **kwargs):
    with open("quitting.log", "a") as f:
        f.write("quitting\n")
    if environment.stats.total.num_requests > 0:
        environment.process_exit_code = 3


class U(HttpUser):
    wait_time = constant(0.05)

    @task
    def t(self):
        self.client.get("/ping")
"#,
    );
    let host = server.url("").trim_end_matches('/').to_string();
    let (code, stdout, stderr) = run_in(
        dir.path(),
        &[
            "-H",
            &host,
            "-u",
            "2",
            "-r",
            "100",
            "-t",
            "1s",
            "--processes",
            "2",
        ],
    );
    assert_eq!(code, Some(3), "{stdout}\n{stderr}");
    let log = std::fs::read_to_string(dir.path().join("quitting.log")).unwrap();
    assert_eq!(log, "quitting\n", "once for the run, as Locust's");
}

#[test]
fn a_requests_timeout_fails_it_as_timed_out_without_waiting_for_the_answer() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "locustfile.py",
        "from locust import HttpUser, task, constant\n\n\nclass U(HttpUser):\n    wait_time = constant(0)\n\n    @task\n    def t(self):\n        self.client.get(\"/delay?ms=1500\", name=\"slow\", timeout=0.2)\n        self.client.get(\"/ping\")\n",
    );
    let host = server.url("").trim_end_matches('/').to_string();
    let (code, stdout, stderr) = run_in(
        dir.path(),
        &[
            "-H", &host, "-u", "1", "-r", "100", "-t", "2s", "--csv", "t",
        ],
    );
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    let csv = std::fs::read_to_string(dir.path().join("t_failures.csv")).unwrap();
    assert!(
        csv.contains("(read timeout=0.2)"),
        "requests' ReadTimeout: {csv}"
    );
    let stats = std::fs::read_to_string(dir.path().join("t_stats.csv")).unwrap();
    let slow = stats
        .lines()
        .find(|l| l.starts_with("GET,slow,"))
        .unwrap_or_else(|| panic!("{stats}"));
    let cols: Vec<&str> = slow.split(',').collect();
    let (count, failures): (u64, u64) = (cols[2].parse().unwrap(), cols[3].parse().unwrap());
    // Given up after 0.2 s each, several fit in 2 s (one answered in 1.5 s would not).
    assert!(count >= 3 && failures == count, "{slow}");
    let max_ms: f64 = cols[8].parse().unwrap();
    assert!(max_ms < 1000.0, "{slow}");
}

#[test]
fn a_load_test_shape_sets_the_users_and_ends_the_run() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "locustfile.py",
        r#"
from locust import HttpUser, LoadTestShape, task, constant


class U(HttpUser):
    wait_time = constant(0.05)

    @task
    def t(self):
        self.client.get("/ping")


class Steps(LoadTestShape):
    def tick(self):
        run_time = self.get_run_time()
        if run_time < 1:
            return 1, 10
        if run_time < 2:
            return (3, 10, [U])
        return None
"#,
    );
    let host = server.url("").trim_end_matches('/').to_string();
    let started = std::time::Instant::now();
    let (code, stdout, stderr) = run_in(dir.path(), &["-H", &host, "-t", "20s", "--out", "run"]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(12),
        "the shape's None ends the run"
    );
    let s: Value = read_json(&dir.path().join("run/summary.json"));
    assert_eq!(s["users"]["started"], 3, "{s:#}");
    assert!(
        s["requests_by_name"]["GET /ping"]["completed"]
            .as_u64()
            .unwrap()
            > 20,
        "{s:#}"
    );
}

#[test]
fn a_shape_ends_the_run_whatever_run_time_says_and_reads_it_with_use_common_options() {
    let _shared = crate::support::shared();
    // Locust's headless runner waits for the shape alone: -t, -u and -r do not bound it, and
    // reach a shape that reads them (use_common_options) as parsed options.
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let host = server.url("").trim_end_matches('/').to_string();
    let head = "from locust import HttpUser, LoadTestShape, task, constant\n\n\nclass U(HttpUser):\n    wait_time = constant(0.05)\n\n    @task\n    def t(self):\n        self.client.get(\"/ping\")\n\n\n";
    write_file(
        dir.path(),
        "own.py",
        &format!("{head}class Own(LoadTestShape):\n    def tick(self):\n        return (2, 10) if self.get_run_time() < 3 else None\n"),
    );
    let started = std::time::Instant::now();
    let (code, stdout, stderr) = run_in(
        dir.path(),
        &["-f", "own.py", "-H", &host, "-t", "1s", "--out", "own"],
    );
    let took = started.elapsed();
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("--run-time"),
        "the ignored -t is said: {stderr}"
    );
    assert!(
        took >= std::time::Duration::from_millis(2900),
        "the shape's 3 s, not -t's 1 s: {took:?}"
    );
    let own: Value = read_json(&dir.path().join("own/summary.json"));
    assert!(own["duration_s"].as_f64().unwrap() >= 2.5, "{own:#}");

    write_file(
        dir.path(),
        "common.py",
        &format!(
            "{head}class Common(LoadTestShape):\n    use_common_options = True\n\n    def tick(self):\n        o = self.runner.environment.parsed_options\n        if self.get_run_time() < o.run_time:\n            return (o.num_users, o.spawn_rate)\n        return None\n"
        ),
    );
    let started = std::time::Instant::now();
    let (code, stdout, stderr) = run_in(
        dir.path(),
        &[
            "-f",
            "common.py",
            "-H",
            &host,
            "-t",
            "2s",
            "-u",
            "3",
            "-r",
            "30",
            "--out",
            "common",
        ],
    );
    let took = started.elapsed();
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(took < std::time::Duration::from_secs(12), "{took:?}");
    let common: Value = read_json(&dir.path().join("common/summary.json"));
    assert_eq!(
        common["users"]["started"], 3,
        "the shape read -u: {common:#}"
    );
    let d = common["duration_s"].as_f64().unwrap();
    assert!((1.5..5.0).contains(&d), "the shape read -t 2s: {d}");
}

#[test]
fn ctrl_c_ends_the_run_with_its_results_and_no_python_traceback() {
    let _shared = crate::support::shared();
    use std::os::unix::process::CommandExt;
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "locustfile.py",
        r#"
from locust import HttpUser, task, constant, events


@events.test_stop.add_listener
def ended(environment, **kwargs):
    open("test_stop.txt", "a").write("test_stop\n")


class U(HttpUser):
    wait_time = constant(0.05)

    @task
    def t(self):
        self.client.get("/ping")

    def on_stop(self):
        self.client.get("/ping", name="bye")
        open("on_stop.txt", "a").write("on_stop\n")
"#,
    );
    let host = server.url("").trim_end_matches('/').to_string();
    // Its own process group, as a terminal's: Ctrl-C reaches loadlab and its helpers alike.
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .args(["locust", "-H", &host, "-u", "2", "-r", "100", "-t", "60s"])
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(4));
    let group = format!("-{}", child.id());
    let sent = std::process::Command::new("kill")
        .args(["-INT", "--", &group])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(stdout.contains("Aggregated"), "{stdout}\n{stderr}");
    assert!(!stderr.contains("KeyboardInterrupt"), "{stderr}");
    assert!(!stderr.contains("Traceback"), "{stderr}");
    // As Locust's shutdown: the users' on_stop (and its request) and test_stop ran, and the
    // exit code is the run's verdict (no request failed), not an interruption's.
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap_or_default();
    assert_eq!(read("on_stop.txt").lines().count(), 2, "{stderr}");
    assert_eq!(read("test_stop.txt").lines().count(), 1, "{stderr}");
    assert!(
        stdout.contains("GET      bye "),
        "on_stop's request is counted: {stdout}"
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
}

#[test]
fn a_pytest_style_file_runs_its_test_functions_and_requests_errors_are_requests() {
    let _shared = crate::support::shared();
    // Locust reads a file without User classes as pytest test functions, each a user calling
    // it over and over with its `session` or `fastsession`; a failed request ends that call
    // quietly. Its HttpUser's errors are requests' exceptions, which files catch by name.
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "test_flow.py",
        r#"
import time

import requests


def test_flow(session):
    session.get("/ping")
    try:
        session.get("/missing").raise_for_status()
    except requests.exceptions.HTTPError as error:
        session.get("/ping", name="caught " + type(error).__name__)
    time.sleep(0.05)
    session.get("/missing", name="missing again").raise_for_status()
    session.get("/never")


def test_fast(fastsession):
    fastsession.get("/ping", name="fast")
    time.sleep(0.05)


def helper_not_a_test(session):
    session.get("/helper")
"#,
    );
    let host = server.url("").trim_end_matches('/').to_string();
    let (code, stdout, stderr) = run_in(
        dir.path(),
        &[
            "-f",
            "test_flow.py",
            "-H",
            &host,
            "-u",
            "2",
            "-r",
            "10",
            "-t",
            "2s",
            "--csv",
            "p",
        ],
    );
    assert_eq!(code, Some(1), "requests failed: {stdout}\n{stderr}");
    assert!(!stderr.contains("Traceback"), "{stderr}");
    let stats = std::fs::read_to_string(dir.path().join("p_stats.csv")).unwrap();
    let count = |name: &str| -> u64 {
        stats
            .lines()
            .find(|l| l.split(',').nth(1) == Some(name))
            .and_then(|l| l.split(',').nth(2))
            .map_or(0, |n| n.parse().unwrap())
    };
    assert!(count("caught HTTPError") > 2, "{stats}");
    // Each call goes on past the caught error; the run's end may cut the last one between
    // the two (a suite run counted 397 and 396), so one fewer at most, per user.
    let (caught, again) = (count("caught HTTPError"), count("missing again"));
    assert!(again <= caught && caught - again <= 2, "{stats}");
    assert!(count("fast") > 2, "{stats}");
    assert_eq!(
        count("/never"),
        0,
        "raise_for_status ended each call: {stats}"
    );
    assert_eq!(count("/helper"), 0, "{stats}");
}

#[test]
fn a_user_class_whose_init_raises_stops_the_spawning_and_exits_2_as_locust() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "locustfile.py",
        r#"
from locust import HttpUser, task, constant

accounts = ["a", "b"]


class U(HttpUser):
    wait_time = constant(0.1)

    def __init__(self, environment):
        self.account = accounts.pop()
        super().__init__(environment)

    @task
    def t(self):
        self.client.get("/ping", name=self.account)
"#,
    );
    let host = server.url("").trim_end_matches('/').to_string();
    let (code, stdout, stderr) = run_in(
        dir.path(),
        &[
            "-H", &host, "-u", "4", "-r", "100", "-t", "2s", "--out", "run",
        ],
    );
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("IndexError: pop from empty list"),
        "{stderr}"
    );
    assert!(stdout.contains("unhandled errors"), "{stdout}");
    let s: Value = read_json(&dir.path().join("run/summary.json"));
    assert_eq!(s["users"]["started"], 2, "no user after the error: {s:#}");
}

#[test]
fn an_init_listeners_users_spawn_rate_and_run_time_are_the_runs_as_locust_reads_them() {
    let _shared = crate::support::shared();
    // Locust's headless start reads the users, spawn rate and run time from parsed_options
    // after `init` has fired and before `test_start` does: init's 3 users at 2 a second for
    // 3 s, not the command line's 10 at 100 for 1 s, nor test_start's 50.
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "locustfile.py",
        r#"
import time

from locust import HttpUser, task, constant, events


@events.init.add_listener
def _(environment, **kwargs):
    options = environment.parsed_options
    options.num_users = 3
    options.spawn_rate = 2
    options.run_time = 3


@events.test_start.add_listener
def _(environment, **kwargs):
    environment.parsed_options.num_users = 50


class U(HttpUser):
    wait_time = constant(0.05)

    def on_start(self):
        with open("starts.log", "a") as f:
            f.write(f"{time.monotonic()}\n")

    @task
    def t(self):
        self.client.get("/ping")
"#,
    );
    let host = server.url("").trim_end_matches('/').to_string();
    let started = std::time::Instant::now();
    let (code, stdout, stderr) = run_in(
        dir.path(),
        &[
            "-H", &host, "-u", "10", "-r", "100", "-t", "1s", "--out", "run",
        ],
    );
    let took = started.elapsed();
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("3 users, 2 started per second, for 3s"),
        "the console says what the run used: {stderr}"
    );
    let s: Value = read_json(&dir.path().join("run/summary.json"));
    assert_eq!(s["users"]["started"], 3, "{s:#}");
    let starts: Vec<f64> = std::fs::read_to_string(dir.path().join("starts.log"))
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(starts.len(), 3, "{starts:?}");
    // Three users at 2 a second start over 1 s (at 100 a second, over 0.02 s).
    let span = starts.iter().cloned().fold(f64::MIN, f64::max)
        - starts.iter().cloned().fold(f64::MAX, f64::min);
    assert!((0.8..2.0).contains(&span), "users started over {span} s");
    let d = s["duration_s"].as_f64().unwrap();
    assert!((2.8..4.5).contains(&d), "init's 3 s, not -t 1s: {d}");
    assert!(took < std::time::Duration::from_secs(20), "{took:?}");
}

#[test]
fn the_environments_host_and_the_files_own_option_set_in_init_reach_every_helpers_users() {
    let _shared = crate::support::shared();
    // -H names a port nobody serves; init points the environment at the service, which Locust
    // gives every User class once test_start has fired. Each process sets the file's own
    // option in its init, and every process's users read the first one's, as Locust's master
    // sends the file's options to its workers: one queue of tickets counts them all.
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let host = server.url("").trim_end_matches('/').to_string();
    write_file(
        dir.path(),
        "locustfile.py",
        &format!(
            r#"
from locust import HttpUser, task, constant, events


@events.init_command_line_parser.add_listener
def _(parser):
    parser.add_argument("--ticket-queue", default="default-queue")


@events.init.add_listener
def _(environment, **kwargs):
    environment.host = "{host}"
    environment.parsed_options.host = "http://127.0.0.1:1/not-read"
    environment.parsed_options.ticket_queue = f"queue-{{environment.runner.worker_index}}"


class U(HttpUser):
    wait_time = constant(0.05)

    @task
    def t(self):
        self.client.get(f"/turno/{{self.environment.parsed_options.ticket_queue}}")
"#
        ),
    );
    let (code, stdout, stderr) = run_in(
        dir.path(),
        &[
            "-H",
            "http://127.0.0.1:1",
            "-u",
            "4",
            "-r",
            "100",
            "-t",
            "1s",
            "--processes",
            "2",
            "--out",
            "run",
        ],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let s: Value = read_json(&dir.path().join("run/summary.json"));
    assert_eq!(s["users"]["started"], 4, "{s:#}");
    assert_eq!(s["requests"]["errors"], 0, "{s:#}");
    let completed = s["requests"]["completed"].as_u64().unwrap();
    assert!(completed > 8, "{s:#}");
    assert_eq!(
        crate::support::next_ticket(&server, "queue-1"),
        1,
        "no user read the second helper's own value"
    );
    // Every request went to the first helper's queue; the run's end may cut one a user has
    // in flight, which the service counted and loadlab did not (one a user at most).
    let served = crate::support::next_ticket(&server, "queue-0") - 1;
    assert!(
        (completed..=completed + 4).contains(&served),
        "the service served {served} of queue-0, loadlab completed {completed}"
    );
}

#[test]
fn an_init_listeners_tags_and_stop_timeout_are_the_runs() {
    let _shared = crate::support::shared();
    // init keeps the tasks tagged `slow` (Locust's runner filters by parsed_options' tags just
    // before test_start) and gives the users 3 s to finish their task when the run ends: each
    // user's 1.5 s request under way at the 1 s end is seen through, and its task goes on to
    // take a ticket. The service counts the tickets; the untagged task takes none.
    let server = TestServer::start(2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "locustfile.py",
        r#"
from locust import HttpUser, task, constant, events, tag


@events.init.add_listener
def _(environment, **kwargs):
    environment.parsed_options.tags = ["slow"]
    environment.stop_timeout = 3


class U(HttpUser):
    wait_time = constant(0)

    @tag("slow")
    @task
    def slow(self):
        self.client.get("/delay?ms=1500")
        self.client.get("/turno/finished")

    @task
    def untagged(self):
        self.client.get("/turno/untagged")
"#,
    );
    let host = server.url("").trim_end_matches('/').to_string();
    let (code, stdout, stderr) = run_in(
        dir.path(),
        &["-H", &host, "-u", "2", "-r", "100", "-t", "1s"],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        crate::support::next_ticket(&server, "finished"),
        3,
        "both users' tasks finished after the run's end"
    );
    assert_eq!(crate::support::next_ticket(&server, "untagged"), 1);
}

#[test]
fn the_files_own_options_are_taken_on_the_command_line_as_locust_takes_them() {
    let _shared = crate::support::shared();
    // `--ticket-queue NAME` is the file's option (its init_command_line_parser adds it), given
    // among loadlab's flags: the users read it, and the service's queue of that name counts
    // their requests. An option the file does not add is refused, naming it.
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "locustfile.py",
        r#"
from locust import HttpUser, task, constant, events


@events.init_command_line_parser.add_listener
def _(parser):
    parser.add_argument("--ticket-queue", default="default-queue")


class U(HttpUser):
    wait_time = constant(0.05)

    @task
    def t(self):
        self.client.get(f"/turno/{self.environment.parsed_options.ticket_queue}")
"#,
    );
    let host = server.url("").trim_end_matches('/').to_string();
    let (code, stdout, stderr) = run_in(
        dir.path(),
        &[
            "-H",
            &host,
            "--ticket-queue",
            "from-the-command-line",
            "-u",
            "2",
            "-r",
            "100",
            "-t",
            "1s",
            "--out",
            "run",
        ],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let s: Value = read_json(&dir.path().join("run/summary.json"));
    let completed = s["requests"]["completed"].as_u64().unwrap();
    assert!(completed > 4, "{s:#}");
    let served = crate::support::next_ticket(&server, "from-the-command-line") - 1;
    assert!(
        (completed..=completed + 2).contains(&served),
        "{served} {completed}"
    );
    assert_eq!(crate::support::next_ticket(&server, "default-queue"), 1);

    let (code, stdout, stderr) =
        run_in(dir.path(), &["-H", &host, "--ticket-queu", "x", "-t", "1s"]);
    assert_ne!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("unrecognized arguments: --ticket-queu"),
        "{stderr}"
    );
}

/// A plain `User` as Locust's gRPC example writes one: its `host` is a channel's address, not
/// a URL, and its calls reach the statistics by `events.request.fire`. Here the "call" is a
/// 10 ms wait in the user's own code, so the file needs no gRPC library.
const PLAIN_USER: &str = r#"
import time

from locust import User, task, constant, events


class Caller(User):
    host = "localhost:50051"
    wait_time = constant(0.05)

    @task
    def say_hello(self):
        start = time.perf_counter()
        time.sleep(0.01)
        events.request.fire(request_type="grpc", name="/locust.hello.HelloService/SayHello",
                            response_time=(time.perf_counter() - start) * 1000,
                            response_length=5, response=None, context=None, exception=None)
"#;

#[test]
fn a_plain_users_own_host_is_its_business_and_its_fired_calls_are_counted() {
    let _shared = crate::support::shared();
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "grpc_like.py", PLAIN_USER);
    let (code, stdout, stderr) = run_in(
        dir.path(),
        &[
            "-f",
            "grpc_like.py",
            "-u",
            "2",
            "-r",
            "100",
            "-t",
            "2s",
            "--json",
        ],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let stats: Value = serde_json::from_str(&stdout).expect("--json prints Locust's statistics");
    let call = stats
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "/locust.hello.HelloService/SayHello")
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(call["method"], "grpc", "{call}");
    // Two users, a call of 10 ms and a wait of 50 ms: about 33 calls a second each.
    let calls = call["num_requests"].as_u64().unwrap();
    assert!((20..=140).contains(&calls), "{calls} calls: {call}");
    assert_eq!(call["num_failures"], 0, "{call}");
    // With the address given as -H, as Locust takes it for plain users, it runs too.
    let (code, stdout, stderr) = run_in(
        dir.path(),
        &[
            "-f",
            "grpc_like.py",
            "-H",
            "localhost:50051",
            "-u",
            "1",
            "-t",
            "1s",
        ],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
}
