//! The response bodies as the document describes them (`ToSchema`), built
//! from the ledger's types, so the ledger needs no schema of its own.

mod accounts;
mod audit;
mod balance;
mod batch;
mod entries;
mod entry;
mod fields;
mod holds;
mod integrations;
mod intents;
mod operations;
mod problem_document;
mod settings;
mod statement;
mod usage;
mod webhooks;

pub use accounts::{AccountPage, AccountSummary, AccountView};
pub use audit::{AuditVerification, HeadSummary, HeadView, Signature, VerificationProblem};
pub use balance::Balance;
pub use batch::{BatchItem, BatchResults};
pub use entries::EntryPage;
pub use entry::{Entry, EntryDetails, EntryKind, EntryStatus, Rejection};
pub use fields::FieldError;
pub use holds::{HoldStatus, HoldView};
pub use integrations::{
    StripeDelivery, StripeEvent, StripeEventPage, StripeEventStatus, StripeIntegration,
    INGEST_PREFIX,
};
pub use intents::{
    IntentChange, IntentCompletion, IntentErrorView, IntentPage, IntentStatusName, IntentView,
    LeaseView,
};
pub use operations::Health;
pub use problem_document::{Problem, ProblemCode};
pub use settings::{Alerts, Metadata, Overdraft, OverdraftLimit, OverdraftMode};
pub use statement::{BalanceFigures, Movements, Statement};
pub use usage::{Granularity, Usage, UsagePeriod};
pub use webhooks::{
    WebhookAttempt, WebhookDelivery, WebhookDeliveryPage, WebhookDeliveryStatus, WebhookEndpoint,
    WebhookEndpointList, WebhookEndpointWithSecret, WebhookEventType, WebhookReplay,
};
