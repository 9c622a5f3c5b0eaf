//! The entry: one event of the log, exactly as stored, and its public view.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::amount::canonical;
use crate::intent::EntryKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "posted" => Some(EntryStatus::Posted),
            "rejected" => Some(EntryStatus::Rejected),
            _ => None,
        }
    }
}

/// An entry as the `entries` table holds it. Immutable once written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEntry {
    pub tenant_id: String,
    pub seq: i64,
    pub id: String,
    pub kind: EntryKind,
    pub upstream_id: String,
    pub status: EntryStatus,
    pub rejection_code: Option<String>,
    pub rejection_message: Option<String>,
    pub account: String,
    pub debit_account: String,
    pub credit_account: String,
    pub amount: Decimal,
    pub unit: String,
    /// Canonical JSON of the client's normalised business parameters.
    pub params: String,
    /// `sha256:<hex>` of `params`.
    pub fingerprint: String,
    /// Truncated to microseconds, the precision both engines keep.
    pub recorded_at: DateTime<Utc>,
    pub balance_after: Decimal,
    pub prev_hash: String,
    pub hash: String,
}

/// The stable text form of `recorded_at`, used in responses and the chain.
pub fn format_recorded_at(t: &DateTime<Utc>) -> String {
    // `YYYY-MM-DDTHH:MM:SS.ffffffZ`, always six fractional digits.
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejection {
    pub code: String,
    pub message: String,
}

/// The entry object of the HTTP API (SPEC §3). Built only from a
/// [`StoredEntry`], so a first answer and every replay serialise to the same
/// bytes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntryView {
    pub id: String,
    pub seq: i64,
    pub kind: EntryKind,
    pub upstream_id: String,
    pub status: EntryStatus,
    pub rejection: Option<Rejection>,
    pub account: String,
    pub debit_account: String,
    pub credit_account: String,
    pub amount: String,
    pub unit: String,
    pub meter: Option<String>,
    pub quantity: Option<String>,
    pub processor: Option<String>,
    pub occurred_at: Option<String>,
    pub recorded_at: String,
    pub metadata: Option<Map<String, Value>>,
    pub fingerprint: String,
    pub prev_hash: String,
    pub hash: String,
    pub balance_after: String,
    /// The request fields of the later kinds (`hold_id`, `payment_id`,
    /// `entry_id`, `reason`, `direction`, `overdraft`, `expires_at`, …),
    /// under their request names; absent for debits and payments.
    #[serde(flatten)]
    pub details: Map<String, Value>,
    /// Set by reads (not by writes or replays) once the entry is reversed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reversed_by: Option<String>,
}

/// Request fields shown as `details` of an entry view.
const DETAIL_FIELDS: [&str; 9] = [
    "hold_id",
    "expires_at",
    "ttl_seconds",
    "counter_account",
    "payment_id",
    "entry_id",
    "reason",
    "direction",
    "overdraft",
];

impl StoredEntry {
    pub fn view(&self) -> EntryView {
        let params: Map<String, Value> = serde_json::from_str(&self.params).unwrap_or_default();
        let text = |k: &str| params.get(k).and_then(Value::as_str).map(str::to_owned);
        let mut details = Map::new();
        if !matches!(self.kind, EntryKind::UsageDebit | EntryKind::Payment) {
            for field in DETAIL_FIELDS {
                if let Some(v) = params.get(field) {
                    details.insert(field.to_owned(), v.clone());
                }
            }
            // A hold asked for a time to live: show the instant it became.
            if let Some(ttl) = params.get("ttl_seconds").and_then(Value::as_i64) {
                let at = crate::intent::HoldExpiry::Ttl(ttl).resolve(self.recorded_at);
                details.insert("expires_at".into(), Value::String(format_recorded_at(&at)));
            }
        }
        EntryView {
            id: self.id.clone(),
            seq: self.seq,
            kind: self.kind,
            upstream_id: self.upstream_id.clone(),
            status: self.status,
            rejection: self.rejection_code.as_ref().map(|code| Rejection {
                code: code.clone(),
                message: self.rejection_message.clone().unwrap_or_default(),
            }),
            account: self.account.clone(),
            debit_account: self.debit_account.clone(),
            credit_account: self.credit_account.clone(),
            amount: canonical(self.amount),
            unit: self.unit.clone(),
            meter: text("meter"),
            quantity: text("quantity"),
            processor: text("processor"),
            occurred_at: text("occurred_at"),
            recorded_at: format_recorded_at(&self.recorded_at),
            metadata: params.get("metadata").and_then(Value::as_object).cloned(),
            fingerprint: self.fingerprint.clone(),
            prev_hash: self.prev_hash.clone(),
            hash: self.hash.clone(),
            balance_after: canonical(self.balance_after),
            details,
            reversed_by: None,
        }
    }
}
