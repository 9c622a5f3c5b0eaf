//! `GET /healthz` and `GET /readyz`.

use serde::Serialize;
use utoipa::ToSchema;

/// `GET /healthz`, `GET /readyz`.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"status": "ok", "engine": "sqlite"}))]
pub struct Health {
    /// `ok` (`/healthz`) or `ready` (`/readyz`).
    status: String,
    /// `sqlite` or `postgres`.
    engine: String,
    /// `/readyz`: the latest applied migration.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    schema_version: Option<i64>,
}
