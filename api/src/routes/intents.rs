//! `POST /v1/usage-debits` and `POST /v1/payments`: validate and fingerprint
//! here, in parallel; decide in the tenant's writer.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use tally_ledger::intent::{EntryKind, Intent};
use tally_ledger::keys::Scope;

use crate::auth::Caller;
use crate::body::JsonObject;
use crate::problem::{answer, ApiError};
use crate::server::AppState;

pub async fn post_usage_debit(
    State(app): State<AppState>,
    caller: Caller,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    post(app, caller, EntryKind::UsageDebit, body).await
}

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
    let intent = Intent::parse(kind, body).map_err(ApiError::Invalid)?;
    let decision = app.writers.decide(caller.tenant(), intent).await?;
    Ok(answer(decision).into_response())
}
