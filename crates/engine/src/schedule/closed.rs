//! Closed-model scheduler (scheduling layer, pure): each connection sends its next request as
//! soon as the previous ones answered, optionally pipelining, until the thread's share of the
//! request count is used up.

use std::cell::Cell;

/// The requests one thread may still start (unlimited when the run has no count).
#[derive(Debug)]
pub struct Budget {
    remaining: Cell<Option<u64>>,
}

impl Budget {
    /// A budget of `count` requests, or unlimited.
    pub fn new(count: Option<u64>) -> Self {
        Budget {
            remaining: Cell::new(count),
        }
    }

    /// Takes up to `want` requests from the budget and returns how many were granted.
    pub fn take(&self, want: usize) -> usize {
        match self.remaining.get() {
            None => want,
            Some(left) => {
                let n = left.min(want as u64);
                self.remaining.set(Some(left - n));
                n as usize
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_grants_exactly_its_count_in_pipelined_batches() {
        let b = Budget::new(Some(25));
        let granted: Vec<usize> = std::iter::from_fn(|| Some(b.take(10)))
            .take_while(|&n| n > 0)
            .collect();
        assert_eq!(granted, vec![10, 10, 5]);
        assert_eq!(b.take(1), 0);
    }

    #[test]
    fn an_unlimited_budget_grants_every_request() {
        let b = Budget::new(None);
        assert_eq!(b.take(7), 7);
        assert_eq!(b.take(7), 7);
    }
}
