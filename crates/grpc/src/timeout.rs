//! The `grpc-timeout` header: a deadline as at most eight digits and a unit.

use std::time::Duration;

/// `grpc-timeout`'s value for `d`: in the finest unit whose count fits eight digits (gRPC's
/// limit), rounded up so the server's deadline is never shorter than the client's.
pub fn grpc_timeout(d: Duration) -> String {
    const MAX: u128 = 99_999_999;
    let nanos = d.as_nanos().max(1);
    for (unit, per) in [
        ("n", 1u128),
        ("u", 1_000),
        ("m", 1_000_000),
        ("S", 1_000_000_000),
        ("M", 60_000_000_000),
    ] {
        let count = nanos.div_ceil(per);
        if count <= MAX {
            return format!("{count}{unit}");
        }
    }
    format!("{}H", nanos.div_ceil(3_600_000_000_000).min(MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_take_the_finest_unit_that_fits_eight_digits() {
        assert_eq!(grpc_timeout(Duration::from_millis(50)), "50000000n");
        assert_eq!(grpc_timeout(Duration::from_millis(500)), "500000u");
        assert_eq!(grpc_timeout(Duration::from_secs(10)), "10000000u");
        assert_eq!(grpc_timeout(Duration::from_secs(1000)), "1000000m");
        assert_eq!(grpc_timeout(Duration::from_secs(200_000)), "200000S");
        assert_eq!(grpc_timeout(Duration::from_nanos(1_500)), "1500n");
        assert_eq!(grpc_timeout(Duration::ZERO), "1n");
        // A value that loses precision is rounded up, never down.
        assert_eq!(grpc_timeout(Duration::new(100, 1)), "100001m");
    }
}
