//! The release of expired holds, by the server itself.
//!
//! Every `tally serve` process sweeps; none coordinates with the others.
//! Exactly-once comes from the ledger, not from the sweepers: each expired
//! hold gets the same intent everywhere (`Intent::expiry_release`, keyed by
//! the hold), the UNIQUE key lets one entry through, and the hold's state,
//! read under the tenant's head lock, turns a sweep that lost a race with a
//! capture or release into a no-op.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::StreamExt;

use crate::decide::Decision;
use crate::intent::Intent;
use crate::store::now_micros;
use crate::writer::Writers;
use crate::LedgerError;

/// Holds released per tenant and sweep at most; the rest wait for the next tick.
pub const SWEEP_BATCH: i64 = 1_000;

/// Tenants whose expired holds are being released at once.
const SWEEP_TENANTS_AT_ONCE: usize = 16;

/// Releases the holds that have expired; returns how many this call released.
///
/// Tenants are independent: a tenant whose holds cannot be released (its
/// stored state does not read, its writer fails) is logged and counted in
/// [`crate::writer::WriterStats::expiry_failures`], and the other tenants
/// are released all the same; that tenant is tried again next tick. The listing
/// takes at most [`SWEEP_BATCH`] holds per tenant, so a tenant that keeps
/// failing never fills the batch of the others.
pub async fn sweep_expired_holds(writers: &Writers) -> Result<usize, LedgerError> {
    let expired = writers
        .storage()
        .expired_holds(now_micros(), SWEEP_BATCH)
        .await?;
    let mut by_tenant: BTreeMap<String, Vec<Intent>> = BTreeMap::new();
    for (tenant, hold_id) in expired {
        by_tenant
            .entry(tenant)
            .or_default()
            .push(Intent::expiry_release(&hold_id));
    }
    // Tenants are released side by side (each by its own writer), so a
    // slow or stuck tenant does not hold the others up either.
    let released = futures_util::stream::iter(by_tenant)
        .map(|(tenant, intents)| release_tenant(writers, tenant, intents))
        .buffer_unordered(SWEEP_TENANTS_AT_ONCE)
        .fold(0, |total, n| async move { total + n })
        .await;
    Ok(released)
}

/// Releases one tenant's expired holds; how many it released. A failure
/// is logged with the tenant and counted, never returned.
async fn release_tenant(writers: &Writers, tenant: String, intents: Vec<Intent>) -> usize {
    let holds = intents.len();
    match writers.decide_all(&tenant, intents).await {
        Ok(decisions) => {
            let released = decisions
                .iter()
                .filter(|d| matches!(d, Decision::Created(_)))
                .count();
            writers
                .stats()
                .expired_holds_released
                .fetch_add(released as u64, Ordering::Relaxed);
            released
        }
        Err(e) => {
            writers
                .stats()
                .expiry_failures
                .fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                tenant = tenant.as_str(),
                holds,
                error = %e,
                "could not release this tenant's expired holds; other tenants go on, this one is retried next tick"
            );
            0
        }
    }
}

/// Sweeps every `interval` until the process ends. Errors are logged,
/// counted and retried on the next tick: an expired hold is only released
/// late, never lost.
pub async fn run_hold_expiry(writers: Writers, interval: Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match sweep_expired_holds(&writers).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(released = n, "released expired holds"),
            Err(e) => {
                writers
                    .stats()
                    .expiry_failures
                    .fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "hold expiry sweep failed; retrying next tick")
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::store::Storage;
    use crate::test_databases::TestDb;

    /// A tenant with more expired holds than a batch (say, one whose holds
    /// cannot be released, so they stay) leaves room for every other tenant.
    #[tokio::test]
    async fn the_listing_takes_a_batch_per_tenant() {
        for db in TestDb::every_engine(2).await {
            let mut rows = Vec::new();
            for (tenant, hold, at) in [
                ("a", "h1", "2026-01-01T00:00:00.000000Z"),
                ("a", "h2", "2026-01-01T00:00:01.000000Z"),
                ("a", "h3", "2026-01-01T00:00:02.000000Z"),
                ("b", "h1", "2026-01-01T00:00:03.000000Z"),
            ] {
                rows.push(format!(
                    "INSERT INTO rule_state (tenant_id, kind, key, value, expires_at) \
                     VALUES ('{tenant}', 'hold', '{hold}', '{{}}', '{at}')"
                ));
            }
            for sql in &rows {
                match &db.storage {
                    Storage::Sqlite(s) => sqlx::query(sql).execute(&s.pool).await.map(|_| ()),
                    Storage::Postgres(s) => sqlx::query(sql).execute(&s.pool).await.map(|_| ()),
                }
                .unwrap();
            }
            let listed = db
                .storage
                .expired_holds(chrono::Utc::now(), 2)
                .await
                .unwrap();
            let pair = |t: &str, h: &str| (t.to_owned(), h.to_owned());
            assert_eq!(
                listed,
                vec![pair("a", "h1"), pair("a", "h2"), pair("b", "h1")],
                "{}",
                db.engine()
            );
            db.remove().await;
        }
    }
}
