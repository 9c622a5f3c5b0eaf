//! PostgreSQL: production. Many `tally` processes may share one database;
//! the `FOR UPDATE` lock on the tenant's head row serialises their groups,
//! and the UNIQUE constraint on (tenant_id, kind, upstream_id) stays the
//! final arbiter. Amounts are NUMERIC, bound and read as exact text.

pub mod citus;
pub(super) mod columns;
mod group_tx;
pub(crate) mod keyed;
mod read_ahead;
mod round_write;
#[cfg(test)]
mod tests;

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgRow};
use sqlx::{PgConnection, PgPool, Postgres, Row};

use super::engine_db::{Arg, EngineDb, Sql};
use super::rule_state::RulesRebuilt;
use super::shared::EngineStore;
use super::transaction::GroupWrite;
use crate::entry::StoredEntry;
use crate::request::EntryKind;
use crate::LedgerError;
use columns::{entry, ENTRY_COLUMNS};
use group_tx::keyed_entries;
pub(crate) use group_tx::PgGroup;
use round_write::write_together;

#[derive(Clone)]
pub struct PostgresStore {
    pub(crate) pool: PgPool,
    /// Every statement of the write path names one tenant, bound as a
    /// scalar (`tenant_id = $1`), and a round holds one tenant's group: a
    /// distributed PostgreSQL (Citus, tables distributed by `tenant_id`)
    /// routes each statement to the one node holding that tenant, where a
    /// statement spanning tenants could not be routed and a transaction
    /// across nodes would be a two-phase commit. Off by default: rounds then
    /// write the groups of many tenants in one statement. Chosen once, at
    /// start-up ([`PostgresStore::routed_by_tenant`]).
    routed_by_tenant: bool,
}

impl EngineStore for PostgresStore {
    type Db = Postgres;
    type Group = PgGroup;

    const ENTRY_COLUMNS: &'static str = ENTRY_COLUMNS;

    fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// PostgreSQL binds `recorded_at` as a timestamp.
    fn recorded_at_arg(time: DateTime<Utc>) -> Arg<'static> {
        Arg::Time(time)
    }

    fn decode_entry(row: &PgRow) -> Result<StoredEntry, LedgerError> {
        entry(row)
    }

    /// PostgreSQL stores an api key's `created_at` as a timestamp; it is
    /// answered as the fixed-width UTC text SQLite stores.
    fn created_at(row: &PgRow) -> Result<String, LedgerError> {
        let created_at: DateTime<Utc> = row.try_get("created_at")?;
        Ok(crate::entry::format_recorded_at(&created_at))
    }

    async fn keyed_entries(
        conn: &mut PgConnection,
        tenant: &str,
        keys: &[(EntryKind, &str)],
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        keyed_entries(conn, tenant, keys).await
    }

    /// A page of the log, its rows handed over as they come.
    async fn read_page(&self, walk: Sql<'_>) -> Result<Vec<StoredEntry>, LedgerError> {
        let rows = Postgres::fetch_all(&mut *self.pool.acquire().await?, &walk).await?;
        rows.iter().map(entry).collect()
    }

    async fn begin_group(&self) -> Result<PgGroup, LedgerError> {
        PostgresStore::begin_group(self).await
    }

    fn group_connection(group: &mut PgGroup) -> &mut PgConnection {
        &mut group.tx
    }

    async fn rebuild_rules(group: &mut PgGroup, tenant: &str) -> Result<RulesRebuilt, LedgerError> {
        group.rebuild_rules(tenant).await
    }
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
        // A Citus coordinator: the schema distributed by tenant, and every
        // statement of the write path routed to one tenant's node, decided
        // here once from the catalog (docs/scaling.md).
        let citus = citus::has_citus(&pool).await?;
        if citus {
            citus::distribute(&pool).await?;
        }
        Ok(Self {
            pool,
            routed_by_tenant: citus,
        })
    }

    /// This store with the write path routed by tenant (`true`) or not
    /// (see the field `routed_by_tenant`); set once, before the writers
    /// start (`Writers::new`). [`PostgresStore::connect`] sets it on a
    /// Citus coordinator; tests set it to run the routed path on one server.
    pub fn with_routing_by_tenant(mut self, routed: bool) -> Self {
        self.routed_by_tenant = routed;
        self
    }

    /// Whether every statement of the write path names one tenant.
    pub fn routed_by_tenant(&self) -> bool {
        self.routed_by_tenant
    }

    pub(super) async fn begin_group(&self) -> Result<PgGroup, LedgerError> {
        Ok(PgGroup {
            tx: self.pool.begin().await?,
            routed_by_tenant: self.routed_by_tenant,
        })
    }

    /// Writes the groups of `writes`, every one decided ahead from its
    /// writer's memory, as one statement in autocommit ([`write_together`]):
    /// one round trip, instead of `BEGIN`, the heads' lock, the write and
    /// `COMMIT`. Per write, whether it was written (`false`: its head had
    /// moved, and it wrote nothing); a failure wrote nothing at all. Not
    /// routed by tenant: there a round is a transaction.
    pub(super) async fn write_alone(
        &self,
        writes: &[&GroupWrite],
    ) -> Result<Vec<bool>, LedgerError> {
        let started = std::time::Instant::now();
        let mut connection = self.pool.acquire().await?;
        let written = write_together(writes, &mut *connection).await?;
        tracing::debug!(
            groups = writes.len(),
            write_ms = started.elapsed().as_secs_f64() * 1e3,
            "groups written in one statement"
        );
        Ok(written)
    }
}
