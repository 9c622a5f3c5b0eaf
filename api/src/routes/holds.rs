//! Holds: reserve (`POST /v1/holds`), capture, release, and read one.

use axum::extract::State;
use axum::response::Response;
use axum::Json;
use tally_ledger::amount::canonical;
use tally_ledger::entry::format_recorded_at;
use tally_ledger::keys::Scope;
use tally_ledger::names::check_upstream_id;
use tally_ledger::request::EntryRequest;
use tally_ledger::rule_state::{StateKey, StateValue};

use super::path::PathText;
use super::rules::decide;
use super::text;
use crate::auth::Caller;
use crate::body::JsonObject;
use crate::problem::ApiError;
use crate::requests::{CaptureRequest, HoldRequest, ReleaseRequest};
use crate::state::AppState;
use crate::views::{Entry, HoldView, Problem};

#[utoipa::path(
    post,
    path = "/v1/holds",
    tag = "holds",
    operation_id = "postHold",
    summary = "Reserve an amount (a hold)",
    description = "Reserves `amount` of the account's available balance until it is captured, released or expires (`expires_at`, or `ttl_seconds` from `recorded_at`). Keyed by `hold_id`.",
    request_body = HoldRequest,
    security(("bearer" = ["post"])),
    responses(
        (status = 201, description = text::CREATED, body = Entry),
        (status = 200, description = text::REPLAYED, body = Entry,
            headers(("Idempotent-Replayed" = String, description = "`true` on a replay"))),
        (status = 409, description = text::CONFLICT, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_request` (also: both or neither of `expires_at` and `ttl_seconds`; `expires_at` not in the future or more than 366 days ahead); `unit_mismatch`; the stored rejection `insufficient_funds` (with `entry`).", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn post_hold(
    State(app): State<AppState>,
    caller: Caller,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    decide(app, caller, Scope::Post, body, EntryRequest::hold).await
}

#[utoipa::path(
    post,
    path = "/v1/holds/{hold_id}/capture",
    tag = "holds",
    operation_id = "postCapture",
    summary = "Capture a hold",
    description = "Posts `amount` (at most the hold) from the account to the hold's `counter_account`; the rest of the hold is released. Keyed by `capture_id`.",
    params(("hold_id" = String, Path, description = "The hold's `hold_id`.", example = "hold_123")),
    request_body = CaptureRequest,
    security(("bearer" = ["post"])),
    responses(
        (status = 201, description = text::CREATED, body = Entry),
        (status = 200, description = text::REPLAYED, body = Entry,
            headers(("Idempotent-Replayed" = String, description = "`true` on a replay"))),
        (status = 404, description = "`not_found`: no such hold (`field`: `hold_id`).", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = text::CONFLICT, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_request` (also: `amount` above the hold); stored rejections `hold_not_open` (captured, released, expired or rejected) and `hold_expired` (past `expires_at`), with `entry`.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn post_capture(
    State(app): State<AppState>,
    caller: Caller,
    hold_id: PathText,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    let hold_id = hold_id.into_inner();
    decide(app, caller, Scope::Post, body, |b| {
        EntryRequest::capture(&hold_id, b)
    })
    .await
}

#[utoipa::path(
    post,
    path = "/v1/holds/{hold_id}/release",
    tag = "holds",
    operation_id = "postRelease",
    summary = "Release a hold",
    description = "Gives the whole hold back to the account's available balance. Keyed by `release_id` (not starting with `@`). Also accepted after `expires_at`.",
    params(("hold_id" = String, Path, description = "The hold's `hold_id`.", example = "hold_123")),
    request_body = ReleaseRequest,
    security(("bearer" = ["post"])),
    responses(
        (status = 201, description = text::CREATED, body = Entry),
        (status = 200, description = text::REPLAYED, body = Entry,
            headers(("Idempotent-Replayed" = String, description = "`true` on a replay"))),
        (status = 404, description = "`not_found`: no such hold (`field`: `hold_id`).", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = text::CONFLICT, body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_request`; the stored rejection `hold_not_open` (with `entry`).", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn post_release(
    State(app): State<AppState>,
    caller: Caller,
    hold_id: PathText,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    let hold_id = hold_id.into_inner();
    decide(app, caller, Scope::Post, body, |b| {
        EntryRequest::release(&hold_id, b)
    })
    .await
}

#[utoipa::path(
    get,
    path = "/v1/holds/{hold_id}",
    tag = "holds",
    operation_id = "getHold",
    summary = "Read a hold",
    params(("hold_id" = String, Path, description = "The hold's `hold_id`.", example = "hold_123")),
    security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "The hold and its status.", body = HoldView),
        (status = 404, description = text::NOT_FOUND, body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn get_hold(
    State(app): State<AppState>,
    caller: Caller,
    hold_id: PathText,
) -> Result<Json<HoldView>, ApiError> {
    caller.require(Scope::Read)?;
    let hold_id = hold_id.checked("hold_id", check_upstream_id)?;
    let record = app
        .writers
        .storage()
        .record(caller.tenant(), &StateKey::Hold(hold_id))
        .await?;
    let Some(StateValue::Hold(h)) = record else {
        return Err(ApiError::NotFound);
    };
    Ok(Json(HoldView {
        hold_id: h.hold_id,
        account: h.account,
        unit: h.unit,
        amount: canonical(h.amount),
        counter_account: h.counter_account,
        expires_at: format_recorded_at(&h.expires_at),
        status: h.status.as_str(),
        entry_id: h.entry_id,
        closed_by: h.closed_by,
    }))
}
