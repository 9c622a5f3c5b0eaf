//! The usage entries on SQLite, packed by the database: sqlx hands each
//! SQLite row from its worker thread to the task with a wake-up (about
//! 6 µs a row, measured), so SQLite packs the rows of a seq window into one
//! JSON array instead, with the parameters the fold reads taken out of
//! `params` (or, where they are, the usage columns). Taking four values out
//! of each entry's params JSON was most of SQLite's work in a usage
//! rebuild.

use std::borrow::Cow;
use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use sqlx::SqlitePool;

use super::{UsageColumnsText, UsageEntries, UsageEntry};
use crate::entry::{string_or_none, EntryStatus, UsageParams, UsageSource};
use crate::request::EntryKind;
use crate::store::rows::parse_decimal;
use crate::store::sqlite::for_each_packed;
use crate::LedgerError;

/// Seq window SQLite packs into one JSON array.
const WINDOW: i64 = 16384;

/// One row of [`PackedSource`]. `->` yields the parameter as JSON (absent:
/// null), so the fold sees a number as a number, exactly as it would
/// parsing `params` itself.
const PACKED_SOURCE: &str = "json_array(seq, kind, account, unit, amount, recorded_at, \
     params -> '$.quantity', params -> '$.meter', params -> '$.occurred_at', \
     params -> '$.entry_id')";

/// The usage rows of one seq window; bound: tenant, after, upto.
const IN_WINDOW: &str = " FROM entries WHERE status = 'posted' \
     AND kind IN ('usage_debit', 'reversal') AND tenant_id = $1 AND seq > $2 AND seq <= $3";

/// Every usage row of one seq window, packed as [`PackedSource`]s.
static ALL_SQL: LazyLock<String> =
    LazyLock::new(|| format!("SELECT json_group_array({PACKED_SOURCE}){IN_WINDOW}"));

/// The rows of one seq window in two packed arrays: the usage debits that
/// carry usage columns as [`PackedColumns`], the others (reversals, and
/// usage debits stored without columns) as [`PackedSource`]s.
static WITHOUT_COLUMNS_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT json_group_array(json_array(account, usage_meter, usage_day, unit, amount, \
         usage_quantity)) FILTER (WHERE kind = 'usage_debit' AND usage_day IS NOT NULL), \
         json_group_array({PACKED_SOURCE}) FILTER (WHERE kind = 'reversal' OR usage_day IS NULL)\
         {IN_WINDOW}"
    )
});

/// A posted usage debit with usage columns: account, usage meter, usage
/// day, unit, amount, usage quantity.
#[derive(serde::Deserialize)]
struct PackedColumns<'a>(
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
);

/// One row of [`PACKED_SOURCE`].
#[derive(serde::Deserialize)]
struct PackedSource<'a>(
    i64,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow, deserialize_with = "string_or_none")] Option<Cow<'a, str>>,
    #[serde(borrow, deserialize_with = "string_or_none")] Option<Cow<'a, str>>,
    #[serde(borrow, deserialize_with = "string_or_none")] Option<Cow<'a, str>>,
    #[serde(borrow, deserialize_with = "string_or_none")] Option<Cow<'a, str>>,
);

/// Hands `each` every [`PackedSource`] of a packed array.
fn each_source<F>(packed: &str, after: i64, each: &mut F) -> Result<(), LedgerError>
where
    F: FnMut(UsageEntry<'_>) -> Result<(), LedgerError>,
{
    let what = format!("usage rows after seq {after}");
    for_each_packed(packed, &what, |row: PackedSource| {
        let PackedSource(
            seq,
            kind,
            account,
            unit,
            amount,
            recorded_at,
            quantity,
            meter,
            occurred_at,
            entry_id,
        ) = row;
        let kind = EntryKind::parse(&kind).ok_or_else(|| {
            LedgerError::Corrupt(format!("kind {kind:?} of the entry at seq {seq}"))
        })?;
        let source = UsageSource {
            seq,
            kind,
            status: EntryStatus::Posted,
            account: &account,
            unit: &unit,
            amount: parse_decimal(&amount, "amount")?,
            recorded_at: DateTime::parse_from_rfc3339(&recorded_at)
                .map_err(|_| LedgerError::Corrupt(format!("recorded_at {recorded_at:?}")))?
                .with_timezone(&Utc),
            params: "",
        };
        let params = UsageParams {
            quantity,
            meter,
            occurred_at,
            entry_id,
        };
        each(UsageEntry::Source(source, Some(params)))
    })?;
    Ok(())
}

/// See `Storage::for_each_usage_entry`.
pub(super) async fn for_each<F>(
    pool: &SqlitePool,
    tenant: &str,
    after: i64,
    upto: i64,
    which: UsageEntries,
    mut each: F,
) -> Result<(), LedgerError>
where
    F: FnMut(UsageEntry<'_>) -> Result<(), LedgerError> + Send,
{
    let mut from = after;
    while from < upto {
        let to = upto.min(from.saturating_add(WINDOW));
        match which {
            UsageEntries::All => {
                let packed: String = sqlx::query_scalar(&ALL_SQL)
                    .bind(tenant)
                    .bind(from)
                    .bind(to)
                    .fetch_one(pool)
                    .await?;
                each_source(&packed, from, &mut each)?;
            }
            UsageEntries::WithoutColumns => {
                let (columns, others): (String, String) = sqlx::query_as(&WITHOUT_COLUMNS_SQL)
                    .bind(tenant)
                    .bind(from)
                    .bind(to)
                    .fetch_one(pool)
                    .await?;
                for_each_packed(&columns, "usage columns", |row: PackedColumns| {
                    let PackedColumns(account, meter, day, unit, amount, quantity) = row;
                    each(UsageEntry::Columns(UsageColumnsText {
                        account: &account,
                        meter: &meter,
                        day: &day,
                        unit: &unit,
                        amount: &amount,
                        quantity: &quantity,
                        entries: 1,
                    }))
                })?;
                each_source(&others, from, &mut each)?;
            }
        }
        from = to;
    }
    Ok(())
}
