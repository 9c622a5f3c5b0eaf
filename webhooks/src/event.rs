//! The events of the ledger: their types, stable ids and bodies.
//!
//! An event is a function of the committed log: its id is derived from what
//! it is about (the entry, or the account and seq of a crossing), so every
//! process, every retry and every replay sends the same id and the same
//! body. Receivers deduplicate by it (`webhook-id`).

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tally_ledger::entry::StoredEntry;
use tally_ledger::request::EntryKind;

/// The event types an endpoint can subscribe to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventType {
    /// A posted entry of any kind.
    EntryPosted,
    /// An entry stored as a rejection (`insufficient_funds`, …).
    EntryRejected,
    /// The server released a hold at its expiry.
    HoldExpired,
    /// An account's available balance crossed below its `alerts.low_balance`.
    BalanceLow,
    /// An intent's outcome `succeeded` was stored (docs/intents.md).
    IntentSucceeded,
    /// An intent's outcome `failed` was stored.
    IntentFailed,
}

impl EventType {
    pub const ALL: [EventType; 6] = [
        EventType::EntryPosted,
        EventType::EntryRejected,
        EventType::HoldExpired,
        EventType::BalanceLow,
        EventType::IntentSucceeded,
        EventType::IntentFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::EntryPosted => "entry.posted",
            EventType::EntryRejected => "entry.rejected",
            EventType::HoldExpired => "hold.expired",
            EventType::BalanceLow => "balance.low",
            EventType::IntentSucceeded => "intent.succeeded",
            EventType::IntentFailed => "intent.failed",
        }
    }

    pub fn parse(text: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == text)
    }
}

/// One event, ready to be delivered.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// `evt_` and 32 hex digits, stable (see the module doc).
    pub id: String,
    pub event_type: EventType,
    /// The tenant's `seq` of the entry the event is about.
    pub seq: i64,
    /// The exact bytes every attempt sends.
    pub body: String,
}

/// `evt_` + the first 16 bytes of sha256 over the parts, NUL-separated.
fn event_id(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            h.update([0u8]);
        }
        h.update(p.as_bytes());
    }
    format!("evt_{}", hex::encode(&h.finalize()[..16]))
}

fn body(id: &str, event_type: EventType, e: &StoredEntry, data: Value) -> String {
    json!({
        "id": id,
        "type": event_type.as_str(),
        "seq": e.seq,
        "created_at": tally_ledger::entry::format_recorded_at(&e.recorded_at),
        "data": data,
    })
    .to_string()
}

/// `entry.posted` or `entry.rejected` of `e`.
pub fn entry_event(tenant: &str, e: &StoredEntry) -> Event {
    let event_type = match e.status {
        tally_ledger::entry::EntryStatus::Posted => EventType::EntryPosted,
        tally_ledger::entry::EntryStatus::Rejected => EventType::EntryRejected,
    };
    let id = event_id(&[event_type.as_str(), tenant, &e.id]);
    let data = json!({ "entry": e.view() });
    Event {
        body: body(&id, event_type, e, data),
        id,
        event_type,
        seq: e.seq,
    }
}

/// `intent.succeeded` or `intent.failed` of an intent's outcome entry;
/// `None` for its claims and releases, which are no one's business but
/// the intent's (`GET /v1/intents/{intent_id}` shows them).
pub fn intent_event(tenant: &str, e: &StoredEntry) -> Option<Event> {
    let event_type = match e.kind {
        EntryKind::IntentSucceeded => EventType::IntentSucceeded,
        EntryKind::IntentFailed => EventType::IntentFailed,
        _ => return None,
    };
    let id = event_id(&[event_type.as_str(), tenant, &e.id]);
    let params: Value = serde_json::from_str(&e.params).unwrap_or(Value::Null);
    let field = |k: &str| params.get(k).cloned().unwrap_or(Value::Null);
    let mut intent = json!({
        "intent_id": e.upstream_id,
        "status": if event_type == EventType::IntentSucceeded { "succeeded" } else { "failed" },
        "attempt": field("attempt"),
        "fence": field("fence"),
    });
    let outcome = if event_type == EventType::IntentSucceeded {
        "result"
    } else {
        "error"
    };
    intent[outcome] = field(outcome);
    let data = json!({ "intent": intent, "entry": e.view() });
    Some(Event {
        body: body(&id, event_type, e, data),
        id,
        event_type,
        seq: e.seq,
    })
}

/// `hold.expired`: `e` is the server's release of an expired hold.
pub fn hold_expired_event(tenant: &str, e: &StoredEntry, hold_id: &str) -> Event {
    let event_type = EventType::HoldExpired;
    let id = event_id(&[event_type.as_str(), tenant, &e.id]);
    let data = json!({ "hold_id": hold_id, "account": e.account, "entry": e.view() });
    Event {
        body: body(&id, event_type, e, data),
        id,
        event_type,
        seq: e.seq,
    }
}

/// `balance.low`: after `e`, `account`'s available balance is below the
/// threshold (and was not before). `balance` is the balance object of
/// `GET /v1/accounts/{account}/balance` as of `e.seq`.
pub fn balance_low_event(
    tenant: &str,
    e: &StoredEntry,
    account: &str,
    threshold: &str,
    balance: Value,
) -> Event {
    let event_type = EventType::BalanceLow;
    let seq = e.seq.to_string();
    let id = event_id(&[event_type.as_str(), tenant, account, &seq]);
    let data = json!({
        "account": account,
        "low_balance": threshold,
        "balance": balance,
        "entry_id": e.id,
    });
    Event {
        body: body(&id, event_type, e, data),
        id,
        event_type,
        seq: e.seq,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_distinct_per_type_tenant_and_subject() {
        let a = event_id(&["entry.posted", "t1", "ent_1"]);
        assert_eq!(a, event_id(&["entry.posted", "t1", "ent_1"]));
        assert_ne!(a, event_id(&["entry.posted", "t2", "ent_1"]));
        assert_ne!(a, event_id(&["hold.expired", "t1", "ent_1"]));
        // The separator keeps ("ab", "c") and ("a", "bc") apart.
        assert_ne!(event_id(&["ab", "c"]), event_id(&["a", "bc"]));
        assert_eq!(a.len(), 4 + 32);
    }

    #[test]
    fn types_read_back() {
        for t in EventType::ALL {
            assert_eq!(EventType::parse(t.as_str()), Some(t));
        }
        assert_eq!(EventType::parse("entry.*"), None);
    }
}
