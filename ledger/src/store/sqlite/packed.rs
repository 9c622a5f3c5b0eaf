//! A page of the log packed by SQLite as one JSON array, read without
//! handing rows over one at a time.

use chrono::{DateTime, Utc};

use crate::entry::{EntryStatus, StoredEntry};
use crate::request::EntryKind;
use crate::store::rows::{parse_decimal, parse_total};
use crate::LedgerError;

/// One entry of a packed page: [`ENTRY_COLUMNS`] in order.
#[derive(serde::Deserialize)]
pub(super) struct PackedEntry(
    String,
    i64,
    String,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
);

impl PackedEntry {
    pub(super) fn into_entry(self) -> Result<StoredEntry, LedgerError> {
        let PackedEntry(
            tenant_id,
            seq,
            id,
            kind,
            upstream_id,
            status,
            rejection_code,
            rejection_message,
            account,
            debit_account,
            credit_account,
            amount,
            unit,
            params,
            fingerprint,
            recorded_at,
            balance_after,
            prev_hash,
            hash,
        ) = self;
        Ok(StoredEntry {
            tenant_id,
            seq,
            id,
            kind: EntryKind::parse(&kind)
                .ok_or_else(|| LedgerError::Corrupt(format!("unknown kind {kind:?}")))?,
            upstream_id,
            status: EntryStatus::parse(&status)
                .ok_or_else(|| LedgerError::Corrupt(format!("unknown status {status:?}")))?,
            rejection_code,
            rejection_message,
            account,
            debit_account,
            credit_account,
            amount: parse_decimal(&amount, "amount")?,
            unit,
            params,
            fingerprint,
            recorded_at: DateTime::parse_from_rfc3339(&recorded_at)
                .map_err(|_| LedgerError::Corrupt(format!("recorded_at {recorded_at:?}")))?
                .with_timezone(&Utc),
            balance_after: parse_total(&balance_after, "balance_after")?,
            prev_hash,
            hash,
        })
    }
}
