//! Sampled requests traced with W3C trace context: what a plan asks for (`--trace-sample`),
//! the client span of each sampled request, and the run's record of them (how many, and the
//! slowest, kept for the summary so a user can look them up in their tracing backend).

use serde::{Deserialize, Serialize};

/// Tracing asked for by a plan: the share of requests that carry a `traceparent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tracing {
    /// Share of requests sampled, in (0, 1].
    pub sample: f64,
    /// A `tracestate` header sent beside each `traceparent` (vendor data), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// How many of the slowest sampled requests a run keeps.
pub const SLOWEST_KEPT: usize = 10;

/// One sampled request as its client span: its IDs and times (Unix nanoseconds) and how it
/// ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientSpan {
    /// Trace ID, 32 lowercase hex digits.
    pub trace_id: String,
    /// The client span's ID, 16 lowercase hex digits (the `traceparent`'s parent ID).
    pub span_id: String,
    /// Index of its request name among the plan's (`Plan::request_names`).
    pub name: usize,
    /// When the schedule meant it to start (open model), else when it was sent.
    pub intended_ns: u64,
    /// When it was sent (before any connect).
    pub sent_ns: u64,
    /// When its bytes began to be written (after a connect, on a new connection).
    pub write_ns: u64,
    /// When the first byte of its answer came; `None` without an answer.
    pub first_byte_ns: Option<u64>,
    /// When it ended.
    pub end_ns: u64,
    /// The response's status; `None` when it failed without one.
    pub status: Option<u16>,
    /// The transport error it failed with (`ErrorKind::as_str`), if it did.
    pub error: Option<String>,
    /// Whether it went on a connection already open.
    pub reused: bool,
}

impl ClientSpan {
    /// Its latency from the intended start, milliseconds.
    pub fn latency_ms(&self) -> f64 {
        self.end_ns.saturating_sub(self.intended_ns) as f64 / 1e6
    }
}

/// A run's sampled requests: how many, and the slowest [`SLOWEST_KEPT`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceRecord {
    /// Requests sampled.
    pub sampled: u64,
    /// The slowest sampled requests, slowest first.
    pub slowest: Vec<ClientSpan>,
}

impl TraceRecord {
    /// Counts `spans` and keeps the slowest of them and of those kept before.
    pub fn add(&mut self, spans: &[ClientSpan]) {
        self.sampled += spans.len() as u64;
        self.keep_slowest(spans);
    }

    /// Adds another record (a shard's): its count, and the slowest of both.
    pub fn merge(&mut self, other: &TraceRecord) {
        self.sampled += other.sampled;
        self.keep_slowest(&other.slowest);
    }

    /// Keeps the slowest of `spans` and of those kept before.
    fn keep_slowest(&mut self, spans: &[ClientSpan]) {
        self.slowest.extend(spans.iter().cloned());
        self.slowest
            .sort_by(|a, b| b.latency_ms().total_cmp(&a.latency_ms()));
        self.slowest.truncate(SLOWEST_KEPT);
    }
}

/// A `traceparent` header's value for a sampled request (version 00, flags 01).
pub fn traceparent(trace_id: &str, span_id: &str) -> String {
    format!("00-{trace_id}-{span_id}-01")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(latency_ms: u64) -> ClientSpan {
        ClientSpan {
            trace_id: format!("{latency_ms:032x}"),
            span_id: format!("{latency_ms:016x}"),
            name: 0,
            intended_ns: 1_000,
            sent_ns: 1_000,
            write_ns: 1_000,
            first_byte_ns: None,
            end_ns: 1_000 + latency_ms * 1_000_000,
            status: Some(200),
            error: None,
            reused: true,
        }
    }

    #[test]
    fn the_record_counts_every_span_and_keeps_the_slowest() {
        let mut r = TraceRecord::default();
        r.add(&(0..8).map(span).collect::<Vec<_>>());
        r.add(&(20..28).map(span).collect::<Vec<_>>());
        assert_eq!(r.sampled, 16);
        let kept: Vec<f64> = r.slowest.iter().map(ClientSpan::latency_ms).collect();
        assert_eq!(
            kept,
            [27.0, 26.0, 25.0, 24.0, 23.0, 22.0, 21.0, 20.0, 7.0, 6.0]
        );
        assert_eq!(
            traceparent(&r.slowest[0].trace_id, &r.slowest[0].span_id),
            "00-0000000000000000000000000000001b-000000000000001b-01"
        );
    }
}
