//! A run's series where teams look: Prometheus (the real server, its remote-write receiver)
//! asked through its query API for what loadlab wrote, against the run's `summary.json`, and
//! the Grafana dashboard's queries run against what landed.

use crate::support::{loadlab_json, read_json, write_file, Served};
use loadlab_service::TestServer;
use serde_json::Value;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A Prometheus of the test's own on a free port of 127.0.0.1, with its remote-write
/// receiver on; stopped (by its PID) when dropped.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start() -> Prometheus {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = write_file(
            dir.path(),
            "prometheus.yml",
            "global:\n  scrape_interval: 1m\n",
        );
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(prometheus_bin())
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--web.enable-remote-write-receiver")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus starts (scripts/test.sh installs it)");
        let p = Prometheus {
            child,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while get(port, "/-/ready").is_none_or(|(code, _)| code != 200) {
            assert!(
                Instant::now() < deadline,
                "prometheus was not ready in 30 s"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// The remote-write URL.
    fn write_url(&self) -> String {
        format!("http://127.0.0.1:{}/api/v1/write", self.port)
    }

    /// An instant query's result vector (empty when nothing matched).
    fn query(&self, promql: &str) -> Vec<Value> {
        let path = format!("/api/v1/query?query={}", encode(promql));
        let (code, body) = get(self.port, &path).expect("prometheus answers");
        let v: Value = serde_json::from_str(&body).expect("prometheus answers JSON");
        assert_eq!(code, 200, "{promql}: {body}");
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// The one number a query gives.
    fn number(&self, promql: &str) -> f64 {
        let r = self.query(promql);
        assert_eq!(r.len(), 1, "{promql}: {r:?}");
        r[0]["value"][1]
            .as_str()
            .and_then(|s| s.parse().ok())
            .expect("a sample's value")
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Debian's prometheus, or the one `LOADLAB_PROMETHEUS` names.
fn prometheus_bin() -> String {
    std::env::var("LOADLAB_PROMETHEUS").unwrap_or_else(|_| "prometheus".into())
}

/// A plain HTTP/1.1 GET on 127.0.0.1:`port`: the status and body, `None` when nothing answered.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let code = text.split(' ').nth(1)?.parse().ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        unchunk(body)
    } else {
        body.to_string()
    };
    Some((code, body))
}

/// A chunked body's data.
fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A query string's value percent-encoded.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Every query of `dashboards/loadlab.json` is valid PromQL over what landed, and the panels
/// a closed-model run fills (throughput, latency, requests by name, in flight, generator CPU)
/// return series.
fn dashboard_queries_find_the_run(prom: &Prometheus, summary: &Value) {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dashboards/loadlab.json");
    let dash = read_json(&file);
    let mut filled = Vec::new();
    for panel in dash["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("an expression");
            let promql = expr.replace("$run", ".*").replace("$__rate_interval", "1h");
            let result = prom.query(&promql);
            if !result.is_empty() {
                filled.push(panel["title"].as_str().unwrap_or("").to_string());
            }
        }
    }
    for title in [
        "Throughput",
        "Latency from the intended start",
        "Requests by name",
        "In flight and users",
        "Generator: CPU and schedule lag",
    ] {
        assert!(
            filled.iter().any(|t| t == title),
            "{title}: {filled:?} ({summary})"
        );
    }
}

/// The collector `scripts/install-otelcol.sh` builds: `LOADLAB_OTELCOL`, or its place in the
/// cache.
fn otelcol_bin() -> std::path::PathBuf {
    crate::support::built_once(
        "LOADLAB_OTELCOL",
        "otelcol-v0.161.0/otelcol-loadlab",
        "scripts/install-otelcol.sh",
    )
}

/// An OpenTelemetry Collector of the test's own: OTLP/HTTP on a free port of 127.0.0.1, every
/// batch it receives written to a file as OTLP JSON lines; stopped by its PID when dropped.
struct Collector {
    child: Child,
    port: u16,
    file: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Collector {
    fn start() -> Collector {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = free_port();
        let file = dir.path().join("otlp.jsonl");
        let config = write_file(
            dir.path(),
            "collector.yaml",
            &format!(
                "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:{port}\n\
                 exporters:\n  file:\n    path: {}\n    flush_interval: 100ms\n\
                 service:\n  telemetry:\n    metrics:\n      level: none\n  pipelines:\n    metrics:\n      receivers: [otlp]\n      exporters: [file]\n    traces:\n      receivers: [otlp]\n      exporters: [file]\n",
                file.display()
            ),
        );
        let child = Command::new(otelcol_bin())
            .arg(format!("--config=file:{}", config.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the collector starts");
        let c = Collector {
            child,
            port,
            file,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the collector did not listen in 30 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        c
    }

    /// Every metric data point the collector wrote, as (metric name, point, resource).
    fn points(&self) -> Vec<(String, Value, Value)> {
        let text = std::fs::read_to_string(&self.file).unwrap_or_default();
        let mut out = Vec::new();
        for line in whole_lines(&text) {
            let batch: Value = serde_json::from_str(line).expect("the collector writes JSON lines");
            for rm in batch["resourceMetrics"].as_array().into_iter().flatten() {
                for sm in rm["scopeMetrics"].as_array().into_iter().flatten() {
                    for m in sm["metrics"].as_array().into_iter().flatten() {
                        let name = m["name"].as_str().unwrap_or("").to_string();
                        let data = ["sum", "gauge", "histogram"]
                            .iter()
                            .find_map(|k| m.get(*k))
                            .cloned()
                            .unwrap_or(Value::Null);
                        for p in data["dataPoints"].as_array().into_iter().flatten() {
                            out.push((name.clone(), p.clone(), rm["resource"].clone()));
                        }
                    }
                }
            }
        }
        out
    }
}

impl Collector {
    /// Every span the collector wrote.
    fn spans(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.file).unwrap_or_default();
        let mut out = Vec::new();
        for line in whole_lines(&text) {
            let batch: Value = serde_json::from_str(line).expect("the collector writes JSON lines");
            for rs in batch["resourceSpans"].as_array().into_iter().flatten() {
                for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                    out.extend(ss["spans"].as_array().into_iter().flatten().cloned());
                }
            }
        }
        out
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The lines of a file the collector is still writing that it has finished: its file exporter
/// writes a long line in 4 KB pieces, so the last may be cut (not yet ended by a newline).
fn whole_lines(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive('\n')
        .filter_map(|l| l.strip_suffix('\n'))
        .filter(|l| !l.trim().is_empty())
}

/// A point's number, as OTLP JSON writes doubles (a number) and integers (a string).
fn number(p: &Value) -> Option<f64> {
    p["asDouble"]
        .as_f64()
        .or_else(|| p["asInt"].as_str().and_then(|s| s.parse().ok()))
}

/// The `traceparent` and `tracestate` of each request that had one.
type SeenTraces = std::sync::Arc<std::sync::Mutex<Vec<(String, Option<String>)>>>;

/// An HTTP/1.1 server on 127.0.0.1 that answers every request `200 ok` on kept-alive
/// connections and keeps the `traceparent` and `tracestate` headers it was sent.
struct TraceRecordingServer {
    addr: std::net::SocketAddr,
    seen: SeenTraces,
    requests: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl TraceRecordingServer {
    fn start() -> TraceRecordingServer {
        use std::io::{BufRead, BufReader, Write};
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let addr = listener.local_addr().expect("its address");
        let seen: SeenTraces = Default::default();
        let requests = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (s, r) = (seen.clone(), requests.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (seen, requests) = (s.clone(), r.clone());
                std::thread::spawn(move || {
                    let mut w = conn.try_clone().expect("a second handle");
                    let mut lines = BufReader::new(conn);
                    let (mut parent, mut state) = (None, None);
                    let mut line = String::new();
                    while lines.read_line(&mut line).is_ok_and(|n| n > 0) {
                        let l = line.trim_end().to_string();
                        line.clear();
                        if l.is_empty() {
                            requests.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            if let Some(p) = parent.take() {
                                seen.lock().unwrap().push((p, state.take()));
                            }
                            if w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                                .is_err()
                            {
                                return;
                            }
                        } else if let Some((k, v)) = l.split_once(':') {
                            match k.to_ascii_lowercase().as_str() {
                                "traceparent" => parent = Some(v.trim().to_string()),
                                "tracestate" => state = Some(v.trim().to_string()),
                                _ => {}
                            }
                        }
                    }
                });
            }
        });
        TraceRecordingServer {
            addr,
            seen,
            requests,
        }
    }
}

/// The Jaeger `scripts/install-jaeger.sh` builds: `LOADLAB_JAEGER`, or its place in the cache.
fn jaeger_bin() -> std::path::PathBuf {
    crate::support::built_once(
        "LOADLAB_JAEGER",
        "jaeger-v1.76.0/jaeger-loadlab",
        "scripts/install-jaeger.sh",
    )
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Jaeger of the test's own: OTLP/HTTP in, traces kept in memory, its query API on another
/// free port of 127.0.0.1; stopped by its PID when dropped.
struct Jaeger {
    child: Child,
    otlp: u16,
    query: u16,
    _dir: tempfile::TempDir,
}

impl Jaeger {
    fn start() -> Jaeger {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (otlp, query, grpc) = (free_port(), free_port(), free_port());
        let config = write_file(
            dir.path(),
            "jaeger.yaml",
            &format!(
                "service:\n  extensions: [jaeger_storage, jaeger_query]\n  pipelines:\n    traces:\n      \
                 receivers: [otlp]\n      exporters: [jaeger_storage_exporter]\n  telemetry:\n    metrics:\n      \
                 level: none\n    logs:\n      level: warn\n\
                 extensions:\n  jaeger_query:\n    storage:\n      traces: mem\n    http:\n      \
                 endpoint: 127.0.0.1:{query}\n    grpc:\n      endpoint: 127.0.0.1:{grpc}\n  jaeger_storage:\n    \
                 backends:\n      mem:\n        memory:\n          max_traces: 100000\n\
                 receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:{otlp}\n\
                 exporters:\n  jaeger_storage_exporter:\n    trace_storage: mem\n"
            ),
        );
        let child = Command::new(jaeger_bin())
            .arg(format!("--config=file:{}", config.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("jaeger starts");
        let j = Jaeger {
            child,
            otlp,
            query,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        for port in [otlp, query] {
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(Instant::now() < deadline, "jaeger did not listen in 30 s");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        j
    }

    /// The trace `id` as Jaeger's query API gives it, once it has `spans` spans.
    fn trace(&self, id: &str, spans: usize) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some((200, body)) = get(self.query, &format!("/api/traces/{id}")) {
                let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                let t = v["data"][0].clone();
                if t["spans"].as_array().is_some_and(|s| s.len() >= spans) {
                    return t;
                }
            }
            assert!(
                Instant::now() < deadline,
                "trace {id} did not reach {spans} spans in Jaeger in 20 s"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Jaeger {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_run_lands_in_prometheus_by_remote_write_with_the_totals_of_its_summary() {
    let _shared = crate::support::shared();
    let prom = Prometheus::start();
    let server = TestServer::start(2).expect("test server");
    let base = format!("http://{}", server.addr);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let scenario = write_file(
        dir.path(),
        "two.yml",
        &format!(
            "config:\n  target: {base}\n  phases:\n    - duration: 3\n      arrivalRate: 60\n\
             scenarios:\n  - flow:\n      - get: {{ url: /ping }}\n      - get: {{ url: /nope }}\n"
        ),
    );
    let (summary, out) = loadlab_json(&[
        "run",
        scenario.to_str().unwrap(),
        "--remote-write",
        &prom.write_url(),
        "--remote-write-header",
        "X-Test: remote",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("remote write"), "{stdout}");
    let run = |m: &str| format!("{m}{{job=\"loadlab\"}}");
    let sent = summary["requests"]["sent"].as_f64().unwrap();
    assert!(sent > 100.0, "{summary}");
    assert_eq!(prom.number(&run("loadlab_requests_sent_total")), sent);
    let statuses = summary["status"].as_object().expect("statuses");
    let answered: f64 = statuses.values().filter_map(Value::as_f64).sum();
    assert_eq!(
        prom.number("sum(loadlab_responses_total{job=\"loadlab\"})"),
        answered
    );
    for (code, n) in statuses {
        assert_eq!(
            prom.number(&format!(
                "loadlab_responses_total{{job=\"loadlab\",status=\"{code}\"}}"
            )),
            n.as_f64().unwrap(),
            "status {code}"
        );
    }
    // By name: each name's requests are its own.
    let named = |name: &str, class: &str| {
        prom.number(&format!(
            "loadlab_requests_total{{name=\"{name}\",method=\"GET\",status_class=\"{class}\"}}"
        ))
    };
    let by_name = &summary["requests_by_name"];
    for (name, class) in [("GET /ping", "2xx"), ("GET /nope", "4xx")] {
        let completed = by_name[name]["completed"].as_f64();
        assert!(completed.is_some_and(|n| n > 0.0), "{name} in {by_name}");
        assert_eq!(Some(named(name, class)), completed, "{name}");
    }
    let count = prom.number(&run("loadlab_latency_seconds_count"));
    assert_eq!(count, summary["requests"]["completed"].as_f64().unwrap());
    assert_eq!(prom.number(&run("loadlab_run_complete")), 1.0);
    // One sample a second: a run of 3 s leaves at least 3 samples of its sent counter.
    let samples = prom.query(&format!("{}[1h]", run("loadlab_requests_sent_total")));
    let n = samples[0]["values"].as_array().map_or(0, Vec::len);
    assert!(n >= 3, "{samples:?}");
    dashboard_queries_find_the_run(&prom, &summary);
}

#[test]
fn a_run_reaches_an_opentelemetry_collector_with_the_totals_of_its_summary() {
    let _shared = crate::support::shared();
    let collector = Collector::start();
    let server = TestServer::start(2).expect("test server");
    let url = format!("http://{}/ping", server.addr);
    let out_dir = tempfile::tempdir().expect("a temporary directory");
    let run_dir = out_dir.path().join("otlp-run");
    let (summary, out) = loadlab_json(&[
        "run",
        &url,
        "-c",
        "2",
        "-d",
        "3s",
        "--out",
        run_dir.to_str().unwrap(),
        "--otlp",
        &format!("http://127.0.0.1:{}", collector.port),
        "--otlp-header",
        "x-test=otlp",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("OTLP"), "{stdout}");
    // The collector writes what it got within its flush interval.
    let deadline = Instant::now() + Duration::from_secs(15);
    let complete = |pts: &[(String, Value, Value)]| {
        pts.iter()
            .any(|(n, p, _)| n == "loadlab_run_complete" && number(p) == Some(1.0))
    };
    let mut points = collector.points();
    while !complete(&points) {
        assert!(
            Instant::now() < deadline,
            "no complete run reached the collector: {points:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
        points = collector.points();
    }
    let last = |name: &str| {
        points
            .iter()
            .filter(|(n, _, _)| n == name)
            .max_by_key(|(_, p, _)| {
                p["timeUnixNano"]
                    .as_str()
                    .unwrap_or("0")
                    .parse::<u128>()
                    .unwrap_or(0)
            })
            .unwrap_or_else(|| panic!("{name} never reached the collector"))
            .clone()
    };
    let (_, sent, resource) = last("loadlab_requests_sent_total");
    assert_eq!(number(&sent), summary["requests"]["sent"].as_f64());
    let attrs = resource["attributes"]
        .as_array()
        .expect("resource attributes");
    let attr = |k: &str| {
        attrs
            .iter()
            .find(|a| a["key"] == k)
            .and_then(|a| a["value"]["stringValue"].as_str())
            .map(str::to_string)
    };
    assert_eq!(attr("service.name").as_deref(), Some("loadlab"));
    assert_eq!(attr("loadlab.run.id").as_deref(), Some("otlp-run"));
    let (_, latency, _) = last("loadlab_latency_seconds");
    let count: f64 = latency["count"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(-1.0);
    assert_eq!(Some(count), summary["requests"]["completed"].as_f64());
    let (_, ok, _) = last("loadlab_requests_total");
    assert_eq!(ok["attributes"][2]["value"]["stringValue"], "2xx", "{ok}");
    assert_eq!(number(&ok), summary["requests"]["ok"].as_f64());
}

#[test]
fn sampled_requests_carry_trace_context_and_reach_the_collector_as_client_spans() {
    let _shared = crate::support::shared();
    let collector = Collector::start();
    let server = TraceRecordingServer::start();
    let url = format!("http://{}/traced", server.addr);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let run_dir = dir.path().join("traced");
    let (summary, out) = loadlab_json(&[
        "run",
        &url,
        "--out",
        run_dir.to_str().unwrap(),
        "--html",
        "-c",
        "2",
        "-n",
        "400",
        "--trace-sample",
        "0.25",
        "--trace-state",
        "team=perf",
        "--otlp",
        &format!("http://127.0.0.1:{}", collector.port),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("OTLP traces"), "{stdout}");
    assert_eq!(
        server.requests.load(std::sync::atomic::Ordering::SeqCst),
        400
    );
    let seen = server.seen.lock().unwrap().clone();
    // 100 expected of 400 at 0.25; 5 standard deviations is ±43.
    assert!((57..=143).contains(&seen.len()), "{} sampled", seen.len());
    let traces = &summary["traces"];
    assert_eq!(traces["sampled"].as_u64(), Some(seen.len() as u64));
    let mut ids = std::collections::BTreeSet::new();
    for (parent, state) in &seen {
        let parts: Vec<&str> = parent.split('-').collect();
        assert!(
            parts.len() == 4
                && parts[0] == "00"
                && parts[1].len() == 32
                && parts[2].len() == 16
                && parts[3] == "01"
                && parts[1..3].iter().all(|p| p
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())),
            "{parent}"
        );
        assert_eq!(state.as_deref(), Some("team=perf"));
        ids.insert((parts[1].to_string(), parts[2].to_string()));
    }
    assert_eq!(
        ids.len(),
        seen.len(),
        "every sampled request has its own IDs"
    );
    // The summary's slowest are sampled requests the server saw, slowest first.
    let slowest = traces["slowest"].as_array().expect("slowest");
    assert_eq!(slowest.len(), 10);
    for s in slowest {
        let id = (
            s["trace_id"].as_str().unwrap().to_string(),
            s["span_id"].as_str().unwrap().to_string(),
        );
        assert!(ids.contains(&id), "{s}");
    }
    // The report lists them too, read back from the run directory.
    let html = std::fs::read_to_string(run_dir.join("report.html")).expect("report.html");
    assert!(
        slowest
            .iter()
            .all(|s| html.contains(s["trace_id"].as_str().unwrap())),
        "the report lacks a slow request's trace ID"
    );
    let latencies: Vec<f64> = slowest
        .iter()
        .map(|s| s["latency_ms"].as_f64().unwrap())
        .collect();
    assert!(latencies.windows(2).all(|w| w[0] >= w[1]), "{latencies:?}");
    // Every sampled request reached the collector as a client span with the same IDs.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut spans = collector.spans();
    while spans.len() < seen.len() {
        assert!(
            Instant::now() < deadline,
            "{} of {} spans reached the collector",
            spans.len(),
            seen.len()
        );
        std::thread::sleep(Duration::from_millis(200));
        spans = collector.spans();
    }
    let exported: std::collections::BTreeSet<(String, String)> = spans
        .iter()
        .map(|s| {
            (
                s["traceId"].as_str().unwrap_or("").to_string(),
                s["spanId"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(exported, ids);
    for s in &spans {
        assert_eq!(s["kind"], 3, "a client span: {s}");
        let start: u64 = s["startTimeUnixNano"].as_str().unwrap().parse().unwrap();
        let end: u64 = s["endTimeUnixNano"].as_str().unwrap().parse().unwrap();
        assert!(end > start, "{s}");
        let events: Vec<&str> = s["events"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["name"].as_str())
            .collect();
        assert!(
            events.contains(&"send") && events.contains(&"first_byte"),
            "{s}"
        );
    }
}

#[test]
fn a_slow_sampled_request_is_found_in_jaeger_with_the_services_spans_under_loadlabs() {
    let _shared = crate::support::shared();
    let jaeger = Jaeger::start();
    let otlp = format!("http://127.0.0.1:{}", jaeger.otlp);
    // The reference service on its own Redis, continuing the traces it is given.
    let served = Served::start(&["--store", "redis", &format!("--otlp={otlp}")]);
    let url = format!("http://127.0.0.1:{}/turno/traced", served.port);
    let (summary, _) = loadlab_json(&[
        "run",
        &url,
        "-c",
        "4",
        "-n",
        "400",
        "--trace-sample",
        "0.1",
        "--otlp",
        &otlp,
    ]);
    assert_eq!(summary["requests"]["ok"], 400, "{summary}");
    let slowest = &summary["traces"]["slowest"][0];
    let (trace_id, client_id) = (
        slowest["trace_id"].as_str().expect("a trace ID"),
        slowest["span_id"].as_str().expect("a span ID"),
    );
    // loadlab's client span, the service's server span, its Redis call.
    let trace = jaeger.trace(trace_id, 3);
    let spans = trace["spans"].as_array().unwrap();
    let service_of = |s: &Value| {
        trace["processes"][s["processID"].as_str().unwrap_or("")]["serviceName"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let parent_of = |s: &Value| {
        s["references"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["refType"] == "CHILD_OF")
            .and_then(|r| r["spanID"].as_str())
            .map(str::to_string)
    };
    let client = spans
        .iter()
        .find(|s| s["spanID"] == client_id)
        .unwrap_or_else(|| panic!("no span {client_id} in {trace}"));
    assert_eq!(service_of(client), "loadlab");
    let server = spans
        .iter()
        .find(|s| parent_of(s).as_deref() == Some(client_id))
        .unwrap_or_else(|| panic!("no span under loadlab's in {trace}"));
    assert_eq!(service_of(server), "loadlab-serve");
    assert_eq!(server["operationName"], "GET /turno/{name}");
    let server_id = server["spanID"].as_str().unwrap();
    let redis = spans
        .iter()
        .find(|s| parent_of(s).as_deref() == Some(server_id))
        .unwrap_or_else(|| panic!("no span under the service's in {trace}"));
    assert_eq!(redis["operationName"], "INCR turno");
    // The service's time is inside loadlab's, the Redis call's inside the service's (µs; the
    // two processes' clocks are one machine's, within a millisecond of rounding).
    let span_of = |s: &Value| {
        let start = s["startTime"].as_u64().unwrap();
        (start, start + s["duration"].as_u64().unwrap())
    };
    for (outer, inner) in [(client, server), (server, redis)] {
        let ((a, b), (c, d)) = (span_of(outer), span_of(inner));
        assert!(
            c + 1_000 >= a && d <= b + 1_000,
            "{outer} does not hold {inner}"
        );
    }
}

#[test]
fn the_node_and_python_services_continue_the_traces_loadlab_sends() {
    let _shared = crate::support::shared();
    let collector = Collector::start();
    let otlp = format!("http://127.0.0.1:{}", collector.port);
    for (runtime, service, route) in [
        ("node", "loadlab-serve-node", "GET /turno/:name"),
        ("python", "loadlab-serve-python", "GET /turno/{name}"),
    ] {
        let served = Served::start(&["--runtime", runtime, &format!("--otlp={otlp}")]);
        let url = format!("http://127.0.0.1:{}/turno/{runtime}", served.port);
        let (summary, _) = loadlab_json(&[
            "run",
            &url,
            "-c",
            "2",
            "-n",
            "60",
            "--trace-sample",
            "0.5",
            "--otlp",
            &otlp,
        ]);
        let sampled = summary["traces"]["sampled"].as_u64().unwrap() as usize;
        assert!(sampled > 0, "{summary}");
        // Every sampled request's server span, under loadlab's client span of that request.
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let spans = collector.spans();
            let clients: std::collections::BTreeMap<String, String> = spans
                .iter()
                .filter(|s| {
                    s["kind"] == 3 && s["name"].as_str().is_some_and(|n| n.contains(runtime))
                })
                .map(|s| {
                    (
                        s["spanId"].as_str().unwrap().into(),
                        s["traceId"].as_str().unwrap().into(),
                    )
                })
                .collect();
            let served_spans: Vec<&Value> = spans
                .iter()
                .filter(|s| s["kind"] == 2 && s["name"] == route)
                .filter(|s| {
                    clients
                        .get(s["parentSpanId"].as_str().unwrap_or(""))
                        .map(String::as_str)
                        == s["traceId"].as_str()
                })
                .collect();
            if clients.len() == sampled && served_spans.len() == sampled {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{service}: {} client and {} server spans of {sampled} sampled requests",
                clients.len(),
                served_spans.len()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}
