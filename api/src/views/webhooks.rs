//! The webhook endpoints and their deliveries, as the API shows them.

use serde::Serialize;
use serde_json::Value;
use tally_webhooks::store::{AttemptRow, DeliveryRow, EndpointRow};
use utoipa::ToSchema;

use serde::Deserialize;

/// An event type an endpoint subscribes to.
#[derive(Deserialize, ToSchema)]
#[allow(dead_code)] // The schema's enum: values are read by `event_types`.
pub enum WebhookEventType {
    #[serde(rename = "entry.posted")]
    #[schema(rename = "entry.posted")]
    EntryPosted,
    #[serde(rename = "entry.rejected")]
    #[schema(rename = "entry.rejected")]
    EntryRejected,
    #[serde(rename = "hold.expired")]
    #[schema(rename = "hold.expired")]
    HoldExpired,
    #[serde(rename = "balance.low")]
    #[schema(rename = "balance.low")]
    BalanceLow,
    #[serde(rename = "intent.succeeded")]
    #[schema(rename = "intent.succeeded")]
    IntentSucceeded,
    #[serde(rename = "intent.failed")]
    #[schema(rename = "intent.failed")]
    IntentFailed,
}

/// A delivery's status.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum WebhookDeliveryStatus {
    /// Not delivered yet: sent at `next_attempt_at`.
    Pending,
    /// A 2xx answered it.
    Delivered,
    /// Given up: still failing at the maximum age, or the receiver answered 410.
    Failed,
}

/// Microseconds since the epoch as RFC 3339 UTC with six fractional digits.
fn time(micros: i64) -> String {
    chrono::DateTime::from_timestamp_micros(micros)
        .map(|t| tally_ledger::entry::format_recorded_at(&t))
        .unwrap_or_default()
}

/// A webhook endpoint. Its secret is shown only when it is made
/// (`POST /v1/webhook-endpoints`) or rotated.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "id": "we_0193a8d2c4f07b3e9a51c2d4e6f80a1b", "url": "https://hooks.example.com/tally",
    "event_types": ["balance.low", "entry.posted"], "description": "billing",
    "enabled": true, "disabled_reason": null, "after_seq": 17,
    "created_at": "2026-12-05T10:00:00.000000Z", "updated_at": "2026-12-05T10:00:00.000000Z"
}))]
pub struct WebhookEndpoint {
    /// `we_` and 32 hex digits.
    pub id: String,
    pub url: String,
    #[schema(value_type = Vec<WebhookEventType>)]
    pub event_types: Vec<String>,
    #[schema(required = true)]
    pub description: Option<String>,
    pub enabled: bool,
    /// `gone` (the receiver answered 410) or `disabled` (a PATCH); null
    /// while enabled.
    #[schema(required = true)]
    pub disabled_reason: Option<String>,
    /// Events of entries after this `seq` are sent (the tenant's head
    /// when the endpoint was made).
    pub after_seq: i64,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

impl From<&EndpointRow> for WebhookEndpoint {
    fn from(r: &EndpointRow) -> Self {
        Self {
            id: r.id.clone(),
            url: r.url.clone(),
            event_types: r.types().iter().map(|t| t.as_str().to_owned()).collect(),
            description: r.description.clone(),
            enabled: r.enabled,
            disabled_reason: r.disabled_reason.clone(),
            after_seq: r.after_seq,
            created_at: time(r.created_at),
            updated_at: time(r.updated_at),
        }
    }
}

/// An endpoint with its signing secret: shown once.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookEndpointWithSecret {
    #[serde(flatten)]
    pub endpoint: WebhookEndpoint,
    /// `whsec_` and the base64 of 32 random bytes: the HMAC-SHA256 key of
    /// `webhook-signature` (docs/events.md). Not shown again.
    #[schema(example = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")]
    pub secret: String,
    /// After a rotation: until when the previous secret signs too.
    #[schema(format = DateTime, required = true)]
    pub previous_secret_expires_at: Option<String>,
}

impl From<&EndpointRow> for WebhookEndpointWithSecret {
    fn from(r: &EndpointRow) -> Self {
        Self {
            endpoint: r.into(),
            secret: r.secret.clone(),
            previous_secret_expires_at: r
                .previous_secret
                .as_ref()
                .and(r.previous_secret_until)
                .map(time),
        }
    }
}

/// `GET /v1/webhook-endpoints`.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookEndpointList {
    /// Every endpoint of the tenant (at most 16), oldest first.
    pub endpoints: Vec<WebhookEndpoint>,
}

/// One attempt of a delivery.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookAttempt {
    /// 1 for the first.
    pub attempt: i64,
    #[schema(format = DateTime)]
    pub attempted_at: String,
    /// `delivered` (2xx), `http_status` (any other answer), `timeout`,
    /// `connection` (no answer) or `gone` (410: the endpoint was disabled).
    pub outcome: String,
    #[schema(required = true)]
    pub http_status: Option<i64>,
    #[schema(required = true)]
    pub error: Option<String>,
    pub duration_ms: i64,
}

impl From<&AttemptRow> for WebhookAttempt {
    fn from(a: &AttemptRow) -> Self {
        Self {
            attempt: a.attempt,
            attempted_at: time(a.attempted_at),
            outcome: a.outcome.clone(),
            http_status: a.http_status,
            error: a.error.clone(),
            duration_ms: a.duration_ms,
        }
    }
}

/// One event for one endpoint, with every attempt so far.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookDelivery {
    /// `wd_` and 32 hex digits.
    pub id: String,
    pub endpoint_id: String,
    /// The event's id: `webhook-id`, the same on every attempt.
    pub event_id: String,
    #[schema(value_type = WebhookEventType)]
    pub event_type: String,
    /// The `seq` of the entry the event is about.
    pub seq: i64,
    #[schema(value_type = WebhookDeliveryStatus)]
    pub status: String,
    /// When the next attempt is due (pending deliveries).
    #[schema(format = DateTime, required = true)]
    pub next_attempt_at: Option<String>,
    /// When the fan-out, a retry or a replay last scheduled it; it is
    /// given up after the maximum age from then.
    #[schema(format = DateTime)]
    pub scheduled_at: String,
    pub attempts: Vec<WebhookAttempt>,
    /// The event, exactly as sent (its body parsed).
    #[schema(value_type = Object)]
    pub event: Value,
}

impl WebhookDelivery {
    pub fn new(d: &DeliveryRow, attempts: &[AttemptRow]) -> Self {
        Self {
            id: d.id.clone(),
            endpoint_id: d.endpoint_id.clone(),
            event_id: d.event_id.clone(),
            event_type: d.event_type.clone(),
            seq: d.seq,
            status: d.status.clone(),
            next_attempt_at: (d.status == "pending").then(|| time(d.next_attempt_at)),
            scheduled_at: time(d.scheduled_at),
            attempts: attempts.iter().map(WebhookAttempt::from).collect(),
            event: serde_json::from_str(&d.payload).unwrap_or(Value::Null),
        }
    }
}

/// `GET /v1/webhook-endpoints/{id}/deliveries`: newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookDeliveryPage {
    pub deliveries: Vec<WebhookDelivery>,
    /// Pass as `after` for the next page; null on the last.
    #[schema(required = true)]
    pub next_after: Option<String>,
}

/// `POST /v1/webhook-endpoints/{id}/replay`.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookReplay {
    /// Deliveries scheduled (made, or pending again).
    pub scheduled: usize,
    pub from_seq: i64,
    /// The last `seq` read.
    pub to_seq: i64,
    /// A replay reads at most 10,000 entries: where the next one starts,
    /// null when this one reached the head.
    #[schema(required = true)]
    pub next_from_seq: Option<i64>,
}
