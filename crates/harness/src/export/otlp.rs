//! OpenTelemetry metrics over OTLP/HTTP: a snapshot of the series as an
//! `ExportMetricsServiceRequest` protobuf. Counters are cumulative monotonic sums from the
//! run's start, gauges gauges, and latencies explicit-bucket histograms with the bounds
//! `/metrics` has (every OTLP backend takes those; exponential histograms are not converted
//! by older Prometheus receivers).

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    metric, number_data_point, AggregationTemporality, Gauge, Histogram, HistogramDataPoint,
    Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

use loadlab_report::series::{Family, Kind, Value};

/// The run's series as one export request: `resource` names the run, `start_ns` is when its
/// counters started, `at_ns` when they were read (nanoseconds since the Unix epoch).
pub fn metrics_request(
    families: &[Family],
    resource: &[(String, String)],
    start_ns: u64,
    at_ns: u64,
) -> ExportMetricsServiceRequest {
    let metrics = families
        .iter()
        .filter(|f| !f.points.is_empty())
        .map(|f| metric(f, start_ns, at_ns))
        .collect();
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(resource_of(resource)),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(scope()),
                metrics,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn metric(f: &Family, start_ns: u64, at_ns: u64) -> Metric {
    let labels = |p: &loadlab_report::series::Point| {
        attributes(p.labels.iter().map(|(k, v)| (*k, v.as_str())))
    };
    let numbers = || {
        f.points
            .iter()
            .filter_map(|p| match &p.value {
                Value::Number(v) => Some(NumberDataPoint {
                    attributes: labels(p),
                    start_time_unix_nano: start_ns,
                    time_unix_nano: at_ns,
                    value: Some(number_data_point::Value::AsDouble(*v)),
                    ..Default::default()
                }),
                Value::Histogram(_) => None,
            })
            .collect()
    };
    let data = match f.kind {
        Kind::Counter => metric::Data::Sum(Sum {
            data_points: numbers(),
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
            is_monotonic: true,
        }),
        Kind::Gauge => metric::Data::Gauge(Gauge {
            data_points: numbers(),
        }),
        Kind::Histogram => metric::Data::Histogram(Histogram {
            data_points: f
                .points
                .iter()
                .filter_map(|p| match &p.value {
                    Value::Histogram(b) => Some(HistogramDataPoint {
                        attributes: labels(p),
                        start_time_unix_nano: start_ns,
                        time_unix_nano: at_ns,
                        count: b.count,
                        sum: Some(b.sum),
                        bucket_counts: b.counts.clone(),
                        explicit_bounds: b.bounds.to_vec(),
                        ..Default::default()
                    }),
                    Value::Number(_) => None,
                })
                .collect(),
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
        }),
    };
    Metric {
        name: f.name.to_string(),
        description: f.help.to_string(),
        unit: f.unit.to_string(),
        data: Some(data),
        ..Default::default()
    }
}

/// The run's resource: its attributes as OTLP strings.
pub fn resource_of(pairs: &[(String, String)]) -> Resource {
    Resource {
        attributes: attributes(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
        ..Default::default()
    }
}

/// loadlab as the instrumentation scope of what it exports.
pub fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: "loadlab".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        ..Default::default()
    }
}

/// Key-value pairs as OTLP string attributes.
pub fn attributes<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> Vec<KeyValue> {
    pairs
        .map(|(k, v)| KeyValue {
            key: k.to_string(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(v.to_string())),
            }),
            ..Default::default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use loadlab_report::series::{Buckets, Point};

    use super::*;

    #[test]
    fn counters_are_cumulative_monotonic_sums_and_histograms_keep_their_bounds() {
        let families = vec![
            Family::single(
                "loadlab_requests_sent_total",
                Kind::Counter,
                "{request}",
                "",
                7.0,
            ),
            Family {
                name: "loadlab_latency_seconds",
                help: "",
                unit: "s",
                kind: Kind::Histogram,
                points: vec![Point {
                    labels: Vec::new(),
                    value: Value::Histogram(Buckets {
                        bounds: &[0.1, 1.0],
                        counts: vec![1, 2, 0],
                        sum: 1.2,
                        count: 3,
                    }),
                }],
            },
        ];
        let req = metrics_request(
            &families,
            &[("service.name".into(), "loadlab".into())],
            5,
            9,
        );
        let rm = &req.resource_metrics[0];
        let attr = &rm.resource.as_ref().unwrap().attributes[0];
        assert_eq!(attr.key, "service.name");
        let ms = &rm.scope_metrics[0].metrics;
        match ms[0].data.as_ref().unwrap() {
            metric::Data::Sum(s) => {
                assert!(s.is_monotonic);
                assert_eq!(
                    s.aggregation_temporality,
                    AggregationTemporality::Cumulative as i32
                );
                let p = &s.data_points[0];
                assert_eq!((p.start_time_unix_nano, p.time_unix_nano), (5, 9));
                assert_eq!(p.value, Some(number_data_point::Value::AsDouble(7.0)));
            }
            other => panic!("not a sum: {other:?}"),
        }
        match ms[1].data.as_ref().unwrap() {
            metric::Data::Histogram(h) => {
                let p = &h.data_points[0];
                assert_eq!(p.bucket_counts, vec![1, 2, 0]);
                assert_eq!(p.explicit_bounds, vec![0.1, 1.0]);
                assert_eq!((p.count, p.sum), (3, Some(1.2)));
            }
            other => panic!("not a histogram: {other:?}"),
        }
    }
}
