//! The per-tenant writer (SPEC §6): every entry request of a tenant goes through one
//! task that takes whatever is waiting and decides it in one transaction.
//!
//! Under load, requests that arrive while a group commits form the next
//! group, so the number of transactions grows far slower than the number of
//! requests. Everything is bounded: entry requests waiting per tenant
//! (`queue_capacity`, beyond which callers get [`LedgerError::Overloaded`] at
//! once instead of memory growing), entry requests per transaction (`max_group`),
//! the optional wait for more requests (`linger`), and the tenants with a
//! writer: one idle for `idle_after` stops, and with it the balances it
//! remembered, so memory follows the tenants that are active, not every
//! tenant ever seen.

mod config;
mod group_loop;
mod heads;
mod look_up;
mod registry;
mod retry;
mod stats;
#[cfg(test)]
mod tests;

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use tokio::sync::oneshot;

use crate::decide::Decision;
use crate::group::MemoryBudget;
use crate::group::RoundCommitter;
use crate::request::EntryRequest;
use crate::LedgerError;
use look_up::KeyTaken;

pub use config::{
    default_committers, WriterConfig, DEFAULT_IDLE_AFTER, DEFAULT_SKIP_LOOK_UPS_AFTER,
};
pub use heads::CommittedHeads;
pub use registry::Queued;
pub use registry::Writers;
pub use stats::{QueueDepth, WriterStats, COMMIT_MICROS_BOUNDS, GROUP_SIZE_BOUNDS};

/// Where the decisions of one job go.
type Reply = oneshot::Sender<Result<Vec<Decision>, LedgerError>>;

/// Entry requests submitted together (one HTTP request) and where their answers go.
struct Job {
    requests: Vec<EntryRequest>,
    /// Per request, once looked up before the writer: its key held no entry.
    absent: Vec<bool>,
    reply: Reply,
}

/// What a tenant's look-up task and writer share.
struct Stage {
    /// Requests queued or being decided; bounded by `queue_capacity`.
    pending: Arc<AtomicUsize>,
    config: WriterConfig,
    stats: Arc<WriterStats>,
    /// The writer reports a group that found a key taken; the look-up task
    /// then looks keys up again.
    key_taken: KeyTaken,
    /// The rounds its groups commit in, shared with the other tenants:
    /// the only way a group commits.
    commits: RoundCommitter,
    /// What every writer of the process may remember, together.
    budget: Arc<MemoryBudget>,
    /// Told the tenant's new head after each commit.
    heads: CommittedHeads,
}
