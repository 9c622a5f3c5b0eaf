//! Request and response types.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

fn decimal(d: Decimal) -> Value {
    Value::String(d.normalize().to_string())
}

/// The optional fields every money-moving request shares.
fn insert_shared_optionals(
    m: &mut Map<String, Value>,
    occurred_at: Option<DateTime<Utc>>,
    counter_account: Option<&str>,
    metadata: Option<&BTreeMap<String, String>>,
) {
    if let Some(v) = occurred_at {
        m.insert(
            "occurred_at".into(),
            json!(v.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
        );
    }
    if let Some(v) = counter_account {
        m.insert("counter_account".into(), json!(v));
    }
    if let Some(v) = metadata {
        m.insert("metadata".into(), json!(v));
    }
}

/// A usage debit. The usage-record ID is required to build one: it is the
/// idempotency key, taken from the upstream system, never generated here.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageDebit {
    pub usage_record_id: String,
    pub account: String,
    pub amount: Decimal,
    pub unit: String,
    pub meter: Option<String>,
    pub quantity: Option<Decimal>,
    pub occurred_at: Option<DateTime<Utc>>,
    pub counter_account: Option<String>,
    pub metadata: Option<BTreeMap<String, String>>,
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

    pub(crate) fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("usage_record_id".into(), json!(self.usage_record_id));
        m.insert("account".into(), json!(self.account));
        m.insert("amount".into(), decimal(self.amount));
        m.insert("unit".into(), json!(self.unit));
        if let Some(v) = &self.meter {
            m.insert("meter".into(), json!(v));
        }
        if let Some(v) = self.quantity {
            m.insert("quantity".into(), decimal(v));
        }
        insert_shared_optionals(
            &mut m,
            self.occurred_at,
            self.counter_account.as_deref(),
            self.metadata.as_ref(),
        );
        Value::Object(m)
    }
}

/// A payment. The payment ID (from the processor's event) is required.
#[derive(Debug, Clone, PartialEq)]
pub struct Payment {
    pub payment_id: String,
    pub account: String,
    pub amount: Decimal,
    pub unit: String,
    pub processor: Option<String>,
    pub occurred_at: Option<DateTime<Utc>>,
    pub counter_account: Option<String>,
    pub metadata: Option<BTreeMap<String, String>>,
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

    pub(crate) fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("payment_id".into(), json!(self.payment_id));
        m.insert("account".into(), json!(self.account));
        m.insert("amount".into(), decimal(self.amount));
        m.insert("unit".into(), json!(self.unit));
        if let Some(v) = &self.processor {
            m.insert("processor".into(), json!(v));
        }
        insert_shared_optionals(
            &mut m,
            self.occurred_at,
            self.counter_account.as_deref(),
            self.metadata.as_ref(),
        );
        Value::Object(m)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    pub code: String,
    pub message: String,
}

/// The entry object of the API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub id: String,
    pub seq: i64,
    pub kind: String,
    pub upstream_id: String,
    pub status: String,
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
    pub metadata: Option<BTreeMap<String, String>>,
    pub fingerprint: String,
    pub prev_hash: String,
    pub hash: String,
    pub balance_after: String,
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

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct EntryPage {
    pub entries: Vec<Entry>,
    pub next_after_seq: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Balance {
    pub account: String,
    pub unit: String,
    pub debits: String,
    pub credits: String,
    pub posted: String,
    pub held: String,
    pub available: String,
    pub as_of_seq: i64,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::str::FromStr;

    use super::*;

    #[test]
    fn optional_fields_are_absent_unless_set() {
        let mut d = UsageDebit::new("ur_1", "cust", Decimal::from_str("1.50").unwrap(), "USD");
        assert_eq!(
            d.to_json(),
            json!({"usage_record_id": "ur_1", "account": "cust", "amount": "1.5", "unit": "USD"})
        );
        d.quantity = Some(Decimal::from_str("10.0").unwrap());
        assert_eq!(d.to_json()["quantity"], "10");
    }
}

/// One operation of `POST /v1/batch`.
#[derive(Debug, Clone, PartialEq)]
pub enum Operation {
    UsageDebit(UsageDebit),
    Payment(Payment),
}

impl Operation {
    pub(crate) fn to_json(&self) -> Value {
        let (kind, mut body) = match self {
            Operation::UsageDebit(d) => ("usage_debit", d.to_json()),
            Operation::Payment(p) => ("payment", p.to_json()),
        };
        body["type"] = json!(kind);
        body
    }
}

/// One result of `POST /v1/batch`: what the single endpoint would have answered.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BatchResult {
    pub status: u16,
    pub replayed: bool,
    pub entry: Option<Entry>,
    pub problem: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct BatchResults {
    pub results: Vec<BatchResult>,
}
