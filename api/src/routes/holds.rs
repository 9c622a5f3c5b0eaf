//! Holds: reserve (`POST /v1/holds`), capture, release, and read one.

use axum::extract::{Path, State};
use axum::response::Response;
use axum::Json;
use serde::Serialize;
use tally_ledger::amount::canonical;
use tally_ledger::entry::format_recorded_at;
use tally_ledger::intent::Intent;
use tally_ledger::keys::Scope;
use tally_ledger::state::{StateKey, StateValue};

use super::rules::decide;
use crate::auth::Caller;
use crate::body::JsonObject;
use crate::problem::ApiError;
use crate::server::AppState;

pub async fn post_hold(
    State(app): State<AppState>,
    caller: Caller,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    decide(app, caller, Scope::Post, body, Intent::hold).await
}

pub async fn post_capture(
    State(app): State<AppState>,
    caller: Caller,
    Path(hold_id): Path<String>,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    decide(app, caller, Scope::Post, body, |b| {
        Intent::capture(&hold_id, b)
    })
    .await
}

pub async fn post_release(
    State(app): State<AppState>,
    caller: Caller,
    Path(hold_id): Path<String>,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    decide(app, caller, Scope::Post, body, |b| {
        Intent::release(&hold_id, b)
    })
    .await
}

/// `GET /v1/holds/{hold_id}`.
#[derive(Debug, Serialize)]
pub struct HoldView {
    hold_id: String,
    account: String,
    unit: String,
    amount: String,
    counter_account: String,
    expires_at: String,
    /// `open`, `captured`, `released`, `expired` or `rejected`.
    status: &'static str,
    entry_id: String,
    closed_by: Option<String>,
}

pub async fn get_hold(
    State(app): State<AppState>,
    caller: Caller,
    Path(hold_id): Path<String>,
) -> Result<Json<HoldView>, ApiError> {
    caller.require(Scope::Read)?;
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
