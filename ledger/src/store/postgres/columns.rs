//! The entry rows as PostgreSQL stores them: their columns and their
//! decoding.

use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::Row;

use crate::entry::StoredEntry;
use crate::store::rows::decode_entry;
use crate::LedgerError;

pub(in crate::store) const ENTRY_COLUMNS: &str =
    "tenant_id, seq, id, kind, upstream_id, status, rejection_code, \
    rejection_message, account, debit_account, credit_account, amount::text AS amount, unit, \
    params, fingerprint, recorded_at, balance_after::text AS balance_after, prev_hash, hash";

pub(in crate::store) fn entry(row: &PgRow) -> Result<StoredEntry, LedgerError> {
    let recorded_at: DateTime<Utc> = row.try_get("recorded_at")?;
    decode_entry(row, recorded_at)
}
