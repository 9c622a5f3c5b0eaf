//! The usage projection's reads and writes, each sent to the engine's own
//! SQL (`sqlite.rs`, `postgres.rs`).

use tally_ledger::store::{EngineRef, Storage};
use tally_ledger::LedgerError;

use super::fold::{UsageFold, UsageScan};
use super::rows::{UsagePart, UsageQuery, UsageRead, UsageRows, Written};
use super::{postgres, sqlite};
use crate::parts::{join_folds, rebuild_ranges, split_range};

/// The seq up to which the usage summaries of `tenant` are complete.
pub async fn usage_checkpoint(storage: &Storage, tenant: &str) -> Result<i64, LedgerError> {
    match storage.engine() {
        EngineRef::Sqlite(s) => sqlite::checkpoint(s.pool(), tenant).await,
        EngineRef::Postgres(s) => postgres::checkpoint(s.pool(), tenant).await,
    }
}

/// The seq up to which `tenant`'s entries were appended before the usage
/// columns existed (migration 0005): those are folded from params.
pub(crate) async fn usage_columns_from(
    storage: &Storage,
    tenant: &str,
) -> Result<i64, LedgerError> {
    match storage.engine() {
        EngineRef::Sqlite(s) => sqlite::usage_columns_from(s.pool(), tenant).await,
        EngineRef::Postgres(s) => postgres::usage_columns_from(s.pool(), tenant).await,
    }
}

/// The usage in the log of `tenant` with seq in `(after, upto]`: the
/// posted usage debits folded, and the posted reversals (seq, the entry
/// they name), which the caller folds once the named entries are read.
/// Reads only those entries, and only the columns the fold needs.
pub(crate) async fn fold_usage_part(
    storage: &Storage,
    tenant: &str,
    after: i64,
    upto: i64,
    rows: UsageRows,
) -> Result<(UsageFold, Vec<(i64, String)>), LedgerError> {
    let mut part = UsagePart {
        tenant,
        after,
        upto,
        rows,
        scan: UsageScan::default(),
        reversals: Vec::new(),
    };
    match storage.engine() {
        EngineRef::Sqlite(s) => sqlite::fold_part(s.pool(), &mut part).await?,
        EngineRef::Postgres(s) => postgres::fold_part(s.pool(), &mut part).await?,
    }
    Ok((part.scan.into_fold()?, part.reversals))
}

/// Folds the reversals [`fold_usage_part`] set aside, reading each entry a
/// reversal names (reversals are rare).
pub(crate) async fn take_back_reversals(
    storage: &Storage,
    tenant: &str,
    reversals: &[(i64, String)],
    fold: &mut UsageFold,
) -> Result<(), LedgerError> {
    for (seq, target) in reversals {
        if let Some(original) = storage.entry_by_id(tenant, target).await? {
            fold.take_back(*seq, &original)?;
        }
    }
    Ok(())
}

/// The stored usage rows of one account, the checkpoint and the head,
/// read from one snapshot.
pub async fn usage_rows(
    storage: &Storage,
    tenant: &str,
    q: &UsageQuery,
) -> Result<UsageRead, LedgerError> {
    match storage.engine() {
        EngineRef::Sqlite(s) => sqlite::usage_rows(s.pool(), tenant, q).await,
        EngineRef::Postgres(s) => postgres::usage_rows(s.pool(), tenant, q).await,
    }
}

/// Every stored usage row of `tenant` and the checkpoint they are
/// complete to, from one snapshot.
pub async fn stored_usage(
    storage: &Storage,
    tenant: &str,
) -> Result<(UsageFold, i64), LedgerError> {
    let (rows, checkpoint) = match storage.engine() {
        EngineRef::Sqlite(s) => sqlite::stored_usage(s.pool(), tenant).await?,
        EngineRef::Postgres(s) => postgres::stored_usage(s.pool(), tenant).await?,
    };
    let mut fold = UsageFold::new();
    for (key, totals) in rows {
        fold.add(key, &totals)?;
    }
    Ok((fold, checkpoint.unwrap_or(0)))
}

/// A fresh fold of `tenant`'s log from seq 1 to `upto` (inclusive): seq
/// ranges folded on one connection each, at once, and added (decimal sums
/// are exact, so the split cannot change the result).
pub async fn fold_usage(
    storage: &Storage,
    tenant: &str,
    upto: i64,
) -> Result<UsageFold, LedgerError> {
    fold_usage_rows(storage, tenant, upto, UsageRows::All).await
}

/// [`fold_usage`], or with [`UsageRows::WithoutColumns`] the rebuild's: on
/// PostgreSQL the usage debits that carry usage columns are added up by the
/// database instead of folded from params.
pub(crate) async fn fold_usage_rows(
    storage: &Storage,
    tenant: &str,
    upto: i64,
    rows: UsageRows,
) -> Result<UsageFold, LedgerError> {
    let mut tasks = Vec::new();
    let mut from_params = upto;
    if rows == UsageRows::WithoutColumns {
        // Entries appended before the usage columns existed are folded from
        // params below; after them, the columns are added up, and only
        // reversals (and any usage debit without columns) are folded from
        // params.
        from_params = usage_columns_from(storage, tenant).await?.clamp(0, upto);
        match storage.engine() {
            EngineRef::Postgres(s) => {
                let (pool, tenant) = (s.pool().clone(), tenant.to_owned());
                let storage = storage.clone();
                tasks.push(tokio::spawn(async move {
                    let (summed, (rest, reversals)) = tokio::try_join!(
                        postgres::sum_usage_columns(&pool, &tenant, from_params, upto),
                        fold_usage_part(
                            &storage,
                            &tenant,
                            from_params,
                            upto,
                            UsageRows::WithoutColumns
                        ),
                    )?;
                    let mut fold = summed;
                    fold.merge(rest)?;
                    Ok((fold, reversals))
                }));
            }
            EngineRef::Sqlite(_) => {
                tasks.extend(
                    split_range(from_params, upto)
                        .into_iter()
                        .map(|(after, to)| {
                            let (storage, tenant) = (storage.clone(), tenant.to_owned());
                            tokio::spawn(async move {
                                fold_usage_part(
                                    &storage,
                                    &tenant,
                                    after,
                                    to,
                                    UsageRows::WithoutColumns,
                                )
                                .await
                            })
                        }),
                );
            }
        }
    }
    tasks.extend(rebuild_ranges(from_params).into_iter().map(|(after, to)| {
        let (storage, tenant) = (storage.clone(), tenant.to_owned());
        tokio::spawn(
            async move { fold_usage_part(&storage, &tenant, after, to, UsageRows::All).await },
        )
    }));
    let mut fold = UsageFold::new();
    let mut reversals = Vec::new();
    for (part, mut taken_back) in join_folds(tasks).await? {
        fold.merge(part)?;
        reversals.append(&mut taken_back);
    }
    take_back_reversals(storage, tenant, &reversals, &mut fold).await?;
    Ok(fold)
}

/// Replaces `tenant`'s usage summaries with a fresh fold of its whole log,
/// rows and checkpoint in one transaction (readers see the old summaries or
/// the new ones, never none). Returns (seq folded to, rows).
pub async fn rebuild_usage(storage: &Storage, tenant: &str) -> Result<(i64, usize), LedgerError> {
    let head = storage.head(tenant).await?.seq;
    let started = std::time::Instant::now();
    // From the usage columns where the writer stored them (PostgreSQL),
    // from params elsewhere; `tally verify` folds everything from params
    // and compares.
    let fold = fold_usage_rows(storage, tenant, head, UsageRows::WithoutColumns).await?;
    let folded = started.elapsed();
    let written = write_usage(storage, tenant, None, head, &fold).await?;
    tracing::debug!(
        tenant,
        fold_ms = folded.as_secs_f64() * 1e3,
        write_ms = (started.elapsed() - folded).as_secs_f64() * 1e3,
        "usage summaries rebuilt"
    );
    match written {
        Written::Done => Ok((head, fold.len())),
        // Unreachable: a replacing write never checks the checkpoint.
        Written::Stale(seq) => Err(LedgerError::Unavailable(format!(
            "usage checkpoint moved to {seq} during the rebuild"
        ))),
    }
}

/// Writes `fold` and the checkpoint `to` in one transaction, under the
/// checkpoint row's lock. With `expected`, `fold` holds deltas added to the
/// stored rows, and nothing is written unless the checkpoint is still
/// `expected`. Without it, `fold` replaces every row of the tenant.
pub(crate) async fn write_usage(
    storage: &Storage,
    tenant: &str,
    expected: Option<i64>,
    to: i64,
    fold: &UsageFold,
) -> Result<Written, LedgerError> {
    match storage.engine() {
        EngineRef::Sqlite(s) => sqlite::write_usage(s, tenant, expected, to, fold).await,
        EngineRef::Postgres(s) => postgres::write_usage(s.pool(), tenant, expected, to, fold).await,
    }
}
