//! What the writers observe, for benchmarks and operators.

use std::sync::atomic::{AtomicU64, AtomicUsize};

use crate::histogram::Histogram;

/// Observations of the writers, for benchmarks and operators (`tally-api`
/// renders them at `GET /metrics`).
#[derive(Debug)]
pub struct WriterStats {
    pub groups: AtomicUsize,
    pub requests: AtomicUsize,
    /// Groups whose transaction failed (after the one retry): every caller
    /// in them got 503 and nothing was committed.
    pub failed_groups: AtomicUsize,
    /// Requests per group transaction.
    pub group_size: Histogram,
    /// Microseconds from `BEGIN` to the end of `COMMIT` (the retry included).
    pub commit_micros: Histogram,
    /// Expired holds this process released (`crate::expiry`).
    pub expired_holds_released: AtomicU64,
    /// Failures of the hold-expiry sweep: a tenant whose expired holds
    /// could not be released, or a listing of expired holds that failed.
    pub expiry_failures: AtomicU64,
    /// Requests answered by the look-up before the writer (replays and
    /// conflicts of committed entries): they never entered a group.
    pub answered_before_group: AtomicU64,
    /// Groups decided from the writer's memory alone, with no read under the
    /// head lock: while the group before them was being written
    /// (pipelining), or after it.
    pub decided_ahead: AtomicU64,
    /// Of those, groups whose write found the head moved (another process
    /// appended) or failed, and that were decided again under the lock.
    /// Not counted: a group whose write found a key taken, or decided on top
    /// of a group that did (see `key_taken_groups`).
    pub decided_ahead_redone: AtomicU64,
    /// Tenant writers stopped after `idle_after` without work.
    pub idle_writers_stopped: AtomicU64,
    /// Requests sent to the writer without their key looked up first, the
    /// look-ups before having found every key free (`super::look_up::KeyLookUps`).
    pub not_looked_up: AtomicU64,
    /// Groups whose write found one of their keys taken (a replay or a
    /// conflict not looked up, or a key taken by another process since its
    /// look-up): nothing was written, and the group was decided again with
    /// every key looked up.
    pub key_taken_groups: AtomicU64,
    /// Requests answered from the entries this process recently committed or
    /// found (`crate::recent::RecentEntries`): no writer, no database.
    pub answered_from_recent: AtomicU64,
    /// Queries of the look-up before the writer, and the keys they asked
    /// for: their ratio is how well look-ups share their query's fixed cost.
    pub look_up_queries: AtomicU64,
    pub keys_looked_up: AtomicU64,
}

/// Bounds of [`WriterStats::group_size`], in requests (`max_group` ≤ 10,000).
pub const GROUP_SIZE_BOUNDS: [u64; 12] = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000];

/// Bounds of [`WriterStats::commit_micros`], in microseconds (0.5 ms – 10 s).
pub const COMMIT_MICROS_BOUNDS: [u64; 14] = [
    500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000, 5_000_000, 10_000_000,
];

impl Default for WriterStats {
    fn default() -> Self {
        Self {
            groups: AtomicUsize::new(0),
            requests: AtomicUsize::new(0),
            failed_groups: AtomicUsize::new(0),
            group_size: Histogram::new(&GROUP_SIZE_BOUNDS),
            commit_micros: Histogram::new(&COMMIT_MICROS_BOUNDS),
            expired_holds_released: AtomicU64::new(0),
            expiry_failures: AtomicU64::new(0),
            answered_before_group: AtomicU64::new(0),
            decided_ahead: AtomicU64::new(0),
            decided_ahead_redone: AtomicU64::new(0),
            idle_writers_stopped: AtomicU64::new(0),
            not_looked_up: AtomicU64::new(0),
            key_taken_groups: AtomicU64::new(0),
            answered_from_recent: AtomicU64::new(0),
            look_up_queries: AtomicU64::new(0),
            keys_looked_up: AtomicU64::new(0),
        }
    }
}

/// Requests waiting in (or being decided by) the writers of this process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDepth {
    /// Summed over tenants.
    pub total: usize,
    /// The fullest tenant's queue (compare with `queue_capacity`).
    pub max: usize,
    /// Tenants with a writer in this process.
    pub tenants: usize,
}
