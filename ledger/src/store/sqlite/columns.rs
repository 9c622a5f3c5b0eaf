//! The entry row as SQLite stores it: its columns and their decoding.

use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteRow;
use sqlx::Row;

use crate::entry::StoredEntry;
use crate::store::rows::decode_entry;
use crate::LedgerError;

pub(in crate::store) const ENTRY_COLUMNS: &str =
    "tenant_id, seq, id, kind, upstream_id, status, rejection_code, \
    rejection_message, account, debit_account, credit_account, amount, unit, params, \
    fingerprint, recorded_at, balance_after, prev_hash, hash";

/// SQLite allows 32,766 bound parameters per statement; stay well below.
pub(in crate::store) const ROWS_PER_INSERT: usize = 500;

pub(in crate::store) fn entry(row: &SqliteRow) -> Result<StoredEntry, LedgerError> {
    let text: String = row.try_get("recorded_at")?;
    let recorded_at = DateTime::parse_from_rfc3339(&text)
        .map_err(|_| LedgerError::Corrupt(format!("recorded_at {text:?}")))?
        .with_timezone(&Utc);
    decode_entry(row, recorded_at)
}
