//! Trace context the service continues when it is given an OTLP endpoint: a request that
//! comes with a sampled W3C `traceparent` gets a server span under the caller's span, and
//! `/turno`'s store call a child span under that; spans go out over OTLP/HTTP (protobuf) in
//! batches from a thread of their own, so a slow collector never holds a request.

use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    span, status, ResourceSpans, ScopeSpans, Span, Status,
};

/// Spans waiting for the exporter; past this many a span is dropped (and counted).
const QUEUE: usize = 8192;

/// Longest wait before the spans gathered so far are sent.
const BATCH_EVERY: Duration = Duration::from_millis(200);

/// Most spans in one export request.
const BATCH_MAX: usize = 512;

/// The trace and span a piece of work belongs to (put in a traced request's extensions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceContext {
    /// The trace's ID.
    pub trace_id: [u8; 16],
    /// The current span's ID: children name it as their parent.
    pub span_id: [u8; 8],
}

/// The service's tracer: where its spans go.
pub struct Tracer {
    tx: SyncSender<Span>,
    service: String,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer")
            .field("service", &self.service)
            .finish()
    }
}

impl Tracer {
    /// A tracer sending to `url` (a whole `…/v1/traces` URL) as service `service`, with its
    /// exporter thread started.
    pub fn start(url: &str, service: &str) -> std::io::Result<Arc<Tracer>> {
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let (url, name) = (url.to_string(), service.to_string());
        std::thread::Builder::new()
            .name("loadlab-serve-traces".into())
            .spawn(move || export_loop(&url, &name, &rx))?;
        Ok(Arc::new(Tracer {
            tx,
            service: service.to_string(),
        }))
    }

    /// Records a finished span (dropped when the exporter is behind).
    fn record(&self, s: Span) {
        let _ = self.tx.try_send(s);
    }

    /// Records a child span `name` of `parent` that ran from `start` for `took`, with
    /// `attrs`, failed when `error` says why.
    pub fn child(
        &self,
        parent: TraceContext,
        name: &str,
        (start, took): (SystemTime, Duration),
        attrs: &[(&str, &str)],
        error: Option<&str>,
    ) {
        let start_ns = unix_ns(start);
        self.record(Span {
            trace_id: parent.trace_id.to_vec(),
            span_id: new_span_id().to_vec(),
            parent_span_id: parent.span_id.to_vec(),
            name: name.into(),
            kind: span::SpanKind::Client as i32,
            start_time_unix_nano: start_ns,
            end_time_unix_nano: start_ns + took.as_nanos() as u64,
            attributes: attrs.iter().map(|(k, v)| string(k, v)).collect(),
            status: error.map(|e| Status {
                code: status::StatusCode::Error as i32,
                message: e.into(),
            }),
            ..Default::default()
        });
    }
}

/// The trace ID, parent span ID and sampled flag of a `traceparent` value (version 00, or a
/// later version read as 00 as the specification asks); `None` when it is malformed or all
/// zeros.
pub fn parse_traceparent(v: &str) -> Option<([u8; 16], [u8; 8], bool)> {
    let mut parts = v.trim().split('-');
    let version = parts.next()?;
    let (trace, parent, flags) = (parts.next()?, parts.next()?, parts.next()?);
    if version.len() != 2 || version == "ff" || trace.len() != 32 || parent.len() != 16 {
        return None;
    }
    if version == "00" && parts.next().is_some() {
        return None;
    }
    let trace_id: [u8; 16] = hex(trace)?.try_into().ok()?;
    let parent_id: [u8; 8] = hex(parent)?.try_into().ok()?;
    let flags = u8::from_str_radix(flags.get(..2)?, 16).ok()?;
    (trace_id != [0; 16] && parent_id != [0; 8]).then_some((trace_id, parent_id, flags & 1 == 1))
}

/// Lowercase hex digits as bytes.
fn hex(s: &str) -> Option<Vec<u8>> {
    if s.bytes()
        .any(|b| !(b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    {
        return None;
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok())
        .collect()
}

fn new_span_id() -> [u8; 8] {
    fastrand::u64(1..).to_be_bytes()
}

fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn string(k: &str, v: &str) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

/// The middleware: a request with a sampled `traceparent` runs inside a server span, its
/// context in the request's extensions for the handler's own spans.
pub async fn traced(
    State(tracer): State<Arc<Tracer>>,
    mut request: Request,
    next: Next,
) -> Response {
    let parent = request
        .headers()
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_traceparent)
        .filter(|&(_, _, sampled)| sampled);
    let Some((trace_id, parent_id, _)) = parent else {
        return next.run(request).await;
    };
    let ctx = TraceContext {
        trace_id,
        span_id: new_span_id(),
    };
    let method = request.method().to_string();
    let path = request.uri().path().to_string();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| path.clone(), |m| m.as_str().to_string());
    request.extensions_mut().insert(ctx);
    let (wall, start) = (SystemTime::now(), Instant::now());
    let response = next.run(request).await;
    let took = start.elapsed();
    let code = response.status().as_u16();
    let start_ns = unix_ns(wall);
    let mut attributes = vec![
        string("http.request.method", &method),
        string("http.route", &route),
        string("url.path", &path),
    ];
    attributes.push(KeyValue {
        key: "http.response.status_code".into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::IntValue(i64::from(code))),
        }),
        ..Default::default()
    });
    tracer.record(Span {
        trace_id: ctx.trace_id.to_vec(),
        span_id: ctx.span_id.to_vec(),
        parent_span_id: parent_id.to_vec(),
        name: format!("{method} {route}"),
        kind: span::SpanKind::Server as i32,
        start_time_unix_nano: start_ns,
        end_time_unix_nano: start_ns + took.as_nanos() as u64,
        attributes,
        // A server span is an error on a 5xx answer only.
        status: (code >= 500).then(|| Status {
            code: status::StatusCode::Error as i32,
            message: String::new(),
        }),
        ..Default::default()
    });
    response
}

/// The exporter thread: gathers spans for up to [`BATCH_EVERY`] and posts them; the first
/// failure is said on stderr, the rest counted silently.
fn export_loop(url: &str, service: &str, rx: &Receiver<Span>) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(2)))
        .http_status_as_error(false)
        .build()
        .into();
    let mut failed = 0u64;
    loop {
        let Ok(first) = rx.recv() else { return };
        let mut batch = vec![first];
        let until = Instant::now() + BATCH_EVERY;
        while batch.len() < BATCH_MAX {
            match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok(s) => batch.push(s),
                Err(_) => break,
            }
        }
        let req = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![string("service.name", service)],
                    ..Default::default()
                }),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: "loadlab-serve".into(),
                        ..Default::default()
                    }),
                    spans: batch,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let body = prost::Message::encode_to_vec(&req);
        let sent = agent
            .post(url)
            .header("Content-Type", "application/x-protobuf")
            .send(&body[..]);
        let error = match sent {
            Ok(r) if r.status().is_success() => None,
            Ok(r) => Some(format!("{url} answered {}", r.status())),
            Err(e) => Some(format!("{url}: {e}")),
        };
        if let Some(e) = error {
            if failed == 0 {
                eprintln!("warning: cannot export spans ({e}); the service goes on");
            }
            failed += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_read_as_the_specification_writes_it() {
        let (t, p, sampled) =
            parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(t[0], 0x4b);
        assert_eq!(p, [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
        assert!(sampled);
        let (.., sampled) =
            parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        assert!(!sampled);
        // A later version may add fields; 00 may not.
        assert!(
            parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
                .is_some()
        );
        for bad in [
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01",
            "garbage",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
    }
}
