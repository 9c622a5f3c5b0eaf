//! Intent records folded from their entries, the way `decide/intents.rs`
//! changes them when it appends.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::entry::StoredEntry;
use crate::fingerprint::canonical_params;
use crate::intents::{
    intent_id_of_upstream, IntentError, IntentOutcome, IntentRecord, IntentStatus,
};
use crate::request::EntryKind;
use crate::rule_state::{StateKey, StateValue};
use crate::LedgerError;

use super::corrupt;

/// Folds one intent entry into `records`.
pub(super) fn apply(
    records: &mut BTreeMap<StateKey, StateValue>,
    e: &StoredEntry,
) -> Result<(), LedgerError> {
    let params: Map<String, Value> =
        serde_json::from_str(&e.params).map_err(|_| corrupt(e, "params are not an object"))?;
    let int = |field: &str| {
        params
            .get(field)
            .and_then(Value::as_i64)
            .ok_or_else(|| corrupt(e, &format!("{field} is not an integer")))
    };
    let text = |field: &str| params.get(field).and_then(Value::as_str).map(str::to_owned);
    let error = || {
        params
            .get("error")
            .and_then(IntentError::from_json)
            .ok_or_else(|| corrupt(e, "error is not {code, message}"))
    };
    let with_fence = matches!(e.kind, EntryKind::IntentClaimed | EntryKind::IntentReleased);
    let intent_id = intent_id_of_upstream(&e.upstream_id, with_fence).to_owned();
    let key = StateKey::Intent(intent_id.clone());
    let before = match records.get(&key) {
        Some(StateValue::Intent(r)) => Some(r.as_ref().clone()),
        _ => None,
    };
    let (fence, attempt) = (int("fence")?, int("attempt")?);
    let next = match (e.kind, before) {
        (EntryKind::IntentClaimed, before) => {
            let lease_expires_at = text("lease_expires_at")
                .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
                .map(|t| t.with_timezone(&Utc))
                .ok_or_else(|| corrupt(e, "lease_expires_at is not a timestamp"))?;
            let token_sha256 =
                text("token_sha256").ok_or_else(|| corrupt(e, "names no token_sha256"))?;
            match before {
                None => IntentRecord {
                    intent_id,
                    action: text("action").ok_or_else(|| corrupt(e, "names no action"))?,
                    params: match params.get("params") {
                        Some(Value::Object(p)) => canonical_params(p),
                        _ => return Err(corrupt(e, "params.params is not an object")),
                    },
                    max_attempts: int("max_attempts")?,
                    status: IntentStatus::Claimed,
                    attempt,
                    fence,
                    token_sha256,
                    lease_expires_at,
                    released_error: None,
                    last_call: None,
                    outcome: None,
                    outcome_seq: None,
                    outcome_entries: 0,
                    created_at: e.recorded_at,
                    updated_at: e.recorded_at,
                },
                Some(r) => IntentRecord {
                    status: IntentStatus::Claimed,
                    attempt,
                    fence,
                    token_sha256,
                    lease_expires_at,
                    updated_at: e.recorded_at,
                    ..r
                },
            }
        }
        (_, None) => return Err(corrupt(e, "finishes an intent never claimed")),
        (EntryKind::IntentReleased, Some(r)) => IntentRecord {
            status: IntentStatus::Released,
            released_error: Some(error()?),
            last_call: text("call"),
            updated_at: e.recorded_at,
            ..r
        },
        (EntryKind::IntentSucceeded, Some(r)) => IntentRecord {
            status: IntentStatus::Succeeded,
            outcome: Some(IntentOutcome::Succeeded {
                result: params.get("result").cloned().unwrap_or(Value::Null),
            }),
            last_call: text("call"),
            outcome_seq: Some(e.seq),
            outcome_entries: int("entries")?,
            updated_at: e.recorded_at,
            ..r
        },
        (_, Some(r)) => IntentRecord {
            status: IntentStatus::Failed,
            outcome: Some(IntentOutcome::Failed { error: error()? }),
            last_call: text("call"),
            outcome_seq: Some(e.seq),
            outcome_entries: 0,
            updated_at: e.recorded_at,
            ..r
        },
    };
    if next.fence != fence || next.attempt != attempt {
        return Err(corrupt(
            e,
            "names another fence or attempt than its intent's",
        ));
    }
    records.insert(key, StateValue::Intent(Box::new(next)));
    Ok(())
}

/// Whether a stored record agrees with the fold of the log. A heartbeat
/// moves a live lease's end without an entry, so a stored lease may end
/// later than the log says (and stay so once the intent is finished),
/// never earlier.
pub(super) fn agrees(stored: &StateValue, folded: &StateValue) -> bool {
    match (stored, folded) {
        (StateValue::Intent(s), StateValue::Intent(f))
            if s.lease_expires_at >= f.lease_expires_at =>
        {
            let s = IntentRecord {
                lease_expires_at: f.lease_expires_at,
                ..s.as_ref().clone()
            };
            &s == f.as_ref()
        }
        _ => stored == folded,
    }
}
