//! Statements other crates run on their own tables (the webhooks' and the
//! integrations'), through [`Storage`] and without knowing the engine: the
//! SQL takes `$1, $2`, which both engines read, its values are [`Arg`]s,
//! and a row comes back as whatever [`FromColumns`] decodes.

use sqlx::{Postgres, Sqlite};

use super::engine_db::{EngineDb, Sql};
use super::log::EngineRef;
use super::storage::Storage;
use crate::LedgerError;

/// The columns of one row, read by name.
pub trait Columns {
    fn text(&self, column: &str) -> Result<String, LedgerError>;
    fn opt_text(&self, column: &str) -> Result<Option<String>, LedgerError>;
    fn int(&self, column: &str) -> Result<i64, LedgerError>;
}

/// A value decoded from one row.
pub trait FromColumns: Sized {
    fn from_columns(row: &dyn Columns) -> Result<Self, LedgerError>;
}

/// A row of either engine.
struct RowOf<'r, DB: EngineDb>(&'r DB::Row);

impl<DB: EngineDb> Columns for RowOf<'_, DB> {
    fn text(&self, column: &str) -> Result<String, LedgerError> {
        Ok(DB::text(self.0, column)?)
    }

    fn opt_text(&self, column: &str) -> Result<Option<String>, LedgerError> {
        Ok(DB::opt_text(self.0, column)?)
    }

    fn int(&self, column: &str) -> Result<i64, LedgerError> {
        Ok(DB::int(self.0, column)?)
    }
}

fn decode<DB: EngineDb, T: FromColumns>(rows: &[DB::Row]) -> Result<Vec<T>, LedgerError> {
    rows.iter()
        .map(|r| T::from_columns(&RowOf::<DB>(r)))
        .collect()
}

impl Storage {
    /// Every row `sql` selects, read on a connection of the readers' pool.
    pub async fn query_all<T: FromColumns>(&self, sql: &Sql<'_>) -> Result<Vec<T>, LedgerError> {
        match self.engine() {
            EngineRef::Sqlite(s) => {
                let rows = Sqlite::fetch_all(&mut *s.pool().acquire().await?, sql).await?;
                decode::<Sqlite, T>(&rows)
            }
            EngineRef::Postgres(s) => {
                let rows = Postgres::fetch_all(&mut *s.pool().acquire().await?, sql).await?;
                decode::<Postgres, T>(&rows)
            }
        }
    }

    /// The first row `sql` selects, if any.
    pub async fn query_optional<T: FromColumns>(
        &self,
        sql: &Sql<'_>,
    ) -> Result<Option<T>, LedgerError> {
        Ok(self.query_all(sql).await?.into_iter().next())
    }

    /// Runs `sql` as a write of its own: on SQLite in this process's write
    /// turn (`BEGIN IMMEDIATE`, then commit), on PostgreSQL in autocommit.
    /// How many rows it changed.
    pub async fn write(&self, sql: &Sql<'_>) -> Result<u64, LedgerError> {
        match self.engine() {
            EngineRef::Sqlite(s) => {
                let mut write = s.begin_write().await?;
                let changed = Sqlite::execute(&mut write, sql).await?;
                write.commit().await?;
                Ok(changed)
            }
            EngineRef::Postgres(s) => {
                Ok(Postgres::execute(&mut *s.pool().acquire().await?, sql).await?)
            }
        }
    }

    /// Runs `sql` (a write with `RETURNING`) as [`Storage::write`] does;
    /// the first row it returns.
    pub async fn write_returning<T: FromColumns>(
        &self,
        sql: &Sql<'_>,
    ) -> Result<Option<T>, LedgerError> {
        let rows = match self.engine() {
            EngineRef::Sqlite(s) => {
                let mut write = s.begin_write().await?;
                let rows = Sqlite::fetch_all(&mut write, sql).await?;
                write.commit().await?;
                decode::<Sqlite, T>(&rows)?
            }
            EngineRef::Postgres(s) => {
                let rows = Postgres::fetch_all(&mut *s.pool().acquire().await?, sql).await?;
                decode::<Postgres, T>(&rows)?
            }
        };
        Ok(rows.into_iter().next())
    }
}
