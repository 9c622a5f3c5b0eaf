//! The Stripe integration's settings (never its secrets) and its events.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::ingest::stripe::store::{EventRow, IntegrationRow};

/// The path Stripe delivers to, under the server's origin.
pub const INGEST_PREFIX: &str = "/v1/ingest/stripe/";

/// Microseconds since the epoch as RFC 3339 UTC with six fractional digits.
fn time(micros: i64) -> String {
    chrono::DateTime::from_timestamp_micros(micros)
        .map(|t| tally_ledger::entry::format_recorded_at(&t))
        .unwrap_or_default()
}

/// A tenant's Stripe integration. The signing secrets are write-only.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({
    "endpoint_path": "/v1/ingest/stripe/sie_0193a8d2c4f07b3e9a51c2d4e6f80a1b4c7d",
    "account_metadata_key": "tally_account", "signing_secrets_count": 1,
    "created_at": "2026-12-07T10:00:00Z", "updated_at": "2026-12-07T10:00:00Z"
}))]
pub struct StripeIntegration {
    /// The path to give Stripe as the webhook endpoint's URL (after this
    /// server's origin): an unguessable id, not the tenant's name.
    pub endpoint_path: String,
    pub account_metadata_key: String,
    /// How many signing secrets are configured (they are never shown).
    pub signing_secrets_count: usize,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

impl From<&IntegrationRow> for StripeIntegration {
    fn from(row: &IntegrationRow) -> Self {
        StripeIntegration {
            endpoint_path: format!("{INGEST_PREFIX}{}", row.endpoint_id),
            account_metadata_key: row.account_metadata_key.clone(),
            signing_secrets_count: row.secrets().len(),
            created_at: time(row.created_at),
            updated_at: time(row.updated_at),
        }
    }
}

/// What became of a Stripe event.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StripeEventStatus {
    /// Its entries were decided (created, replayed, or rejected by the
    /// ledger's rules).
    Applied,
    /// A type tally does not map; acknowledged.
    Ignored,
    /// It could not be mapped (`reason`); acknowledged. A refund waiting
    /// for its payment (`waiting_for`) is applied when the payment arrives.
    Unmapped,
}

/// A Stripe event as recorded.
#[derive(Serialize, ToSchema)]
pub struct StripeEvent {
    #[schema(example = "evt_1NG8Du2eZvKYlo2CUI79vXWy")]
    pub event_id: String,
    #[schema(example = "payment_intent.succeeded")]
    pub r#type: String,
    #[schema(value_type = StripeEventStatus)]
    pub status: String,
    /// Why it is unmapped.
    pub reason: Option<String>,
    /// The payment (`pi_…`) an unmapped refund waits for.
    pub waiting_for: Option<String>,
    #[schema(format = DateTime)]
    pub received_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

impl From<&EventRow> for StripeEvent {
    fn from(row: &EventRow) -> Self {
        StripeEvent {
            event_id: row.event_id.clone(),
            r#type: row.event_type.clone(),
            status: row.status.clone(),
            reason: row.reason.clone(),
            waiting_for: row.waiting_for.clone(),
            received_at: time(row.received_at),
            updated_at: time(row.updated_at),
        }
    }
}

/// A page of Stripe events in `event_id` order.
#[derive(Serialize, ToSchema)]
pub struct StripeEventPage {
    pub events: Vec<StripeEvent>,
    /// Pass as `after` for the next page; null on the last.
    pub next_after: Option<String>,
}

/// The answer to a delivery: what the event came to, the same for every
/// redelivery (`Idempotent-Replayed: true` then).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"event_id": "evt_1", "type": "payment_intent.succeeded", "status": "applied",
    "results": [{"status": 201, "replayed": false, "entry": {"kind": "payment"}}]}))]
pub struct StripeDelivery {
    pub event_id: String,
    pub r#type: String,
    #[schema(value_type = StripeEventStatus)]
    pub status: String,
    /// Why it is unmapped.
    #[schema(nullable = false)]
    pub reason: Option<String>,
    /// Each operation's answer, as `POST /v1/batch` gives it.
    #[schema(value_type = Vec<super::BatchItem>)]
    pub results: Vec<Value>,
}
