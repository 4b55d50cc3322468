//! Flag values as users type them (counts, durations such as `10s`, rates such as `2.5k`),
//! checked when clap parses them, so a bad value is refused before anything runs.

use std::net::IpAddr;
use std::time::Duration;

use loadlab_run::plan::{MAX_RATE_RPS, MAX_SOURCE_ADDRS};
use loadlab_run::Threshold;

/// A whole number of at least 1 (connections, threads, depth).
pub fn positive_count(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err("must be a whole number of at least 1".into()),
    }
}

/// The probe's highest concurrency: 1 to 100,000.
pub fn concurrency_bound(s: &str) -> Result<usize, String> {
    match positive_count(s)? {
        n if n > 100_000 => Err("must be at most 100,000".into()),
        n => Ok(n),
    }
}

/// A whole number of at least 1, possibly large (request counts).
pub fn positive_u64(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err("must be a whole number of at least 1".into()),
    }
}

/// A duration such as `10s`, `1m30s` or `250ms`; a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        return if secs.is_finite() && secs >= 0.0 {
            Duration::try_from_secs_f64(secs).map_err(|_| "is too long".into())
        } else {
            Err("must not be negative".into())
        };
    }
    humantime::parse_duration(s).map_err(|_| "expected a duration such as 10s, 2m or 500ms".into())
}

/// A duration above zero.
pub fn positive_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => Err("must be longer than zero".into()),
        d => Ok(d),
    }
}

/// A duration of whole seconds, one or more, such as `5s` or `1m`.
pub fn whole_seconds(s: &str) -> Result<Duration, String> {
    match positive_duration(s)? {
        d if d.subsec_nanos() != 0 => Err("must be whole seconds, such as 5s or 1m".into()),
        d => Ok(d),
    }
}

/// Requests per second, such as `500` or `2.5k`.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, mult) = match t.strip_suffix(['k', 'K']) {
        Some(n) => (n, 1000.0),
        None => (t, 1.0),
    };
    num.parse::<f64>()
        .ok()
        .filter(|r| r.is_finite())
        .map(|r| r * mult)
        .ok_or_else(|| "expected requests per second, such as 500 or 2.5k".into())
}

/// A rate above zero, at most [`MAX_RATE_RPS`].
pub fn positive_rate(s: &str) -> Result<f64, String> {
    match parse_rate(s)? {
        r if r > MAX_RATE_RPS => Err("must be at most 10,000,000 requests per second".into()),
        r if r > 0.0 => Ok(r),
        _ => Err("must be more than zero requests per second".into()),
    }
}

/// A rate of zero or more, at most [`MAX_RATE_RPS`].
pub fn non_negative_rate(s: &str) -> Result<f64, String> {
    match parse_rate(s)? {
        r if r > MAX_RATE_RPS => Err("must be at most 10,000,000 requests per second".into()),
        r if r >= 0.0 => Ok(r),
        _ => Err("must not be negative".into()),
    }
}

/// CPUs' worth of time, more than zero: `2` (whole cores, pinned) or `0.25` (a quota).
pub fn cpus(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(c) if c.is_finite() && c > 0.0 && c <= 1024.0 => Ok(c),
        Ok(_) => Err("must be more than 0 and at most 1024 CPUs".into()),
        Err(_) => Err("expected a number of CPUs, such as 2 or 0.25".into()),
    }
}

/// A memory size in bytes, as Docker's `--memory` and Kubernetes' limits write it: a number
/// with an optional unit `k`, `m`, `g` (powers of 1024, as Docker reads them, in either case,
/// with or without an `i` or a `b`): `256M`, `256Mi`, `1g`, `512mb`. At least 4 MiB, the least
/// a process needs to start.
pub fn memory_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit.trim_end_matches('b').trim_end_matches('i');
    let mult: u64 = match unit {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        _ => {
            return Err(format!(
                "unknown unit in {s:?}: use k, m or g, such as 256M"
            ))
        }
    };
    let n: f64 = number
        .parse()
        .map_err(|_| format!("expected a memory size such as 256M, got {s:?}"))?;
    let bytes = n * mult as f64;
    if !bytes.is_finite() || bytes < (4u64 << 20) as f64 {
        return Err(format!(
            "{s:?} is under 4M, too little for a process to start"
        ));
    }
    Ok(bytes as u64)
}

/// Local addresses, as `--source-addr` takes them: a comma-separated list of addresses and
/// ranges (`127.0.0.2,127.0.0.5-127.0.0.9`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddrList(pub Vec<IpAddr>);

/// A comma-separated list of IP addresses and inclusive ranges `FIRST-LAST` of one family,
/// at most 65,536 addresses in all.
pub fn addr_list(s: &str) -> Result<AddrList, String> {
    let mut addrs = Vec::new();
    for item in s.split(',').map(str::trim) {
        let parse = |a: &str| {
            a.trim()
                .parse::<IpAddr>()
                .map_err(|_| format!("{a:?} is not an IP address"))
        };
        match item.split_once('-') {
            None => addrs.push(parse(item)?),
            Some((first, last)) => {
                let range = match (parse(first)?, parse(last)?) {
                    (IpAddr::V4(a), IpAddr::V4(b)) => {
                        (u128::from(u32::from(a)), u128::from(u32::from(b)))
                    }
                    (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b)),
                    _ => return Err(format!("{item:?} mixes IPv4 and IPv6")),
                };
                if range.0 > range.1 {
                    return Err(format!("{item:?} ends before it starts"));
                }
                if range.1 - range.0 >= (MAX_SOURCE_ADDRS - addrs.len()) as u128 {
                    return Err(format!("at most {MAX_SOURCE_ADDRS} addresses"));
                }
                let v4 = matches!(parse(first)?, IpAddr::V4(_));
                for n in range.0..=range.1 {
                    addrs.push(match v4 {
                        // In range: both ends are IPv4 addresses.
                        true => IpAddr::V4((n as u32).into()),
                        false => IpAddr::V6(n.into()),
                    });
                }
            }
        }
        if addrs.len() > MAX_SOURCE_ADDRS {
            return Err(format!("at most {MAX_SOURCE_ADDRS} addresses"));
        }
    }
    Ok(AddrList(addrs))
}

/// Thresholds, as `--slo` takes them: a comma-separated list (`p99<300ms,errors<1%`).
#[derive(Debug, Clone, PartialEq)]
pub struct ThresholdList(pub Vec<Threshold>);

/// Parses `--slo`'s list of thresholds.
pub fn threshold_list(s: &str) -> Result<ThresholdList, String> {
    Threshold::parse_list(s)
        .map(ThresholdList)
        .map_err(|e| e.to_string())
}

/// `--shard I/N`: shard I (from 0) of N.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardArg {
    /// The shard, from 0.
    pub index: usize,
    /// Shards in all.
    pub count: usize,
}

/// Parses `--shard I/N`, with I from 0 to N − 1.
pub fn shard_arg(s: &str) -> Result<ShardArg, String> {
    let bad = || format!("{s:?} is not a shard: give I/N with I from 0 to N-1, e.g. 0/4");
    let (i, n) = s.trim().split_once('/').ok_or_else(bad)?;
    let index: usize = i.trim().parse().map_err(|_| bad())?;
    let count: usize = n.trim().parse().map_err(|_| bad())?;
    if count == 0 || index >= count || count > loadlab_run::shard::MAX_SHARDS {
        return Err(bad());
    }
    Ok(ShardArg { index, count })
}

/// Parses `--start-at`: RFC 3339 or Unix seconds.
pub fn start_at(s: &str) -> Result<std::time::SystemTime, String> {
    loadlab_run::shard::parse_start_at(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_is_i_of_n_with_i_below_n() {
        assert_eq!(shard_arg("2/3"), Ok(ShardArg { index: 2, count: 3 }));
        for bad in ["3/3", "1", "-1/2", "0/0", "a/b", "1/2/3"] {
            assert!(shard_arg(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_accept_units_and_bare_seconds() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2.5"), Ok(Duration::from_millis(2500)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("-3").is_err());
        assert!(positive_duration("0s").is_err());
        assert_eq!(whole_seconds("1m"), Ok(Duration::from_secs(60)));
        assert!(whole_seconds("1500ms").is_err());
        assert!(whole_seconds("0s").is_err());
    }

    #[test]
    fn rates_and_counts_reject_zero_and_negatives() {
        assert_eq!(positive_rate("2.5k"), Ok(2500.0));
        assert!(positive_rate("0").is_err());
        assert!(positive_rate("-5").is_err());
        assert_eq!(non_negative_rate("0"), Ok(0.0));
        assert!(positive_count("0").is_err());
        assert!(positive_count("-1").is_err());
        assert_eq!(positive_u64("1000"), Ok(1000));
    }

    #[test]
    fn source_addresses_take_lists_and_ranges() {
        let a = addr_list("127.0.0.2, 127.0.0.5-127.0.0.7").unwrap().0;
        let want: Vec<IpAddr> = ["127.0.0.2", "127.0.0.5", "127.0.0.6", "127.0.0.7"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        assert_eq!(a, want);
        assert_eq!(addr_list("::1-::2").unwrap().0.len(), 2);
        assert_eq!(addr_list("127.0.0.255-127.0.1.0").unwrap().0.len(), 2);
        assert!(addr_list("127.0.0.9-127.0.0.2").is_err());
        assert!(addr_list("127.0.0.1-::1").is_err());
        assert!(addr_list("localhost").is_err());
        assert!(addr_list("10.0.0.0-10.255.255.255").is_err(), "too many");
    }

    #[test]
    fn a_budget_reads_cpus_and_memory_as_docker_writes_them() {
        assert_eq!(cpus("0.25"), Ok(0.25));
        assert_eq!(cpus("2"), Ok(2.0));
        for bad in ["0", "-1", "abc", "inf", "2000"] {
            assert!(cpus(bad).is_err(), "{bad}");
        }
        assert_eq!(memory_size("256M"), Ok(256 << 20));
        assert_eq!(memory_size("256Mi"), Ok(256 << 20));
        assert_eq!(memory_size("256mb"), Ok(256 << 20));
        assert_eq!(memory_size("1g"), Ok(1 << 30));
        assert_eq!(memory_size("1.5G"), Ok(3 << 29));
        assert_eq!(memory_size("8388608"), Ok(8 << 20));
        for bad in ["", "256T", "1M", "M", "12x"] {
            assert!(memory_size(bad).is_err(), "{bad}");
        }
    }
}
