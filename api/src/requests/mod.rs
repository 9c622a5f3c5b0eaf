//! The request bodies and query strings the API accepts, as typed structs:
//! the one description both the parsing and the OpenAPI document use.
//!
//! A body struct derives `Deserialize` with `deny_unknown_fields` (so its
//! schema says `additionalProperties: false`) and `ToSchema`. Its fields
//! are [`Raw`]: serde checks the shape (which fields exist; the body
//! extractor has already refused repeated keys), and the ledger's entry
//! request parsers stay the one place that validates values, so a 422 still lists
//! every problem of a body at once and amounts keep their exact text
//! ([`read`]).

use serde_json::{Map, Value};
use tally_ledger::fields::ValidationErrors;
use tally_ledger::request::{EntryKind, EntryRequest};

mod accounts;
mod batch;
mod holds;
mod integrations;
mod intents;
mod queries;
mod raw;
mod rules;
mod transfers;
mod webhooks;

pub use accounts::AccountSettingsRequest;
pub use batch::{BatchOperation, BatchRequest};
pub use holds::{CaptureRequest, HoldRequest, ReleaseRequest};
pub use integrations::{
    stripe_settings, StripeEventRequest, StripeIntegrationRequest, StripeSettings, STRIPE_FIELDS,
};
pub use intents::{
    ClaimIntentRequest, CompleteIntentRequest, FailIntentRequest, HeartbeatIntentRequest,
};
pub use queries::{
    AccountsQuery, BalanceQuery, EntriesQuery, ExportQuery, IntentsQuery, StatementQuery,
    StripeEventsQuery, UsageQuery, WebhookDeliveriesQuery,
};
pub use raw::{field_names, read, Raw};
pub use rules::{AdjustmentRequest, Direction, RefundRequest, ReversalRequest};
pub use transfers::{PaymentRequest, UsageDebitRequest};
pub use webhooks::{
    endpoint_change, new_endpoint, replay_from, NewEndpoint, WebhookEndpointChangeRequest,
    WebhookEndpointRequest, WebhookReplayRequest, ENDPOINT_CHANGE_FIELDS, ENDPOINT_FIELDS,
    REPLAY_FIELDS,
};

/// Validates a body of a kind whose whole request is the body (the single
/// endpoints of those kinds and each batch operation) through its typed
/// struct, then the ledger's parser of that kind.
pub fn entry_request(
    kind: EntryKind,
    body: Map<String, Value>,
) -> Result<EntryRequest, ValidationErrors> {
    let fields = match kind {
        EntryKind::UsageDebit => read::<UsageDebitRequest>(body),
        EntryKind::Payment => read::<PaymentRequest>(body),
        EntryKind::Hold => read::<HoldRequest>(body),
        EntryKind::Refund => read::<RefundRequest>(body),
        EntryKind::Reversal => read::<ReversalRequest>(body),
        EntryKind::Adjustment => read::<AdjustmentRequest>(body),
        // Their keys or accounts come from the URL: the parser refuses them
        // here, whatever the body.
        EntryKind::AccountSettings
        | EntryKind::HoldCapture
        | EntryKind::HoldRelease
        | EntryKind::IntentClaimed
        | EntryKind::IntentReleased
        | EntryKind::IntentSucceeded
        | EntryKind::IntentFailed => body,
    };
    EntryRequest::parse(kind, fields)
}

#[cfg(test)]
mod tests;
