//! `POST /v1/batch`: up to 1,000 operations, each answered exactly as its
//! single endpoint would answer it, in request order. Valid operations go to
//! the tenant's writer together and are decided in order in one group, so
//! the same key twice in a batch is a replay (or a 409), never a double post.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use tally_ledger::fields::ValidationErrors;
use tally_ledger::keys::Scope;
use tally_ledger::request::{EntryKind, EntryRequest};
use tally_ledger::writer::Writers;

use super::{answer, count_embedded};
use crate::auth::Caller;
use crate::body::JsonObject;
use crate::problem::{Answer, ApiError};
use crate::requests::BatchRequest;
use crate::state::AppState;
use crate::views::{BatchItem, BatchResults, Problem};

/// Most operations in one batch.
pub const MAX_OPERATIONS: usize = 1_000;

const BATCH_KINDS: [EntryKind; 5] = [
    EntryKind::UsageDebit,
    EntryKind::Payment,
    EntryKind::Hold,
    EntryKind::Refund,
    EntryKind::Reversal,
];

fn invalid(field: &str, message: impl Into<String>) -> ApiError {
    ApiError::Invalid(ValidationErrors::single(field, message))
}

fn operations(body: Map<String, Value>) -> Result<Vec<Value>, ApiError> {
    let mut body = body;
    let mut errors = ValidationErrors::default();
    for key in body.keys() {
        if key != "operations" {
            errors.push(key.clone(), "is not a known field");
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::Invalid(errors));
    }
    match body.remove("operations") {
        Some(Value::Array(ops)) if ops.is_empty() => {
            Err(invalid("operations", "must contain at least one operation"))
        }
        Some(Value::Array(ops)) if ops.len() > MAX_OPERATIONS => Err(invalid(
            "operations",
            format!(
                "must contain at most {MAX_OPERATIONS} operations (got {})",
                ops.len()
            ),
        )),
        Some(Value::Array(ops)) => Ok(ops),
        Some(_) => Err(invalid("operations", "must be an array")),
        None => Err(invalid("operations", "is required")),
    }
}

/// Parses one operation into an entry request, or the answer its error gives.
pub(crate) fn parse_operation(op: Value) -> Result<EntryRequest, Answer> {
    let Value::Object(mut fields) = op else {
        return Err(invalid("operation", "must be an object").answer());
    };
    // The batch takes the kinds of the `post` scope whose whole request is
    // the body; adjustments need `admin`, captures and releases name their
    // hold in the URL.
    let kind = match fields.remove("type") {
        Some(Value::String(t)) => EntryKind::parse(&t).filter(|k| BATCH_KINDS.contains(k)),
        _ => None,
    };
    let Some(kind) = kind else {
        return Err(invalid(
            "type",
            "must be usage_debit, payment, hold, refund or reversal",
        )
        .answer());
    };
    EntryRequest::parse(kind, fields).map_err(|v| ApiError::Invalid(v).answer())
}

#[utoipa::path(
    post,
    path = "/v1/batch",
    tag = "entries",
    operation_id = "postBatch",
    summary = "Post up to 1,000 operations at once",
    description = "Usage debits, payments, holds, refunds and reversals (each with its `type`), \
        decided in order in one group. Each result is what its single endpoint would answer; an \
        invalid or conflicting operation does not affect the others. The same key twice in one \
        batch: the second is a replay of the first (or a 409). A database failure fails the \
        whole batch (503, nothing committed), so it can be retried as a whole. Body up to 8 MiB.",
    request_body = BatchRequest,
    security(("bearer" = ["post"])),
    responses(
        (status = 200, description = "One result per operation, in request order.", body = BatchResults),
        (status = 422, description = "`invalid_request` on `operations` (missing, empty, more \
            than 1,000, not an array) or an unknown top-level field; nothing written.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn post_batch(
    State(app): State<AppState>,
    caller: Caller,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    caller.require(Scope::Post)?;
    let ops = operations(body)?;
    let results = decide_operations(&app.writers, caller.tenant(), ops)
        .await?
        .into_iter()
        .map(|a| {
            count_embedded(&a);
            BatchItem::from(a)
        })
        .collect();
    Ok((StatusCode::OK, axum::Json(BatchResults { results })).into_response())
}

/// The batch path: each operation parsed, the valid ones decided together
/// in order by the tenant's writer, and every one answered exactly as its
/// single endpoint would, in order. A database failure fails them all
/// (nothing committed), so the caller can send them again as a whole.
pub(crate) async fn decide_operations(
    writers: &Writers,
    tenant: &str,
    ops: Vec<Value>,
) -> Result<Vec<Answer>, ApiError> {
    let mut answers: Vec<Option<Answer>> = Vec::with_capacity(ops.len());
    let mut entry_requests = Vec::with_capacity(ops.len());
    let mut slots = Vec::with_capacity(ops.len());
    for (i, op) in ops.into_iter().enumerate() {
        match parse_operation(op) {
            Ok(request) => {
                entry_requests.push(request);
                slots.push(i);
                answers.push(None);
            }
            Err(a) => answers.push(Some(a)),
        }
    }
    let decisions = writers.decide_all(tenant, entry_requests).await?;
    assert_eq!(decisions.len(), slots.len(), "a decision per request");
    for (slot, decision) in slots.into_iter().zip(decisions) {
        answers[slot] = Some(answer(decision));
    }
    Ok(answers
        .into_iter()
        .map(|a| {
            a.unwrap_or_else(|| ApiError::Internal("an operation got no decision".into()).answer())
        })
        .collect())
}
