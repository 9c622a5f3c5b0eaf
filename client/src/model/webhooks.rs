//! Webhook endpoints and their deliveries (scope `admin`).
//!
//! Unlike the ledger's mutations these calls carry no upstream ID: a retry
//! after a lost answer is not a replay. A retried
//! [`Client::post_webhook_endpoint`](crate::Client::post_webhook_endpoint)
//! may make a second endpoint, a retried rotation rotates again, a retried
//! delete may answer `NotFound`; a PATCH sets the same values again.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// An event type an endpoint subscribes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WebhookEventType {
    /// An entry was posted.
    #[serde(rename = "entry.posted")]
    EntryPosted,
    /// A ledger rule rejected an entry (stored).
    #[serde(rename = "entry.rejected")]
    EntryRejected,
    /// A hold expired without capture or release.
    #[serde(rename = "hold.expired")]
    HoldExpired,
    /// An account's available balance crossed below its `low_balance` alert.
    #[serde(rename = "balance.low")]
    BalanceLow,
    /// An intent's outcome `succeeded` was stored.
    #[serde(rename = "intent.succeeded")]
    IntentSucceeded,
    /// An intent's outcome `failed` was stored.
    #[serde(rename = "intent.failed")]
    IntentFailed,
    /// A type this client does not know yet (a newer server); never sent.
    #[serde(other, skip_serializing)]
    Other,
}

impl WebhookEventType {
    /// The wire name, e.g. `entry.posted`.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookEventType::EntryPosted => "entry.posted",
            WebhookEventType::EntryRejected => "entry.rejected",
            WebhookEventType::HoldExpired => "hold.expired",
            WebhookEventType::BalanceLow => "balance.low",
            WebhookEventType::IntentSucceeded => "intent.succeeded",
            WebhookEventType::IntentFailed => "intent.failed",
            WebhookEventType::Other => "other",
        }
    }
}

/// A delivery's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WebhookDeliveryStatus {
    /// Not delivered yet: an attempt is due at `next_attempt_at`.
    Pending,
    /// A 2xx answered.
    Delivered,
    /// Given up after the maximum age.
    Failed,
    /// A status this client does not know yet (a newer server).
    #[serde(other, skip_serializing)]
    Other,
}

impl WebhookDeliveryStatus {
    /// The wire name, as `?status=` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookDeliveryStatus::Pending => "pending",
            WebhookDeliveryStatus::Delivered => "delivered",
            WebhookDeliveryStatus::Failed => "failed",
            WebhookDeliveryStatus::Other => "other",
        }
    }
}

/// `POST /v1/webhook-endpoints`: where to send which events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WebhookEndpointRequest {
    /// `https://` to a public address (`http://` and private addresses only
    /// on a server started with `--webhook-allow-insecure`); ≤ 2,048 bytes.
    pub url: String,
    /// At least one, no repeats.
    pub event_types: Vec<WebhookEventType>,
    /// Free text for people, ≤ 500 bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl WebhookEndpointRequest {
    pub fn new(url: impl Into<String>, event_types: impl Into<Vec<WebhookEventType>>) -> Self {
        Self {
            url: url.into(),
            event_types: event_types.into(),
            description: None,
        }
    }
}

/// `PATCH /v1/webhook-endpoints/{id}`: what is `Some` changes, the rest is
/// left as it is; at least one field (else the server answers 422).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WebhookEndpointChange {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_types: Option<Vec<WebhookEventType>>,
    /// `Some(None)` clears the description (sends `null`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<Option<String>>,
    /// `false` holds deliveries back (they wait); `true` sends them again
    /// and clears `disabled_reason`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// A webhook endpoint, without its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookEndpoint {
    /// `we_` and 32 hex digits.
    pub id: String,
    pub url: String,
    pub event_types: Vec<WebhookEventType>,
    pub description: Option<String>,
    pub enabled: bool,
    /// `gone` (the receiver answered 410) or `disabled` (a PATCH); `None`
    /// while enabled.
    pub disabled_reason: Option<String>,
    /// Events of entries after this seq are sent (the tenant's head when the
    /// endpoint was made).
    pub after_seq: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// An endpoint with its signing secret, shown only when the endpoint is made
/// or its secret rotated. `Debug` leaves the secret out.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "WithSecretWire")]
pub struct WebhookEndpointWithSecret {
    pub endpoint: WebhookEndpoint,
    /// `whsec_` and the base64 of 32 random bytes: the HMAC-SHA256 key of
    /// `webhook-signature` (Standard Webhooks).
    pub secret: String,
    /// After a rotation: until when the previous secret signs too.
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
}

/// The flat answer (no `#[serde(flatten)]`: it mis-reads numbers under
/// serde_json's `arbitrary_precision`).
#[derive(Deserialize)]
struct WithSecretWire {
    id: String,
    url: String,
    event_types: Vec<WebhookEventType>,
    description: Option<String>,
    enabled: bool,
    disabled_reason: Option<String>,
    after_seq: i64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    secret: String,
    previous_secret_expires_at: Option<DateTime<Utc>>,
}

impl From<WithSecretWire> for WebhookEndpointWithSecret {
    fn from(w: WithSecretWire) -> Self {
        Self {
            endpoint: WebhookEndpoint {
                id: w.id,
                url: w.url,
                event_types: w.event_types,
                description: w.description,
                enabled: w.enabled,
                disabled_reason: w.disabled_reason,
                after_seq: w.after_seq,
                created_at: w.created_at,
                updated_at: w.updated_at,
            },
            secret: w.secret,
            previous_secret_expires_at: w.previous_secret_expires_at,
        }
    }
}

impl fmt::Debug for WebhookEndpointWithSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookEndpointWithSecret")
            .field("endpoint", &self.endpoint)
            .field("secret", &"whsec_…")
            .field(
                "previous_secret_expires_at",
                &self.previous_secret_expires_at,
            )
            .finish()
    }
}

/// `GET /v1/webhook-endpoints`.
#[derive(Deserialize)]
pub(crate) struct WebhookEndpointList {
    pub endpoints: Vec<WebhookEndpoint>,
}

/// One attempt of a delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookAttempt {
    /// 1 for the first.
    pub attempt: i64,
    pub attempted_at: DateTime<Utc>,
    /// `delivered` (2xx), `http_status` (another answer), `timeout`,
    /// `connection` (no answer) or `gone` (410: the endpoint was disabled).
    pub outcome: String,
    pub http_status: Option<u16>,
    pub error: Option<String>,
    pub duration_ms: i64,
}

/// One event for one endpoint, with every attempt so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookDelivery {
    /// `wd_` and 32 hex digits.
    pub id: String,
    pub endpoint_id: String,
    /// The event's id: `webhook-id`, the same on every attempt, retry and
    /// replay.
    pub event_id: String,
    pub event_type: WebhookEventType,
    /// The seq of the entry the event is about.
    pub seq: i64,
    pub status: WebhookDeliveryStatus,
    /// When the next attempt is due (pending deliveries).
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// When the fan-out, a retry or a replay last scheduled it.
    pub scheduled_at: DateTime<Utc>,
    pub attempts: Vec<WebhookAttempt>,
    /// The event exactly as sent (its body parsed; amounts are strings).
    pub event: serde_json::Value,
}

/// `GET /v1/webhook-endpoints/{id}/deliveries`: newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookDeliveryPage {
    pub deliveries: Vec<WebhookDelivery>,
    /// Pass as `after` for the next page; `None` on the last.
    pub next_after: Option<String>,
}

/// `POST /v1/webhook-endpoints/{id}/replay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookReplay {
    /// Deliveries scheduled (made, or pending again).
    pub scheduled: u64,
    pub from_seq: i64,
    /// The last seq read.
    pub to_seq: i64,
    /// A replay reads at most 10,000 entries: where the next one starts,
    /// `None` when this one reached the head.
    pub next_from_seq: Option<i64>,
}

#[derive(Serialize)]
pub(crate) struct WebhookReplayRequest {
    pub from_seq: i64,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_change_sends_only_what_is_given_and_null_clears() {
        let change = WebhookEndpointChange {
            description: Some(None),
            enabled: Some(false),
            ..WebhookEndpointChange::default()
        };
        assert_eq!(
            serde_json::to_string(&change).unwrap(),
            r#"{"description":null,"enabled":false}"#
        );
        let request =
            WebhookEndpointRequest::new("https://h.example.com/", [WebhookEventType::EntryPosted]);
        assert_eq!(
            serde_json::to_string(&request).unwrap(),
            r#"{"url":"https://h.example.com/","event_types":["entry.posted"]}"#
        );
    }

    #[test]
    fn the_secret_is_read_but_not_shown() {
        let made: WebhookEndpointWithSecret = serde_json::from_str(
            r#"{"id":"we_1","url":"https://h.example.com/","event_types":["entry.posted","some.future"],
                "description":null,"enabled":true,"disabled_reason":null,"after_seq":17,
                "created_at":"2026-12-05T10:00:00.000000Z","updated_at":"2026-12-05T10:00:00Z",
                "secret":"whsec_c2VjcmV0","previous_secret_expires_at":null}"#,
        )
        .unwrap();
        assert_eq!(made.endpoint.after_seq, 17);
        assert_eq!(
            made.endpoint.event_types,
            [WebhookEventType::EntryPosted, WebhookEventType::Other]
        );
        assert_eq!(made.secret, "whsec_c2VjcmV0");
        assert!(!format!("{made:?}").contains("c2VjcmV0"));
    }
}
