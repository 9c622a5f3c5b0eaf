//! The storage engines behind one narrow interface.
//!
//! [`Storage`] is what the rest of tally sees. What both engines do alike
//! is written once ([`shared`]); each engine's folder keeps only its own SQL
//! and what it alone does. The store does I/O only: a group transaction's reads and
//! writes are the plain-data primitives of [`transaction`], which the group
//! module calls, so both engines run the very same decision code
//! and the store never sees a decision.

mod accounts;
mod balance_rebuild;
#[cfg(test)]
mod durability_tests;
mod engine_db;
mod engine_group;
mod intents;
mod log;
mod migration_checksums;
mod piece_tx;
mod postgres;
mod read_ahead;
mod readers;
mod readiness;
mod rows;
mod rule_state;
mod shared;
mod sqlite;
mod statements;
mod storage;
mod transaction;
mod usage_log;

pub use accounts::{AccountFilter, AccountRow};
pub use balance_rebuild::{rebuild_balances, stored_total_is};
pub use engine_db::{Arg, EngineDb, Sql};
pub(crate) use engine_group::EngineGroup;
pub use log::{EngineRef, LockedConnection, TenantLock};
pub(crate) use piece_tx::PieceTx;
pub use postgres::{citus, PostgresStore};
pub(crate) use read_ahead::{ReadAhead, ReadAheadRows};
pub use readers::{reader_head_seq, ReaderConnection, ReaderLag};
pub use rows::{
    fold_hold_row, hold_rows_sql, parse_decimal, AccountRange, BalanceRow, EntryFilter, PoolStats,
    DEFAULT_POOL_SIZE, LOG_PAGE,
};
pub(crate) use rows::{new_entry_id, now_micros};
pub use rule_state::RulesRebuilt;
pub use sqlite::{for_each_packed, SqliteStore, SqliteWrite};
pub use statements::{Columns, FromColumns};
pub use storage::Storage;
pub(crate) use transaction::{head_moved, Fence, GroupTransaction, GroupWrite};
pub use usage_log::{UsageColumnsText, UsageEntries, UsageEntry};
