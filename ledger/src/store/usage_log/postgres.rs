//! The usage entries on PostgreSQL: rows streamed with only the columns
//! the fold needs, and the usage columns added up by the database.

use futures_util::TryStreamExt;
use sqlx::{PgPool, Row};

use super::{UsageColumnsText, UsageEntries, UsageEntry};
use crate::entry::{EntryStatus, UsageSource};
use crate::request::EntryKind;
use crate::store::rows::parse_decimal;
use crate::store::PostgresStore;
use crate::LedgerError;

/// The entries that carry usage, and the columns the fold reads of them
/// (`recorded_at` is column 5; every row is posted). The caller adds the
/// seq range. Each column costs: dropping `id` and `status` took a quarter
/// off PostgreSQL's work for these rows.
const SOURCES: &str = "SELECT seq, kind, account, unit, amount::text, recorded_at, params \
     FROM entries WHERE status = 'posted' AND kind IN ('usage_debit', 'reversal') AND";

/// See `Storage::for_each_usage_entry`.
pub(super) async fn for_each<F>(
    pool: &PgPool,
    tenant: &str,
    after: i64,
    upto: i64,
    which: UsageEntries,
    mut each: F,
) -> Result<(), LedgerError>
where
    F: FnMut(UsageEntry<'_>) -> Result<(), LedgerError> + Send,
{
    let range = "tenant_id = $1 AND seq > $2 AND seq <= $3";
    let sql = match which {
        UsageEntries::All => format!("{SOURCES} {range}"),
        // Two index scans instead of a scan of the heap: the reversals
        // through the (tenant_id, kind, upstream_id) key, the usage debits
        // without columns through the partial index of migration 0006.
        UsageEntries::WithoutColumns => format!(
            "{SOURCES} kind = 'reversal' AND {range} UNION ALL \
             {SOURCES} kind = 'usage_debit' AND usage_day IS NULL AND {range}"
        ),
    };
    let mut rows = sqlx::query(&sql)
        .bind(tenant)
        .bind(after)
        .bind(upto)
        .fetch(pool);
    while let Some(row) = rows.try_next().await? {
        // Decoded without sqlx's per-value type check (a tenth of the
        // fold's CPU): the statement fixes the types (`int8`, `text`,
        // `text`, `text`, `text`, `timestamptz`, `text`).
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
        each(UsageEntry::Source(source, None))?;
    }
    Ok(())
}

impl PostgresStore {
    /// Hands `each` the sums, per usage key, of the posted usage debits of
    /// `tenant` with seq in `(after, upto]` that carry usage columns
    /// (`crate::entry::UsageColumns`): one parallel aggregate with exact
    /// NUMERIC sums instead of a million rows of params sent to Rust and
    /// parsed there.
    pub async fn for_each_usage_sum<F>(
        &self,
        tenant: &str,
        after: i64,
        upto: i64,
        mut each: F,
    ) -> Result<(), LedgerError>
    where
        F: FnMut(UsageColumnsText<'_>) -> Result<(), LedgerError> + Send,
    {
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
        .fetch(self.pool());
        while let Some(r) = rows.try_next().await? {
            each(UsageColumnsText {
                account: r.try_get(0)?,
                meter: r.try_get(1)?,
                day: r.try_get(2)?,
                unit: r.try_get(3)?,
                amount: r.try_get(4)?,
                quantity: r.try_get(5)?,
                entries: r.try_get(6)?,
            })?;
        }
        Ok(())
    }
}
