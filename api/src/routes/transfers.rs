//! `POST /v1/usage-debits` and `POST /v1/payments`: validate and fingerprint
//! here, in parallel; decide in the tenant's writer.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use tally_ledger::keys::Scope;
use tally_ledger::request::{EntryKind, EntryRequest};

use super::answer;
use super::text;
use crate::auth::Caller;
use crate::body::JsonObject;
use crate::problem::ApiError;
use crate::requests::{PaymentRequest, UsageDebitRequest};
use crate::state::AppState;
use crate::views::{Entry, Problem};

#[utoipa::path(
    post,
    path = "/v1/usage-debits",
    tag = "entries",
    operation_id = "postUsageDebit",
    summary = "Record a usage debit",
    description = "Debits `account` by `amount` and credits `@revenue` (or `counter_account`). \
        Keyed by `usage_record_id`.",
    request_body = UsageDebitRequest,
    security(("bearer" = ["post"])),
    responses(
        (status = 201, description = text::CREATED, body = Entry),
        (status = 200, description = text::REPLAYED, body = Entry,
            headers(("Idempotent-Replayed" = String, description = "`true` on a replay"))),
        (status = 409, description = text::CONFLICT, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_request`; `unit_mismatch`; or the stored \
            rejection `insufficient_funds` (the account's overdraft floor), with the rejected \
            `entry`, on every replay too (`Idempotent-Replayed: true`).", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn post_usage_debit(
    State(app): State<AppState>,
    caller: Caller,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    post(app, caller, EntryKind::UsageDebit, body).await
}

#[utoipa::path(
    post,
    path = "/v1/payments",
    tag = "entries",
    operation_id = "postPayment",
    summary = "Record a payment",
    description = "Credits `account` with `amount` and debits `@payments` (or \
        `counter_account`). Keyed by `payment_id`.",
    request_body = PaymentRequest,
    security(("bearer" = ["post"])),
    responses(
        (status = 201, description = text::CREATED, body = Entry),
        (status = 200, description = text::REPLAYED, body = Entry,
            headers(("Idempotent-Replayed" = String, description = "`true` on a replay"))),
        (status = 409, description = text::CONFLICT, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_request`; `unit_mismatch`; or the stored \
            rejection `insufficient_funds` when `counter_account` is a customer account below \
            its floor (with the rejected `entry`).", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn post_payment(
    State(app): State<AppState>,
    caller: Caller,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    post(app, caller, EntryKind::Payment, body).await
}

async fn post(
    app: AppState,
    caller: Caller,
    kind: EntryKind,
    body: serde_json::Map<String, serde_json::Value>,
) -> Result<Response, ApiError> {
    caller.require(Scope::Post)?;
    let request = EntryRequest::parse(kind, body).map_err(ApiError::Invalid)?;
    let decision = app.writers.decide(caller.tenant(), request).await?;
    Ok(answer(decision).into_response())
}
