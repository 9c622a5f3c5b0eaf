//! Services react to the ledger: events derived from the committed log,
//! delivered to each tenant's webhook endpoints at least once, signed per
//! the Standard Webhooks specification (docs/events.md).
//!
//! - [`event`]: the event types, their stable ids and bodies.
//! - [`derive`]: the log folded into events, `balance.low` included
//!   ([`alerts`]); a pure function of the log, so every process derives the
//!   same events with the same ids.
//! - [`fanout`]: the log is the outbox: events after a tenant's checkpoint
//!   become one delivery row per subscribed endpoint, rows and checkpoint
//!   in one transaction.
//! - [`dispatch`]: deliveries claimed under a lease, sent, and their
//!   outcome and next attempt stored ([`schedule`], [`send`]).
//! - [`store`]: endpoints and deliveries, the SQL of both engines.
//! - [`signature`], [`url_guard`]: secrets and signatures; the addresses a
//!   delivery may reach.

pub mod alerts;
pub mod derive;
pub mod dispatch;
mod error;
pub mod event;
pub mod fanout;
pub mod schedule;
pub mod send;
pub mod signature;
pub mod stats;
pub mod store;
pub mod url_guard;

pub use error::WebhookError;
