//! The usage projection's reads and writes, each sent to the engine's own
//! SQL (`sqlite.rs`, `postgres.rs`).

use chrono::NaiveDate;
use sqlx::{Postgres, Sqlite};
use tally_ledger::entry::{UsageParams, DAY_FORMAT};
use tally_ledger::request::EntryKind;
use tally_ledger::store::{EngineRef, PostgresStore, Storage, UsageEntries, UsageEntry};
use tally_ledger::LedgerError;

use super::fold::{reversal_target_of, UsageFold, UsageKey, UsageScan, UsageTotals};
use super::rows::{parse_wide, UsageQuery, UsageRead, Written};
use super::shared;
use tally_ledger::fold_parts::{join_folds, rebuild_ranges, split_range};

/// The seq up to which the usage summaries of `tenant` are complete.
pub async fn usage_checkpoint(storage: &Storage, tenant: &str) -> Result<i64, LedgerError> {
    match storage.engine() {
        EngineRef::Sqlite(s) => {
            shared::checkpoint::<Sqlite>(&mut *s.pool().acquire().await?, tenant).await
        }
        EngineRef::Postgres(s) => {
            shared::checkpoint::<Postgres>(&mut *s.pool().acquire().await?, tenant).await
        }
    }
}

/// The seq up to which `tenant`'s entries were appended before the usage
/// columns existed (migration 0005): those are folded from params.
pub(crate) async fn usage_columns_from(
    storage: &Storage,
    tenant: &str,
) -> Result<i64, LedgerError> {
    storage.usage_columns_from(tenant).await
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
    which: UsageEntries,
) -> Result<(UsageFold, Vec<(i64, String)>), LedgerError> {
    let mut scan = UsageScan::default();
    let mut reversals = Vec::new();
    // Consecutive entries mostly share a day: it is parsed when it changes.
    let mut last_day: Option<(String, NaiveDate)> = None;
    storage
        .for_each_usage_entry(tenant, after, upto, which, |entry| match entry {
            UsageEntry::Columns(c) => {
                let day = match &last_day {
                    Some((text, day)) if text == c.day => *day,
                    _ => {
                        let day = parse_day(c.day)?;
                        last_day = Some((c.day.to_owned(), day));
                        day
                    }
                };
                let totals = UsageTotals {
                    amount: parse_wide(c.amount, "amount")?,
                    quantity: parse_wide(c.quantity, "usage quantity")?,
                    entries: c.entries,
                };
                scan.add_to_key(c.account, c.meter, day, c.unit, &totals)
            }
            // The engine took the parameters out: a reversal names its
            // entry there.
            UsageEntry::Source(source, Some(params)) => {
                if source.kind == EntryKind::Reversal {
                    if let Some(target) = params.entry_id {
                        reversals.push((source.seq, target.into_owned()));
                    }
                    return Ok(());
                }
                let params = UsageParams {
                    entry_id: None,
                    ..params
                };
                scan.add_usage(&source, params)
            }
            UsageEntry::Source(source, None) => {
                scan.add_source(&source)?;
                if let Some(target) = reversal_target_of(&source)? {
                    reversals.push((source.seq, target));
                }
                Ok(())
            }
        })
        .await?;
    Ok((scan.into_fold()?, reversals))
}

/// PostgreSQL's sums, per usage key, of the posted usage debits with seq in
/// `(after, upto]` that carry usage columns.
async fn sum_usage_columns(
    store: &PostgresStore,
    tenant: &str,
    after: i64,
    upto: i64,
) -> Result<UsageFold, LedgerError> {
    let mut fold = UsageFold::new();
    store
        .for_each_usage_sum(tenant, after, upto, |c| {
            let key = UsageKey {
                account: c.account.to_owned(),
                meter: c.meter.to_owned(),
                day: parse_day(c.day)?,
                unit: c.unit.to_owned(),
            };
            let totals = UsageTotals {
                amount: parse_wide(c.amount, "sum of usage amounts")?,
                quantity: parse_wide(c.quantity, "sum of usage quantities")?,
                entries: c.entries,
            };
            fold.add(key, &totals)
        })
        .await?;
    Ok(fold)
}

/// The usage day of an entry, as its usage columns store it.
fn parse_day(text: &str) -> Result<NaiveDate, LedgerError> {
    NaiveDate::parse_from_str(text, DAY_FORMAT)
        .map_err(|_| LedgerError::Corrupt(format!("usage_day {text:?} of an entry")))
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
        EngineRef::Sqlite(s) => shared::usage_rows(s, tenant, q).await,
        EngineRef::Postgres(s) => shared::usage_rows(s.pool(), tenant, q).await,
    }
}

/// Every stored usage row of `tenant` and the checkpoint they are
/// complete to, from one snapshot.
pub async fn stored_usage(
    storage: &Storage,
    tenant: &str,
) -> Result<(UsageFold, i64), LedgerError> {
    let (rows, checkpoint) = match storage.engine() {
        EngineRef::Sqlite(s) => shared::stored_usage(s, tenant).await?,
        EngineRef::Postgres(s) => shared::stored_usage(s.pool(), tenant).await?,
    };
    let mut fold = UsageFold::new();
    for (key, totals) in rows {
        fold.add(key, &totals)?;
    }
    Ok((fold, checkpoint))
}

/// A fresh fold of `tenant`'s log from seq 1 to `upto` (inclusive): seq
/// ranges folded on one connection each, at once, and added (decimal sums
/// are exact, so the split cannot change the result).
pub async fn fold_usage(
    storage: &Storage,
    tenant: &str,
    upto: i64,
) -> Result<UsageFold, LedgerError> {
    fold_usage_rows(storage, tenant, upto, UsageEntries::All).await
}

/// [`fold_usage`], or with [`UsageEntries::WithoutColumns`] the rebuild's: on
/// PostgreSQL the usage debits that carry usage columns are added up by the
/// database instead of folded from params.
pub(crate) async fn fold_usage_rows(
    storage: &Storage,
    tenant: &str,
    upto: i64,
    rows: UsageEntries,
) -> Result<UsageFold, LedgerError> {
    let mut tasks = Vec::new();
    let mut from_params = upto;
    if rows == UsageEntries::WithoutColumns {
        // Entries appended before the usage columns existed are folded from
        // params below; after them, the columns are added up, and only
        // reversals (and any usage debit without columns) are folded from
        // params.
        from_params = usage_columns_from(storage, tenant).await?.clamp(0, upto);
        match storage.engine() {
            EngineRef::Postgres(s) => {
                let (store, tenant) = (s.clone(), tenant.to_owned());
                let storage = storage.clone();
                tasks.push(tokio::spawn(async move {
                    let (summed, (rest, reversals)) = tokio::try_join!(
                        sum_usage_columns(&store, &tenant, from_params, upto),
                        fold_usage_part(
                            &storage,
                            &tenant,
                            from_params,
                            upto,
                            UsageEntries::WithoutColumns
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
                                    UsageEntries::WithoutColumns,
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
        tokio::spawn(async move {
            fold_usage_part(&storage, &tenant, after, to, UsageEntries::All).await
        })
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
    let fold = fold_usage_rows(storage, tenant, head, UsageEntries::WithoutColumns).await?;
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
        EngineRef::Sqlite(s) => shared::write_usage(s, tenant, expected, to, fold).await,
        EngineRef::Postgres(s) => shared::write_usage(s.pool(), tenant, expected, to, fold).await,
    }
}
