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

/// `GET /v1/holds/{hold_id}`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Hold)]
pub struct HoldView {
    pub hold_id: String,
    pub account: String,
    pub unit: String,
    /// The held amount.
    #[schema(format = "decimal", example = "5")]
    pub amount: String,
    /// The account a capture credits.
    pub counter_account: String,
    #[schema(format = DateTime)]
    pub expires_at: String,
    /// `open`, `captured`, `released`, `expired` or `rejected`.
    #[schema(value_type = HoldStatus)]
    pub status: &'static str,
    /// The hold's own entry.
    pub entry_id: String,
    /// The entry that captured or released it; null while open.
    #[schema(required = true)]
    pub closed_by: Option<String>,
}
