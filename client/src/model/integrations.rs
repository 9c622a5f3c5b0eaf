//! The Stripe integration (settings: scope `admin`) and the Stripe events it
//! recorded (list: scope `read`; reapply: scope `post`).
//!
//! Stripe delivers its events to the integration's `endpoint_path` itself
//! (`POST /v1/ingest/stripe/{id}`, signed with `Stripe-Signature`): this
//! client has no call for that. Like the webhook endpoints' calls these
//! carry no upstream ID, but each is harmless to repeat: a PUT sets the same
//! settings again, a retried delete may answer `NotFound`, and a reapply
//! keys its entries by Stripe's ids, so what was applied before replays.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// `PUT /v1/integrations/stripe`: the settings in full. `Debug` leaves the
/// secrets out.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct StripeIntegrationRequest {
    /// The endpoint's signing secrets from Stripe's dashboard (`whsec_…`),
    /// 1 to 5 while they rotate: a delivery signed by any one is accepted.
    /// Write-only: never answered back.
    pub signing_secrets: Vec<String>,
    /// The PaymentIntent metadata key whose value is the ledger account
    /// (1 to 40 bytes).
    pub account_metadata_key: String,
}

impl StripeIntegrationRequest {
    pub fn new(
        signing_secrets: impl IntoIterator<Item = impl Into<String>>,
        account_metadata_key: impl Into<String>,
    ) -> Self {
        Self {
            signing_secrets: signing_secrets.into_iter().map(Into::into).collect(),
            account_metadata_key: account_metadata_key.into(),
        }
    }
}

impl fmt::Debug for StripeIntegrationRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StripeIntegrationRequest")
            .field(
                "signing_secrets",
                &format_args!("[{} × whsec_…]", self.signing_secrets.len()),
            )
            .field("account_metadata_key", &self.account_metadata_key)
            .finish()
    }
}

/// A tenant's Stripe integration, without its secrets (the server never
/// answers them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeIntegration {
    /// The path to give Stripe as the webhook endpoint's URL, after the
    /// server's origin (`/v1/ingest/stripe/sie_…`); it stays the same when
    /// the settings are replaced.
    pub endpoint_path: String,
    pub account_metadata_key: String,
    /// How many signing secrets are configured.
    pub signing_secrets_count: u32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What became of a Stripe event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StripeEventStatus {
    /// Its entries were decided (created, replayed, or rejected by the
    /// ledger's rules).
    Applied,
    /// A type tally does not map; acknowledged.
    Ignored,
    /// It could not be mapped (`reason`); acknowledged. A refund waiting for
    /// its payment (`waiting_for`) is applied when the payment arrives;
    /// others can be reapplied once the mapping is fixed.
    Unmapped,
    /// A status this client does not know yet (a newer server).
    #[serde(other, skip_serializing)]
    Other,
}

impl StripeEventStatus {
    /// The wire name, as `?status=` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            StripeEventStatus::Applied => "applied",
            StripeEventStatus::Ignored => "ignored",
            StripeEventStatus::Unmapped => "unmapped",
            StripeEventStatus::Other => "other",
        }
    }
}

/// A Stripe event as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeEvent {
    /// Stripe's event id (`evt_…`).
    pub event_id: String,
    /// Stripe's event type, e.g. `payment_intent.succeeded`.
    #[serde(rename = "type")]
    pub event_type: String,
    pub status: StripeEventStatus,
    /// Why it is unmapped.
    pub reason: Option<String>,
    /// The payment (`pi_…`) an unmapped refund waits for.
    pub waiting_for: Option<String>,
    pub received_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// `GET /v1/integrations/stripe/events`: in `event_id` order (bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeEventPage {
    pub events: Vec<StripeEvent>,
    /// Pass as `after` for the next page; `None` on the last.
    pub next_after: Option<String>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_request_sends_its_secrets_but_does_not_show_them() {
        let request = StripeIntegrationRequest::new(["whsec_abc123"], "tally_account");
        assert_eq!(
            serde_json::to_string(&request).unwrap(),
            r#"{"signing_secrets":["whsec_abc123"],"account_metadata_key":"tally_account"}"#
        );
        let shown = format!("{request:?}");
        assert!(!shown.contains("abc123"), "{shown}");
        assert!(shown.contains("tally_account"), "{shown}");
    }

    #[test]
    fn events_read_their_type_and_an_unknown_status() {
        let page: StripeEventPage = serde_json::from_str(
            r#"{"events":[
                {"event_id":"evt_1","type":"charge.refunded","status":"unmapped",
                 "reason":"payment pi_1 not recorded yet","waiting_for":"pi_1",
                 "received_at":"2026-12-07T10:00:00.000000Z","updated_at":"2026-12-07T10:00:00Z"},
                {"event_id":"evt_2","type":"x.y","status":"some_future",
                 "reason":null,"waiting_for":null,
                 "received_at":"2026-12-07T10:00:00Z","updated_at":"2026-12-07T10:00:00Z"}],
              "next_after":null}"#,
        )
        .unwrap();
        assert_eq!(page.events[0].event_type, "charge.refunded");
        assert_eq!(page.events[0].status, StripeEventStatus::Unmapped);
        assert_eq!(page.events[0].waiting_for.as_deref(), Some("pi_1"));
        assert_eq!(page.events[1].status, StripeEventStatus::Other);
        assert_eq!(page.next_after, None);
    }
}
