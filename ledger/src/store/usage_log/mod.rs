//! The log as the usage summaries read it: a tenant's posted usage debits
//! and reversals in a seq range, with only the columns a usage fold needs,
//! each engine its fastest way (SQLite packs a window into JSON arrays,
//! PostgreSQL streams rows), and on PostgreSQL their sums per usage key.
//! The fold itself is the read model's (`tally_projections::usage`); this
//! is where its SQL on `entries` lives, beside the table's other readers.

mod postgres;
mod sqlite;

use crate::entry::{UsageParams, UsageSource};
use crate::LedgerError;

use super::log::EngineRef;
use super::storage::Storage;

/// Which usage entries a read hands over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageEntries {
    /// Every posted usage debit and reversal.
    All,
    /// The reversals, and the usage debits stored without usage columns;
    /// on SQLite also the others, as [`UsageEntry::Columns`] (on
    /// PostgreSQL the database adds those up:
    /// [`PostgresStore::for_each_usage_sum`](super::PostgresStore::for_each_usage_sum)).
    WithoutColumns,
}

/// Usage debits that carry usage columns, as stored (text), one entry or
/// the sum of `entries` of them with one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageColumnsText<'a> {
    pub account: &'a str,
    pub meter: &'a str,
    /// `crate::entry::DAY_FORMAT`.
    pub day: &'a str,
    pub unit: &'a str,
    pub amount: &'a str,
    pub quantity: &'a str,
    pub entries: i64,
}

/// One posted usage entry, as a usage read hands it over.
#[derive(Debug)]
pub enum UsageEntry<'a> {
    /// A usage debit whose usage columns hold its meter, day and quantity.
    Columns(UsageColumnsText<'a>),
    /// A usage debit or a reversal, with its parameters when the engine
    /// took them out of `params` already (then `source.params` is empty).
    Source(UsageSource<'a>, Option<UsageParams<'a>>),
}

impl Storage {
    /// Hands `each` the posted usage entries of `tenant` with seq in
    /// `(after, upto]` ([`UsageEntries`] says which), in no set order.
    pub async fn for_each_usage_entry<F>(
        &self,
        tenant: &str,
        after: i64,
        upto: i64,
        which: UsageEntries,
        each: F,
    ) -> Result<(), LedgerError>
    where
        F: FnMut(UsageEntry<'_>) -> Result<(), LedgerError> + Send,
    {
        match self.engine() {
            EngineRef::Sqlite(s) => {
                sqlite::for_each(s.pool(), tenant, after, upto, which, each).await
            }
            EngineRef::Postgres(s) => {
                postgres::for_each(s.pool(), tenant, after, upto, which, each).await
            }
        }
    }
}
