//! The storage engines behind one narrow interface.
//!
//! [`Storage`] is what the rest of tally sees. What both engines do alike
//! is written once ([`shared`]); each engine's folder keeps only its own SQL
//! and what it alone does. The store does I/O only: a group transaction's reads and
//! writes are the plain-data primitives of [`transaction`], which the group
//! module calls, so both engines run the very same decision code
//! and the store never sees a decision.

mod accounts;
#[cfg(test)]
mod durability_tests;
mod engine_group;
mod intents;
mod log;
mod migration_checksums;
mod piece_tx;
mod postgres;
mod read_ahead;
mod readiness;
mod rows;
mod rules;
mod shared;
mod shared_commit;
mod sqlite;
mod storage;
mod transaction;

pub use accounts::{AccountFilter, AccountRow};
pub use log::{EngineRef, LockedConnection, TenantLock};
pub use postgres::{citus, PostgresStore};
pub(crate) use read_ahead::ReadAhead;
pub use rows::{
    fold_hold_row, hold_rows_sql, parse_decimal, AccountRange, BalanceRow, EntryFilter, PoolStats,
    DEFAULT_POOL_SIZE, LOG_PAGE,
};
pub(crate) use rows::{new_entry_id, now_micros};
pub use rules::RulesRebuilt;
pub(crate) use shared_commit::RoundWork;
pub use shared_commit::{RoundStats, SharedCommit, MAX_ROUND_INTENTS, MAX_ROUND_WORK};
pub use sqlite::{SqliteStore, SqliteWrite};
pub use storage::Storage;
pub(crate) use transaction::{Fence, GroupTransaction, GroupWrite};
