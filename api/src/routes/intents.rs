//! Intents (docs/intents.md): claim (`POST /v1/intents`), complete, fail,
//! heartbeat, read one, list. Parsed here, decided by the tenant's writer
//! (`tally_ledger::decide`), answered through `crate::problem`.

use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{Map, Value};
use tally_ledger::decide::{Decision, IntentAnswer};
use tally_ledger::fields::ValidationErrors;
use tally_ledger::intents::{
    ClaimOp, CompleteOp, FailOp, HeartbeatOp, IntentOp, IntentRecord, IntentStatus, LeaseToken,
};
use tally_ledger::keys::Scope;
use tally_ledger::request::EntryRequest;

use super::batch::{parse_operation, MAX_OPERATIONS};
use super::path::PathText;
use super::query::QueryParams;
use super::{answer, count_embedded, text};
use crate::auth::Caller;
use crate::body::JsonObject;
use crate::problem::{intent_problem, Answer, ApiError};
use crate::requests::{
    ClaimIntentRequest, CompleteIntentRequest, FailIntentRequest, HeartbeatIntentRequest,
    IntentsQuery,
};
use crate::state::AppState;
use crate::views::{BatchItem, IntentCompletion, IntentPage, IntentView, LeaseView, Problem};

/// Largest page of `GET /v1/intents`.
const MAX_INTENTS_PAGE: i64 = 1_000;

/// The ledger's clock: what a reader sees of a lease is what the writer
/// decides with.
fn now() -> chrono::DateTime<chrono::Utc> {
    tally_ledger::clock::now()
}

/// Decides `op` and, after it, `entries` in the same group; the first
/// decision is the operation's.
async fn decide(
    app: &AppState,
    caller: &Caller,
    op: IntentOp,
    entries: Vec<EntryRequest>,
) -> Result<(IntentAnswer, Vec<Decision>), ApiError> {
    let mut requests = Vec::with_capacity(entries.len() + 1);
    requests.push(EntryRequest::intent(op));
    requests.extend(entries);
    let mut decisions = app
        .writers
        .decide_all(caller.tenant(), requests)
        .await?
        .into_iter();
    match decisions.next() {
        Some(Decision::Intent(a)) => Ok((a, decisions.collect())),
        _ => Err(ApiError::Internal(
            "an intent's operation got no intent decision".into(),
        )),
    }
}

fn json_response(status: StatusCode, replayed: bool, body: Value) -> Response {
    let mut response = (status, Json(body)).into_response();
    if replayed {
        response
            .headers_mut()
            .insert("Idempotent-Replayed", HeaderValue::from_static("true"));
    }
    response
}

fn view_json(view: IntentView) -> Result<Value, ApiError> {
    serde_json::to_value(view).map_err(|e| ApiError::Internal(e.to_string()))
}

/// The answer to an operation that has an intent to show.
fn intent_response(intent_id: &str, answer: IntentAnswer) -> Result<Response, ApiError> {
    if let Some(problem) = intent_problem(intent_id, &answer) {
        return Ok(problem);
    }
    let (status, replayed, view) = match answer {
        IntentAnswer::Claimed { record, token } => {
            let mut view = IntentView::at(&record, now());
            view.lease = Some(LeaseView {
                token,
                fence: record.fence,
                expires_at: tally_ledger::entry::format_recorded_at(&record.lease_expires_at),
            });
            (StatusCode::CREATED, false, view)
        }
        IntentAnswer::Replayed { record } => (StatusCode::OK, true, IntentView::at(&record, now())),
        IntentAnswer::Applied { record } => (StatusCode::OK, false, IntentView::at(&record, now())),
        _ => {
            return Err(ApiError::Internal(
                "an intent answer without an intent".into(),
            ))
        }
    };
    Ok(json_response(status, replayed, view_json(view)?))
}

#[utoipa::path(
    post,
    path = "/v1/intents",
    tag = "intents",
    operation_id = "claimIntent",
    summary = "Claim an intent (a costly action done once)",
    description = "Claims `intent_id` under a lease. New, or its last lease ran out or was \
        released without an outcome: 201 with `lease` (`token`, `fence`, `expires_at`). Another \
        claim's lease is live: 409 `intent_in_progress` with `Retry-After`. An outcome is \
        stored: 200 with it and `Idempotent-Replayed: true`, for ever. Another `action` or \
        other `params`: 409 `idempotency_conflict` with `differing_fields`.",
    request_body = ClaimIntentRequest,
    security(("bearer" = ["post"])),
    responses(
        (status = 201, description = "Claimed: the lease's token is shown this once.", body = IntentView),
        (status = 200, description = "The stored outcome.", body = IntentView,
            headers(("Idempotent-Replayed" = String, description = "`true`"))),
        (status = 409, description = "`intent_in_progress` (`Retry-After`) or `idempotency_conflict`.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = text::INVALID, body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn claim_intent(
    State(app): State<AppState>,
    caller: Caller,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    caller.require(Scope::Post)?;
    let token =
        LeaseToken::generate().map_err(|e| ApiError::Internal(format!("no random token: {e}")))?;
    let op = ClaimOp::parse(body, token).map_err(ApiError::Invalid)?;
    let intent_id = op.intent_id.clone();
    let (answer, _) = decide(&app, &caller, IntentOp::Claim(op), Vec::new()).await?;
    intent_response(&intent_id, answer)
}

/// Parses a completion's `entries` (batch operations); any invalid one
/// refuses the whole completion, so no outcome is stored without them.
fn completion_entries(body: &Map<String, Value>) -> Result<Vec<EntryRequest>, ApiError> {
    let ops = match body.get("entries") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(ops)) if ops.len() <= MAX_OPERATIONS => ops.clone(),
        Some(Value::Array(ops)) => {
            return Err(ApiError::Invalid(ValidationErrors::single(
                "entries",
                format!(
                    "must contain at most {MAX_OPERATIONS} operations (got {})",
                    ops.len()
                ),
            )))
        }
        Some(_) => {
            return Err(ApiError::Invalid(ValidationErrors::single(
                "entries",
                "must be an array of batch operations",
            )))
        }
    };
    let mut errors = ValidationErrors::default();
    let mut entries = Vec::with_capacity(ops.len());
    for (i, op) in ops.into_iter().enumerate() {
        match parse_operation(op) {
            Ok(request) => entries.push(request),
            Err(Answer::Problem { body, .. }) => {
                let listed = body.get("errors").and_then(Value::as_array).cloned();
                for e in listed.unwrap_or_default() {
                    let field = e.get("field").and_then(Value::as_str).unwrap_or("");
                    let message = e.get("message").and_then(Value::as_str).unwrap_or("");
                    errors.push(format!("entries[{i}].{field}"), message);
                }
            }
            Err(Answer::Entry { .. }) => errors.push(format!("entries[{i}]"), "is invalid"),
        }
    }
    if errors.is_empty() {
        Ok(entries)
    } else {
        Err(ApiError::Invalid(errors))
    }
}

#[utoipa::path(
    post,
    path = "/v1/intents/{intent_id}/complete",
    tag = "intents",
    operation_id = "completeIntent",
    summary = "Store an intent's result, with its ledger entries",
    description = "Stores `succeeded` with `result`. `entries` (up to 1,000 `/v1/batch` \
        operations) are decided as in a batch and commit in the same transaction as the \
        outcome: both or neither. The same call replayed answers identically (with \
        `Idempotent-Replayed: true`); any other call on a finished intent, or a token that is \
        not the current claim's, is 409 `lease_lost`. Body up to 8 MiB.",
    params(("intent_id" = String, Path, description = "The intent's `intent_id`.", example = "inv_2026_11_cust_42")),
    request_body = CompleteIntentRequest,
    security(("bearer" = ["post"])),
    responses(
        (status = 200, description = "Succeeded, with each entry's answer as a batch gives it.", body = IntentCompletion),
        (status = 404, description = "`not_found`: never claimed.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`lease_lost`: nothing written.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_request` (an invalid entry names `entries[i]`); nothing written.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn complete_intent(
    State(app): State<AppState>,
    caller: Caller,
    intent_id: PathText,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    caller.require(Scope::Post)?;
    let intent_id = intent_id.into_inner();
    let entries = completion_entries(&body)?;
    let op = CompleteOp::parse(&intent_id, body, entries.len()).map_err(ApiError::Invalid)?;
    let (answer, decisions) = decide(&app, &caller, IntentOp::Complete(op), entries).await?;
    if let Some(problem) = intent_problem(&intent_id, &answer) {
        return Ok(problem);
    }
    let (record, replayed) = match answer {
        IntentAnswer::Applied { record } => (record, false),
        IntentAnswer::Replayed { record } => (record, true),
        _ => return Err(ApiError::Internal("a completion's odd answer".into())),
    };
    let entries = decisions
        .into_iter()
        .map(|d| {
            let a = answer_as_first(d, &record, replayed);
            count_embedded(&a);
            BatchItem::from(a)
        })
        .collect();
    let body = IntentCompletion {
        intent: IntentView::at(&record, now()),
        entries,
    };
    let body = serde_json::to_value(body).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(json_response(StatusCode::OK, replayed, body))
}

/// A replayed completion answers each entry as the first call did: an
/// entry that completion created (it follows the outcome in the log) is
/// shown as created again.
fn answer_as_first(decision: Decision, record: &IntentRecord, replayed: bool) -> Answer {
    if let (true, Decision::Replayed(entry), Some(outcome_seq)) =
        (replayed, &decision, record.outcome_seq)
    {
        if entry.seq > outcome_seq && entry.seq <= outcome_seq + record.outcome_entries {
            return answer(Decision::Created(entry.clone()));
        }
    }
    answer(decision)
}

#[utoipa::path(
    post,
    path = "/v1/intents/{intent_id}/fail",
    tag = "intents",
    operation_id = "failIntent",
    summary = "Report an intent's failure",
    description = "`retryable: false` stores `failed` with `error`. `retryable: true` releases \
        the lease and counts the attempt (`released`); the attempt that reaches \
        `max_attempts` is stored `failed` instead. A token that is not the current claim's is \
        409 `lease_lost`.",
    params(("intent_id" = String, Path, description = "The intent's `intent_id`.", example = "inv_2026_11_cust_42")),
    request_body = FailIntentRequest,
    security(("bearer" = ["post"])),
    responses(
        (status = 200, description = "Failed or released.", body = IntentView),
        (status = 404, description = "`not_found`: never claimed.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`lease_lost`: nothing written.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = text::INVALID, body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn fail_intent(
    State(app): State<AppState>,
    caller: Caller,
    intent_id: PathText,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    caller.require(Scope::Post)?;
    let intent_id = intent_id.into_inner();
    let op = FailOp::parse(&intent_id, body).map_err(ApiError::Invalid)?;
    let (answer, _) = decide(&app, &caller, IntentOp::Fail(op), Vec::new()).await?;
    intent_response(&intent_id, answer)
}

#[utoipa::path(
    post,
    path = "/v1/intents/{intent_id}/heartbeat",
    tag = "intents",
    operation_id = "heartbeatIntent",
    summary = "Extend an intent's lease",
    description = "The lease runs until now + `lease_seconds` (never shortened). A token that is \
        not the current claim's is 409 `lease_lost`.",
    params(("intent_id" = String, Path, description = "The intent's `intent_id`.", example = "inv_2026_11_cust_42")),
    request_body = HeartbeatIntentRequest,
    security(("bearer" = ["post"])),
    responses(
        (status = 200, description = "The intent with its lease's new end.", body = IntentView),
        (status = 404, description = "`not_found`: never claimed.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`lease_lost`.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = text::INVALID, body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn heartbeat_intent(
    State(app): State<AppState>,
    caller: Caller,
    intent_id: PathText,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    caller.require(Scope::Post)?;
    let intent_id = intent_id.into_inner();
    let op = HeartbeatOp::parse(&intent_id, body).map_err(ApiError::Invalid)?;
    let (answer, _) = decide(&app, &caller, IntentOp::Heartbeat(op), Vec::new()).await?;
    intent_response(&intent_id, answer)
}

#[utoipa::path(
    get,
    path = "/v1/intents/{intent_id}",
    tag = "intents",
    operation_id = "getIntent",
    summary = "Read an intent and its history",
    description = "Its status, attempts, fence, the live lease's end (never its token), the \
        outcome, and `history`: its entries in the log.",
    params(("intent_id" = String, Path, description = "The intent's `intent_id`.", example = "inv_2026_11_cust_42")),
    security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "The intent.", body = IntentView),
        (status = 404, description = text::NOT_FOUND, body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn get_intent(
    State(app): State<AppState>,
    caller: Caller,
    intent_id: PathText,
) -> Result<Json<IntentView>, ApiError> {
    caller.require(Scope::Read)?;
    let intent_id = intent_id.into_inner();
    let storage = app.writers.storage();
    let record = storage
        .intent(caller.tenant(), &intent_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let history = storage.intent_history(caller.tenant(), &intent_id).await?;
    Ok(Json(IntentView::at(&record, now()).with_history(&history)))
}

#[utoipa::path(
    get,
    path = "/v1/intents",
    tag = "intents",
    operation_id = "listIntents",
    summary = "List intents",
    description = "The tenant's intents in `intent_id` order (bytes), filtered by `status` (as \
        read now) and `action`. Pass `next_after` as `after` until it is null; a page may hold \
        fewer than `limit` when filters skip intents.",
    params(IntentsQuery),
    security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "A page.", body = IntentPage),
        (status = 422, description = text::INVALID_QUERY, body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn list_intents(
    State(app): State<AppState>,
    caller: Caller,
    RawQuery(raw): RawQuery,
) -> Result<Json<IntentPage>, ApiError> {
    caller.require(Scope::Read)?;
    let mut q = QueryParams::documented::<IntentsQuery>(raw.as_deref())?;
    let status = match q.text("status") {
        None => None,
        Some(s) => match IntentStatus::parse(&s) {
            Some(s) => Some(s),
            None => {
                q.error(
                    "status",
                    "must be one of claimed, released, succeeded, failed",
                );
                None
            }
        },
    };
    let action = q.text("action");
    let after = q.text("after").unwrap_or_default();
    let limit = q.int("limit", 1, MAX_INTENTS_PAGE).unwrap_or(100);
    q.finish()?;
    let now = now();
    // One page of records read; the filters keep what they keep, and the
    // next page starts after the last record read.
    let records = app
        .writers
        .storage()
        .intents_page(caller.tenant(), &after, limit)
        .await?;
    let next_after = (records.len() as i64 == limit)
        .then(|| records.last().map(|r| r.intent_id.clone()))
        .flatten();
    let intents = records
        .iter()
        .filter(|r| status.is_none_or(|s| r.status_at(now) == s))
        .filter(|r| action.as_deref().is_none_or(|a| r.action == a))
        .map(|r| IntentView::at(r, now))
        .collect();
    Ok(Json(IntentPage {
        intents,
        next_after,
    }))
}
