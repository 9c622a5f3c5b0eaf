//! Other processes' commits, for the long polls of this one.
//!
//! A waiting `GET /v1/entries?wait_ms=` is woken by its tenant's head
//! ([`tally_ledger::writer::CommittedHeads`]). This process's commits move
//! it at once; several `tally serve` processes may share one database,
//! so this watcher reads the head of each tenant somebody waits for, every
//! [`WATCH_EVERY`], and tells the waiters. Its cost follows the tenants
//! with waiters, not the waiters: one read per such tenant per tick, none
//! when nobody waits.

use std::time::Duration;

use tally_ledger::writer::Writers;

/// How often the heads of watched tenants are read: the longest a long
/// poll waits for an entry another process committed.
pub const WATCH_EVERY: Duration = Duration::from_millis(200);

/// Runs for the life of the process.
pub async fn watch_other_processes(writers: Writers) {
    let mut tick = tokio::time::interval(WATCH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        for tenant in writers.heads().watched_tenants() {
            match writers.storage().head(&tenant).await {
                Ok(head) => writers.heads().advanced(&tenant, head.seq),
                Err(e) => tracing::debug!(tenant, error = %e, "reading a watched head failed"),
            }
        }
    }
}
