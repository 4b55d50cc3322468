//! Sends the run's series to metric backends while it runs — Prometheus remote write and
//! OpenTelemetry over OTLP/HTTP — once a second from a thread of its own, so a slow or absent
//! backend never holds the engine: what could not be sent is counted and said, never the
//! run's failure.

pub mod otlp;
pub mod otlp_traces;
pub mod remote_write;

use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use loadlab_report::live::Live;
use loadlab_run::{Interval, LiveReading, Summary, TimelineRow};

/// Where the series go, as the command line and the environment give it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExportOptions {
    /// Prometheus remote-write receiver (`…/api/v1/write`).
    pub remote_write: Option<String>,
    /// Extra headers on every remote-write request (`Authorization`, tenant IDs).
    pub remote_write_headers: Vec<(String, String)>,
    /// OTLP/HTTP metrics endpoint, whole (`…/v1/metrics`).
    pub otlp_metrics: Option<String>,
    /// Extra headers on every OTLP metrics request.
    pub otlp_headers: Vec<(String, String)>,
    /// OTLP/HTTP traces endpoint, whole (`…/v1/traces`), for sampled requests' spans.
    pub otlp_traces: Option<String>,
    /// Extra headers on every OTLP traces request.
    pub otlp_trace_headers: Vec<(String, String)>,
    /// Attributes of the run's resource (`service.name`, `loadlab.run.id`, …), also the
    /// remote-write series' labels (dots as underscores).
    pub resource: Vec<(String, String)>,
}

/// The OTLP/HTTP port and path the SDKs use when nothing is given.
const OTLP_DEFAULT: &str = "http://localhost:4318";

impl ExportOptions {
    /// Options from the command line's `--remote-write URL`, `--remote-write-header K: V`,
    /// `--otlp [URL]` (`Some("")` when given without a URL) and `--otlp-header K=V`, with the
    /// OpenTelemetry SDKs' environment variables read from `env` as they read them: a URL
    /// given is the base endpoint (`/v1/metrics` and `/v1/traces` appended); without one,
    /// `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` (`…_TRACES_ENDPOINT`) whole, else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` as the base, else `http://localhost:4318`; headers from
    /// `OTEL_EXPORTER_OTLP_HEADERS` and `OTEL_EXPORTER_OTLP_METRICS_HEADERS`
    /// (`…_TRACES_HEADERS`) (`k=v,k2=v2`, values percent-decoded), the command line's last; `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` add to the
    /// resource.
    pub fn from_flags(
        remote_write: Option<&str>,
        remote_write_headers: &[String],
        otlp: Option<&str>,
        otlp_headers: &[String],
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<ExportOptions, String> {
        // `Name: value` or `name=value` on either flag, as `-H` takes them.
        let header = |h: &String| loadlab_input::target::parse_header(h).map_err(|e| e.to_string());
        let mut o = ExportOptions {
            remote_write: remote_write.map(str::to_string),
            remote_write_headers: remote_write_headers
                .iter()
                .map(header)
                .collect::<Result<_, _>>()?,
            ..ExportOptions::default()
        };
        if let Some(url) = otlp {
            let nonempty = |k: &str| env(k).filter(|v| !v.trim().is_empty());
            // Per signal, as the SDKs: a URL given is the base; else the signal's own
            // endpoint whole; else the common one as the base; else localhost.
            let endpoint = |signal: &str| {
                if !url.is_empty() {
                    signal_url(url, signal)
                } else if let Some(whole) = nonempty(&format!(
                    "OTEL_EXPORTER_OTLP_{}_ENDPOINT",
                    signal.to_uppercase()
                )) {
                    whole
                } else {
                    signal_url(
                        &nonempty("OTEL_EXPORTER_OTLP_ENDPOINT").unwrap_or(OTLP_DEFAULT.into()),
                        signal,
                    )
                }
            };
            let mut cli = Vec::new();
            for h in otlp_headers {
                cli.push(header(h)?);
            }
            let headers = |signal: &str| {
                let common = env("OTEL_EXPORTER_OTLP_HEADERS").map(|v| pairs(&v));
                let own = env(&format!(
                    "OTEL_EXPORTER_OTLP_{}_HEADERS",
                    signal.to_uppercase()
                ))
                .map(|v| pairs(&v));
                let mut all: Vec<(String, String)> = common.into_iter().flatten().collect();
                all.extend(own.into_iter().flatten());
                all.extend(cli.iter().cloned());
                all
            };
            o.otlp_metrics = Some(endpoint("metrics"));
            o.otlp_headers = headers("metrics");
            o.otlp_traces = Some(endpoint("traces"));
            o.otlp_trace_headers = headers("traces");
        }
        if let Some(name) = env("OTEL_SERVICE_NAME").filter(|v| !v.is_empty()) {
            o.resource.push(("service.name".into(), name));
        }
        o.resource.extend(
            env("OTEL_RESOURCE_ATTRIBUTES")
                .map(|v| pairs(&v))
                .unwrap_or_default(),
        );
        Ok(o)
    }

    /// True when no backend is named.
    pub fn is_empty(&self) -> bool {
        self.remote_write.is_none() && self.otlp_metrics.is_none()
    }
}

/// A base OTLP endpoint with a signal's path (`/v1/metrics`, `/v1/traces`), unless it ends
/// with one already (then that one is swapped for the signal's).
fn signal_url(base: &str, signal: &str) -> String {
    let base = base.trim_end_matches('/');
    let base = ["/v1/metrics", "/v1/traces"]
        .iter()
        .find_map(|p| base.strip_suffix(p))
        .unwrap_or(base);
    format!("{base}/v1/{signal}")
}

/// `k=v,k2=v2` as the OpenTelemetry environment variables write lists (W3C baggage-like,
/// values percent-encoded).
fn pairs(list: &str) -> Vec<(String, String)> {
    list.split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (decode(k.trim()), decode(v.trim())))
        .filter(|(k, _)| !k.is_empty())
        .collect()
}

/// Percent-decoding (`%20` → space); a malformed escape is kept as written.
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).and_then(|&c| hex(c)),
            b.get(i + 2).and_then(|&c| hex(c)),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What the exporter's thread is told.
enum Msg {
    Begin {
        label: String,
        open: bool,
        names: Vec<(String, String)>,
        labels: Vec<(String, String)>,
    },
    Second(Box<(TimelineRow, Interval)>, f64),
    Reading(LiveReading),
    Finish(Box<Summary>),
    Close,
}

/// Seconds waiting to be sent while a backend is slow; past them a second is skipped (the
/// counters are totals, so the next one carries it).
const QUEUE: usize = 8;

/// How long one request to a backend may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// The exporter: a thread sending each second's series to the backends of [`ExportOptions`].
pub struct Exporter {
    tx: Option<SyncSender<Msg>>,
    thread: Option<JoinHandle<Tally>>,
    /// Seconds skipped because the queue was full.
    skipped: std::sync::atomic::AtomicU64,
}

/// What was sent to one backend.
#[derive(Debug, Default, Clone)]
struct Sent {
    ok: u64,
    failed: u64,
    last_error: Option<String>,
}

/// What was sent, per backend.
#[derive(Debug, Default)]
struct Tally {
    remote_write: Sent,
    otlp: Sent,
    otlp_traces: Sent,
}

impl Exporter {
    /// Starts the exporter's thread when `options` name a backend.
    pub fn start(options: &ExportOptions) -> Option<Exporter> {
        if options.is_empty() {
            return None;
        }
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let options = options.clone();
        let thread = std::thread::Builder::new()
            .name("loadlab-export".into())
            .spawn(move || export_loop(&options, &rx))
            .ok()?;
        Some(Exporter {
            tx: Some(tx),
            thread: Some(thread),
            skipped: Default::default(),
        })
    }

    /// Starts a new run (a lab's next cell) named `label`, whose requests have `names`
    /// (name, method) and whose series carry `labels` besides the resource's.
    pub fn begin(
        &self,
        label: &str,
        open: bool,
        names: Vec<(String, String)>,
        labels: Vec<(String, String)>,
    ) {
        self.send(Msg::Begin {
            label: label.to_string(),
            open,
            names,
            labels,
        });
    }

    /// A finished second, with the generator's CPU time so far (seconds); skipped when the
    /// backends are behind.
    pub fn add(&self, row: &TimelineRow, iv: &Interval, generator_cpu_s: f64) {
        let Some(tx) = &self.tx else { return };
        let msg = Msg::Second(Box::new((row.clone(), iv.clone())), generator_cpu_s);
        if let Err(TrySendError::Full(_)) = tx.try_send(msg) {
            self.skipped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// A feed for the sampler's readings of watched processes and stores (dropped when the
    /// backends are behind).
    pub fn feed(&self) -> Box<dyn Fn(LiveReading) + Send> {
        let tx = self.tx.clone();
        Box::new(move |r| {
            if let Some(tx) = &tx {
                let _ = tx.try_send(Msg::Reading(r));
            }
        })
    }

    /// The run ended with `summary`: its last series are sent (waiting for room).
    pub fn finish(&self, summary: &Summary) {
        self.send(Msg::Finish(Box::new(summary.clone())));
    }

    fn send(&self, msg: Msg) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(msg);
        }
    }

    /// Sends what is queued, stops the thread and prints what was sent where.
    pub fn close(mut self) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(Msg::Close);
        }
        let Some(tally) = self.thread.take().and_then(|t| t.join().ok()) else {
            return;
        };
        let skipped = self.skipped.load(std::sync::atomic::Ordering::Relaxed);
        for (what, sent) in [
            ("remote write", &tally.remote_write),
            ("OTLP", &tally.otlp),
            ("OTLP traces", &tally.otlp_traces),
        ] {
            if sent.ok + sent.failed == 0 {
                continue;
            }
            let unit = if what == "OTLP traces" {
                "batch(es) of spans"
            } else {
                "snapshot(s)"
            };
            let mut line = format!("  {what:<13}{} {unit} sent", sent.ok);
            if sent.failed > 0 {
                line.push_str(&format!(", {} not sent", sent.failed));
                if let Some(e) = &sent.last_error {
                    line.push_str(&format!(" (last: {e})"));
                }
            }
            if skipped > 0 {
                line.push_str(&format!(
                    ", {skipped} second(s) skipped while it was behind"
                ));
            }
            println!("{line}");
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(Msg::Close);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The exporter's thread: keeps the run's totals in a [`Live`] and sends its series after
/// each second and at the end.
fn export_loop(options: &ExportOptions, rx: &Receiver<Msg>) -> Tally {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(REQUEST_TIMEOUT))
        .http_status_as_error(false)
        .user_agent(concat!("loadlab/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let mut live = Live::new("", false);
    let mut labels: Vec<(String, String)> = Vec::new();
    // The current run's request names (name, method), for its spans.
    let mut span_names: Vec<(String, String)> = Vec::new();
    let mut start_ns = now_ns();
    let mut tally = Tally::default();
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Begin {
                label,
                open,
                names,
                labels: l,
            } => {
                span_names = names.clone();
                live = Live::new(&label, open).with_names(names);
                labels = l;
                start_ns = now_ns();
                continue;
            }
            Msg::Second(second, cpu) => {
                live.add(&second.0, &second.1);
                live.set_generator_cpu(cpu);
                if let (Some(url), false) = (&options.otlp_traces, second.1.spans.is_empty()) {
                    let mut resource = options.resource.clone();
                    resource.extend(labels.iter().cloned());
                    let req = otlp_traces::traces_request(&second.1.spans, &span_names, &resource);
                    post(
                        &agent,
                        url,
                        protobuf_headers(&options.otlp_trace_headers),
                        prost::Message::encode_to_vec(&req),
                        &mut tally.otlp_traces,
                    );
                }
            }
            Msg::Reading(r) => {
                live.read(r);
                continue;
            }
            Msg::Finish(summary) => live.finish(*summary),
            Msg::Close => break,
        }
        let families = live.families();
        let at_ns = now_ns();
        let mut resource = options.resource.clone();
        resource.extend(labels.iter().cloned());
        if let Some(url) = &options.remote_write {
            // Prometheus' own name for the service is its job.
            let job = resource
                .iter()
                .find(|(k, _)| k == "service.name")
                .map(|(_, v)| ("job".to_string(), v.clone()));
            let common: Vec<(String, String)> = resource
                .iter()
                .map(|(k, v)| (k.replace(['.', '-'], "_"), v.clone()))
                .chain(job)
                .collect();
            let req = remote_write::write_request(&families, &common, (at_ns / 1_000_000) as i64);
            let headers = remote_write::HEADERS
                .iter()
                .map(|&(k, v)| (k.to_string(), v.to_string()))
                .chain(options.remote_write_headers.iter().cloned());
            post(
                &agent,
                url,
                headers,
                remote_write::body(&req),
                &mut tally.remote_write,
            );
        }
        if let Some(url) = &options.otlp_metrics {
            let req = otlp::metrics_request(&families, &resource, start_ns, at_ns);
            post(
                &agent,
                url,
                protobuf_headers(&options.otlp_headers),
                prost::Message::encode_to_vec(&req),
                &mut tally.otlp,
            );
        }
    }
    tally
}

/// An OTLP request's headers: its content type, then `extra`.
fn protobuf_headers(extra: &[(String, String)]) -> impl Iterator<Item = (String, String)> + '_ {
    std::iter::once((
        "Content-Type".to_string(),
        "application/x-protobuf".to_string(),
    ))
    .chain(extra.iter().cloned())
}

/// POSTs `body` to `url`, counting the outcome in `sent`; the first failure is said at once
/// (one line), the rest counted.
fn post(
    agent: &ureq::Agent,
    url: &str,
    headers: impl Iterator<Item = (String, String)>,
    body: Vec<u8>,
    sent: &mut Sent,
) {
    let mut req = agent.post(url);
    for (k, v) in headers {
        req = req.header(k, v);
    }
    let error = match req.send(&body[..]) {
        Ok(resp) if resp.status().is_success() => None,
        Ok(resp) => Some(format!("{url} answered {}", resp.status())),
        Err(e) => Some(format!("{url}: {e}")),
    };
    match error {
        None => sent.ok += 1,
        Some(e) => {
            if sent.failed == 0 {
                let what = if url.ends_with("/v1/traces") {
                    "spans"
                } else {
                    "metrics"
                };
                eprintln!("warning: cannot export {what} ({e}); the run goes on, and what was not sent is counted");
            }
            sent.failed += 1;
            sent.last_error = Some(e);
        }
    }
}

/// Nanoseconds since the Unix epoch.
fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn otlp_endpoints_and_headers_are_read_as_the_sdks_read_them() {
        let vars = &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=abc%20d,x-team=perf"),
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci"),
        ];
        let o = ExportOptions::from_flags(None, &[], Some(""), &[], env_of(vars)).unwrap();
        assert_eq!(
            o.otlp_metrics.as_deref(),
            Some("http://collector:4318/v1/metrics")
        );
        assert_eq!(
            o.otlp_headers,
            vec![
                ("api-key".to_string(), "abc d".to_string()),
                ("x-team".to_string(), "perf".to_string())
            ]
        );
        assert_eq!(
            o.resource,
            vec![("deployment.environment".into(), "ci".into())]
        );
        let signal = &[(
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            "http://c:4318/custom",
        )];
        let o = ExportOptions::from_flags(None, &[], Some(""), &[], env_of(signal)).unwrap();
        assert_eq!(o.otlp_metrics.as_deref(), Some("http://c:4318/custom"));
        let o =
            ExportOptions::from_flags(None, &[], Some("http://x:1"), &[], env_of(signal)).unwrap();
        assert_eq!(o.otlp_metrics.as_deref(), Some("http://x:1/v1/metrics"));
        assert_eq!(o.otlp_traces.as_deref(), Some("http://x:1/v1/traces"));
        let o = ExportOptions::from_flags(
            None,
            &[],
            Some("http://x:1/v1/metrics"),
            &["k=v".into()],
            env_of(&[("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "t=1")]),
        )
        .unwrap();
        assert_eq!(o.otlp_traces.as_deref(), Some("http://x:1/v1/traces"));
        assert_eq!(o.otlp_headers, vec![("k".to_string(), "v".to_string())]);
        assert_eq!(
            o.otlp_trace_headers,
            vec![("t".to_string(), "1".into()), ("k".to_string(), "v".into())]
        );
        let o = ExportOptions::from_flags(None, &[], Some(""), &[], env_of(&[])).unwrap();
        assert_eq!(
            o.otlp_metrics.as_deref(),
            Some("http://localhost:4318/v1/metrics")
        );
    }

    #[test]
    fn a_header_without_its_separator_is_refused_with_its_text() {
        let e = ExportOptions::from_flags(
            Some("http://p/api/v1/write"),
            &["X-Scope".into()],
            None,
            &[],
            env_of(&[]),
        )
        .unwrap_err();
        assert!(e.contains("\"X-Scope\"") && e.contains("name=value"), "{e}");
        let o = ExportOptions::from_flags(
            Some("http://p/api/v1/write"),
            &["X-Scope-OrgID: team-a".into()],
            None,
            &[],
            env_of(&[]),
        )
        .unwrap();
        assert_eq!(
            o.remote_write_headers,
            vec![("X-Scope-OrgID".into(), "team-a".into())]
        );
        assert!(o.otlp_metrics.is_none());
    }
}
