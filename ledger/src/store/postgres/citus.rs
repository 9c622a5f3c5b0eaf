//! tally on a Citus cluster: the schema distributed by tenant.
//!
//! Every table of tenant data is distributed by `tenant_id` and colocated
//! with `ledger_heads`, so one tenant's rows all live on one node and a
//! group's transaction commits there in one phase. The directory tables,
//! read before the tenant is known (an API key by its hash), are reference
//! tables: a copy on every node. docs/scaling.md has the why of each.
//!
//! Whether the database is a Citus coordinator is read once, from the
//! catalog, when tally connects; the write path chooses its statements from
//! that, never per request.

use sqlx::{PgConnection, PgPool};

use crate::LedgerError;

/// Tables read before the tenant is known: copied to every node.
pub const REFERENCE_TABLES: &[&str] = &["api_keys", "stripe_integrations"];

/// The first table of the colocation group; every other tenant table is
/// colocated with it.
const COLOCATION_ANCHOR: &str = "ledger_heads";

/// sqlx's own record of the applied migrations: local to the coordinator.
const LOCAL_TABLES: &[&str] = &["_sqlx_migrations"];

/// Serialises the distribution of processes starting together (the key is
/// arbitrary; sqlx's migrations take another).
const DISTRIBUTION_LOCK: i64 = 0x7461_6c6c_7963_6974; // "tallycit"

/// What a table becomes on the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// A copy on every node.
    Reference,
    /// Distributed by `tenant_id`, colocated with `ledger_heads`.
    ByTenant,
}

/// One step of a distribution: a table and what it becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistributionStep {
    pub table: String,
    pub placement: Placement,
}

impl std::fmt::Display for DistributionStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.placement {
            Placement::Reference => {
                write!(f, "{}: reference table (a copy on every node)", self.table)
            }
            Placement::ByTenant if self.table == COLOCATION_ANCHOR => {
                write!(f, "{}: distributed by tenant_id", self.table)
            }
            Placement::ByTenant => write!(
                f,
                "{}: distributed by tenant_id, colocated with {COLOCATION_ANCHOR}",
                self.table
            ),
        }
    }
}

/// Whether the database has the `citus` extension: it is a coordinator,
/// and tally distributes its schema there.
pub async fn has_citus(pool: &PgPool) -> Result<bool, LedgerError> {
    Ok(
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')")
            .fetch_one(pool)
            .await?,
    )
}

/// Whether the server could run Citus in this database: the extension is
/// available to `CREATE EXTENSION` (installed, and preloaded as Citus needs).
pub async fn citus_available(pool: &PgPool) -> Result<bool, LedgerError> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'citus') \
           AND current_setting('shared_preload_libraries') ~ '(^|[ ,])citus($|[ ,])'",
    )
    .fetch_one(pool)
    .await?)
}

/// The steps still to take: every table of the public schema not yet known
/// to Citus, the anchor first. A table that is neither a reference table
/// nor has a `tenant_id` is an error: tenant data must say whose it is.
pub async fn plan(pool: &PgPool) -> Result<Vec<DistributionStep>, LedgerError> {
    let tables: Vec<(String, bool)> = sqlx::query_as(
        "SELECT c.relname::text, EXISTS (SELECT 1 FROM pg_attribute a \
             WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped) \
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') \
           AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = c.oid) \
         ORDER BY c.relname <> $1, c.relname",
    )
    .bind(COLOCATION_ANCHOR)
    .fetch_all(pool)
    .await?;
    let mut steps = Vec::with_capacity(tables.len());
    for (table, has_tenant) in tables {
        if LOCAL_TABLES.contains(&table.as_str()) {
            continue;
        }
        let placement = if REFERENCE_TABLES.contains(&table.as_str()) {
            Placement::Reference
        } else if has_tenant {
            Placement::ByTenant
        } else {
            return Err(LedgerError::Distribution(format!(
                "table {table} has no tenant_id and is not a reference table: \
                 it cannot be distributed by tenant"
            )));
        };
        steps.push(DistributionStep { table, placement });
    }
    Ok(steps)
}

/// Distributes every table [`plan`] lists, under an advisory lock so that
/// processes starting together do it once; answers the steps taken. The
/// append-only triggers of `entries` go to every shard with it
/// (`citus.enable_unsafe_triggers`: they only refuse, they never write
/// another row, so nothing about them is unsafe across shards).
pub async fn distribute(pool: &PgPool) -> Result<Vec<DistributionStep>, LedgerError> {
    let mut conn = pool.acquire().await?;
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(DISTRIBUTION_LOCK)
        .execute(&mut *conn)
        .await?;
    let result = distribute_locked(pool, &mut conn).await;
    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(DISTRIBUTION_LOCK)
        .execute(&mut *conn)
        .await;
    let steps = result?;
    unlocked?;
    Ok(steps)
}

async fn distribute_locked(
    pool: &PgPool,
    conn: &mut PgConnection,
) -> Result<Vec<DistributionStep>, LedgerError> {
    let steps = plan(pool).await?;
    if steps.is_empty() {
        return Ok(steps);
    }
    sqlx::query("SET citus.enable_unsafe_triggers = on")
        .execute(&mut *conn)
        .await?;
    for step in &steps {
        let statement = match step.placement {
            Placement::Reference => "SELECT create_reference_table($1::regclass)",
            Placement::ByTenant if step.table == COLOCATION_ANCHOR => {
                "SELECT create_distributed_table($1::regclass, 'tenant_id')"
            }
            Placement::ByTenant => {
                "SELECT create_distributed_table($1::regclass, 'tenant_id', \
                   colocate_with => 'ledger_heads')"
            }
        };
        // The table name comes from the catalog, quoted as an identifier.
        let had_rows: bool = sqlx::query_scalar(&format!(
            "SELECT EXISTS (SELECT 1 FROM {})",
            quote_identifier(&step.table)
        ))
        .fetch_one(&mut *conn)
        .await?;
        sqlx::query(statement)
            .bind(&step.table)
            .execute(&mut *conn)
            .await
            .map_err(|e| LedgerError::Distribution(format!("{step}: {e}")))?;
        if had_rows {
            drop_local_copy(conn, step).await?;
        }
        tracing::info!(table = %step.table, placement = ?step.placement, "distributed on Citus");
    }
    sqlx::query("RESET citus.enable_unsafe_triggers")
        .execute(&mut *conn)
        .await?;
    Ok(steps)
}

/// A table that held rows keeps them in the coordinator's shell after they
/// were copied into the shards: dead weight, removed. The append-only
/// trigger refuses `TRUNCATE` on `entries`, so it is done with the
/// session's triggers off (`session_replication_role`, a superuser's
/// setting): the rows are the copied ones, the shards keep theirs, and no
/// other statement runs with the triggers off. Without the privilege the
/// copy is left in place, and said so.
async fn drop_local_copy(
    conn: &mut PgConnection,
    step: &DistributionStep,
) -> Result<(), LedgerError> {
    sqlx::query("BEGIN").execute(&mut *conn).await?;
    let truncated = async {
        sqlx::query("SET LOCAL session_replication_role = replica")
            .execute(&mut *conn)
            .await?;
        sqlx::query("SELECT truncate_local_data_after_distributing_table($1::regclass)")
            .bind(&step.table)
            .execute(&mut *conn)
            .await?;
        Ok::<(), sqlx::Error>(())
    }
    .await;
    match truncated {
        Ok(()) => {
            sqlx::query("COMMIT").execute(&mut *conn).await?;
        }
        Err(e) => {
            sqlx::query("ROLLBACK").execute(&mut *conn).await?;
            tracing::warn!(
                table = %step.table,
                error = %e,
                "the coordinator keeps a local copy of the distributed rows; \
                 truncate_local_data_after_distributing_table removes it"
            );
        }
    }
    Ok(())
}

/// `name` as a double-quoted SQL identifier.
fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A PostgreSQL database opened to be distributed (`tally db distribute`):
/// its migrations applied, nothing else done at connect.
pub struct CitusDatabase {
    pool: PgPool,
}

impl CitusDatabase {
    /// Connects to `url` and applies tally's migrations, so the schema to
    /// distribute is the current one. Refuses, having changed nothing, a
    /// server without Citus, a database without the extension, and a
    /// cluster with no worker.
    pub async fn open(url: &str) -> Result<CitusDatabase, LedgerError> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(LedgerError::Distribution(
                "only a PostgreSQL database with the citus extension can be distributed; \
                 SQLite is the embedded engine and is never distributed"
                    .into(),
            ));
        }
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect_with(super::connect_options(url)?)
            .await?;
        if !has_citus(&pool).await? {
            let why = if citus_available(&pool).await? {
                "this database has no citus extension: run CREATE EXTENSION citus in it \
                 and register the workers (SELECT citus_add_node(host, port)) first \
                 (docs/scaling.md)"
            } else {
                "this server has no Citus: install the extension and preload it \
                 (shared_preload_libraries = 'citus'), then CREATE EXTENSION citus \
                 and register the workers (docs/scaling.md)"
            };
            return Err(LedgerError::Distribution(why.into()));
        }
        let workers: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_dist_node \
             WHERE groupid <> 0 AND noderole = 'primary' AND isactive",
        )
        .fetch_one(&pool)
        .await?;
        if workers == 0 {
            return Err(LedgerError::Distribution(
                "the cluster has no active worker: register them first with \
                 SELECT citus_add_node(host, port) (docs/scaling.md)"
                    .into(),
            ));
        }
        super::migrate(&pool).await?;
        Ok(CitusDatabase { pool })
    }

    /// What [`CitusDatabase::distribute`] would do now.
    pub async fn plan(&self) -> Result<Vec<DistributionStep>, LedgerError> {
        plan(&self.pool).await
    }

    /// Distributes what [`CitusDatabase::plan`] lists.
    pub async fn distribute(&self) -> Result<Vec<DistributionStep>, LedgerError> {
        distribute(&self.pool).await
    }

    /// Every table Citus knows, with its kind (`distributed`,
    /// `reference`) and colocation group, in name order.
    pub async fn placements(&self) -> Result<Vec<(String, String, i32)>, LedgerError> {
        Ok(sqlx::query_as(
            "SELECT table_name::text, citus_table_type, colocation_id \
             FROM citus_tables ORDER BY table_name::text",
        )
        .fetch_all(&self.pool)
        .await?)
    }
}
