//! PostgreSQL: production. Many `tally` processes may share one database;
//! the `FOR UPDATE` lock on the tenant's head row serialises their groups,
//! and the UNIQUE constraint on (tenant_id, kind, upstream_id) stays the
//! final arbiter. Amounts are NUMERIC, bound and read as exact text.

pub mod citus;
pub(super) mod columns;
mod group;
mod group_write;
mod read_ahead;
#[cfg(test)]
mod tests;

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgRow};
use sqlx::{PgPool, Postgres, QueryBuilder, Row};

use super::shared::engine_reads;
use super::transaction::{head_moved, GroupWrite};
use crate::entry::StoredEntry;
use crate::LedgerError;
use columns::{entry, BALANCE_COLUMNS, ENTRY_COLUMNS};
use group::keyed_entries;
pub(crate) use group::PgGroup;
use group_write::{group_write, routed_group_write};

#[derive(Clone)]
pub struct PostgresStore {
    pub(crate) pool: PgPool,
    /// The database is a Citus coordinator (read from the catalog once, at
    /// connect): every statement of a request's path then names one tenant
    /// as a scalar, so Citus routes it to the tenant's node.
    pub(crate) citus: bool,
}

/// PostgreSQL binds `recorded_at` as a timestamp.
fn recorded_at_time(t: DateTime<Utc>) -> DateTime<Utc> {
    t
}

/// PostgreSQL stores an api key's `created_at` as a timestamp; it is
/// answered as the fixed-width UTC text SQLite stores.
fn created_at_text(row: &PgRow) -> Result<String, sqlx::Error> {
    let created_at: DateTime<Utc> = row.try_get("created_at")?;
    Ok(crate::entry::format_recorded_at(&created_at))
}

engine_reads! {
    store = PostgresStore,
    db = Postgres,
    entry = entry,
    entry_columns = ENTRY_COLUMNS,
    balance_columns = BALANCE_COLUMNS,
    time = recorded_at_time,
    keyed_entries = keyed_entries,
    rule_rows = super::rules::stored_pg,
    created_at = created_at_text,
    group = PgGroup,
    log_page = ("", "", read_rows),
    insert_api_key = (
        "INSERT INTO api_keys (tenant_id, key_hash, scopes, created_at) VALUES ($1, $2, $3, now())",
        database_clock
    ),
    balance_rows_sql = "SELECT b.unit, b.debits::text AS debits, b.credits::text AS credits, \
           b.held::text AS held, h.seq AS head_seq \
         FROM ledger_heads h LEFT JOIN balances b \
           ON b.tenant_id = h.tenant_id AND b.account = $2 \
         WHERE h.tenant_id = $1 ORDER BY b.unit",
}

/// An api key's `created_at` is the database's `now()`: nothing to bind.
fn database_clock() -> Option<String> {
    None
}

/// A page of the log, its rows handed over as they come.
async fn read_rows(
    pool: &PgPool,
    mut page: QueryBuilder<'_, Postgres>,
) -> Result<Vec<StoredEntry>, LedgerError> {
    let rows = page.build().fetch_all(pool).await?;
    rows.iter().map(entry).collect()
}

/// The connection options of `url`, with PostgreSQL's JIT compiler off
/// unless the URL's `options` say otherwise. No statement of the request
/// path costs enough to be compiled; the log-wide aggregates of `tally
/// projections rebuild` and `tally verify` do, and there every process of a
/// parallel plan compiled its expressions for ~100 ms of a ~1 s scan, more
/// than the compiled code saved.
fn connect_options(url: &str) -> Result<PgConnectOptions, LedgerError> {
    let options = PgConnectOptions::from_str(url)?;
    if options.get_options().is_some_and(|o| o.contains("jit")) {
        return Ok(options);
    }
    Ok(options.options([("jit", "off")]))
}

/// Applies tally's migrations. sqlx takes an advisory lock, so processes
/// starting together migrate once.
async fn migrate(pool: &PgPool) -> Result<(), LedgerError> {
    super::migration_checksums::accept_reworded_postgres(pool).await?;
    sqlx::migrate!("../migrations/postgres").run(pool).await?;
    Ok(())
}

impl PostgresStore {
    pub async fn connect(url: &str, pool_size: u32) -> Result<Self, LedgerError> {
        let pool = super::rows::pool_options::<Postgres>(pool_size)
            // A database that does not answer turns into a prompt 503, not a hang.
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(connect_options(url)?)
            .await?;
        migrate(&pool).await?;
        let citus = citus::has_citus(&pool).await?;
        if citus {
            citus::distribute(&pool).await?;
        }
        Ok(Self { pool, citus })
    }

    /// Whether this database is a Citus coordinator (docs/scaling.md).
    pub fn is_citus(&self) -> bool {
        self.citus
    }

    pub(super) async fn begin_group(&self) -> Result<PgGroup, LedgerError> {
        Ok(PgGroup {
            tx: self.pool.begin().await?,
            routed: self.citus,
        })
    }

    /// Writes a group decided from the writer's memory, on its own: one
    /// statement in its own transaction (see [`group_write`]), instead of
    /// `BEGIN`, the head's lock, the write and `COMMIT`, four round trips
    /// on the tenant's critical path. Fails, having written nothing, if the
    /// head is no longer where the group was decided.
    pub(super) async fn write_alone(&self, write: &GroupWrite) -> Result<(), LedgerError> {
        let started = std::time::Instant::now();
        if self.citus {
            let mut group = self.begin_group().await?;
            if !routed_group_write(write, &mut group.tx).await? {
                return Err(head_moved());
            }
            group.tx.commit().await?;
        } else {
            let mut connection = self.pool.acquire().await?;
            if group_write(write, &mut *connection).await? != 1 {
                return Err(head_moved());
            }
        }
        tracing::debug!(
            entries = write.entries.len(),
            write_ms = started.elapsed().as_secs_f64() * 1e3,
            "group written alone"
        );
        Ok(())
    }
}
