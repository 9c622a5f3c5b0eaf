//! The release of expired holds, by the server itself.
//!
//! Every `tally serve` process sweeps; none coordinates with the others.
//! Exactly-once comes from the ledger, not from the sweepers: each expired
//! hold gets the same request everywhere (`EntryRequest::expiry_release`, keyed by
//! the hold), the UNIQUE key lets one entry through, and the hold's state,
//! read under the tenant's head lock, turns a sweep that lost a race with a
//! capture or release into a no-op.

use std::sync::atomic::Ordering;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::StreamExt;

use crate::decide::Decision;
use crate::request::EntryRequest;
use crate::store::now_micros;
use crate::writer::Writers;
use crate::LedgerError;

/// Holds released per tenant and sweep at most; the rest wait for the next tick.
pub const SWEEP_BATCH: i64 = 1_000;

/// Tenants whose expired holds are being released at once.
const SWEEP_TENANTS_AT_ONCE: usize = 16;

/// Releases the holds that have expired; returns how many this call released.
///
/// One query finds the tenants with an expired hold (tenant ids only); each
/// such tenant's holds are then read and released by queries that name the
/// tenant, so on a distributed engine they run on the tenant's node alone
/// (docs/scaling.md). Tenants are independent: a tenant whose holds cannot
/// be read or released (its stored state does not read, its writer fails)
/// is logged and counted in [`crate::writer::WriterStats::expiry_failures`],
/// and the other tenants are released all the same; that tenant is tried
/// again next tick. At most [`SWEEP_BATCH`] holds of a tenant are released
/// per sweep, so a tenant that keeps failing never delays the others.
pub async fn sweep_expired_holds(writers: &Writers) -> Result<usize, LedgerError> {
    let now = now_micros();
    let tenants = writers.storage().tenants_with_expired_holds(now).await?;
    // Tenants are released side by side (each by its own writer), so a
    // slow or stuck tenant does not hold the others up either.
    let released = futures_util::stream::iter(tenants)
        .map(|tenant| release_tenant(writers, tenant, now))
        .buffer_unordered(SWEEP_TENANTS_AT_ONCE)
        .fold(0, |total, n| async move { total + n })
        .await;
    Ok(released)
}

/// Releases one tenant's holds expired by `now`; how many it released. A
/// failure is logged with the tenant and counted, never returned.
async fn release_tenant(writers: &Writers, tenant: String, now: DateTime<Utc>) -> usize {
    let released = async {
        let holds = writers
            .storage()
            .expired_holds(&tenant, now, SWEEP_BATCH)
            .await?;
        let requests = holds
            .iter()
            .map(|h| EntryRequest::expiry_release(h))
            .collect();
        let decisions = writers.decide_all(&tenant, requests).await?;
        Ok::<_, LedgerError>(
            decisions
                .iter()
                .filter(|d| matches!(d, Decision::Created(_)))
                .count(),
        )
    }
    .await;
    match released {
        Ok(released) => {
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

    /// The sweep finds the tenants with an expired hold, then reads each
    /// tenant's holds alone: the oldest first, at most a batch, nothing of
    /// another tenant and nothing that has not expired.
    #[tokio::test]
    async fn expired_holds_are_found_per_tenant() {
        for db in TestDb::every_engine(2).await {
            let mut rows = Vec::new();
            for (tenant, hold, at) in [
                ("a", "h2", "2026-01-01T00:00:01.000000Z"),
                ("a", "h1", "2026-01-01T00:00:00.000000Z"),
                ("a", "h3", "2026-01-01T00:00:02.000000Z"),
                ("b", "h1", "2026-01-01T00:00:03.000000Z"),
                ("c", "h1", "2999-01-01T00:00:00.000000Z"),
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
            let now = chrono::Utc::now();
            let engine = db.engine();
            let tenants = db.storage.tenants_with_expired_holds(now).await.unwrap();
            assert_eq!(tenants, vec!["a".to_owned(), "b".to_owned()], "{engine}");
            let a = db.storage.expired_holds("a", now, 2).await.unwrap();
            assert_eq!(a, vec!["h1".to_owned(), "h2".to_owned()], "{engine}");
            let b = db.storage.expired_holds("b", now, 2).await.unwrap();
            assert_eq!(b, vec!["h1".to_owned()], "{engine}");
            let c = db.storage.expired_holds("c", now, 2).await.unwrap();
            assert!(c.is_empty(), "{engine}");
            db.remove().await;
        }
    }
}
