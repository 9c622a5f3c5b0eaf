//! The tally ledger: domain types, the decision of every entry, and the two
//! storage engines behind one narrow interface. Knows nothing of HTTP.
//!
//! Where things live:
//! - [`request`]: a client's request turned into a validated, fingerprinted
//!   entry request.
//! - [`decide`]: the one place where an entry request becomes an entry, a replay, a
//!   conflict or a refusal.
//! - [`writer`]: the per-tenant group-commit writer: admission, queues,
//!   look-ups and the loop that hands groups to [`group`].
//! - [`group`]: one group transaction: load its state, call [`decide`],
//!   build its write.
//! - [`recent`]: recently committed entries, answering retries from memory.
//! - [`store`]: SQLite and PostgreSQL, I/O only, each with its SQL beside
//!   its code.
//!
//! The write path runs one way: writer -> group -> decide, and group ->
//! store.

pub mod amount;
pub mod audit;
pub mod balance;
pub mod chain;
pub mod clock;
pub mod decide;
pub mod entry;
mod error;
pub mod expiry;
pub mod fields;
pub mod fingerprint;
pub mod fold;
pub mod fold_parts;
pub mod group;
pub mod hex_text;
pub mod histogram;
pub mod intents;
pub mod keys;
pub mod names;
pub mod recent;
pub mod request;
pub mod rule_fold;
pub mod rule_state;
pub mod store;
pub mod verify;
pub mod writer;

#[cfg(test)]
mod test_databases;

pub use decide::Decision;
pub use error::{Cause, LedgerError};
