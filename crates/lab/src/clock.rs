//! The seconds of a run's timeline that the lab's readings are filed under.

use std::time::Instant;

/// The second, counted from `start`, that holds the middle of the span from `from` to `to`:
/// a reading at the end of second k describes second k, as the timeline's row k does.
pub fn span_second(start: Instant, from: Instant, to: Instant) -> u64 {
    let mid = (from.saturating_duration_since(start) + to.saturating_duration_since(start)) / 2;
    mid.as_secs()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_reading_is_labelled_with_the_second_its_span_covers() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        // The readings of a 1 s sampler, a little late each time: each describes the second
        // it ends, not the one it was taken in.
        assert_eq!(span_second(start, at(0), at(1_003)), 0);
        assert_eq!(span_second(start, at(1_003), at(2_004)), 1);
        assert_eq!(span_second(start, at(2_004), at(3_002)), 2);
        // A last reading 600 ms into second 3 describes second 3.
        assert_eq!(span_second(start, at(3_002), at(3_602)), 3);
        // A sampler started before `start` counts from 0.
        assert_eq!(span_second(at(500), at(0), at(1_000)), 0);
    }
}
