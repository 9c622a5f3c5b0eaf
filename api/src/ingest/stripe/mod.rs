//! Stripe webhooks as payments and refunds (docs/ingest.md).
//!
//! A delivery is checked (`signature`), then answered from the event's
//! record if it has one, else mapped (`map`), decided through the batch
//! path and recorded (`store`). The entries are keyed by Stripe's own ids
//! (`pi_…`, `re_…`), so deliveries racing each other make one entry; the
//! event's record is written once, by the first to finish, and the others
//! answer as it did. A refund whose payment is not in the ledger yet is
//! recorded `unmapped`, waiting for that payment, and applied when the
//! payment's event is.

pub mod map;
pub mod signature;
pub mod store;

use serde_json::{json, Map, Value};
use tally_ledger::writer::Writers;

use super::Outcome;
use crate::problem::{Answer, ApiError};
use crate::routes::batch::decide_operations;
use crate::views::BatchItem;
use map::Mapping;
use store::{EventRow, IntegrationRow};

/// What a delivery is answered: 200 and this body, and whether it is the
/// recorded answer of an earlier delivery.
#[derive(Debug)]
pub struct Delivered {
    pub body: Value,
    pub replayed: bool,
}

/// An event's outcome, before it is recorded.
struct Applied {
    status: &'static str,
    reason: Option<String>,
    waiting_for: Option<String>,
    results: Vec<Value>,
}

/// Receives one delivery to `endpoint_id`, at `now` (unix seconds).
pub async fn receive(
    writers: &Writers,
    endpoint_id: &str,
    signature_header: Option<&str>,
    body: &[u8],
    now_seconds: i64,
) -> Result<Delivered, ApiError> {
    let storage = writers.storage();
    let Some(integration) = store::integration_by_endpoint(storage, endpoint_id).await? else {
        return Err(ApiError::NotFound);
    };
    signature::verify(
        signature_header,
        body,
        &integration.secrets(),
        now_seconds,
        signature::DEFAULT_TOLERANCE_SECONDS,
    )
    .map_err(|e| ApiError::InvalidSignature(e.to_string()))?;
    let event: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
    let Some((event_id, event_type)) = map::identity(&event) else {
        return Err(ApiError::Invalid(
            tally_ledger::fields::ValidationErrors::single(
                "id",
                "a Stripe event needs its id and type",
            ),
        ));
    };
    let tenant = integration.tenant_id.as_str();
    if let Some(recorded) = store::event(storage, tenant, event_id).await? {
        return Ok(replay(&recorded));
    }
    let applied = apply(writers, &integration, &event).await?;
    let micros = now_micros();
    let answer = answer_body(event_id, event_type, &applied);
    let row = EventRow {
        tenant_id: tenant.to_owned(),
        event_id: event_id.to_owned(),
        event_type: event_type.to_owned(),
        status: applied.status.to_owned(),
        reason: applied.reason.clone(),
        waiting_for: applied.waiting_for.clone(),
        payload: String::from_utf8_lossy(body).into_owned(),
        answer: answer.to_string(),
        received_at: micros,
        updated_at: micros,
    };
    if !store::insert_event(storage, &row).await? {
        // Another delivery of this event finished first: its answer.
        return match store::event(storage, tenant, event_id).await? {
            Some(recorded) => Ok(replay(&recorded)),
            None => Err(ApiError::Unavailable(
                "the event's record went missing".into(),
            )),
        };
    }
    if row.waiting_for.is_some() {
        // The payment may have been committed, and looked for what waits
        // on it, between this event's decision and its record: once
        // recorded, decide it once more.
        reapply_row(writers, &integration, row.clone()).await?;
    } else if event_type == "payment_intent.succeeded" && applied.status == "applied" {
        if let Some(payment_id) = event["data"]["object"]["id"].as_str() {
            apply_waiting(writers, &integration, payment_id).await?;
        }
    }
    Ok(Delivered {
        body: answer,
        replayed: false,
    })
}

/// Applies a recorded event again with today's settings (`reapply`), and
/// records its new status. Its entries are keyed: what was applied before
/// replays.
pub async fn reapply(
    writers: &Writers,
    tenant: &str,
    event_id: &str,
) -> Result<EventRow, ApiError> {
    let storage = writers.storage();
    let Some(row) = store::event(storage, tenant, event_id).await? else {
        return Err(ApiError::NotFound);
    };
    let Some(integration) = store::integration(storage, tenant).await? else {
        return Err(ApiError::Invalid(
            tally_ledger::fields::ValidationErrors::single(
                "integration",
                "the tenant has no Stripe integration: PUT /v1/integrations/stripe first",
            ),
        ));
    };
    let row = reapply_row(writers, &integration, row).await?;
    if row.event_type == "payment_intent.succeeded" && row.status == "applied" {
        let payload: Value = serde_json::from_str(&row.payload).unwrap_or_default();
        if let Some(payment_id) = payload["data"]["object"]["id"].as_str() {
            apply_waiting(writers, &integration, payment_id).await?;
        }
    }
    Ok(row)
}

async fn reapply_row(
    writers: &Writers,
    integration: &IntegrationRow,
    mut row: EventRow,
) -> Result<EventRow, ApiError> {
    let event: Value = serde_json::from_str(&row.payload)
        .map_err(|e| ApiError::Internal(format!("a recorded Stripe event is not JSON: {e}")))?;
    let applied = apply(writers, integration, &event).await?;
    row.status = applied.status.to_owned();
    row.reason = applied.reason;
    row.waiting_for = applied.waiting_for;
    row.updated_at = now_micros();
    store::update_event(writers.storage(), &row).await?;
    Ok(row)
}

/// Applies the refunds that were waiting for `payment_id`.
async fn apply_waiting(
    writers: &Writers,
    integration: &IntegrationRow,
    payment_id: &str,
) -> Result<(), ApiError> {
    let waiting = store::waiting_for(writers.storage(), &integration.tenant_id, payment_id).await?;
    for row in waiting {
        reapply_row(writers, integration, row).await?;
    }
    Ok(())
}

/// Maps `event` and decides its operations through the batch path.
async fn apply(
    writers: &Writers,
    integration: &IntegrationRow,
    event: &Value,
) -> Result<Applied, ApiError> {
    let ops = match map::map(event, &integration.account_metadata_key) {
        Mapping::Ignored => return Ok(outcome("ignored", None, None, Vec::new())),
        Mapping::Unmapped(reason) => {
            return Ok(outcome("unmapped", Some(reason), None, Vec::new()))
        }
        Mapping::Operations(ops) => ops,
    };
    let waits_on = map::refunded_payment(&ops).map(str::to_owned);
    let answers = decide_operations(writers, &integration.tenant_id, ops).await?;
    let mut status = "applied";
    let mut reason = None;
    let mut waiting_for = None;
    for answer in &answers {
        let why = match (Outcome::of(answer), answer) {
            (Outcome::Unavailable, _) => {
                return Err(ApiError::Unavailable(
                    "the ledger could not decide the event's operations".into(),
                ))
            }
            (Outcome::Created | Outcome::Replayed, _) => continue,
            // A payment that is not there yet: the refund waits for it.
            (_, Answer::Problem { body, .. })
                if code(body) == Some("not_found")
                    && body.get("field") == Some(&json!("payment_id")) =>
            {
                waiting_for = waits_on.clone();
                format!(
                    "payment {} is not in the ledger yet; applied when it arrives",
                    waits_on.as_deref().unwrap_or("?")
                )
            }
            // A stored rejection is the ledger's rules deciding: applied.
            (Outcome::Rejected, Answer::Entry { .. }) => continue,
            (Outcome::Rejected, Answer::Problem { body, .. }) if body.contains_key("entry") => {
                continue
            }
            (_, Answer::Problem { body, .. }) => format!(
                "{}: {}",
                code(body).unwrap_or("refused"),
                body.get("detail").and_then(Value::as_str).unwrap_or("")
            ),
            (_, Answer::Entry { .. }) => continue,
        };
        status = "unmapped";
        reason.get_or_insert(why);
    }
    let results = answers
        .into_iter()
        .map(|a| serde_json::to_value(BatchItem::from(a)).unwrap_or(Value::Null))
        .collect();
    Ok(outcome(status, reason, waiting_for, results))
}

fn outcome(
    status: &'static str,
    reason: Option<String>,
    waiting_for: Option<String>,
    results: Vec<Value>,
) -> Applied {
    Applied {
        status,
        reason,
        waiting_for,
        results,
    }
}

fn code(body: &Map<String, Value>) -> Option<&str> {
    body.get("code").and_then(Value::as_str)
}

fn answer_body(event_id: &str, event_type: &str, applied: &Applied) -> Value {
    let mut body = json!({
        "event_id": event_id,
        "type": event_type,
        "status": applied.status,
        "results": applied.results,
    });
    if let Some(reason) = &applied.reason {
        body["reason"] = json!(reason);
    }
    body
}

fn replay(recorded: &EventRow) -> Delivered {
    Delivered {
        body: serde_json::from_str(&recorded.answer).unwrap_or(Value::Null),
        replayed: true,
    }
}

fn now_micros() -> i64 {
    chrono::Utc::now().timestamp_micros()
}
