//! The entry: one event of the log, exactly as stored, and its public view.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::{Map, Value};

mod usage_columns;

pub use usage_columns::{
    params_of, string_or_none, usage_terms, UsageColumns, UsageParams, UsageSource, DAY_FORMAT,
};

use crate::amount::canonical;
use crate::balance::WideDecimal;
use crate::request::EntryKind;

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
    /// The account's `posted` after this entry: a total, exact at any size.
    pub balance_after: WideDecimal,
    pub prev_hash: String,
    pub hash: String,
}

pub use crate::clock::format_recorded_at;

/// Why a ledger rule rejected the entry (SPEC §1.4): stored with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejection {
    /// `insufficient_funds`, `hold_not_open`, `hold_expired`,
    /// `refund_exceeds_payment` or `already_reversed`.
    pub code: String,
    pub message: String,
}

/// The entry object of the HTTP API (SPEC §3). Built only from a
/// [`StoredEntry`], so a first answer and every replay serialise to the same
/// bytes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntryView {
    /// `ent_` and 32 hex digits.
    pub id: String,
    /// Gap-free position in the tenant's log, from 1.
    pub seq: i64,
    pub kind: EntryKind,
    /// The request's upstream ID (`usage_record_id`, `payment_id`, `hold_id`, …).
    pub upstream_id: String,
    pub status: EntryStatus,
    /// Null unless `status` is `rejected`.
    pub rejection: Option<Rejection>,
    /// The customer account the entry is about.
    pub account: String,
    pub debit_account: String,
    pub credit_account: String,
    /// A decimal string, > 0 (0 for `account_settings`).
    pub amount: String,
    pub unit: String,
    pub meter: Option<String>,
    /// A decimal string ≥ 0.
    pub quantity: Option<String>,
    pub processor: Option<String>,
    /// The client's RFC 3339 time of the event, normalised to UTC.
    pub occurred_at: Option<String>,
    /// The ledger's time of the decision: UTC, six fractional digits.
    pub recorded_at: String,
    /// String keys to string values, ≤ 50 keys.
    pub metadata: Option<Map<String, Value>>,
    /// `sha256:` and the hex digest of the canonical business parameters.
    pub fingerprint: String,
    /// Hex; 64 zeros for seq 1.
    pub prev_hash: String,
    /// Hex `sha256(prev_hash ‖ canonical entry)`.
    pub hash: String,
    /// The `posted` balance of `account` right after this entry.
    pub balance_after: String,
    /// The request fields of the later kinds (`hold_id`, `payment_id`,
    /// `entry_id`, `reason`, `direction`, `overdraft`, `expires_at`, …),
    /// under their request names; absent for debits and payments.
    #[serde(flatten)]
    pub details: Map<String, Value>,
    /// Set by reads (not by writes or replays) once the entry is reversed:
    /// the id of the reversal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reversed_by: Option<String>,
}

/// Request fields shown as `details` of an entry view.
pub const DETAIL_FIELDS: [&str; 10] = [
    "hold_id",
    "expires_at",
    "ttl_seconds",
    "counter_account",
    "payment_id",
    "entry_id",
    "reason",
    "direction",
    "overdraft",
    "alerts",
];

/// The parameters a debit's or payment's view shows; the others are
/// skipped unread.
#[derive(Default, serde::Deserialize)]
struct ShownParams {
    meter: Option<Value>,
    quantity: Option<Value>,
    processor: Option<Value>,
    occurred_at: Option<Value>,
    metadata: Option<Value>,
}

impl StoredEntry {
    pub fn view(&self) -> EntryView {
        if matches!(self.kind, EntryKind::UsageDebit | EntryKind::Payment) {
            // Every answer of a debit or payment is built here, replays
            // included: reading only the shown fields skips the others
            // without building a map of them (measured with the benchmark's
            // replay scenarios).
            let shown: ShownParams = serde_json::from_str(&self.params).unwrap_or_default();
            let text = |v: Option<Value>| match v {
                Some(Value::String(s)) => Some(s),
                _ => None,
            };
            let metadata = match shown.metadata {
                Some(Value::Object(m)) => Some(m),
                _ => None,
            };
            return self.view_with(
                [
                    text(shown.meter),
                    text(shown.quantity),
                    text(shown.processor),
                    text(shown.occurred_at),
                ],
                metadata,
                Map::new(),
            );
        }
        self.view_from_map()
    }

    /// The view from every parameter, read into a map.
    fn view_from_map(&self) -> EntryView {
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
                let at = crate::request::HoldExpiry::Ttl(ttl).resolve(self.recorded_at);
                details.insert("expires_at".into(), Value::String(format_recorded_at(&at)));
            }
        }
        self.view_with(
            [
                text("meter"),
                text("quantity"),
                text("processor"),
                text("occurred_at"),
            ],
            params.get("metadata").and_then(Value::as_object).cloned(),
            details,
        )
    }

    /// The view, given what it shows of the parameters: meter, quantity,
    /// processor and occurred_at (each if a string), metadata, details.
    fn view_with(
        &self,
        [meter, quantity, processor, occurred_at]: [Option<String>; 4],
        metadata: Option<Map<String, Value>>,
        details: Map<String, Value>,
    ) -> EntryView {
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
            meter,
            quantity,
            processor,
            occurred_at,
            recorded_at: format_recorded_at(&self.recorded_at),
            metadata,
            fingerprint: self.fingerprint.clone(),
            prev_hash: self.prev_hash.clone(),
            hash: self.hash.clone(),
            balance_after: self.balance_after.to_string(),
            details,
            reversed_by: None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn entry(kind: EntryKind, params: &str) -> StoredEntry {
        StoredEntry {
            tenant_id: "t".into(),
            seq: 7,
            id: "ent_1".into(),
            kind,
            upstream_id: "u1".into(),
            status: EntryStatus::Posted,
            rejection_code: None,
            rejection_message: None,
            account: "cust_1".into(),
            debit_account: "cust_1".into(),
            credit_account: "@revenue".into(),
            amount: Decimal::new(150, 2),
            unit: "USD".into(),
            params: params.into(),
            fingerprint: "sha256:00".into(),
            recorded_at: DateTime::parse_from_rfc3339("2026-12-01T10:00:00.123456Z")
                .unwrap()
                .with_timezone(&Utc),
            balance_after: WideDecimal::parse("-1.50").unwrap(),
            prev_hash: "0".repeat(64),
            hash: "1".repeat(64),
        }
    }

    /// A debit's or payment's view reads only the fields it shows; it must
    /// be the view every parameter read into a map gives.
    #[test]
    fn a_debits_view_is_the_view_from_all_its_parameters() {
        let params = [
            r#"{"account":"cust_1","amount":"1.50","meter":"tokens","metadata":{"a":"1","z":"\u00e9\"x"},"occurred_at":"2026-12-01T09:00:00Z","quantity":"3","unit":"USD","usage_record_id":"u1"}"#,
            r#"{"account":"cust_1","amount":"1.50","processor":"stripe","unit":"USD","payment_id":"p1","extra":[1,{"b":null}]}"#,
            r#"{"meter":null,"quantity":3,"metadata":"not an object","occurred_at":{"x":1}}"#,
            r#"{}"#,
            "not json",
        ];
        for kind in [EntryKind::UsageDebit, EntryKind::Payment] {
            for p in params {
                let e = entry(kind, p);
                assert_eq!(
                    serde_json::to_value(e.view()).unwrap(),
                    serde_json::to_value(e.view_from_map()).unwrap(),
                    "{kind:?} {p}"
                );
            }
        }
        let shown = serde_json::to_value(entry(EntryKind::UsageDebit, params[0]).view()).unwrap();
        assert_eq!(shown["meter"], "tokens");
        assert_eq!(shown["quantity"], "3");
        assert_eq!(shown["metadata"]["z"], "\u{e9}\"x");
    }
}
