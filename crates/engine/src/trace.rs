//! W3C trace context on sampled requests (a leaf beside the connections): which requests
//! are sampled, the `traceparent` (and `tracestate`) written into a sampled request's bytes,
//! and the client span recorded for it.
//!
//! Headers are inserted into the request's encoded bytes rather than kept in its template:
//! the IDs change with every request, while templates are encoded once per run and written
//! as they are, so only the sampled share pays for a copy.

use std::time::{SystemTime, UNIX_EPOCH};

use loadlab_run::trace::{traceparent, ClientSpan};
use loadlab_run::{Plan, Tracing};
use tokio::time::Instant;

/// The plan's tracing, for one thread's requests.
pub struct Tracer {
    /// Share of requests sampled.
    sample: f64,
    /// The `tracestate` value sent with each `traceparent`, if any.
    state: Option<String>,
}

/// The IDs of one sampled request: its trace and its client span, as hex.
#[derive(Debug, Clone)]
pub struct SpanIds {
    /// 32 hex digits.
    pub trace_id: String,
    /// 16 hex digits.
    pub span_id: String,
}

impl Tracer {
    /// The tracer of `plan`, when it traces.
    pub fn of(plan: &Plan) -> Option<Tracer> {
        plan.trace.as_ref().map(|Tracing { sample, state }| Tracer {
            sample: *sample,
            state: state.clone(),
        })
    }

    /// New IDs when this request is sampled. IDs are random and never all zeros, as the
    /// trace-context specification asks.
    pub fn sample(&self) -> Option<SpanIds> {
        (self.sample >= 1.0 || fastrand::f64() < self.sample).then(|| SpanIds {
            trace_id: format!("{:032x}", fastrand::u128(1..)),
            span_id: format!("{:016x}", fastrand::u64(1..)),
        })
    }

    /// `request` (an HTTP/1.1 request's bytes) with the trace headers after its request line;
    /// `None` when it has a `traceparent` of its own (the user's trace is kept).
    pub fn with_headers(&self, request: &[u8], ids: &SpanIds) -> Option<Vec<u8>> {
        let line_end = request.windows(2).position(|w| w == b"\r\n")? + 2;
        let head_end = request
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(request.len(), |i| i + 2);
        let head = &request[line_end.min(head_end)..head_end];
        let has_own = head
            .split(|&b| b == b'\n')
            .any(|l| l.len() > 12 && l[..12].eq_ignore_ascii_case(b"traceparent:"));
        if has_own {
            return None;
        }
        let mut headers = format!(
            "traceparent: {}\r\n",
            traceparent(&ids.trace_id, &ids.span_id)
        );
        if let Some(state) = &self.state {
            headers.push_str(&format!("tracestate: {state}\r\n"));
        }
        let mut out = Vec::with_capacity(request.len() + headers.len());
        out.extend_from_slice(&request[..line_end]);
        out.extend_from_slice(headers.as_bytes());
        out.extend_from_slice(&request[line_end..]);
        Some(out)
    }
}

/// How a sampled request went, in the engine's clock.
pub struct Outcome {
    /// When the schedule meant it to start, else its send.
    pub intended: Instant,
    /// When it was sent.
    pub sent: Instant,
    /// When its writes began.
    pub write: Instant,
    /// When its answer's first byte came.
    pub first_byte: Option<Instant>,
    /// When it ended.
    pub end: Instant,
    /// Its status, when answered.
    pub status: Option<u16>,
    /// Its transport error, when it failed.
    pub error: Option<&'static str>,
}

/// The client span of a sampled request of name index `name`, its times as Unix nanoseconds.
pub fn span(ids: SpanIds, name: usize, o: &Outcome) -> ClientSpan {
    // The wall clock of an engine instant: both clocks read once, here.
    let (wall, now) = (SystemTime::now(), Instant::now());
    let wall_ns = wall
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64;
    let ns =
        |t: Instant| wall_ns.saturating_sub(now.saturating_duration_since(t).as_nanos() as u64);
    ClientSpan {
        trace_id: ids.trace_id,
        span_id: ids.span_id,
        name,
        intended_ns: ns(o.intended),
        sent_ns: ns(o.sent),
        write_ns: ns(o.write),
        first_byte_ns: o.first_byte.map(ns),
        end_ns: ns(o.end),
        status: o.status,
        error: o.error.map(str::to_string),
        reused: o.write == o.sent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracer(state: Option<&str>) -> Tracer {
        Tracer {
            sample: 1.0,
            state: state.map(str::to_string),
        }
    }

    #[test]
    fn the_headers_go_after_the_request_line_and_a_users_own_trace_is_kept() {
        let ids = SpanIds {
            trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
            span_id: "00f067aa0ba902b7".into(),
        };
        let req = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
        let out = tracer(Some("k=v")).with_headers(req, &ids).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /a HTTP/1.1\r\ntraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n\
             tracestate: k=v\r\nHost: x\r\n\r\n"
        );
        let own =
            b"GET /a HTTP/1.1\r\nHost: x\r\nTraceParent: 00-1-2-01\r\n\r\nbody traceparent: x";
        assert!(tracer(None).with_headers(own, &ids).is_none());
        // A body that mentions the header is not a header.
        let body = b"POST /a HTTP/1.1\r\nHost: x\r\n\r\ntraceparent: x";
        assert!(tracer(None).with_headers(body, &ids).is_some());
    }

    #[test]
    fn a_share_samples_about_that_share_with_fresh_nonzero_ids() {
        let t = Tracer {
            sample: 0.1,
            state: None,
        };
        let sampled: Vec<SpanIds> = (0..20_000).filter_map(|_| t.sample()).collect();
        // 2,000 expected; 5 standard deviations is ±212.
        assert!(
            (1_788..=2_212).contains(&sampled.len()),
            "{}",
            sampled.len()
        );
        assert!(sampled.iter().all(|s| s.trace_id.len() == 32
            && s.span_id.len() == 16
            && s.trace_id != "0".repeat(32)));
        assert_ne!(sampled[0].trace_id, sampled[1].trace_id);
    }
}
