//! The bodies of the mutating endpoints. Each carries the upstream system's
//! ID of the operation as a required constructor argument: it is the
//! idempotency key, taken from the caller, never generated here.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::wire;
use super::Metadata;

/// `POST /v1/usage-debits`: debits `account`, credits `@revenue` (or
/// `counter_account`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageDebit {
    pub usage_record_id: String,
    pub account: String,
    #[serde(serialize_with = "wire::decimal")]
    pub amount: Decimal,
    pub unit: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meter: Option<String>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "wire::opt_decimal"
    )]
    pub quantity: Option<Decimal>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "wire::opt_time"
    )]
    pub occurred_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counter_account: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl UsageDebit {
    pub fn new(
        usage_record_id: impl Into<String>,
        account: impl Into<String>,
        amount: Decimal,
        unit: impl Into<String>,
    ) -> Self {
        Self {
            usage_record_id: usage_record_id.into(),
            account: account.into(),
            amount,
            unit: unit.into(),
            meter: None,
            quantity: None,
            occurred_at: None,
            counter_account: None,
            metadata: None,
        }
    }
}

/// `POST /v1/payments`: credits `account`, debits `@payments` (or
/// `counter_account`). The payment ID comes from the processor's event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Payment {
    pub payment_id: String,
    pub account: String,
    #[serde(serialize_with = "wire::decimal")]
    pub amount: Decimal,
    pub unit: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processor: Option<String>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "wire::opt_time"
    )]
    pub occurred_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counter_account: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl Payment {
    pub fn new(
        payment_id: impl Into<String>,
        account: impl Into<String>,
        amount: Decimal,
        unit: impl Into<String>,
    ) -> Self {
        Self {
            payment_id: payment_id.into(),
            account: account.into(),
            amount,
            unit: unit.into(),
            processor: None,
            occurred_at: None,
            counter_account: None,
            metadata: None,
        }
    }
}

/// `POST /v1/holds`: reserves `amount` of the account's available balance.
/// Exactly one of `expires_at` and `ttl_seconds` must be set; the
/// constructors set one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hold {
    pub hold_id: String,
    pub account: String,
    #[serde(serialize_with = "wire::decimal")]
    pub amount: Decimal,
    pub unit: String,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "wire::opt_time"
    )]
    pub expires_at: Option<DateTime<Utc>>,
    /// 1 to 2,592,000 seconds from the hold's `recorded_at`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<i64>,
    /// The account a capture credits (default `@revenue`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counter_account: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl Hold {
    /// A hold that expires `ttl_seconds` after it is recorded.
    pub fn with_ttl(
        hold_id: impl Into<String>,
        account: impl Into<String>,
        amount: Decimal,
        unit: impl Into<String>,
        ttl_seconds: i64,
    ) -> Self {
        Self {
            hold_id: hold_id.into(),
            account: account.into(),
            amount,
            unit: unit.into(),
            expires_at: None,
            ttl_seconds: Some(ttl_seconds),
            counter_account: None,
            metadata: None,
        }
    }

    /// A hold that expires at `expires_at` (in the future, at most 366 days).
    pub fn until(
        hold_id: impl Into<String>,
        account: impl Into<String>,
        amount: Decimal,
        unit: impl Into<String>,
        expires_at: DateTime<Utc>,
    ) -> Self {
        Self {
            expires_at: Some(expires_at),
            ttl_seconds: None,
            ..Self::with_ttl(hold_id, account, amount, unit, 0)
        }
    }
}

/// `POST /v1/holds/{hold_id}/capture`: posts up to the held amount; the
/// rest of the hold is released.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capture {
    pub capture_id: String,
    #[serde(serialize_with = "wire::decimal")]
    pub amount: Decimal,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl Capture {
    pub fn new(capture_id: impl Into<String>, amount: Decimal) -> Self {
        Self {
            capture_id: capture_id.into(),
            amount,
            metadata: None,
        }
    }
}

/// `POST /v1/holds/{hold_id}/release`: gives the whole hold back. The
/// release ID may not start with `@`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Release {
    pub release_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl Release {
    pub fn new(release_id: impl Into<String>) -> Self {
        Self {
            release_id: release_id.into(),
            metadata: None,
        }
    }
}

/// `POST /v1/refunds`: gives (part of) a payment back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refund {
    pub refund_id: String,
    /// The refunded payment's `payment_id`.
    pub payment_id: String,
    #[serde(serialize_with = "wire::decimal")]
    pub amount: Decimal,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl Refund {
    pub fn new(
        refund_id: impl Into<String>,
        payment_id: impl Into<String>,
        amount: Decimal,
    ) -> Self {
        Self {
            refund_id: refund_id.into(),
            payment_id: payment_id.into(),
            amount,
            reason: None,
            metadata: None,
        }
    }
}

/// `POST /v1/reversals`: the compensating entry of a posted entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reversal {
    pub reversal_id: String,
    /// The `id` of the entry to reverse.
    pub entry_id: String,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl Reversal {
    pub fn new(
        reversal_id: impl Into<String>,
        entry_id: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            reversal_id: reversal_id.into(),
            entry_id: entry_id.into(),
            reason: reason.into(),
            metadata: None,
        }
    }
}

/// Which way an adjustment moves money.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// From `@adjustments` to the account.
    Credit,
    /// From the account to `@adjustments`.
    Debit,
}

/// `POST /v1/adjustments` (scope `admin`): a correction against
/// `@adjustments`; no overdraft floor applies.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Adjustment {
    pub adjustment_id: String,
    pub account: String,
    #[serde(serialize_with = "wire::decimal")]
    pub amount: Decimal,
    /// Defaults to the account's unit (required if it has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    pub direction: Direction,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl Adjustment {
    pub fn new(
        adjustment_id: impl Into<String>,
        account: impl Into<String>,
        amount: Decimal,
        direction: Direction,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            adjustment_id: adjustment_id.into(),
            account: account.into(),
            amount,
            unit: None,
            direction,
            reason: reason.into(),
            metadata: None,
        }
    }
}

/// An account's overdraft floor: `"allow"` (the default), `"forbid"`, or
/// `{"limit": "<amount ≥ 0>"}` (`available` may not go below `−limit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overdraft {
    Allow,
    Forbid,
    Limit(Decimal),
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum OverdraftMode {
    Allow,
    Forbid,
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum OverdraftRepr {
    Mode(OverdraftMode),
    Limit {
        #[serde(serialize_with = "wire::decimal")]
        limit: Decimal,
    },
}

impl Serialize for Overdraft {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Overdraft::Allow => OverdraftRepr::Mode(OverdraftMode::Allow),
            Overdraft::Forbid => OverdraftRepr::Mode(OverdraftMode::Forbid),
            Overdraft::Limit(limit) => OverdraftRepr::Limit { limit },
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Overdraft {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match OverdraftRepr::deserialize(d)? {
            OverdraftRepr::Mode(OverdraftMode::Allow) => Overdraft::Allow,
            OverdraftRepr::Mode(OverdraftMode::Forbid) => Overdraft::Forbid,
            OverdraftRepr::Limit { limit } => Overdraft::Limit(limit),
        })
    }
}

/// An account's alerts: `balance.low` fires when the account's `available`
/// balance crosses below `low_balance` (a decimal of any sign).
/// `Alerts::default()` (`{}`): no alert.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alerts {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "wire::opt_decimal"
    )]
    pub low_balance: Option<Decimal>,
}

/// `PUT /v1/accounts/{account}` (scope `admin`): the account's settings,
/// in full. Idempotent by content, so safe to retry as it is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccountSettings {
    /// Cannot change once the account has a unit.
    pub unit: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overdraft: Option<Overdraft>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// `None`: no alert (the settings are in full, so a set alert is cleared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alerts: Option<Alerts>,
}

impl AccountSettings {
    pub fn new(unit: impl Into<String>) -> Self {
        Self {
            unit: unit.into(),
            overdraft: None,
            metadata: None,
            alerts: None,
        }
    }
}

/// One operation of `POST /v1/batch`, tagged with its `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Operation {
    UsageDebit(UsageDebit),
    Payment(Payment),
    Hold(Hold),
    Refund(Refund),
    Reversal(Reversal),
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::str::FromStr;

    use serde_json::{json, to_value};

    use super::*;

    #[test]
    fn optional_fields_are_absent_unless_set() {
        let mut d = UsageDebit::new("ur_1", "cust", Decimal::from_str("1.50").unwrap(), "USD");
        assert_eq!(
            to_value(&d).unwrap(),
            json!({"usage_record_id": "ur_1", "account": "cust", "amount": "1.5", "unit": "USD"})
        );
        d.quantity = Some(Decimal::from_str("10.0").unwrap());
        d.occurred_at = Some("2026-11-29T10:00:00Z".parse().unwrap());
        let v = to_value(&d).unwrap();
        assert_eq!(
            (&v["quantity"], &v["occurred_at"]),
            (&json!("10"), &json!("2026-11-29T10:00:00Z"))
        );
    }

    #[test]
    fn batch_operations_carry_their_type() {
        let op = Operation::Reversal(Reversal::new("rev_1", "ent_1", "twice"));
        assert_eq!(
            to_value(&op).unwrap(),
            json!({"type": "reversal", "reversal_id": "rev_1", "entry_id": "ent_1", "reason": "twice"})
        );
        let hold = Hold::until(
            "h",
            "c",
            Decimal::ONE,
            "USD",
            "2027-01-01T00:00:00Z".parse().unwrap(),
        );
        assert_eq!(to_value(&hold).unwrap()["ttl_seconds"], json!(null));
        assert!(to_value(&hold).unwrap().get("ttl_seconds").is_none());
    }

    #[test]
    fn overdraft_is_a_mode_or_a_limit() {
        let limit = Overdraft::Limit(Decimal::from_str("50.00").unwrap());
        assert_eq!(to_value(limit).unwrap(), json!({"limit": "50"}));
        assert_eq!(to_value(Overdraft::Forbid).unwrap(), json!("forbid"));
        let back: Overdraft = serde_json::from_str(r#"{"limit": "50.00"}"#).unwrap();
        assert_eq!(back, limit);
        let allow: Overdraft = serde_json::from_str(r#""allow""#).unwrap();
        assert_eq!(allow, Overdraft::Allow);
    }
}
