//! What this process's deliveries did, for `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Attempts by outcome, counted as they end.
#[derive(Debug, Default)]
pub struct DeliveryStats {
    pub delivered: AtomicU64,
    pub http_status: AtomicU64,
    pub timeout: AtomicU64,
    pub connection: AtomicU64,
    pub gone: AtomicU64,
    /// Deliveries given up (dead-lettered).
    pub given_up: AtomicU64,
    /// Fan-out rounds or claims that failed (retried on the next round).
    pub failures: AtomicU64,
}

impl DeliveryStats {
    pub fn count(&self, outcome_label: &str) {
        let counter = match outcome_label {
            "delivered" => &self.delivered,
            "http_status" => &self.http_status,
            "timeout" => &self.timeout,
            "connection" => &self.connection,
            _ => &self.gone,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// `(outcome, attempts)` for every outcome.
    pub fn by_outcome(&self) -> [(&'static str, u64); 5] {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        [
            ("delivered", get(&self.delivered)),
            ("http_status", get(&self.http_status)),
            ("timeout", get(&self.timeout)),
            ("connection", get(&self.connection)),
            ("gone", get(&self.gone)),
        ]
    }
}
