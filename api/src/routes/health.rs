//! `GET /healthz`: 200 when the database answers.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::problem::ApiError;
use crate::server::AppState;

pub async fn healthz(State(app): State<AppState>) -> Result<Json<Value>, ApiError> {
    let storage = app.writers.storage();
    storage.ping().await?;
    Ok(Json(
        json!({"status": "ok", "engine": storage.engine_name()}),
    ))
}
