//! `PUT /v1/accounts/{account}`.

use serde::Deserialize;
use utoipa::ToSchema;

use super::Raw;
use crate::views::{Alerts, Metadata, Overdraft};

/// `PUT /v1/accounts/{account}` (scope `admin`): the account's settings,
/// in full. Idempotent by content: the same settings write nothing.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"unit": "USD", "overdraft": {"limit": "50.00"}, "metadata": {"plan": "pro"}}))]
pub struct AccountSettingsRequest {
    /// The account's unit; cannot change once the account has one.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 32, pattern = r"^[A-Za-z0-9_.:-]+$")]
    pub unit: Option<Raw>,
    #[schema(value_type = Option<Overdraft>)]
    pub overdraft: Option<Raw>,
    #[schema(value_type = Option<Metadata>)]
    pub metadata: Option<Raw>,
    #[schema(value_type = Option<Alerts>)]
    pub alerts: Option<Raw>,
}
