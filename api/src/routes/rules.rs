//! `POST /v1/refunds`, `POST /v1/reversals` (scope `post`) and
//! `POST /v1/adjustments` (scope `admin`): decided by the tenant's writer
//! like every other intent.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use tally_ledger::fields::ValidationErrors;
use tally_ledger::intent::Intent;
use tally_ledger::keys::Scope;

use crate::auth::Caller;
use crate::body::JsonObject;
use crate::problem::{answer, ApiError};
use crate::server::AppState;

pub async fn post_refund(
    State(app): State<AppState>,
    caller: Caller,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    decide(app, caller, Scope::Post, body, Intent::refund).await
}

pub async fn post_reversal(
    State(app): State<AppState>,
    caller: Caller,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    decide(app, caller, Scope::Post, body, Intent::reversal).await
}

pub async fn post_adjustment(
    State(app): State<AppState>,
    caller: Caller,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    decide(app, caller, Scope::Admin, body, Intent::adjustment).await
}

/// Checks the scope, parses, and answers the writer's decision.
pub(crate) async fn decide(
    app: AppState,
    caller: Caller,
    scope: Scope,
    body: Map<String, Value>,
    parse: impl FnOnce(Map<String, Value>) -> Result<Intent, ValidationErrors>,
) -> Result<Response, ApiError> {
    caller.require(scope)?;
    let intent = parse(body).map_err(ApiError::Invalid)?;
    let decision = app.writers.decide(caller.tenant(), intent).await?;
    Ok(answer(decision).into_response())
}
