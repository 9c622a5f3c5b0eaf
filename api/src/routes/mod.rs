//! One file per resource.

pub mod accounts;
pub mod audit;
pub mod balances;
pub mod batch;
pub mod entries;
pub mod health;
pub mod holds;
pub mod intents;
pub(crate) mod path;
mod query;
pub mod rules;
pub mod statements;
pub mod usage;
