//! What the read models (tally-projections) may use of a store besides the
//! reads of [`Storage`]: the engine's pool, to run their own SQL on their
//! own tables (and on the log, which is immutable up to the head), and the
//! tenant's head lock, to rewrite stored balances with no group committing
//! in between.

use sqlx::{PgConnection, PgPool, SqliteConnection, SqlitePool};

use super::postgres::PgGroup;
use super::postgres::PostgresStore;
use super::shared::log_heads;
use super::sqlite::SqliteGroup;
use super::sqlite::SqliteStore;
use super::storage::Storage;
use super::transaction::GroupTransaction;
use crate::balance::AccountBalance;
use crate::chain::Head;
use crate::on_engine;
use crate::LedgerError;

/// The engine behind a [`Storage`], for SQL of the engine's own dialect.
#[derive(Clone, Copy)]
pub enum EngineRef<'a> {
    Sqlite(&'a SqliteStore),
    Postgres(&'a PostgresStore),
}

impl Storage {
    pub fn engine(&self) -> EngineRef<'_> {
        match self {
            Storage::Sqlite(s) => EngineRef::Sqlite(s),
            Storage::Postgres(s) => EngineRef::Postgres(s),
        }
    }

    /// Locks `tenant`'s head (as a group does, so no group commits until
    /// [`TenantLock::commit`]) and bumps its generation: writers must not
    /// trust balances they remember across the rewrite that follows.
    pub async fn lock_tenant(&self, tenant: &str) -> Result<TenantLock, LedgerError> {
        on_engine!(self, Storage, s => {
            let (group, head) = log_heads::lock_for_rewrite(s, tenant).await?;
            Ok(TenantLock {
                head,
                group: group.into(),
            })
        })
    }
}

impl SqliteStore {
    /// The pool readers use (not the writer's connection).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}

impl PostgresStore {
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

/// A tenant's head, locked by [`Storage::lock_tenant`] until the
/// transaction it was taken in commits (or is dropped, rolling back).
pub struct TenantLock {
    head: Head,
    group: Locked,
}

enum Locked {
    Sqlite(SqliteGroup),
    Postgres(PgGroup),
}

impl From<SqliteGroup> for Locked {
    fn from(group: SqliteGroup) -> Self {
        Locked::Sqlite(group)
    }
}

impl From<PgGroup> for Locked {
    fn from(group: PgGroup) -> Self {
        Locked::Postgres(group)
    }
}

/// The connection of a [`TenantLock`]'s transaction.
pub enum LockedConnection<'a> {
    Sqlite(&'a mut SqliteConnection),
    Postgres(&'a mut PgConnection),
}

impl TenantLock {
    /// The head as it was locked: every entry up to it is committed.
    pub fn head(&self) -> Head {
        self.head
    }

    pub fn connection(&mut self) -> LockedConnection<'_> {
        match &mut self.group {
            Locked::Sqlite(g) => LockedConnection::Sqlite(&mut g.tx),
            Locked::Postgres(g) => LockedConnection::Postgres(&mut g.tx),
        }
    }

    /// Writes (inserts or replaces) stored balances, as a group does.
    pub async fn write_balances(
        &mut self,
        tenant: &str,
        rows: &[(&str, &str, AccountBalance)],
    ) -> Result<(), LedgerError> {
        on_engine!(&mut self.group, Locked, g => g.write_balances(tenant, rows).await)
    }

    pub async fn commit(self) -> Result<(), LedgerError> {
        on_engine!(self.group, Locked, g => g.commit().await)
    }
}
