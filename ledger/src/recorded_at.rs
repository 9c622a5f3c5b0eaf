//! The one text form of a point in time the ledger writes: entries'
//! `recorded_at`, hold expiries, checkpoints. A leaf: the entry, the rule
//! state and the chain all use it, and it uses none of them.

use chrono::{DateTime, Utc};

/// The stable text form of `recorded_at`, used in responses and the chain.
pub fn format_recorded_at(t: &DateTime<Utc>) -> String {
    // `YYYY-MM-DDTHH:MM:SS.ffffffZ`, always six fractional digits.
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}
