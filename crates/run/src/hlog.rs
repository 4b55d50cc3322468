//! HdrHistogram interval logs, their one writer and reader: `latency.hlog` (an interval per
//! second: latency from the intended start untagged, from the actual send tagged `service`)
//! and `histograms.hlog` (the whole run's other histograms, an interval per tag, request names
//! on `#name TAG NAME` lines). The engine, `dir` and the shards' merge all go through here.

use std::io::Write;
use std::time::Duration;

use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

/// The tag of the service latency's intervals (latency from the actual send).
pub const SERVICE_TAG: &str = "service";

/// The header of `latency.hlog` for a run that started `start_s` seconds after the epoch.
pub fn latency_header(start_s: f64) -> String {
    format!(
        "#loadlab latency log: values in microseconds; untagged = latency from the intended \
         start, Tag=service = from the actual send\n\
         #[StartTime: {start_s:.3} (seconds since epoch)]\n\
         #[BaseTime: {start_s:.3} (seconds since epoch)]\n\
         \"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n"
    )
}

/// `latency.hlog`'s lines, a second at a time: what the engine's collector and the shards'
/// merge append to.
pub struct SecondsLog {
    lines: Vec<u8>,
    serializer: V2DeflateSerializer,
}

impl Default for SecondsLog {
    fn default() -> Self {
        SecondsLog {
            lines: Vec::new(),
            serializer: V2DeflateSerializer::new(),
        }
    }
}

impl SecondsLog {
    /// An empty log.
    pub fn new() -> Self {
        SecondsLog::default()
    }

    /// Adds second `second`'s latency and service latency.
    pub fn write(&mut self, second: u64, latency: &Histogram<u64>, service: &Histogram<u64>) {
        let mut log = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.lines, &mut self.serializer)
            .expect("writes to a Vec");
        let start = Duration::from_secs(second);
        let length = Duration::from_secs(1);
        // Serializing a valid histogram into memory does not fail; if it did, the log would
        // lose one interval, never the summary.
        let _ = log.write_histogram(latency, start, length, None);
        let _ = log.write_histogram(service, start, length, Tag::new(SERVICE_TAG));
    }

    /// The lines written so far.
    pub fn into_lines(self) -> Vec<u8> {
        self.lines
    }
}

/// `histograms.hlog`: histograms of the whole run (`length` long), an interval per tag, with
/// `names` (tag, request name) on `#name` lines first; `None` when every histogram is empty.
pub fn whole_run_log(
    entries: &[(String, &Histogram<u64>)],
    names: &[(String, String)],
    length: Duration,
) -> Option<Vec<u8>> {
    let entries: Vec<&(String, &Histogram<u64>)> =
        entries.iter().filter(|(_, h)| !h.is_empty()).collect();
    if entries.is_empty() {
        return None;
    }
    let mut text = Vec::new();
    writeln!(
        text,
        "#loadlab whole-run histograms: values in microseconds, one interval per tag"
    )
    .expect("writes to a Vec");
    for (tag, name) in names {
        writeln!(text, "#name {tag} {name}").expect("writes to a Vec");
    }
    let mut serializer = V2DeflateSerializer::new();
    let mut log = IntervalLogWriterBuilder::new()
        .begin_log_with(&mut text, &mut serializer)
        .expect("writes to a Vec");
    for (tag, h) in entries {
        // Serializing a valid histogram into memory does not fail.
        let _ = log.write_histogram(*h, Duration::ZERO, length, Tag::new(tag));
    }
    Some(text)
}

/// One interval of a log, its histogram still encoded (decoded, a histogram takes hundreds of
/// KB: readers decode one at a time).
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedInterval {
    /// Its start, whole seconds from the log's base time.
    pub second: u64,
    /// Its tag (`None`: latency from the intended start).
    pub tag: Option<String>,
    /// The histogram, base64 of its compressed V2 form.
    pub encoded: String,
}

/// An interval log that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HlogError(String);

/// A log read back: its intervals and its request names.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadLog {
    /// Every interval, in order.
    pub intervals: Vec<LoggedInterval>,
    /// The `#name TAG NAME` lines, as (tag, name).
    pub names: Vec<(String, String)>,
}

/// Every interval of a log, and its request names.
pub fn read_intervals(bytes: &[u8]) -> Result<ReadLog, HlogError> {
    let text = String::from_utf8_lossy(bytes);
    let names = text
        .lines()
        .filter_map(|l| l.strip_prefix("#name "))
        .filter_map(|l| l.split_once(' '))
        .map(|(tag, name)| (tag.to_string(), name.to_string()))
        .collect();
    let mut out = Vec::new();
    for entry in IntervalLogIterator::new(bytes) {
        let entry = entry.map_err(|e| HlogError(format!("{e:?}")))?;
        let LogEntry::Interval(iv) = entry else {
            continue;
        };
        out.push(LoggedInterval {
            second: iv.start_timestamp().as_secs_f64().round() as u64,
            tag: iv.tag().map(|t| t.as_str().to_string()),
            encoded: iv.encoded_histogram().to_string(),
        });
    }
    Ok(ReadLog {
        intervals: out,
        names,
    })
}

/// Decodes a histogram as a log encodes it.
pub fn decode(encoded: &str, de: &mut Deserializer) -> Result<Histogram<u64>, HlogError> {
    use base64::Engine;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| HlogError(e.to_string()))?;
    de.deserialize(&mut raw.as_slice())
        .map_err(|e| HlogError(format!("{e:?}")))
}

/// A histogram encoded as a log encodes it: base64 of its compressed V2 form.
pub fn encode(h: &Histogram<u64>) -> String {
    use base64::Engine;
    use hdrhistogram::serialization::Serializer as _;
    let mut raw = Vec::new();
    // Serializing a valid histogram into memory does not fail; if it did, the histogram would
    // read back empty.
    let _ = V2DeflateSerializer::new().serialize(h, &mut raw);
    base64::engine::general_purpose::STANDARD.encode(raw)
}

/// Decodes a histogram [`encode`] wrote into [`crate::new_histogram`]'s bounds, so it adds to
/// the run's other histograms.
fn decode_in_run_bounds(encoded: &str) -> Result<Histogram<u64>, HlogError> {
    let h = decode(encoded, &mut Deserializer::new())?;
    let mut out = crate::new_histogram();
    out.add(&h).map_err(|e| HlogError(format!("{e:?}")))?;
    Ok(out)
}

/// Serde for a histogram field of the records (`#[serde(with = "crate::hlog::as_encoded")]`):
/// the text [`encode`] writes.
pub(crate) mod as_encoded {
    use hdrhistogram::Histogram;
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the histogram encoded.
    pub fn serialize<S: Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::encode(h))
    }

    /// Reads an encoded histogram back.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Histogram<u64>, D::Error> {
        let text = String::deserialize(d)?;
        super::decode_in_run_bounds(&text).map_err(D::Error::custom)
    }
}

/// Serde for histograms by name (`#[serde(with = "crate::hlog::as_encoded_map")]`): each name
/// with the text [`encode`] writes.
pub(crate) mod as_encoded_map {
    use std::collections::BTreeMap;

    use hdrhistogram::Histogram;
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Writes each histogram encoded, under its name.
    pub fn serialize<S: Serializer>(
        map: &BTreeMap<String, Histogram<u64>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let encoded: BTreeMap<&str, String> = map
            .iter()
            .map(|(name, h)| (name.as_str(), super::encode(h)))
            .collect();
        encoded.serialize(s)
    }

    /// Reads the encoded histograms back, by name.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, Histogram<u64>>, D::Error> {
        BTreeMap::<String, String>::deserialize(d)?
            .into_iter()
            .map(|(name, text)| {
                let h = super::decode_in_run_bounds(&text).map_err(D::Error::custom)?;
                Ok((name, h))
            })
            .collect()
    }
}

/// The untagged intervals of a log added up: the whole run's latency from the intended start.
pub fn untagged_total(bytes: &[u8]) -> Result<Histogram<u64>, HlogError> {
    let intervals = read_intervals(bytes)?.intervals;
    let mut total = crate::new_histogram();
    let mut de = Deserializer::new();
    for iv in intervals.iter().filter(|iv| iv.tag.is_none()) {
        total
            .add(&decode(&iv.encoded, &mut de)?)
            .map_err(|e| HlogError(format!("{e:?}")))?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(values: &[u64]) -> Histogram<u64> {
        let mut h = crate::new_histogram();
        for v in values {
            h.record(*v).unwrap();
        }
        h
    }

    #[test]
    fn seconds_written_read_back_by_second_and_tag_and_add_up() {
        let mut log = SecondsLog::new();
        log.write(0, &recorded(&[100, 200]), &recorded(&[90]));
        log.write(1, &recorded(&[300]), &recorded(&[80, 70]));
        let mut bytes = latency_header(1_700_000_000.0).into_bytes();
        bytes.extend(log.into_lines());
        let ReadLog { intervals, names } = read_intervals(&bytes).unwrap();
        assert!(names.is_empty());
        let shape: Vec<(u64, Option<&str>)> = intervals
            .iter()
            .map(|iv| (iv.second, iv.tag.as_deref()))
            .collect();
        assert_eq!(
            shape,
            [
                (0, None),
                (0, Some(SERVICE_TAG)),
                (1, None),
                (1, Some(SERVICE_TAG))
            ]
        );
        let total = untagged_total(&bytes).unwrap();
        assert_eq!(total.len(), 3);
        assert_eq!(total.max(), 300);
        let service = decode(&intervals[3].encoded, &mut Deserializer::new()).unwrap();
        assert_eq!(service.len(), 2);
    }

    #[test]
    fn the_whole_runs_log_names_its_requests_and_skips_empty_histograms() {
        let empty = crate::new_histogram();
        let full = recorded(&[5, 6, 7]);
        let entries = [("connect".to_string(), &empty), ("n0".to_string(), &full)];
        let names = [("n0".to_string(), "get home".to_string())];
        let bytes = whole_run_log(&entries, &names, Duration::from_secs(10)).unwrap();
        let read = read_intervals(&bytes).unwrap();
        assert_eq!(read.names, names);
        let intervals = read.intervals;
        assert_eq!(intervals.len(), 1);
        assert_eq!(intervals[0].tag.as_deref(), Some("n0"));
        assert!(whole_run_log(&entries[..1], &[], Duration::from_secs(1)).is_none());
    }

    #[test]
    fn an_encoded_histogram_reads_back_with_the_same_counts_in_the_runs_bounds() {
        let h = recorded(&[1, 250, 250, 7_000_000]);
        let back = decode_in_run_bounds(&encode(&h)).unwrap();
        assert_eq!(back.len(), 4);
        assert_eq!(back.max(), h.max());
        assert_eq!(back.count_at(250), 2);
        let mut run = crate::new_histogram();
        run.add(&back).unwrap();
        let empty = decode_in_run_bounds(&encode(&crate::new_histogram())).unwrap();
        assert!(empty.is_empty());
    }

    #[test]
    fn a_damaged_histogram_is_an_error_not_a_panic() {
        assert!(decode("not base64!", &mut Deserializer::new()).is_err());
        assert!(decode("AAAA", &mut Deserializer::new()).is_err());
    }
}
