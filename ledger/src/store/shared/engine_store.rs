//! [`EngineStore`]: what one engine's store gives the reads written once
//! for both (`api_keys.rs`, `entry_reads.rs`, `balance_reads.rs`,
//! `rule_records.rs`, `expired_holds.rs`, `log_heads.rs`). Each engine
//! implements it in its own module with its own SQL and types.

use std::future::Future;

use chrono::{DateTime, Utc};
use sqlx::{Database, Pool};

use crate::entry::StoredEntry;
use crate::request::EntryKind;
use crate::store::engine_db::{Arg, EngineDb, Sql};
use crate::store::rule_state::RulesRebuilt;
use crate::store::transaction::GroupTransaction;
use crate::LedgerError;

/// A connection of the engine's database.
pub(in crate::store) type Connection<S> = <<S as EngineStore>::Db as Database>::Connection;

/// A row of the engine's database.
pub(in crate::store) type EngineRow<S> = <<S as EngineStore>::Db as Database>::Row;

pub(in crate::store) trait EngineStore: Sync {
    type Db: EngineDb;
    /// The engine's group transaction.
    type Group: GroupTransaction;

    /// The columns [`EngineStore::decode_entry`] reads.
    const ENTRY_COLUMNS: &'static str;

    /// The pool readers use.
    fn pool(&self) -> &Pool<Self::Db>;

    /// A time as the engine binds `recorded_at`.
    fn recorded_at_arg(time: DateTime<Utc>) -> Arg<'static>;

    /// An entry row selected with [`EngineStore::ENTRY_COLUMNS`].
    fn decode_entry(row: &EngineRow<Self>) -> Result<StoredEntry, LedgerError>;

    /// An api key row's `created_at`, as fixed-width UTC text.
    fn created_at(row: &EngineRow<Self>) -> Result<String, LedgerError>;

    /// Entries holding one of `keys`, on `conn`.
    fn keyed_entries(
        conn: &mut Connection<Self>,
        tenant: &str,
        keys: &[(EntryKind, &str)],
    ) -> impl Future<Output = Result<Vec<StoredEntry>, LedgerError>> + Send;

    /// The entries a log walk (`entry_reads::log_walk`) selects, read the
    /// engine's fastest way.
    fn read_page(
        &self,
        walk: Sql<'_>,
    ) -> impl Future<Output = Result<Vec<StoredEntry>, LedgerError>> + Send;

    fn begin_group(&self) -> impl Future<Output = Result<Self::Group, LedgerError>> + Send;

    /// The connection a group's transaction runs on.
    fn group_connection(group: &mut Self::Group) -> &mut Connection<Self>;

    /// Rebuilds the tenant's rule state from its log, on the group that
    /// holds the tenant's head lock.
    fn rebuild_rules(
        group: &mut Self::Group,
        tenant: &str,
    ) -> impl Future<Output = Result<RulesRebuilt, LedgerError>> + Send;
}

/// Whether the database answers.
pub(in crate::store) async fn ping<S: EngineStore>(store: &S) -> Result<(), LedgerError> {
    S::Db::execute(
        &mut *store.pool().acquire().await?,
        &Sql::new(super::sql::PING),
    )
    .await?;
    Ok(())
}

/// Every row of `sql`, read on a connection of the readers' pool.
pub(in crate::store) async fn rows<S: EngineStore>(
    store: &S,
    sql: &Sql<'_>,
) -> Result<Vec<EngineRow<S>>, LedgerError> {
    Ok(S::Db::fetch_all(&mut *store.pool().acquire().await?, sql).await?)
}

/// The first row of `sql`, if any, read as [`rows`].
pub(in crate::store) async fn first_row<S: EngineStore>(
    store: &S,
    sql: &Sql<'_>,
) -> Result<Option<EngineRow<S>>, LedgerError> {
    Ok(S::Db::fetch_optional(&mut *store.pool().acquire().await?, sql).await?)
}

/// The text `column` of each row.
pub(in crate::store) fn texts<S: EngineStore>(
    rows: &[EngineRow<S>],
    column: &str,
) -> Result<Vec<String>, LedgerError> {
    Ok(rows
        .iter()
        .map(|r| S::Db::text(r, column))
        .collect::<Result<_, _>>()?)
}
