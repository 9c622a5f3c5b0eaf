//! Ingestion where duplicates are born: a file re-imported after a crash,
//! a broker's redeliveries, a payment processor's retried webhooks. Each
//! source hands its operations to the batch path, where the upstream ID of
//! each one makes at-least-once delivery exactly-once entries
//! (docs/ingest.md).

pub mod import;
pub mod nats;
pub mod nats_stats;
mod outcome;
pub mod stripe;

pub use outcome::{Counts, Outcome};
