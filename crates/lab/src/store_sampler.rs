//! Readings of a watched Redis server, taken on the sampler's ticks (lab → run): commands per
//! second, memory and clients from `INFO`, and each stream's length, consumer-group pending
//! count and lag, so a queue's backlog sits on the same per-second timeline as the CPU.

use std::time::{Duration, Instant};

use loadlab_run::{StoreSample, StoreSeries, StreamReading};
use redis::{Connection, Value};

/// Longest wait for the server to connect or answer one reading; a reading that fails is
/// skipped, and the next one connects anew.
const READ_TIMEOUT: Duration = Duration::from_millis(500);

/// Most stream keys looked at per reading.
const MAX_STREAMS: usize = 64;

/// One watched Redis server and what it read last.
pub struct StoreReader {
    client: redis::Client,
    conn: Option<Connection>,
    series: StoreSeries,
    /// `total_commands_processed` and when, at the previous reading.
    previous: Option<(u64, Instant)>,
}

impl StoreReader {
    /// A reader of the server at `url` (not connected yet); a URL that is not Redis's is
    /// refused with why.
    pub fn new(url: &str) -> Result<StoreReader, String> {
        let client =
            redis::Client::open(url).map_err(|e| format!("{url:?} is not a Redis URL: {e}"))?;
        let info = client.get_connection_info();
        let name = format!("redis {}", info.addr());
        Ok(StoreReader {
            client,
            conn: None,
            series: StoreSeries {
                name,
                samples: Vec::new(),
            },
            previous: None,
        })
    }

    /// Takes one reading and returns it, its second counted from `start` (that of the span
    /// since the previous reading); the first only sets the command counter's start.
    pub fn read(&mut self, start: Instant) -> Option<&StoreSample> {
        match self.try_read(start) {
            Ok(Some(sample)) => {
                self.series.samples.push(sample);
                self.series.samples.last()
            }
            Ok(None) => None,
            Err(_) => {
                self.conn = None;
                None
            }
        }
    }

    /// What the store is called: `redis 127.0.0.1:PORT`.
    pub fn name(&self) -> &str {
        &self.series.name
    }

    /// Every reading taken.
    pub fn finish(self) -> StoreSeries {
        self.series
    }

    fn try_read(&mut self, start: Instant) -> redis::RedisResult<Option<StoreSample>> {
        if self.conn.is_none() {
            let c = self.client.get_connection_with_timeout(READ_TIMEOUT)?;
            c.set_read_timeout(Some(READ_TIMEOUT))?;
            c.set_write_timeout(Some(READ_TIMEOUT))?;
            self.conn = Some(c);
        }
        let conn = self.conn.as_mut().expect("connected above");
        let info: String = redis::cmd("INFO").query(conn)?;
        let now = Instant::now();
        let field = |key: &str| info_field(&info, key);
        let total = field("total_commands_processed").unwrap_or(0.0) as u64;
        let (streams, own_commands) = read_streams(conn)?;
        let previous = self.previous.replace((total, now));
        let Some((before, at)) = previous else {
            return Ok(None);
        };
        // The reading's own commands (INFO, SCAN, XLEN, XINFO) are not the service's: the
        // counter includes the previous reading's, which ran after its INFO.
        let service = total.saturating_sub(before).saturating_sub(own_commands);
        let secs = now.duration_since(at).as_secs_f64().max(1e-3);
        Ok(Some(StoreSample {
            second: crate::clock::span_second(start, at, now),
            commands_per_s: service as f64 / secs,
            memory_mb: field("used_memory").unwrap_or(0.0) / (1024.0 * 1024.0),
            clients: field("connected_clients").unwrap_or(0.0) as u64,
            streams,
        }))
    }
}

/// A numeric `key:value` line of an INFO reply.
fn info_field(info: &str, key: &str) -> Option<f64> {
    info.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

/// Each stream's length, pending entries (summed over its groups) and lag (the largest of
/// its groups'), and the number of commands the reading sent.
fn read_streams(conn: &mut Connection) -> redis::RedisResult<(Vec<StreamReading>, u64)> {
    let (mut keys, scans) = scan_keys(conn, &["TYPE", "stream"], MAX_STREAMS)?;
    let mut commands = 1 + scans; // the INFO before, and the SCANs
    keys.sort();
    keys.truncate(MAX_STREAMS);
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let length: u64 = redis::cmd("XLEN").arg(&key).query(conn)?;
        let (pending, lag) = groups_backlog(conn, &key)?;
        commands += 2;
        out.push(StreamReading {
            stream: key,
            length,
            pending,
            lag,
        });
    }
    Ok((out, commands))
}

/// The keys `SCAN` finds with `filter` (`MATCH p` or `TYPE t`), stopping once it has `limit`,
/// and the number of SCAN commands sent.
pub(crate) fn scan_keys(
    conn: &mut Connection,
    filter: &[&str],
    limit: usize,
) -> redis::RedisResult<(Vec<String>, u64)> {
    let (mut keys, mut cursor, mut commands) = (Vec::new(), 0u64, 0);
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg(filter)
            .arg("COUNT")
            .arg(1000)
            .query(conn)?;
        commands += 1;
        keys.extend(batch);
        cursor = next;
        if cursor == 0 || keys.len() >= limit {
            return Ok((keys, commands));
        }
    }
}

/// A stream's entries delivered to its consumer groups and not acknowledged (summed over the
/// groups), and the entries not yet delivered (the largest lag of its groups, when known).
pub(crate) fn groups_backlog(
    conn: &mut Connection,
    key: &str,
) -> redis::RedisResult<(u64, Option<u64>)> {
    let groups: Value = redis::cmd("XINFO").arg("GROUPS").arg(key).query(conn)?;
    let (mut pending, mut lag) = (0, None);
    if let Value::Array(groups) = groups {
        for g in groups {
            pending += group_field(&g, "pending").unwrap_or(0);
            if let Some(l) = group_field(&g, "lag") {
                lag = Some(lag.map_or(l, |m: u64| m.max(l)));
            }
        }
    }
    Ok((pending, lag))
}

/// A numeric field of one group in an `XINFO GROUPS` reply (a flat key/value array in RESP2,
/// a map in RESP3).
fn group_field(group: &Value, key: &str) -> Option<u64> {
    let pairs: Vec<(&Value, &Value)> = match group {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|c| Some((&c[0], c.get(1)?)))
            .collect(),
        Value::Map(items) => items.iter().map(|(k, v)| (k, v)).collect(),
        _ => return None,
    };
    pairs.into_iter().find_map(|(k, v)| {
        let name = match k {
            Value::BulkString(b) => std::str::from_utf8(b).ok()?,
            Value::SimpleString(s) => s.as_str(),
            _ => return None,
        };
        if name != key {
            return None;
        }
        match v {
            Value::Int(n) => u64::try_from(*n).ok(),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_are_read_by_key() {
        let info = "# Stats\r\ntotal_commands_processed:42\r\nused_memory:1048576\r\n";
        assert_eq!(info_field(info, "total_commands_processed"), Some(42.0));
        assert_eq!(info_field(info, "used_memory"), Some(1048576.0));
        assert_eq!(info_field(info, "missing"), None);
    }
}
