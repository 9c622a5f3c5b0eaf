//! Entry requests: a client's request validated, normalised and
//! fingerprinted, without touching the database (this runs in parallel in
//! the handlers), and an intent's operation queued the same way.

mod holds;
mod intents;
mod model;
mod rules;
mod transfers;

pub use holds::MAX_HOLD_TTL_SECONDS;
pub use model::{
    request_fields, Action, AdjustmentRequest, Direction, EntryKind, EntryRequest, HoldExpiry,
    HoldRequest, SettingsChange, Transfer,
};
