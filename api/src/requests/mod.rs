//! The request bodies and query strings the API accepts, as typed structs:
//! the OpenAPI document's description of each body, field by field.
//!
//! A body struct derives `Deserialize` with `deny_unknown_fields` (so its
//! schema says `additionalProperties: false`) and `ToSchema`. Its fields
//! are [`Raw`], and no body is deserialized into it on a request: the
//! ledger's entry request parsers read the body's JSON object (after the
//! body extractor refused repeated keys) and are the one place that checks
//! which fields exist and what their values are, so a 422 lists every
//! problem of a body at once and amounts keep their exact text. Each
//! struct's field list is held equal to its parser's by this module's
//! tests and tests/openapi.rs.

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
pub use raw::{field_names, Raw};
pub use rules::{AdjustmentRequest, Direction, RefundRequest, ReversalRequest};
pub use transfers::{PaymentRequest, UsageDebitRequest};
pub use webhooks::{
    endpoint_change, new_endpoint, replay_from, NewEndpoint, WebhookEndpointChangeRequest,
    WebhookEndpointRequest, WebhookReplayRequest, ENDPOINT_CHANGE_FIELDS, ENDPOINT_FIELDS,
    REPLAY_FIELDS,
};

#[cfg(test)]
mod tests;
