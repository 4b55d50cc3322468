//! OpenTelemetry traces over OTLP/HTTP: the client spans of a second's sampled requests as
//! an `ExportTraceServiceRequest` protobuf. A span starts at the request's intended start, so
//! its length is the latency loadlab records; its events mark the send, the first write
//! (after a connect on a new connection) and the first byte of the answer.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{
    span, status, ResourceSpans, ScopeSpans, Span, Status,
};

use loadlab_run::ClientSpan;

use super::otlp::{attributes, resource_of, scope};

/// `spans` as one export request; `names` gives each request name index its (name, method),
/// `resource` names the run.
pub fn traces_request(
    spans: &[ClientSpan],
    names: &[(String, String)],
    resource: &[(String, String)],
) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource_of(resource)),
            scope_spans: vec![ScopeSpans {
                scope: Some(scope()),
                spans: spans.iter().map(|s| client_span(s, names)).collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// Hex digits as bytes; empty when they are not hex.
fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16))
        .collect::<Result<_, _>>()
        .unwrap_or_default()
}

fn value(v: any_value::Value) -> Option<AnyValue> {
    Some(AnyValue { value: Some(v) })
}

fn client_span(s: &ClientSpan, names: &[(String, String)]) -> Span {
    let (name, method) = names
        .get(s.name)
        .cloned()
        .unwrap_or_else(|| (String::new(), String::new()));
    // HTTP client spans are named by their method, and the request's name when it has one
    // that is not already "METHOD path".
    let span_name = if name.is_empty() || name.starts_with(&format!("{method} ")) {
        if name.is_empty() {
            method.clone()
        } else {
            name.clone()
        }
    } else {
        format!("{method} {name}")
    };
    let mut attrs = attributes(
        [
            ("http.request.method", method.as_str()),
            ("loadlab.request.name", name.as_str()),
        ]
        .into_iter(),
    );
    attrs.push(KeyValue {
        key: "loadlab.connection.reused".into(),
        value: value(any_value::Value::BoolValue(s.reused)),
        ..Default::default()
    });
    if let Some(code) = s.status {
        attrs.push(KeyValue {
            key: "http.response.status_code".into(),
            value: value(any_value::Value::IntValue(i64::from(code))),
            ..Default::default()
        });
    }
    if let Some(e) = &s.error {
        attrs.extend(attributes(std::iter::once(("error.type", e.as_str()))));
    }
    let event = |name: &str, at: u64| span::Event {
        time_unix_nano: at,
        name: name.into(),
        ..Default::default()
    };
    let mut events = vec![event("send", s.sent_ns)];
    if s.write_ns != s.sent_ns {
        events.push(event("write", s.write_ns));
    }
    events.extend(s.first_byte_ns.map(|t| event("first_byte", t)));
    // A client span is an error on a transport failure or a 4xx/5xx answer.
    let failed = s.error.is_some() || s.status.is_some_and(|c| c >= 400);
    Span {
        trace_id: hex_bytes(&s.trace_id),
        span_id: hex_bytes(&s.span_id),
        name: span_name,
        kind: span::SpanKind::Client as i32,
        start_time_unix_nano: s.intended_ns,
        end_time_unix_nano: s.end_ns,
        attributes: attrs,
        events,
        status: Some(Status {
            code: if failed {
                status::StatusCode::Error
            } else {
                status::StatusCode::Unset
            } as i32,
            message: s.error.clone().unwrap_or_default(),
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sampled_request_is_a_client_span_from_its_intended_start_with_its_times_as_events() {
        let s = ClientSpan {
            trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
            span_id: "00f067aa0ba902b7".into(),
            name: 1,
            intended_ns: 1_000,
            sent_ns: 1_500,
            write_ns: 2_000,
            first_byte_ns: Some(5_000),
            end_ns: 6_000,
            status: Some(503),
            error: None,
            reused: false,
        };
        let names = [
            ("a".to_string(), "GET".to_string()),
            ("/b".to_string(), "POST".to_string()),
        ];
        let req = traces_request(&[s], &names, &[("service.name".into(), "loadlab".into())]);
        let span = &req.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(span.name, "POST /b");
        assert_eq!(span.trace_id.len(), 16);
        assert_eq!(span.trace_id[0], 0x4b);
        assert_eq!(
            span.span_id,
            [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]
        );
        assert_eq!(span.kind, span::SpanKind::Client as i32);
        assert_eq!(
            (span.start_time_unix_nano, span.end_time_unix_nano),
            (1_000, 6_000)
        );
        let events: Vec<(&str, u64)> = span
            .events
            .iter()
            .map(|e| (e.name.as_str(), e.time_unix_nano))
            .collect();
        assert_eq!(
            events,
            [("send", 1_500), ("write", 2_000), ("first_byte", 5_000)]
        );
        assert_eq!(
            span.status.as_ref().unwrap().code,
            status::StatusCode::Error as i32
        );
        assert!(span
            .attributes
            .iter()
            .any(|kv| kv.key == "http.response.status_code"
                && kv.value == value(any_value::Value::IntValue(503))));
    }
}
