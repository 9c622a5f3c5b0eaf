//! Throughput and latency of one measured run.

use std::future::Future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::workload::Rng;

#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Entries (rows) written or replayed.
    pub rows: u64,
    /// Requests (or transactions) issued.
    pub requests: u64,
    pub errors: u64,
    pub elapsed: Duration,
    /// One latency per request, in microseconds.
    pub latencies_us: Vec<u64>,
    /// The same, of the single POSTs answered 201 (posted) and 200
    /// (replayed): in a mix, the two sides of the mean latency that sets
    /// the rate of a fixed number of clients.
    pub posted_us: Vec<u64>,
    pub replayed_us: Vec<u64>,
}

impl Stats {
    pub fn merge(&mut self, other: Stats) {
        self.rows += other.rows;
        self.requests += other.requests;
        self.errors += other.errors;
        self.latencies_us.extend(other.latencies_us);
        self.posted_us.extend(other.posted_us);
        self.replayed_us.extend(other.replayed_us);
    }

    pub fn rows_per_sec(&self) -> f64 {
        self.rows as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn percentile_ms(&mut self, p: f64) -> f64 {
        percentile_ms(&mut self.latencies_us, p)
    }
}

/// The `p` quantile of `latencies_us`, in ms; 0 when there are none.
pub fn percentile_ms(latencies_us: &mut [u64], p: f64) -> f64 {
    if latencies_us.is_empty() {
        return 0.0;
    }
    latencies_us.sort_unstable();
    let idx = ((latencies_us.len() as f64 - 1.0) * p).round() as usize;
    latencies_us[idx] as f64 / 1_000.0
}

/// Mean of `latencies_us`, in ms; 0 when there are none.
pub fn mean_ms(latencies_us: &[u64]) -> f64 {
    if latencies_us.is_empty() {
        return 0.0;
    }
    latencies_us.iter().sum::<u64>() as f64 / latencies_us.len() as f64 / 1_000.0
}

/// Runs `clients` tasks until `duration` has passed and merges their
/// figures. Task `c` gets its own seeded generator and the deadline; the
/// HTTP load and the raw SQL baseline share this driver, so both are timed
/// the same way.
pub async fn drive<F, Fut>(clients: usize, duration: Duration, task: F) -> Stats
where
    F: Fn(Rng, Instant) -> Fut,
    Fut: Future<Output = Stats> + Send + 'static,
{
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = (0..clients)
        .map(|c| tokio::spawn(task(Rng::new(seed ^ ((c as u64 + 1) << 32)), deadline)))
        .collect();
    let mut total = Stats::default();
    for t in tasks {
        if let Ok(s) = t.await {
            total.merge(s);
        }
    }
    total.elapsed = started.elapsed();
    total
}
