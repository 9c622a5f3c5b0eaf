//! The ledger's clock: UTC now, to the microsecond both engines store, and
//! the one text form of a point in time it writes.
//!
//! `TALLY_CLOCK_OFFSET_SECONDS` (read once, at the first reading) moves it:
//! tests use it to show that what a day, or a year, changes about an
//! answer (a lease run out, an outcome replayed) is decided by the clock
//! and nothing else. Never set it in production: a clock moved backwards
//! makes `recorded_at` go backwards in the log.

use std::sync::OnceLock;

use chrono::{DateTime, Duration, Utc};

/// The environment variable that moves the clock (tests only).
pub const OFFSET_VARIABLE: &str = "TALLY_CLOCK_OFFSET_SECONDS";

fn offset() -> Duration {
    static OFFSET: OnceLock<Duration> = OnceLock::new();
    *OFFSET.get_or_init(|| {
        std::env::var(OFFSET_VARIABLE)
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
            .and_then(Duration::try_seconds)
            .unwrap_or_else(Duration::zero)
    })
}

/// Now, in microseconds: the first answer must equal every replay read
/// back from the database.
pub fn now() -> DateTime<Utc> {
    let now = Utc::now()
        .checked_add_signed(offset())
        .unwrap_or_else(Utc::now);
    DateTime::from_timestamp_micros(now.timestamp_micros()).unwrap_or(now)
}

// The one text form of a point in time the ledger writes: entries'
// `recorded_at`, hold expiries, checkpoints. A leaf: the entry, the rule
// state and the chain all use it, and it uses none of them.
/// The stable text form of `recorded_at`, used in responses and the chain.
pub fn format_recorded_at(t: &DateTime<Utc>) -> String {
    // `YYYY-MM-DDTHH:MM:SS.ffffffZ`, always six fractional digits.
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}
