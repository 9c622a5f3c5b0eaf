//! A group transaction of either engine, and how [`Storage`] opens one.

use super::postgres::PgGroup;
use super::read_ahead::{ReadAhead, ReadAheadRows};
use super::sqlite::SqliteGroup;
use super::storage::Storage;
use super::transaction::{Fence, GroupTransaction, GroupWrite};
use crate::balance::AccountBalance;
use crate::entry::StoredEntry;
use crate::on_engine;
use crate::request::EntryKind;
use crate::rule_state::StateKey;
use crate::LedgerError;

/// A group transaction of either engine.
pub(crate) struct EngineGroup(Engine);

enum Engine {
    Sqlite(SqliteGroup),
    Postgres(PgGroup),
}

impl GroupTransaction for EngineGroup {
    async fn lock_head(&mut self, tenant: &str) -> Result<Fence, LedgerError> {
        on_engine!(&mut self.0, Engine, g => g.lock_head(tenant).await)
    }

    async fn entries_with_keys(
        &mut self,
        tenant: &str,
        keys: &[(EntryKind, &str)],
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        on_engine!(&mut self.0, Engine, g => g.entries_with_keys(tenant, keys).await)
    }

    async fn balances_of(
        &mut self,
        tenant: &str,
        accounts: &[&str],
    ) -> Result<Vec<(String, String, AccountBalance)>, LedgerError> {
        on_engine!(&mut self.0, Engine, g => g.balances_of(tenant, accounts).await)
    }

    async fn entries_by_ids(
        &mut self,
        tenant: &str,
        ids: &[&str],
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        on_engine!(&mut self.0, Engine, g => g.entries_by_ids(tenant, ids).await)
    }

    async fn records_of(
        &mut self,
        tenant: &str,
        keys: &[StateKey],
    ) -> Result<Vec<(String, String, String)>, LedgerError> {
        on_engine!(&mut self.0, Engine, g => g.records_of(tenant, keys).await)
    }

    async fn write_balances(
        &mut self,
        tenant: &str,
        rows: &[(&str, &str, AccountBalance)],
    ) -> Result<(), LedgerError> {
        on_engine!(&mut self.0, Engine, g => GroupTransaction::write_balances(g, tenant, rows).await)
    }

    async fn write_group(&mut self, write: &GroupWrite) -> Result<(), LedgerError> {
        on_engine!(&mut self.0, Engine, g => g.write_group(write).await)
    }

    async fn commit(self) -> Result<(), LedgerError> {
        on_engine!(self.0, Engine, g => g.commit().await)
    }
}

impl EngineGroup {
    /// Whether a round locks the head of each group it writes before the
    /// writes go out. PostgreSQL does, so that every head of a round is
    /// locked in tenant order (rounds on other connections wait rather
    /// than deadlock). SQLite does not need to: `BEGIN IMMEDIATE` holds the
    /// database's one write lock, and its joint write moves each head only
    /// from the seq and hash the group was decided on.
    pub(crate) fn locks_heads(&self) -> bool {
        matches!(self.0, Engine::Postgres(_))
    }

    /// Reads ahead for the pieces of a round (`super::read_ahead`): every
    /// head, balance and record they ask for, one statement per table.
    pub(crate) async fn read_ahead(
        &mut self,
        asks: &[&ReadAhead],
    ) -> Result<Vec<ReadAheadRows>, LedgerError> {
        match &mut self.0 {
            Engine::Sqlite(g) => g.read_ahead(asks).await,
            Engine::Postgres(g) => g.read_ahead(asks).await,
        }
    }

    /// Writes the groups of a round (see [`GroupTransaction::write_group`]),
    /// one statement per table for all of them (on PostgreSQL routed by
    /// tenant, a round's one group as statements naming its tenant). Per
    /// write, whether it was written: on PostgreSQL a group whose head moved
    /// writes nothing while the others are written (`false`); on SQLite
    /// such a group fails the call, as does any failure on either engine,
    /// the transaction then to be rolled back to a savepoint.
    pub(crate) async fn write_many(
        &mut self,
        writes: &[&GroupWrite],
    ) -> Result<Vec<bool>, LedgerError> {
        match &mut self.0 {
            Engine::Sqlite(g) => {
                g.write_many(writes).await?;
                Ok(vec![true; writes.len()])
            }
            Engine::Postgres(g) => g.write_many(writes).await,
        }
    }

    /// Runs one statement `sql` (no parameters, no rows) on the transaction: the
    /// savepoints of a commit round (`crate::group::committer`).
    pub(crate) async fn execute(&mut self, sql: &'static str) -> Result<(), LedgerError> {
        match &mut self.0 {
            Engine::Sqlite(g) => {
                sqlx::query(sql).execute(&mut *g.tx).await?;
            }
            Engine::Postgres(g) => {
                sqlx::query(sql).execute(&mut *g.tx).await?;
            }
        }
        Ok(())
    }
}

impl Storage {
    /// Opens a group transaction; nothing is locked until
    /// [`GroupTransaction::lock_head`].
    pub(crate) async fn begin_group(&self) -> Result<EngineGroup, LedgerError> {
        Ok(EngineGroup(match self {
            Storage::Sqlite(s) => Engine::Sqlite(s.begin_group().await?),
            Storage::Postgres(s) => Engine::Postgres(s.begin_group().await?),
        }))
    }

    /// Whether a round of groups all decided ahead is written as one
    /// statement in autocommit ([`Storage::write_alone`]): on PostgreSQL,
    /// not routed by tenant. Elsewhere every round is a transaction.
    pub(crate) fn writes_alone(&self) -> bool {
        matches!(self, Storage::Postgres(s) if !s.routed_by_tenant())
    }

    /// Writes a round's groups, every one decided ahead, as one statement
    /// in autocommit (where [`Storage::writes_alone`]). Per write, whether
    /// it was written (see [`EngineGroup::write_many`]).
    pub(crate) async fn write_alone(
        &self,
        writes: &[&GroupWrite],
    ) -> Result<Vec<bool>, LedgerError> {
        match self {
            Storage::Postgres(s) if !s.routed_by_tenant() => s.write_alone(writes).await,
            _ => Err(LedgerError::Unavailable(
                "this engine writes every round in a transaction".to_owned(),
            )),
        }
    }

    /// Most groups in one round: one where every statement must name a
    /// single tenant (PostgreSQL routed by tenant).
    pub(crate) fn most_groups_a_round(&self, most: usize) -> usize {
        match self {
            Storage::Postgres(s) if s.routed_by_tenant() => 1,
            _ => most,
        }
    }
}
