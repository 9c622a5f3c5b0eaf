//! The usage projector: rounds that fold the entries after the checkpoint
//! and add them to the summaries, and the loop of `tally serve` that runs
//! them for every tenant that is behind.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tally_ledger::store::{EngineRef, ReaderLag, Storage, UsageEntries};
use tally_ledger::LedgerError;

use super::engine::{fold_usage_part, take_back_reversals, usage_checkpoint, write_usage};
use super::fold::USAGE_PROJECTOR;
use super::rows::{Written, USAGE_PAGE};

/// One projector round: folds at most `max_entries` entries after the
/// checkpoint and adds them to the summaries, checkpoint and rows in one
/// transaction. Returns the checkpoint after the round (another process's,
/// if it got there first; then this round wrote nothing).
pub async fn project_usage(
    storage: &Storage,
    tenant: &str,
    max_entries: i64,
) -> Result<i64, LedgerError> {
    let checkpoint = usage_checkpoint(storage, tenant).await?;
    // Entries up to the head are committed (the head moves in the same
    // transaction), so the round may stop at the head without reading the
    // entries that carry no usage.
    let head = storage.head(tenant).await?.seq;
    if head <= checkpoint {
        return Ok(checkpoint);
    }
    let new_checkpoint = head.min(checkpoint.saturating_add(max_entries.max(1)));
    let (mut delta, reversals) = fold_usage_part(
        storage,
        tenant,
        checkpoint,
        new_checkpoint,
        UsageEntries::All,
    )
    .await?;
    take_back_reversals(storage, tenant, &reversals, &mut delta).await?;
    match write_usage(storage, tenant, Some(checkpoint), new_checkpoint, &delta).await? {
        Written::Done => Ok(new_checkpoint),
        Written::Stale(seq) => {
            tracing::debug!(
                tenant,
                read = checkpoint,
                found = seq,
                "usage checkpoint moved by another projector; round dropped"
            );
            Ok(seq)
        }
    }
}

/// Projects `tenant` up to the head it has when called. Returns the
/// checkpoint reached.
pub async fn project_usage_to_head(storage: &Storage, tenant: &str) -> Result<i64, LedgerError> {
    let head = storage.head(tenant).await?.seq;
    let mut checkpoint = usage_checkpoint(storage, tenant).await?;
    let page = match storage.engine() {
        EngineRef::Sqlite(_) => super::sqlite::USAGE_PAGE,
        EngineRef::Postgres(_) => USAGE_PAGE,
    };
    while checkpoint < head {
        let next = project_usage(storage, tenant, page).await?;
        if next == checkpoint {
            // The log ends before the head we read: nothing to fold.
            break;
        }
        checkpoint = next;
    }
    Ok(checkpoint)
}

/// Tenants whose usage checkpoint is behind their head: tenant ids only
/// (the ledger's [`Storage::tenants_behind`], the projector's one query
/// that spans tenants; docs/scaling.md). Each tenant's entries are then
/// read by queries that name the tenant.
pub async fn usage_lagging_tenants(storage: &Storage) -> Result<Vec<String>, LedgerError> {
    storage.tenants_behind(USAGE_PROJECTOR).await
}

/// How far the usage projection is behind, over every tenant.
pub type UsageLag = ReaderLag;

/// The usage projection's lag as one row: an aggregate over the heads and
/// checkpoints, so a scrape reads two numbers however many tenants lag.
pub async fn usage_lags(storage: &Storage) -> Result<UsageLag, LedgerError> {
    storage.reader_lag(USAGE_PROJECTOR).await
}

/// The usage projector of `tally serve`: every `every`, projects every
/// tenant that is behind up to its head. Errors are logged and retried on
/// the next tick; the task never ends on its own.
pub async fn run_usage_projector(storage: Storage, every: Duration, stats: Arc<ProjectorStats>) {
    // The first round runs one interval after start, not at once.
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let tenants = match usage_lagging_tenants(&storage).await {
            Ok(t) => t,
            Err(e) => {
                stats.failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "usage projection failed; will retry");
                continue;
            }
        };
        // A tenant that fails does not hold up the others.
        for tenant in tenants {
            if let Err(e) = project_usage_to_head(&storage, &tenant).await {
                stats.failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(tenant, error = %e, "usage projection failed; will retry");
            }
        }
        stats.rounds.fetch_add(1, Ordering::Relaxed);
    }
}

/// Observations of this process's usage projector, for operators (the lag
/// itself is read from the database: [`usage_lags`]).
#[derive(Debug, Default)]
pub struct ProjectorStats {
    /// Rounds completed (failed tenants included).
    pub rounds: AtomicU64,
    /// Failed reads of the lagging tenants and failed tenant projections;
    /// each is retried next round.
    pub failures: AtomicU64,
}
