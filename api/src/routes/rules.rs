//! `POST /v1/refunds`, `POST /v1/reversals` (scope `post`) and
//! `POST /v1/adjustments` (scope `admin`): decided by the tenant's writer
//! like every other entry request.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use tally_ledger::fields::ValidationErrors;
use tally_ledger::keys::Scope;
use tally_ledger::request::EntryRequest;

use super::answer;
use super::text;
use crate::auth::Caller;
use crate::body::JsonObject;
use crate::problem::ApiError;
use crate::requests::{AdjustmentRequest, RefundRequest, ReversalRequest};
use crate::state::AppState;
use crate::views::{Entry, Problem};

#[utoipa::path(
    post,
    path = "/v1/refunds",
    tag = "rules",
    operation_id = "postRefund",
    summary = "Refund a payment",
    description = "Moves `amount` back from the paid account to the payment's debit side. Keyed by `refund_id`.",
    request_body = RefundRequest,
    security(("bearer" = ["post"])),
    responses(
        (status = 201, description = text::CREATED, body = Entry),
        (status = 200, description = text::REPLAYED, body = Entry,
            headers(("Idempotent-Replayed" = String, description = "`true` on a replay"))),
        (status = 404, description = "`not_found`: no such payment (`field`: `payment_id`); retry once the payment exists.", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = text::CONFLICT, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_request`; stored rejections `refund_exceeds_payment` (refunds would total more than the payment; a reversed or rejected payment refunds nothing) and `insufficient_funds`, with `entry`.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn post_refund(
    State(app): State<AppState>,
    caller: Caller,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    decide(app, caller, Scope::Post, body, EntryRequest::refund).await
}

#[utoipa::path(
    post,
    path = "/v1/reversals",
    tag = "rules",
    operation_id = "postReversal",
    summary = "Reverse an entry",
    description = "Appends the compensating entry of a posted entry (its credit side back to its debit side, the whole amount). Always possible: no overdraft floor applies. Keyed by `reversal_id`.",
    request_body = ReversalRequest,
    security(("bearer" = ["post"])),
    responses(
        (status = 201, description = text::CREATED, body = Entry),
        (status = 200, description = text::REPLAYED, body = Entry,
            headers(("Idempotent-Replayed" = String, description = "`true` on a replay"))),
        (status = 404, description = "`not_found`: no such entry (`field`: `entry_id`).", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = text::CONFLICT, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_request` (also: the entry moves no money — `hold`, `hold_release`, `account_settings` —, is a reversal, or was rejected); the stored rejection `already_reversed` (with `entry`).", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn post_reversal(
    State(app): State<AppState>,
    caller: Caller,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    decide(app, caller, Scope::Post, body, |b| {
        EntryRequest::reversal(b)
    })
    .await
}

#[utoipa::path(
    post,
    path = "/v1/adjustments",
    tag = "rules",
    operation_id = "postAdjustment",
    summary = "Adjust a balance",
    description = "An `admin` correction: `credit` moves `amount` from `@adjustments` to the account, `debit` the other way. No overdraft floor applies. Keyed by `adjustment_id`.",
    request_body = AdjustmentRequest,
    security(("bearer" = ["admin"])),
    responses(
        (status = 201, description = text::CREATED, body = Entry),
        (status = 200, description = text::REPLAYED, body = Entry,
            headers(("Idempotent-Replayed" = String, description = "`true` on a replay"))),
        (status = 409, description = text::CONFLICT, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_request` (also: no `unit` for an account that has none); `unit_mismatch`.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn post_adjustment(
    State(app): State<AppState>,
    caller: Caller,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    decide(app, caller, Scope::Admin, body, |b| {
        EntryRequest::adjustment(b)
    })
    .await
}

/// Checks the scope, parses, and answers the writer's decision.
pub(crate) async fn decide(
    app: AppState,
    caller: Caller,
    scope: Scope,
    body: Map<String, Value>,
    parse: impl FnOnce(Map<String, Value>) -> Result<EntryRequest, ValidationErrors>,
) -> Result<Response, ApiError> {
    caller.require(scope)?;
    let request = parse(body).map_err(ApiError::Invalid)?;
    let decision = app.writers.decide(caller.tenant(), request).await?;
    Ok(answer(decision).into_response())
}
