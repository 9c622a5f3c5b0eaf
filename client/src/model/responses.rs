//! The entry object and the answers of the mutating endpoints.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::{Alerts, Direction, Metadata, Overdraft};
use crate::error::ClientError;
use crate::problem::Problem;

/// What an entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    UsageDebit,
    Payment,
    AccountSettings,
    Hold,
    HoldCapture,
    HoldRelease,
    Refund,
    Reversal,
    Adjustment,
    IntentClaimed,
    IntentReleased,
    IntentSucceeded,
    IntentFailed,
    /// A kind this client does not know yet (a newer server).
    #[serde(other)]
    Other,
}

impl EntryKind {
    /// The wire name, as `GET /v1/entries?kind=` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::UsageDebit => "usage_debit",
            EntryKind::Payment => "payment",
            EntryKind::AccountSettings => "account_settings",
            EntryKind::Hold => "hold",
            EntryKind::HoldCapture => "hold_capture",
            EntryKind::HoldRelease => "hold_release",
            EntryKind::Refund => "refund",
            EntryKind::Reversal => "reversal",
            EntryKind::Adjustment => "adjustment",
            EntryKind::IntentClaimed => "intent_claimed",
            EntryKind::IntentReleased => "intent_released",
            EntryKind::IntentSucceeded => "intent_succeeded",
            EntryKind::IntentFailed => "intent_failed",
            EntryKind::Other => "other",
        }
    }
}

/// The stored decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryStatus {
    Posted,
    Rejected,
}

impl EntryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryStatus::Posted => "posted",
            EntryStatus::Rejected => "rejected",
        }
    }
}

/// Why a ledger rule rejected the entry, stored with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    pub code: String,
    pub message: String,
}

/// The entry object of the API (SPEC §3). The request fields of the later
/// kinds (`hold_id`, `payment_id`, `entry_id`, `reason`, …) are present only
/// on the entries whose requests had them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub id: String,
    pub seq: i64,
    pub kind: EntryKind,
    pub upstream_id: String,
    pub status: EntryStatus,
    pub rejection: Option<Rejection>,
    pub account: String,
    pub debit_account: String,
    pub credit_account: String,
    pub amount: Decimal,
    pub unit: String,
    pub meter: Option<String>,
    pub quantity: Option<Decimal>,
    pub processor: Option<String>,
    pub occurred_at: Option<DateTime<Utc>>,
    pub recorded_at: DateTime<Utc>,
    pub metadata: Option<Metadata>,
    pub fingerprint: String,
    pub prev_hash: String,
    pub hash: String,
    /// The `posted` balance of `account` right after this entry.
    pub balance_after: Decimal,
    /// Holds, captures, releases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_id: Option<String>,
    /// Holds: the expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<i64>,
    /// Holds: the account a capture credits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter_account: Option<String>,
    /// Refunds: the refunded payment's upstream ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment_id: Option<String>,
    /// Reversals: the reversed entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Adjustments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    /// `account_settings` entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overdraft: Option<Overdraft>,
    /// `account_settings` entries that set an alert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alerts: Option<Alerts>,
    /// Set by reads once the entry is reversed: the id of the reversal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reversed_by: Option<String>,
}

/// The result of a mutating call.
#[derive(Debug, Clone)]
pub struct Posted {
    pub entry: Entry,
    /// This call (or one of its attempts) created the entry: 201.
    pub created: bool,
    /// The entry already existed: 200 with `Idempotent-Replayed: true`. After
    /// a retry this is normal — an earlier attempt committed but its answer
    /// was lost.
    pub replayed: bool,
    /// The exact response body.
    pub body: Vec<u8>,
    /// HTTP attempts this call made (1 when nothing had to be retried).
    pub attempts: u32,
}

/// A page of `GET /v1/entries`; pass `next_after_seq` as `after_seq` for the
/// next one until it is `None`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct EntryPage {
    pub entries: Vec<Entry>,
    pub next_after_seq: Option<i64>,
}

/// One result of `POST /v1/batch`: what the single endpoint would have
/// answered.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BatchResult {
    pub status: u16,
    pub replayed: bool,
    pub entry: Option<Entry>,
    pub problem: Option<Problem>,
}

impl BatchResult {
    /// The operation's entry, or its problem as the typed error the single
    /// endpoint would have given (a stored rejection carries its entry).
    pub fn into_result(self) -> Result<Entry, ClientError> {
        match (self.entry, self.problem) {
            (Some(entry), None) => Ok(entry),
            (_, Some(problem)) => Err(ClientError::from_problem(self.status, None, problem)),
            (None, None) => Err(ClientError::Decode(format!(
                "batch result {} has neither an entry nor a problem",
                self.status
            ))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct BatchResults {
    pub results: Vec<BatchResult>,
}
