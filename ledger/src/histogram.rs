//! Observations for operators: plain atomics the ledger updates as it
//! works and the API reads when it is scraped. Nothing here knows a metrics
//! format or HTTP; `tally-api` renders these (`GET /metrics`).

use std::sync::atomic::{AtomicU64, Ordering};

/// A histogram of non-negative integer observations (requests, microseconds)
/// over fixed upper bounds, updated with relaxed atomics: observing never
/// blocks and never allocates.
#[derive(Debug)]
pub struct Histogram {
    /// Upper bounds, ascending; a value `v` falls into the first bucket with
    /// `v <= bound`, or the overflow bucket after the last.
    bounds: &'static [u64],
    /// One count per bound, plus the overflow bucket (not cumulative).
    counts: Box<[AtomicU64]>,
    sum: AtomicU64,
}

/// A consistent-enough reading of a [`Histogram`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// `(upper bound, observations <= bound)`, cumulative, ascending.
    pub buckets: Vec<(u64, u64)>,
    /// Every observation (the `+Inf` bucket); always equals the sum of the
    /// bucket counts read, so `+Inf` and `count` agree in one snapshot.
    pub count: u64,
    /// Sum of the observed values (saturating).
    pub sum: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [u64]) -> Self {
        debug_assert!(bounds.windows(2).all(|w| w[0] < w[1]), "ascending bounds");
        Self {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, value: u64) {
        let i = self.bounds.partition_point(|&b| b < value);
        // `i <= bounds.len()`, and `counts` has `bounds.len() + 1` slots.
        if let Some(c) = self.counts.get(i) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        // Saturate rather than wrap: a wrapped sum would look like a reset.
        let _ = self
            .sum
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                Some(s.saturating_add(value))
            });
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = 0u64;
        let mut buckets = Vec::with_capacity(self.bounds.len());
        for (bound, count) in self.bounds.iter().zip(self.counts.iter()) {
            cumulative = cumulative.saturating_add(count.load(Ordering::Relaxed));
            buckets.push((*bound, cumulative));
        }
        let overflow = self
            .counts
            .last()
            .map(|c| c.load(Ordering::Relaxed))
            .unwrap_or(0);
        HistogramSnapshot {
            buckets,
            count: cumulative.saturating_add(overflow),
            sum: self.sum.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_inclusive() {
        static BOUNDS: [u64; 3] = [1, 10, 100];
        let h = Histogram::new(&BOUNDS);
        for v in [0, 1, 2, 10, 11, 100, 101, 5000] {
            h.observe(v);
        }
        let s = h.snapshot();
        assert_eq!(s.buckets, vec![(1, 2), (10, 4), (100, 6)]);
        assert_eq!(s.count, 8);
        assert_eq!(s.sum, 5225);
    }
}
