//! `GET /v1/holds/{hold_id}`.

use serde::Serialize;
use utoipa::ToSchema;

/// What a hold is now.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HoldStatus {
    Open,
    Captured,
    Released,
    /// Released by the server when its time ran out.
    Expired,
    /// The hold itself was rejected (e.g. insufficient funds).
    Rejected,
}
