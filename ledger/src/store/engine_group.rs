//! A group transaction of either engine, and how [`Storage`] opens one.

use super::postgres::PgGroup;
use super::read_ahead::{ReadAhead, ReadAheadRows};
use super::sqlite::SqliteGroup;
use super::storage::Storage;
use super::transaction::{write_ahead, Fence, GroupTransaction, GroupWrite};
use crate::balance::AccountBalance;
use crate::entry::StoredEntry;
use crate::intent::EntryKind;
use crate::on_engine;
use crate::state::StateKey;
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

    /// Writes the groups of distinct tenants (see [`GroupTransaction::write_group`]):
    /// on SQLite one statement per table for all of them.
    pub(crate) async fn write_many(&mut self, writes: &[&GroupWrite]) -> Result<(), LedgerError> {
        match &mut self.0 {
            Engine::Sqlite(g) => g.write_many(writes).await,
            Engine::Postgres(g) => {
                for write in writes {
                    g.write_group(write).await?;
                }
                Ok(())
            }
        }
    }

    /// Runs one statement `sql` (no parameters, no rows) on the transaction: the
    /// savepoints of a shared round (`super::shared_commit`).
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

    /// Writes a group decided ahead, on top of `start` only (see
    /// [`write_ahead`]). PostgreSQL sends a group with rows as one
    /// statement of its own.
    pub(crate) async fn write_ahead(
        &self,
        tenant: &str,
        start: Fence,
        write: Option<&GroupWrite>,
    ) -> Result<(), LedgerError> {
        match self {
            Storage::Sqlite(s) => write_ahead(s.begin_group().await?, tenant, start, write).await,
            Storage::Postgres(s) => match write {
                Some(write) => s.write_alone(write).await,
                None => write_ahead(s.begin_group().await?, tenant, start, None).await,
            },
        }
    }
}
