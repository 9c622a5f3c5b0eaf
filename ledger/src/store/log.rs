//! What the read models (tally-projections) may use of a store besides the
//! reads of [`Storage`]: the engine's pool, to run their own SQL on their
//! own tables (and on the log, which is immutable up to the head), and the
//! tenant's head lock, to rewrite stored balances with no group committing
//! in between.

use sqlx::{PgConnection, PgPool, SqliteConnection, SqlitePool};

use super::transaction::GroupTransaction;
use super::{PostgresStore, SqliteStore, Storage};
use crate::balance::AccountBalance;
use crate::chain::Head;
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
        match self {
            Storage::Sqlite(s) => {
                let mut group = s.begin_group().await?;
                let head = group.lock_head(tenant).await?.head;
                sqlx::query(
                    "UPDATE ledger_heads SET generation = generation + 1 WHERE tenant_id = ?",
                )
                .bind(tenant)
                .execute(&mut *group.tx)
                .await?;
                Ok(TenantLock {
                    head,
                    group: Locked::Sqlite(group),
                })
            }
            Storage::Postgres(s) => {
                let mut group = s.begin_group().await?;
                let head = group.lock_head(tenant).await?.head;
                sqlx::query(
                    "UPDATE ledger_heads SET generation = generation + 1 WHERE tenant_id = $1",
                )
                .bind(tenant)
                .execute(&mut *group.tx)
                .await?;
                Ok(TenantLock {
                    head,
                    group: Locked::Postgres(group),
                })
            }
        }
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
    Sqlite(super::sqlite::SqliteGroup),
    Postgres(super::postgres::PgGroup),
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
        match &mut self.group {
            Locked::Sqlite(g) => g.write_balances(tenant, rows).await,
            Locked::Postgres(g) => g.write_balances(tenant, rows).await,
        }
    }

    pub async fn commit(self) -> Result<(), LedgerError> {
        match self.group {
            Locked::Sqlite(g) => g.commit().await,
            Locked::Postgres(g) => g.commit().await,
        }
    }
}
