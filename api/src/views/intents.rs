//! The intent as served (docs/intents.md).

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use tally_ledger::entry::{format_recorded_at, StoredEntry};
use tally_ledger::intents::{IntentOutcome, IntentRecord, IntentStatus};
use tally_ledger::request::EntryKind;
use utoipa::ToSchema;

use super::BatchItem;

/// What an intent is now.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum IntentStatusName {
    /// A claim holds a live lease.
    Claimed,
    /// No live lease and no outcome: the next claim takes it.
    Released,
    Succeeded,
    Failed,
}

/// A claim's lease. The token is shown once, to the claimer.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = IntentLease)]
pub struct LeaseView {
    /// The secret naming this claim: send it with `complete`, `fail` and
    /// `heartbeat`.
    pub token: String,
    /// Grows by one with every claim of the intent.
    pub fence: i64,
    #[schema(format = DateTime)]
    pub expires_at: String,
}

/// `error` of a failed or released intent.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = IntentError)]
pub struct IntentErrorView {
    pub code: String,
    pub message: String,
}

/// One change of an intent's state: its entry in the log.
#[derive(Debug, Serialize, ToSchema)]
pub struct IntentChange {
    /// `claimed`, `released`, `succeeded` or `failed`.
    #[serde(rename = "type")]
    pub change: &'static str,
    pub fence: Option<i64>,
    pub attempt: Option<i64>,
    #[schema(format = DateTime)]
    pub at: String,
    pub seq: i64,
    pub entry_id: String,
}

/// An intent (`GET /v1/intents/{intent_id}`, and every answer about one).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Intent)]
pub struct IntentView {
    pub intent_id: String,
    pub action: String,
    #[schema(value_type = Object)]
    pub params: Value,
    /// `claimed`, `released`, `succeeded` or `failed`; a lease that ran out
    /// reads `released` (`failed`, `lease_expired`, at the last attempt).
    #[schema(value_type = IntentStatusName)]
    pub status: &'static str,
    /// The attempt of the current or last claim (1 for the first).
    pub attempt: i64,
    pub max_attempts: i64,
    /// The current or last claim's fence.
    pub fence: i64,
    /// When the live lease runs out; null without one.
    #[schema(required = true, format = DateTime)]
    pub lease_expires_at: Option<String>,
    /// The new claim's lease: on a 201 only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease: Option<LeaseView>,
    /// The stored result of a succeeded intent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<serde_json::Value>)]
    pub result: Option<Value>,
    /// Why it failed (or why its last attempt was released).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<IntentErrorView>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
    /// Its entries in the log, oldest first (`GET` of one intent only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<IntentChange>>,
}

impl IntentView {
    /// The record as a reader sees it at `now`.
    pub fn at(record: &IntentRecord, now: DateTime<Utc>) -> Self {
        let status = record.status_at(now);
        let result = match &record.outcome {
            Some(IntentOutcome::Succeeded { result }) => Some(result.clone()),
            _ => None,
        };
        IntentView {
            intent_id: record.intent_id.clone(),
            action: record.action.clone(),
            params: serde_json::from_str(&record.params).unwrap_or(Value::Null),
            status: status.as_str(),
            attempt: record.attempt,
            max_attempts: record.max_attempts,
            fence: record.fence,
            lease_expires_at: (status == IntentStatus::Claimed)
                .then(|| format_recorded_at(&record.lease_expires_at)),
            lease: None,
            result,
            error: record.error_at(now).map(|e| IntentErrorView {
                code: e.code,
                message: e.message,
            }),
            created_at: format_recorded_at(&record.created_at),
            updated_at: format_recorded_at(&record.updated_at),
            history: None,
        }
    }

    pub fn with_history(mut self, entries: &[StoredEntry]) -> Self {
        self.history = Some(entries.iter().map(change).collect());
        self
    }
}

fn change(e: &StoredEntry) -> IntentChange {
    let params: serde_json::Map<String, Value> =
        serde_json::from_str(&e.params).unwrap_or_default();
    let int = |k: &str| params.get(k).and_then(Value::as_i64);
    IntentChange {
        change: match e.kind {
            EntryKind::IntentClaimed => "claimed",
            EntryKind::IntentReleased => "released",
            EntryKind::IntentSucceeded => "succeeded",
            _ => "failed",
        },
        fence: int("fence"),
        attempt: int("attempt"),
        at: format_recorded_at(&e.recorded_at),
        seq: e.seq,
        entry_id: e.id.clone(),
    }
}

/// `GET /v1/intents`: a page of intents in `intent_id` order.
#[derive(Debug, Serialize, ToSchema)]
pub struct IntentPage {
    pub intents: Vec<IntentView>,
    /// Pass as `after` for the next page; null on the last.
    #[schema(required = true)]
    pub next_after: Option<String>,
}

/// `POST /v1/intents/{intent_id}/complete`: the intent and, in order, the
/// answer to each of its entries as a batch gives it.
#[derive(Serialize, ToSchema)]
pub struct IntentCompletion {
    #[serde(flatten)]
    pub intent: IntentView,
    pub entries: Vec<BatchItem>,
}
