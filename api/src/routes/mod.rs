//! One file per resource.

pub mod balances;
pub mod batch;
pub mod entries;
pub mod health;
pub mod intents;
mod query;
