//! Request and response types.
//!
//! Requests serialise exactly the fields the server accepts (it refuses
//! unknown ones): an optional field left `None` is absent, never `null`.
//! Money is [`rust_decimal::Decimal`], sent and received as JSON strings.

mod integrations;
mod requests;
mod responses;
mod views;
mod webhooks;

pub use integrations::{
    StripeEvent, StripeEventPage, StripeEventStatus, StripeIntegration, StripeIntegrationRequest,
};
pub use requests::{
    AccountSettings, Adjustment, Alerts, Capture, Direction, Hold, Operation, Overdraft, Payment,
    Refund, Release, Reversal, UsageDebit,
};
pub(crate) use responses::BatchResults;
pub use responses::{BatchResult, Entry, EntryKind, EntryPage, EntryStatus, Posted, Rejection};
pub use views::{
    Account, AccountPage, AccountSummary, AuditHead, AuditVerification, Balance, BalanceFigures,
    Granularity, HeadSummary, Health, HoldInfo, HoldStatus, Movements, Signature, Statement, Usage,
    UsagePeriod, VerificationProblem, VerificationStatus,
};
pub use webhooks::{
    WebhookAttempt, WebhookDelivery, WebhookDeliveryPage, WebhookDeliveryStatus, WebhookEndpoint,
    WebhookEndpointChange, WebhookEndpointRequest, WebhookEndpointWithSecret, WebhookEventType,
    WebhookReplay,
};
pub(crate) use webhooks::{WebhookEndpointList, WebhookReplayRequest};

/// String keys to string values, at most 50 keys.
pub type Metadata = std::collections::BTreeMap<String, String>;

/// Serialisers shared by the request types.
pub(crate) mod wire {
    use chrono::{DateTime, SecondsFormat, Utc};
    use rust_decimal::Decimal;
    use serde::Serializer;

    /// A decimal as a JSON string, normalised (`1.50` → `"1.5"`; the
    /// server's fingerprint treats them as the same request anyway).
    pub fn decimal<S: Serializer>(d: &Decimal, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&d.normalize().to_string())
    }

    pub fn opt_decimal<S: Serializer>(d: &Option<Decimal>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => decimal(d, s),
            None => s.serialize_none(),
        }
    }

    /// RFC 3339 in UTC (`Z`), with as many fractional digits as needed.
    pub fn time(t: &DateTime<Utc>) -> String {
        t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
    }

    pub fn opt_time<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_str(&time(t)),
            None => s.serialize_none(),
        }
    }
}
