//! Requests turned into intents: validated, normalised and fingerprinted,
//! without touching the database (this runs in parallel in the handlers).

mod holds;
mod model;
mod rules;
mod transfers;

pub use holds::MAX_HOLD_TTL_SECONDS;
pub use model::{
    request_fields, Action, AdjustmentRequest, Direction, EntryKind, EntryRequest, HoldExpiry,
    HoldRequest, SettingsChange, Transfer,
};
