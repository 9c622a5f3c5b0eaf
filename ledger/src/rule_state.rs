//! The ledger's rule state: what the writer must know, besides balances, to
//! decide an entry — account settings, holds, refunded totals, reversals.
//!
//! Every record is a projection of the log, kept in step with it inside the
//! group transaction (table `rule_state`, one JSON value per record), so a
//! decision never scans the log. `tally verify` refolds the log and compares.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde_json::{json, Map, Value};

use crate::amount::{canonical, parse_exact};
use crate::balance::WideDecimal;
use crate::clock::format_recorded_at;
use crate::intents::IntentRecord;

/// How far below zero an account's `available` balance may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overdraft {
    /// No floor (the default: usage is recorded whatever the balance).
    #[default]
    Allow,
    /// `available` never below zero.
    Forbid,
    /// `available` never below `-limit`.
    Limit(Decimal),
}

impl Overdraft {
    /// The lowest `available` allowed, if any.
    pub fn floor(self) -> Option<Decimal> {
        match self {
            Overdraft::Allow => None,
            Overdraft::Forbid => Some(Decimal::ZERO),
            Overdraft::Limit(l) => Some(-l),
        }
    }

    pub fn to_json(self) -> Value {
        match self {
            Overdraft::Allow => json!("allow"),
            Overdraft::Forbid => json!("forbid"),
            Overdraft::Limit(l) => json!({ "limit": canonical(l) }),
        }
    }

    pub fn from_json(v: &Value) -> Result<Overdraft, String> {
        const SHAPE: &str = r#"must be "allow", "forbid" or {"limit": "<amount>"}"#;
        match v {
            Value::String(s) if s == "allow" => Ok(Overdraft::Allow),
            Value::String(s) if s == "forbid" => Ok(Overdraft::Forbid),
            Value::Object(m) if m.len() == 1 => {
                let limit = match m.get("limit") {
                    Some(Value::String(s)) => parse_exact(s, false)?,
                    Some(Value::Number(n)) => parse_exact(&n.to_string(), true)?,
                    _ => return Err(SHAPE.to_owned()),
                };
                if limit < Decimal::ZERO {
                    return Err("limit must not be negative".to_owned());
                }
                Ok(Overdraft::Limit(limit.normalize()))
            }
            _ => Err(SHAPE.to_owned()),
        }
    }
}

/// `alerts` of account settings: `{"low_balance": "<decimal>"}` (any
/// sign: a postpaid account may alert below a negative figure), `{}` or
/// `{"low_balance": null}` for none.
pub fn low_balance_from_json(v: &Value) -> Result<Option<Decimal>, String> {
    const SHAPE: &str = r#"must be {"low_balance": "<amount>"} or {}"#;
    let Value::Object(m) = v else {
        return Err(SHAPE.to_owned());
    };
    if m.keys().any(|k| k != "low_balance") {
        return Err(SHAPE.to_owned());
    }
    match m.get("low_balance") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(parse_exact(s, false)?.normalize())),
        Some(Value::Number(n)) => Ok(Some(parse_exact(&n.to_string(), true)?.normalize())),
        Some(_) => Err(SHAPE.to_owned()),
    }
}

/// What [`low_balance_from_json`] reads back.
pub fn low_balance_to_json(low: Decimal) -> Value {
    json!({ "low_balance": canonical(low) })
}

/// An account's current settings, as its latest `account_settings` entry set them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountSettings {
    pub unit: String,
    pub overdraft: Overdraft,
    pub metadata: Option<Map<String, Value>>,
    /// `alerts.low_balance`, if set.
    pub low_balance: Option<Decimal>,
    /// 1 for the first settings entry of the account, then +1 per change.
    pub version: i64,
    pub entry_id: String,
    pub seq: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldStatus {
    Open,
    Captured,
    Released,
    /// Released by the server when its time ran out.
    Expired,
    /// The hold itself was rejected (e.g. insufficient funds): it reserves
    /// nothing and can be neither captured nor released.
    Rejected,
}

impl HoldStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            HoldStatus::Open => "open",
            HoldStatus::Captured => "captured",
            HoldStatus::Released => "released",
            HoldStatus::Expired => "expired",
            HoldStatus::Rejected => "rejected",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [
            HoldStatus::Open,
            HoldStatus::Captured,
            HoldStatus::Released,
            HoldStatus::Expired,
            HoldStatus::Rejected,
        ]
        .into_iter()
        .find(|h| h.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldRecord {
    pub hold_id: String,
    pub account: String,
    pub unit: String,
    pub amount: Decimal,
    pub counter_account: String,
    pub expires_at: DateTime<Utc>,
    pub status: HoldStatus,
    /// The `hold` entry.
    pub entry_id: String,
    /// The capture or release entry that closed it.
    pub closed_by: Option<String>,
}

/// Which record: the `kind` and `key` columns of `rule_state`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StateKey {
    Account(String),
    Hold(String),
    /// Total refunded of a payment, by its `payment_id`.
    Refunded(String),
    /// The reversal of an entry, by the entry's id.
    Reversal(String),
    /// An intent, by its `intent_id` (`crate::intents`).
    Intent(String),
}

impl StateKey {
    pub fn kind(&self) -> &'static str {
        match self {
            StateKey::Account(_) => "account",
            StateKey::Hold(_) => "hold",
            StateKey::Refunded(_) => "refunded",
            StateKey::Reversal(_) => "reversal",
            StateKey::Intent(_) => "intent",
        }
    }

    pub fn key(&self) -> &str {
        match self {
            StateKey::Account(k)
            | StateKey::Hold(k)
            | StateKey::Refunded(k)
            | StateKey::Reversal(k)
            | StateKey::Intent(k) => k,
        }
    }

    pub fn from_parts(kind: &str, key: String) -> Option<StateKey> {
        Some(match kind {
            "account" => StateKey::Account(key),
            "hold" => StateKey::Hold(key),
            "refunded" => StateKey::Refunded(key),
            "reversal" => StateKey::Reversal(key),
            "intent" => StateKey::Intent(key),
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateValue {
    Account(AccountSettings),
    Hold(HoldRecord),
    /// A payment's refunded total; exact at any size like every total.
    Refunded(WideDecimal),
    /// The id of the reversal entry.
    ReversedBy(String),
    Intent(Box<IntentRecord>),
}

/// A stored record: key, JSON text, and the expiry column (open holds only,
/// so the expiry sweep is an index range scan).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateRow {
    pub kind: &'static str,
    pub key: String,
    pub value: String,
    pub expires_at: Option<String>,
}

impl StateValue {
    pub fn to_row(&self, key: &StateKey) -> StateRow {
        let (value, expires_at) = match self {
            StateValue::Account(a) => (
                json!({
                    "unit": a.unit, "overdraft": a.overdraft.to_json(), "metadata": a.metadata,
                    "low_balance": a.low_balance.map(canonical),
                    "version": a.version, "entry_id": a.entry_id, "seq": a.seq,
                }),
                None,
            ),
            StateValue::Hold(h) => (
                json!({
                    "account": h.account, "unit": h.unit, "amount": canonical(h.amount),
                    "counter_account": h.counter_account,
                    "expires_at": format_recorded_at(&h.expires_at),
                    "status": h.status.as_str(), "entry_id": h.entry_id, "closed_by": h.closed_by,
                }),
                (h.status == HoldStatus::Open).then(|| format_recorded_at(&h.expires_at)),
            ),
            StateValue::Refunded(d) => (json!(d.to_string()), None),
            StateValue::ReversedBy(id) => (json!(id), None),
            StateValue::Intent(r) => (r.to_json(), None),
        };
        StateRow {
            kind: key.kind(),
            key: key.key().to_owned(),
            value: value.to_string(),
            expires_at,
        }
    }

    /// Reads a stored record back; `None` if it is not what `key` stores.
    pub fn from_json(key: &StateKey, text: &str) -> Option<StateValue> {
        let v: Value = serde_json::from_str(text).ok()?;
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let dec = |k: &str| s(k).and_then(|t| parse_exact(&t, false).ok());
        Some(match key {
            StateKey::Account(_) => StateValue::Account(AccountSettings {
                unit: s("unit")?,
                overdraft: Overdraft::from_json(v.get("overdraft")?).ok()?,
                metadata: v.get("metadata").and_then(Value::as_object).cloned(),
                low_balance: dec("low_balance"),
                version: v.get("version")?.as_i64()?,
                entry_id: s("entry_id")?,
                seq: v.get("seq")?.as_i64()?,
            }),
            StateKey::Hold(hold_id) => StateValue::Hold(HoldRecord {
                hold_id: hold_id.clone(),
                account: s("account")?,
                unit: s("unit")?,
                amount: dec("amount")?,
                counter_account: s("counter_account")?,
                expires_at: DateTime::parse_from_rfc3339(&s("expires_at")?)
                    .ok()?
                    .with_timezone(&Utc),
                status: HoldStatus::parse(&s("status")?)?,
                entry_id: s("entry_id")?,
                closed_by: s("closed_by"),
            }),
            // Plain decimal text of any size (a total has no digit limit).
            StateKey::Refunded(_) => StateValue::Refunded(WideDecimal::parse(v.as_str()?)?),
            StateKey::Reversal(_) => StateValue::ReversedBy(v.as_str()?.to_owned()),
            StateKey::Intent(id) => StateValue::Intent(Box::new(IntentRecord::from_json(id, &v)?)),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn overdraft_reads_its_three_shapes_and_refuses_others() {
        assert_eq!(Overdraft::from_json(&json!("allow")), Ok(Overdraft::Allow));
        assert_eq!(
            Overdraft::from_json(&json!("forbid")),
            Ok(Overdraft::Forbid)
        );
        let limit = Overdraft::from_json(&json!({"limit": "50.00"})).unwrap();
        assert_eq!(limit.floor().unwrap().to_string(), "-50");
        assert_eq!(limit.to_json(), json!({"limit": "50"}));
        assert!(Overdraft::from_json(&json!({"limit": "-1"})).is_err());
        assert!(Overdraft::from_json(&json!("maybe")).is_err());
        assert!(Overdraft::from_json(&json!({"limit": "1", "x": 1})).is_err());
    }

    #[test]
    fn records_round_trip_through_their_rows() {
        let key = StateKey::Hold("h1".into());
        let hold = StateValue::Hold(HoldRecord {
            hold_id: "h1".into(),
            account: "c".into(),
            unit: "USD".into(),
            amount: Decimal::new(150, 2),
            counter_account: "@revenue".into(),
            expires_at: DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
            status: HoldStatus::Open,
            entry_id: "ent_1".into(),
            closed_by: None,
        });
        let row = hold.to_row(&key);
        assert_eq!(
            row.expires_at.as_deref(),
            Some("2027-01-15T08:00:00.000000Z")
        );
        assert_eq!(StateValue::from_json(&key, &row.value), Some(hold));
        let key = StateKey::Account("c".into());
        let account = StateValue::Account(AccountSettings {
            unit: "USD".into(),
            overdraft: Overdraft::Limit(Decimal::new(5, 0)),
            metadata: None,
            low_balance: Some(Decimal::new(250, 2)),
            version: 2,
            entry_id: "ent_2".into(),
            seq: 9,
        });
        let row = account.to_row(&key);
        assert_eq!(row.expires_at, None);
        assert_eq!(StateValue::from_json(&key, &row.value), Some(account));
    }
}
