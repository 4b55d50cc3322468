//! Prometheus remote write 1.0: a snapshot of the series as a `WriteRequest` protobuf,
//! snappy-compressed (block format), with one sample per series stamped with the snapshot's
//! time.

use loadlab_report::series::{Family, Value};

// The remote-write messages are four small protobuf types (Prometheus' `prompb/types.proto`
// and `remote.proto`). No maintained crate publishes them on their own, so they are declared
// here with prost's derive, with the field numbers the protocol fixes.

/// `prometheus.WriteRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WriteRequest {
    /// The series, each with its samples.
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

/// `prometheus.TimeSeries`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeSeries {
    /// Labels, sorted by name, `__name__` among them.
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    /// Samples in time order.
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
}

/// `prometheus.Label`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    /// Label name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Label value.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `prometheus.Sample`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// The value.
    #[prost(double, tag = "1")]
    pub value: f64,
    /// Milliseconds since the Unix epoch.
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// The series of `families` as a write request: each point one series with the run's
/// `common` labels added, a histogram as its `_bucket` (cumulative, `le`), `_sum` and
/// `_count` series, as Prometheus keeps classic histograms.
pub fn write_request(families: &[Family], common: &[(String, String)], at_ms: i64) -> WriteRequest {
    let mut timeseries = Vec::new();
    let mut push = |name: String, labels: Vec<(String, String)>, value: f64| {
        let mut labels: Vec<Label> = std::iter::once(("__name__".to_string(), name))
            .chain(common.iter().cloned())
            .chain(labels)
            .map(|(name, value)| Label { name, value })
            .collect();
        labels.sort_by(|a, b| a.name.cmp(&b.name));
        labels.dedup_by(|a, b| a.name == b.name);
        timeseries.push(TimeSeries {
            labels,
            samples: vec![Sample {
                value,
                timestamp: at_ms,
            }],
        });
    };
    for f in families {
        for p in &f.points {
            let own: Vec<(String, String)> = p
                .labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect();
            match &p.value {
                Value::Number(v) => push(f.name.to_string(), own, *v),
                Value::Histogram(b) => {
                    let mut below = 0u64;
                    let bounds = b.bounds.iter().map(f64::to_string);
                    let edges = bounds.chain(std::iter::once("+Inf".to_string()));
                    for (le, n) in edges.zip(&b.counts) {
                        below += n;
                        let mut with_le = own.clone();
                        with_le.push(("le".into(), le));
                        push(format!("{}_bucket", f.name), with_le, below as f64);
                    }
                    push(format!("{}_sum", f.name), own.clone(), b.sum);
                    push(format!("{}_count", f.name), own, b.count as f64);
                }
            }
        }
    }
    WriteRequest { timeseries }
}

/// The body of a remote-write request: the message's protobuf, snappy-compressed.
pub fn body(request: &WriteRequest) -> Vec<u8> {
    let bytes = prost::Message::encode_to_vec(request);
    // Compressing a buffer in memory cannot fail but for a buffer over snappy's 4 GB bound.
    snap::raw::Encoder::new()
        .compress_vec(&bytes)
        .unwrap_or_default()
}

/// Headers the protocol asks for, besides the user's.
pub const HEADERS: [(&str, &str); 3] = [
    ("Content-Encoding", "snappy"),
    ("Content-Type", "application/x-protobuf"),
    ("X-Prometheus-Remote-Write-Version", "0.1.0"),
];

#[cfg(test)]
mod tests {
    use loadlab_report::series::{Buckets, Kind, Point};

    use super::*;

    #[test]
    fn a_histogram_becomes_cumulative_buckets_sum_and_count_with_sorted_labels() {
        let fam = Family {
            name: "loadlab_latency_seconds",
            help: "",
            unit: "s",
            kind: Kind::Histogram,
            points: vec![Point {
                labels: vec![("name", "home".into())],
                value: Value::Histogram(Buckets {
                    bounds: &[0.1],
                    counts: vec![3, 1],
                    sum: 0.5,
                    count: 4,
                }),
            }],
        };
        let req = write_request(
            &[fam],
            &[("job".into(), "loadlab".into())],
            1_700_000_000_000,
        );
        let series: Vec<(String, f64)> = req
            .timeseries
            .iter()
            .map(|t| {
                let names: Vec<&str> = t.labels.iter().map(|l| l.name.as_str()).collect();
                let mut sorted = names.clone();
                sorted.sort();
                assert_eq!(names, sorted);
                let text = t
                    .labels
                    .iter()
                    .map(|l| format!("{}={}", l.name, l.value))
                    .collect::<Vec<_>>()
                    .join(",");
                (text, t.samples[0].value)
            })
            .collect();
        assert_eq!(
            series,
            vec![
                (
                    "__name__=loadlab_latency_seconds_bucket,job=loadlab,le=0.1,name=home".into(),
                    3.0
                ),
                (
                    "__name__=loadlab_latency_seconds_bucket,job=loadlab,le=+Inf,name=home".into(),
                    4.0
                ),
                (
                    "__name__=loadlab_latency_seconds_sum,job=loadlab,name=home".into(),
                    0.5
                ),
                (
                    "__name__=loadlab_latency_seconds_count,job=loadlab,name=home".into(),
                    4.0
                ),
            ]
        );
        let back = snap::raw::Decoder::new()
            .decompress_vec(&body(&req))
            .unwrap();
        let decoded: WriteRequest = prost::Message::decode(back.as_slice()).unwrap();
        assert_eq!(decoded, req);
    }
}
