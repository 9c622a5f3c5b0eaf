//! `GET /healthz`: 200 when the database answers (liveness, SPEC §3).
//! `GET /readyz`: 200 only when this process should get traffic: its
//! migrations have run, the database answers within [`READY_TIMEOUT`], and
//! shutdown has not begun (readiness; docs/operations.md).

use std::time::Duration;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};
use tally_ledger::LedgerError;

use crate::problem::ApiError;
use crate::state::AppState;

/// How long `/readyz` waits for the database before answering 503.
pub const READY_TIMEOUT: Duration = Duration::from_secs(2);

#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    operation_id = "getHealthz",
    summary = "Liveness: the database answers",
    responses(
        (status = 200, description = "`{\"status\": \"ok\", \"engine\"}`.", body = crate::views::Health),
        (status = 503, description = "`unavailable`: the database does not answer.", body = crate::views::Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn healthz(State(app): State<AppState>) -> Result<Json<Value>, ApiError> {
    let storage = app.writers.storage();
    storage.ping().await?;
    Ok(Json(
        json!({"status": "ok", "engine": storage.engine_name()}),
    ))
}

#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    operation_id = "getReadyz",
    summary = "Readiness: this process should get traffic",
    description = "200 when migrations have run, the database answers in time and shutdown has \
        not begun.",
    responses(
        (status = 200, description = "`{\"status\": \"ready\", \"engine\", \"schema_version\"}`.", body = crate::views::Health),
        (status = 503, description = "`unavailable`: not ready, and why (`detail`).", body = crate::views::Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn readyz(State(app): State<AppState>) -> Result<Json<Value>, ApiError> {
    if app.lifecycle.is_shutting_down() {
        return Err(ApiError::NotReady("shutting down".into()));
    }
    let storage = app.writers.storage();
    let schema = match tokio::time::timeout(READY_TIMEOUT, storage.check_ready()).await {
        Ok(Ok(version)) => version,
        Ok(Err(LedgerError::Unavailable(why))) => return Err(ApiError::NotReady(why)),
        Ok(Err(e)) => {
            // The cause (host names, …) goes to the log, not to the
            // unauthenticated caller.
            tracing::warn!(error = %e, "not ready");
            return Err(ApiError::NotReady("the database does not answer".into()));
        }
        Err(_) => {
            return Err(ApiError::NotReady(format!(
                "the database did not answer within {} ms",
                READY_TIMEOUT.as_millis()
            )))
        }
    };
    // Shutdown may have begun while the database answered.
    if app.lifecycle.is_shutting_down() {
        return Err(ApiError::NotReady("shutting down".into()));
    }
    Ok(Json(json!({
        "status": "ready",
        "engine": storage.engine_name(),
        "schema_version": schema,
    })))
}
