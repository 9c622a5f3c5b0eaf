//! One file per resource. Routes import the shared state, the problem
//! mapping, the request structs and the views; never the server that
//! assembles them.

pub mod accounts;
mod answer;
pub mod audit;
pub mod audit_verify;
pub mod balances;
pub mod batch;
pub mod console;
pub mod entries;
pub mod health;
pub mod holds;
pub mod ingest;
pub mod integrations;
pub mod intents;
pub(crate) mod path;
mod query;
pub mod rules;
pub mod statements;
mod text;
pub mod transfers;
pub mod usage;
pub mod webhook_deliveries;
pub mod webhooks;

pub use answer::{answer, count_embedded};
