//! Endpoints and deliveries on both engines. The SQL is written once: both
//! engines read `$1, $2`; a write runs in the engine's write transaction
//! (on SQLite this process's write turn and `BEGIN IMMEDIATE`, as the
//! ledger's own writes). Times are microseconds since the Unix epoch, UTC.

pub(crate) mod deliveries;
mod endpoints;
mod engine;

pub use deliveries::{
    AttemptRow, DeliveryFilter, DeliveryRow, DeliveryStatus, NewDelivery, Outcome, PendingAge,
};
pub use endpoints::{EndpointChange, EndpointRow, MAX_ENDPOINTS_PER_TENANT};

pub use engine::now_micros;
pub(crate) use engine::{new_id, on_pool};
