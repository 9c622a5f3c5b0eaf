//! Rule state recomputed from the log alone: account settings, holds,
//! refunded totals and reversals, folded entry by entry the way the writer
//! changes its records when it appends (`decide/append.rs`).
//!
//! `tally verify` compares the stored `rule_state` rows with this fold and
//! `tally projections rebuild` writes the fold back; both use [`RuleFold`]
//! and [`compare`], so what one calls right the other restores.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde_json::{Map, Value};

use crate::balance::WideDecimal;
use crate::entry::{EntryStatus, StoredEntry};
use crate::names::{REVENUE_ACCOUNT, SERVER_KEY_PREFIX};
use crate::request::EntryKind;
use crate::rule_state::{AccountSettings, HoldRecord, HoldStatus, Overdraft, StateKey, StateValue};
use crate::LedgerError;

mod intent_fold;

/// The kinds of entry that change rule state, for SQL filters; the others
/// (usage debits, payments, adjustments) never do.
pub const RULE_KINDS_SQL: &str =
    "('account_settings', 'hold', 'hold_capture', 'hold_release', 'refund', 'reversal', \
     'intent_claimed', 'intent_released', 'intent_succeeded', 'intent_failed')";

/// Every rule-state record the log implies, by key.
#[derive(Debug, Default)]
pub struct RuleFold {
    pub records: BTreeMap<StateKey, StateValue>,
}

fn corrupt(e: &StoredEntry, what: &str) -> LedgerError {
    LedgerError::Corrupt(format!(
        "seq {}: {} entry {}: {what}",
        e.seq,
        e.kind.as_str(),
        e.id
    ))
}

impl RuleFold {
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds one entry, in seq order.
    pub fn apply(&mut self, e: &StoredEntry) -> Result<(), LedgerError> {
        if e.kind.is_intent() {
            return intent_fold::apply(&mut self.records, e);
        }
        let rule_kind = matches!(
            e.kind,
            EntryKind::AccountSettings
                | EntryKind::Hold
                | EntryKind::HoldCapture
                | EntryKind::HoldRelease
                | EntryKind::Refund
                | EntryKind::Reversal
        );
        if !rule_kind {
            return Ok(());
        }
        let posted = e.status == EntryStatus::Posted;
        // Only a hold is remembered when rejected (as a rejected hold).
        if !posted && e.kind != EntryKind::Hold {
            return Ok(());
        }
        let params: Map<String, Value> =
            serde_json::from_str(&e.params).map_err(|_| corrupt(e, "params are not an object"))?;
        let text = |field: &str| params.get(field).and_then(Value::as_str);
        match e.kind {
            EntryKind::AccountSettings => {
                let key = StateKey::Account(e.account.clone());
                let version = match self.records.get(&key) {
                    Some(StateValue::Account(a)) => a.version + 1,
                    _ => 1,
                };
                let overdraft = match params.get("overdraft") {
                    None => Overdraft::Allow,
                    Some(v) => Overdraft::from_json(v).map_err(|m| corrupt(e, &m))?,
                };
                let settings = AccountSettings {
                    unit: e.unit.clone(),
                    overdraft,
                    metadata: params.get("metadata").and_then(Value::as_object).cloned(),
                    low_balance: match params.get("alerts") {
                        None => None,
                        Some(v) => crate::rule_state::low_balance_from_json(v)
                            .map_err(|m| corrupt(e, &m))?,
                    },
                    version,
                    entry_id: e.id.clone(),
                    seq: e.seq,
                };
                self.records.insert(key, StateValue::Account(settings));
            }
            EntryKind::Hold => {
                let expires_at = match (text("expires_at"), params.get("ttl_seconds")) {
                    (Some(at), _) => DateTime::parse_from_rfc3339(at)
                        .map_err(|_| corrupt(e, "expires_at is not a timestamp"))?
                        .with_timezone(&Utc),
                    (None, Some(ttl)) => {
                        let seconds = ttl
                            .as_i64()
                            .ok_or_else(|| corrupt(e, "ttl_seconds is not an integer"))?;
                        Duration::try_seconds(seconds)
                            .and_then(|d| e.recorded_at.checked_add_signed(d))
                            .ok_or_else(|| corrupt(e, "ttl_seconds is out of range"))?
                    }
                    (None, None) => return Err(corrupt(e, "names no expiry")),
                };
                let record = HoldRecord {
                    hold_id: e.upstream_id.clone(),
                    account: e.account.clone(),
                    unit: e.unit.clone(),
                    amount: e.amount,
                    counter_account: text("counter_account")
                        .unwrap_or(REVENUE_ACCOUNT)
                        .to_owned(),
                    expires_at,
                    status: if posted {
                        HoldStatus::Open
                    } else {
                        HoldStatus::Rejected
                    },
                    entry_id: e.id.clone(),
                    closed_by: None,
                };
                self.records.insert(
                    StateKey::Hold(e.upstream_id.clone()),
                    StateValue::Hold(record),
                );
            }
            EntryKind::HoldCapture | EntryKind::HoldRelease => {
                let hold_id = text("hold_id").ok_or_else(|| corrupt(e, "names no hold_id"))?;
                let status = if e.kind == EntryKind::HoldCapture {
                    HoldStatus::Captured
                } else if e
                    .upstream_id
                    .strip_prefix(SERVER_KEY_PREFIX)
                    .is_some_and(|k| k.starts_with("expired:"))
                {
                    HoldStatus::Expired
                } else {
                    HoldStatus::Released
                };
                // Like the writer: closing a hold it has no record of
                // changes no record (the balance fold reports that entry).
                if let Some(StateValue::Hold(h)) =
                    self.records.get_mut(&StateKey::Hold(hold_id.to_owned()))
                {
                    h.status = status;
                    h.closed_by = Some(e.id.clone());
                }
            }
            EntryKind::Refund => {
                let payment_id =
                    text("payment_id").ok_or_else(|| corrupt(e, "names no payment_id"))?;
                let key = StateKey::Refunded(payment_id.to_owned());
                let amount = WideDecimal::from_decimal(e.amount)
                    .ok_or_else(|| corrupt(e, "has more than 18 fractional digits"))?;
                // Added exactly, like the writer: `checked_add` would round.
                let total = match self.records.get(&key) {
                    Some(StateValue::Refunded(before)) => before + &amount,
                    _ => amount,
                };
                self.records.insert(key, StateValue::Refunded(total));
            }
            EntryKind::Reversal => {
                let target = text("entry_id").ok_or_else(|| corrupt(e, "names no entry_id"))?;
                self.records.insert(
                    StateKey::Reversal(target.to_owned()),
                    StateValue::ReversedBy(e.id.clone()),
                );
            }
            _ => {}
        }
        Ok(())
    }
}

/// A `rule_state` row as stored, read without interpretation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    pub kind: String,
    pub key: String,
    pub value: String,
    pub expires_at: Option<String>,
}

/// How a stored row differs from the fold of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    /// The log implies the record; no row holds it.
    Missing { key: StateKey, expected: String },
    /// A row the log does not imply.
    Extra {
        kind: String,
        key: String,
        stored: String,
    },
    /// The row holds another value (or expiry column) than the log implies.
    Different {
        key: StateKey,
        stored: String,
        expected: String,
    },
}

impl Difference {
    /// The row to write to repair it; `None`: the row must go.
    pub fn repair(&self, fold: &RuleFold) -> Option<crate::rule_state::StateRow> {
        match self {
            Difference::Missing { key, .. } | Difference::Different { key, .. } => {
                fold.records.get(key).map(|v| v.to_row(key))
            }
            Difference::Extra { .. } => None,
        }
    }

    /// (kind, key) of the row.
    pub fn row_key(&self) -> (&str, &str) {
        match self {
            Difference::Missing { key, .. } | Difference::Different { key, .. } => {
                (key.kind(), key.key())
            }
            Difference::Extra { kind, key, .. } => (kind, key),
        }
    }
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Difference::Missing { key, expected } => write!(
                f,
                "rule state {} {:?}: missing; the log folds to {expected}",
                key.kind(),
                key.key()
            ),
            Difference::Extra { kind, key, stored } => write!(
                f,
                "rule state {kind} {key:?}: extra; stored {stored} but the log makes no such record"
            ),
            Difference::Different {
                key,
                stored,
                expected,
            } => write!(
                f,
                "rule state {} {:?}: different; stored {stored} but the log folds to {expected}",
                key.kind(),
                key.key()
            ),
        }
    }
}

fn show(value: &str, expires_at: Option<&str>) -> String {
    match expires_at {
        Some(at) => format!("{value} (expires_at column {at})"),
        None => value.to_owned(),
    }
}

/// Every difference between the stored rows and the fold, by kind and key.
/// Values are compared as records (so the order of JSON keys does not
/// matter), and the expiry column, which the sweep reads, as text.
pub fn compare(fold: &RuleFold, stored: &[StoredRecord]) -> Vec<Difference> {
    let mut rows: BTreeMap<(&str, &str), &StoredRecord> = BTreeMap::new();
    for r in stored {
        rows.insert((r.kind.as_str(), r.key.as_str()), r);
    }
    let mut out = Vec::new();
    for (key, value) in &fold.records {
        let row = value.to_row(key);
        let expected = show(&row.value, row.expires_at.as_deref());
        // The record as it reads back (timestamps keep microseconds).
        let wanted = StateValue::from_json(key, &row.value);
        match rows.remove(&(key.kind(), key.key())) {
            None => out.push(Difference::Missing {
                key: key.clone(),
                expected,
            }),
            Some(s) => {
                let same = match (StateValue::from_json(key, &s.value), &wanted) {
                    (Some(stored), Some(wanted)) => {
                        intent_fold::agrees(&stored, wanted) && s.expires_at == row.expires_at
                    }
                    _ => false,
                };
                if !same {
                    out.push(Difference::Different {
                        key: key.clone(),
                        stored: show(&s.value, s.expires_at.as_deref()),
                        expected,
                    });
                }
            }
        }
    }
    for ((kind, key), s) in rows {
        out.push(Difference::Extra {
            kind: kind.to_owned(),
            key: key.to_owned(),
            stored: show(&s.value, s.expires_at.as_deref()),
        });
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use chrono::Utc;
    use serde_json::json;

    use super::*;
    use crate::chain::Head;
    use crate::decide::{decide_group, GroupState};
    use crate::request::EntryRequest;

    fn body(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    /// The fold of the entries the writer appended equals the records the
    /// writer kept while deciding them: every kind, posted and rejected.
    #[test]
    fn the_fold_of_the_log_equals_the_writers_records() {
        let mut state = GroupState::new("t", Head::EMPTY);
        let debit = EntryRequest::usage_debit(body(
            json!({"usage_record_id": "u1", "account": "c", "amount": "3", "unit": "USD"}),
        ))
        .unwrap();
        let mut n = 0;
        let mut ids = move || {
            n += 1;
            format!("ent_{n}")
        };
        let first = decide_group(&mut state, &[&debit], Utc::now(), &mut ids);
        let debit_id = first.new_entries[0].id.clone();
        let hold = |id: &str, amount: &str, expiry: Value| {
            let mut b = json!({"hold_id": id, "account": "c", "amount": amount, "unit": "USD",
                               "counter_account": "@payments"});
            for (k, v) in expiry.as_object().unwrap() {
                b[k] = v.clone();
            }
            EntryRequest::hold(body(b)).unwrap()
        };
        let soon = (Utc::now() + Duration::days(1))
            .to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
            .replace("Z", "1Z");
        let requests = vec![
            EntryRequest::settings(
                "c",
                body(json!({"unit": "USD", "overdraft": {"limit": "20"}})),
            )
            .unwrap(),
            EntryRequest::payment(body(
                json!({"payment_id": "p1", "account": "c", "amount": "10", "unit": "USD"}),
            ))
            .unwrap(),
            EntryRequest::refund(body(
                json!({"refund_id": "r1", "payment_id": "p1", "amount": "4"}),
            ))
            .unwrap(),
            EntryRequest::refund(body(
                json!({"refund_id": "r2", "payment_id": "p1", "amount": "1.5"}),
            ))
            .unwrap(),
            EntryRequest::reversal(body(
                json!({"reversal_id": "v1", "entry_id": debit_id, "reason": "x"}),
            ))
            .unwrap(),
            hold("h1", "2", json!({"ttl_seconds": 60})),
            // Nanoseconds: the record keeps microseconds.
            hold("h2", "1", json!({"expires_at": soon})),
            hold("h3", "1", json!({"ttl_seconds": 60})),
            // Rejected: beyond the overdraft limit; remembered as rejected.
            hold("h4", "500", json!({"ttl_seconds": 60})),
            EntryRequest::capture("h1", body(json!({"capture_id": "c1", "amount": "1"}))).unwrap(),
            EntryRequest::release("h2", body(json!({"release_id": "rel1"}))).unwrap(),
            EntryRequest::expiry_release("h3"),
            EntryRequest::settings(
                "c",
                body(json!({"unit": "USD", "overdraft": "forbid", "metadata": {"a": "b"}})),
            )
            .unwrap(),
        ];
        let refs: Vec<&EntryRequest> = requests.iter().collect();
        let out = decide_group(&mut state, &refs, Utc::now(), &mut ids);
        let mut fold = RuleFold::new();
        for e in first.new_entries.iter().chain(out.new_entries.iter()) {
            fold.apply(e).unwrap();
        }
        let stored: Vec<StoredRecord> = state
            .records
            .iter()
            .map(|(k, v)| {
                let row = v.to_row(k);
                StoredRecord {
                    kind: row.kind.to_owned(),
                    key: row.key,
                    value: row.value,
                    expires_at: row.expires_at,
                }
            })
            .collect();
        assert_eq!(stored.len(), 7, "{stored:?}");
        assert_eq!(compare(&fold, &stored), vec![]);
        let statuses: Vec<_> = ["h1", "h2", "h3", "h4"]
            .iter()
            .map(|h| match &fold.records[&StateKey::Hold((*h).into())] {
                StateValue::Hold(h) => h.status,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            statuses,
            [
                HoldStatus::Captured,
                HoldStatus::Released,
                HoldStatus::Expired,
                HoldStatus::Rejected
            ]
        );

        // Each kind of damage is named as what it is.
        let mut damaged = stored.clone();
        damaged.retain(|r| r.kind != "refunded");
        if let Some(account) = damaged.iter_mut().find(|r| r.kind == "account") {
            account.value = "{".into();
        }
        damaged.push(StoredRecord {
            kind: "reversal".into(),
            key: "ent_x".into(),
            value: "\"ent_y\"".into(),
            expires_at: None,
        });
        let found = compare(&fold, &damaged);
        assert!(found
            .iter()
            .any(|d| matches!(d, Difference::Different { key, .. } if key.kind() == "account")));
        assert!(found
            .iter()
            .any(|d| matches!(d, Difference::Missing { key, .. }
            if *key == StateKey::Refunded("p1".into()))));
        assert!(found
            .iter()
            .any(|d| matches!(d, Difference::Extra { key, .. } if key == "ent_x")));
        assert_eq!(found.len(), 3, "{found:?}");
    }
}
