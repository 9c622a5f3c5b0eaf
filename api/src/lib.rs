//! The HTTP face of tally. Handlers parse, authenticate and hand entry requests to
//! the ledger's writer; [`problem`] is the one place where ledger outcomes
//! and errors become HTTP statuses and problem+json bodies.

pub mod audit_cli;
pub mod auth;
pub mod body;
pub mod body_size;
pub mod cli;
pub mod config;
pub mod connections;
pub mod feed;
pub mod ingest;
mod json_body;
pub mod key_cache;
pub mod keys_cli;
pub mod limits;
pub mod logging;
pub mod maintain_cli;
pub mod metrics;
pub mod observe;
pub mod openapi;
pub mod problem;
pub mod requests;
pub mod routes;
pub mod server;
pub mod setting;
pub mod state;
pub mod views;

pub use problem::ApiError;
pub use server::router;
pub use state::AppState;
