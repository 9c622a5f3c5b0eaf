//! The usage summaries on PostgreSQL: the SQL of every read and write of
//! `usage_summaries` and `projector_checkpoints`, and the reads of the log
//! the fold runs over.

use chrono::NaiveDate;
use futures_util::TryStreamExt;
use sqlx::{PgPool, Row};
use tally_ledger::entry::{EntryStatus, UsageSource, DAY_FORMAT};
use tally_ledger::request::EntryKind;
use tally_ledger::store::{parse_decimal, LOG_PAGE};
use tally_ledger::LedgerError;

use super::fold::{reversal_target_of, UsageFold, UsageKey, UsageScan, UsageTotals};
use super::rows::{day_text, parse_wide, UsagePart, UsageRows, USAGE_SOURCES};
use super::shared::{usage_reads, usage_write};

usage_reads! {
    db = sqlx::Postgres,
    pool = PgPool,
    connection = sqlx::PgConnection,
    summary_columns = "account, meter, day, unit, quantity::text AS quantity, \
        amount::text AS amount, entries",
    snapshot = snapshot,
}

/// A read-only transaction on one snapshot.
async fn snapshot(
    pool: &PgPool,
) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, sqlx::Error> {
    pool.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .await
}

/// Folds the usage rows with seq in `(after, upto]` into `part`, setting
/// reversals aside (see `super::fold_usage_part`).
pub(super) async fn fold_part(pool: &PgPool, into: &mut UsagePart<'_>) -> Result<(), LedgerError> {
    let (tenant, after, upto, rows) = (into.tenant, into.after, into.upto, into.rows);
    let (part, reversals) = (&mut into.scan, &mut into.reversals);
    let sources = USAGE_SOURCES.replace("amount,", "amount::text,");
    let range = "tenant_id = $1 AND seq > $2 AND seq <= $3";
    let sql = match rows {
        UsageRows::All => format!("{sources} {range}"),
        // Two index scans instead of a scan of the heap: the reversals
        // through the (tenant_id, kind, upstream_id) key, the usage debits
        // without columns through the partial index of migration 0006.
        UsageRows::WithoutColumns => format!(
            "{sources} kind = 'reversal' AND {range} UNION ALL \
             {sources} kind = 'usage_debit' AND usage_day IS NULL AND {range}"
        ),
    };
    let mut rows = sqlx::query(&sql)
        .bind(tenant)
        .bind(after)
        .bind(upto)
        .fetch(pool);
    while let Some(r) = rows.try_next().await? {
        fold_usage_row(&r, part, reversals)?;
    }
    Ok(())
}

/// Folds one PostgreSQL row of [`super::USAGE_SOURCES`]; a reversal is set aside
/// with the entry it names. Columns are decoded without sqlx's per-value
/// type check (a tenth of the fold's CPU): the statement fixes their types
/// (`int8`, `text`, `text`, `text`, `text`, `timestamptz`, `text`).
fn fold_usage_row(
    row: &sqlx::postgres::PgRow,
    scan: &mut UsageScan,
    reversals: &mut Vec<(i64, String)>,
) -> Result<(), LedgerError> {
    let seq: i64 = row.try_get_unchecked(0)?;
    let kind: &str = row.try_get_unchecked(1)?;
    let amount: &str = row.try_get_unchecked(4)?;
    let source = UsageSource {
        seq,
        kind: EntryKind::parse(kind).ok_or_else(|| {
            LedgerError::Corrupt(format!("kind {kind:?} of the entry at seq {seq}"))
        })?,
        status: EntryStatus::Posted,
        account: row.try_get_unchecked(2)?,
        unit: row.try_get_unchecked(3)?,
        amount: parse_decimal(amount, "amount")?,
        recorded_at: row.try_get_unchecked(5)?,
        params: row.try_get_unchecked(6)?,
    };
    scan.add_source(&source)?;
    if let Some(target) = reversal_target_of(&source)? {
        reversals.push((seq, target));
    }
    Ok(())
}

/// PostgreSQL adds up, per usage key, the posted usage debits with seq in
/// `(after, upto]` that carry usage columns (`tally_ledger::entry::UsageColumns`):
/// one parallel aggregate with exact NUMERIC sums instead of a million rows
/// of params sent to Rust and parsed there.
pub(super) async fn sum_usage_columns(
    pool: &sqlx::PgPool,
    tenant: &str,
    after: i64,
    upto: i64,
) -> Result<UsageFold, LedgerError> {
    let mut fold = UsageFold::new();
    let mut rows = sqlx::query(
        "SELECT account, usage_meter, usage_day, unit, sum(amount)::text, \
           sum(usage_quantity)::text, count(*) FROM entries \
         WHERE tenant_id = $1 AND seq > $2 AND seq <= $3 AND kind = 'usage_debit' \
           AND status = 'posted' AND usage_day IS NOT NULL \
         GROUP BY account, usage_meter, usage_day, unit",
    )
    .bind(tenant)
    .bind(after)
    .bind(upto)
    .fetch(pool);
    while let Some(r) = rows.try_next().await? {
        let day: &str = r.try_get(2)?;
        let key = UsageKey {
            account: r.try_get(0)?,
            meter: r.try_get(1)?,
            day: NaiveDate::parse_from_str(day, DAY_FORMAT)
                .map_err(|_| LedgerError::Corrupt(format!("usage_day {day:?} of an entry")))?,
            unit: r.try_get(3)?,
        };
        let totals = UsageTotals {
            amount: parse_wide(r.try_get(4)?, "sum of usage amounts")?,
            quantity: parse_wide(r.try_get(5)?, "sum of usage quantities")?,
            entries: r.try_get(6)?,
        };
        fold.add(key, &totals)?;
    }
    Ok(fold)
}

usage_write! {
    store = PgPool,
    begin = PgPool::begin,
    lock = "SELECT seq FROM projector_checkpoints \
        WHERE tenant_id = $1 AND projector = $2 FOR UPDATE",
    stored = "SELECT account, meter, day, unit, quantity::text, amount::text, \
        entries FROM usage_summaries WHERE tenant_id = $1",
    remove = remove_rows,
    add = add_deltas,
}

/// Deletes the summary rows of `tenant` with these keys, in one statement.
async fn remove_rows(
    conn: &mut sqlx::PgConnection,
    tenant: &str,
    remove: &[[String; 4]],
) -> Result<(), LedgerError> {
    if remove.is_empty() {
        return Ok(());
    }
    let column = |i: usize| remove.iter().map(|k| k[i].as_str()).collect::<Vec<&str>>();
    sqlx::query(
        "DELETE FROM usage_summaries u USING UNNEST($2::text[], \
           $3::text[], $4::text[], $5::text[]) AS k(account, meter, day, unit) \
         WHERE u.tenant_id = $1 AND u.account = k.account \
           AND u.meter = k.meter AND u.day = k.day AND u.unit = k.unit",
    )
    .bind(tenant)
    .bind(column(0))
    .bind(column(1))
    .bind(column(2))
    .bind(column(3))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// NUMERIC adds exactly: the database adds each delta to its row.
async fn add_deltas(
    conn: &mut sqlx::PgConnection,
    tenant: &str,
    fold: &UsageFold,
    _read_ahead: (),
) -> Result<(), LedgerError> {
    let rows: Vec<(&UsageKey, &UsageTotals)> = fold.iter().collect();
    for chunk in rows.chunks(LOG_PAGE as usize) {
        let col = |f: fn(&UsageKey, &UsageTotals) -> String| {
            chunk.iter().map(|(k, t)| f(k, t)).collect::<Vec<String>>()
        };
        let entries: Vec<i64> = chunk.iter().map(|(_, t)| t.entries).collect();
        sqlx::query(
            "INSERT INTO usage_summaries \
               (tenant_id, account, meter, day, unit, quantity, amount, entries) \
             SELECT $1, r.account, r.meter, r.day, r.unit, r.quantity::numeric, \
                    r.amount::numeric, r.entries \
             FROM UNNEST($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
                         $7::text[], $8::int8[]) \
               AS r(account, meter, day, unit, quantity, amount, entries) \
             ON CONFLICT (tenant_id, account, meter, day, unit) DO UPDATE SET \
               quantity = usage_summaries.quantity + excluded.quantity, \
               amount = usage_summaries.amount + excluded.amount, \
               entries = usage_summaries.entries + excluded.entries",
        )
        .bind(tenant)
        .bind(col(|k, _| k.account.clone()))
        .bind(col(|k, _| k.meter.clone()))
        .bind(col(|k, _| day_text(k.day)))
        .bind(col(|k, _| k.unit.clone()))
        .bind(col(|_, t| t.quantity.to_string()))
        .bind(col(|_, t| t.amount.to_string()))
        .bind(entries)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}
