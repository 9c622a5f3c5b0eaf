//! The log's readers (the usage projector, the webhook fan-out) follow each
//! tenant's head from a checkpoint of their own (table
//! `projector_checkpoints`, one row per tenant and reader). What they need
//! of the ledger's tables is read here, so that no SQL outside the ledger
//! names `ledger_heads`: which tenants' heads are past a reader's
//! checkpoint, by how much, and a head's seq inside a reader's snapshot.

use std::future::Future;

use sqlx::{PgConnection, Postgres, Sqlite, SqliteConnection};

use super::engine_db::{Arg, EngineDb, Sql};

use super::storage::Storage;
use crate::on_engine;
use crate::LedgerError;

/// Tenants whose head is past the reader's (`$1`) checkpoint; a tenant
/// with no checkpoint row has read nothing (seq 0). The one query of a
/// reader that spans tenants: it reads the one-row-per-tenant head and
/// checkpoint, joined on `tenant_id` (colocated on a distributed engine).
const BEHIND: &str = "SELECT h.tenant_id FROM ledger_heads h \
     LEFT JOIN projector_checkpoints c \
       ON c.tenant_id = h.tenant_id AND c.projector = $1 \
     WHERE h.seq > COALESCE(c.seq, 0) ORDER BY h.tenant_id";

/// [`BEHIND`] among the tenants `$2` names: a JSON array on SQLite, a
/// text array on PostgreSQL.
const BEHIND_AMONG_SQLITE: &str = "SELECT h.tenant_id FROM ledger_heads h \
     LEFT JOIN projector_checkpoints c \
       ON c.tenant_id = h.tenant_id AND c.projector = $1 \
     WHERE h.tenant_id IN (SELECT value FROM json_each($2)) \
       AND h.seq > COALESCE(c.seq, 0) ORDER BY h.tenant_id";
const BEHIND_AMONG_POSTGRES: &str = "SELECT h.tenant_id FROM ledger_heads h \
     LEFT JOIN projector_checkpoints c \
       ON c.tenant_id = h.tenant_id AND c.projector = $1 \
     WHERE h.tenant_id = ANY($2) \
       AND h.seq > COALESCE(c.seq, 0) ORDER BY h.tenant_id";

/// The lag of the reader `$1` as one row: an aggregate over the heads and
/// checkpoints, so a scrape reads two numbers however many tenants lag.
const LAG: &str = "SELECT COUNT(*) AS lagging_tenants, \
       COALESCE(MAX(h.seq - COALESCE(c.seq, 0)), 0) AS max_entries \
     FROM ledger_heads h \
     LEFT JOIN projector_checkpoints c \
       ON c.tenant_id = h.tenant_id AND c.projector = $1 \
     WHERE h.seq > COALESCE(c.seq, 0)";

const HEAD_SEQ: &str = "SELECT seq FROM ledger_heads WHERE tenant_id = $1";

const USAGE_COLUMNS_FROM: &str = "SELECT usage_columns_from FROM ledger_heads WHERE tenant_id = $1";

/// How far one reader is behind, over every tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct ReaderLag {
    /// Tenants whose checkpoint is behind their head.
    pub lagging_tenants: i64,
    /// The largest `head seq − checkpoint` of a tenant (0 if none lags).
    pub max_entries: i64,
}

impl Storage {
    /// Tenants whose head is past `reader`'s checkpoint, in tenant order.
    pub async fn tenants_behind(&self, reader: &str) -> Result<Vec<String>, LedgerError> {
        Ok(on_engine!(self, Storage, s => {
            sqlx::query_scalar(BEHIND).bind(reader).fetch_all(s.pool()).await?
        }))
    }

    /// Those of `tenants` whose head is past `reader`'s checkpoint, in
    /// tenant order. For a reader that follows only some tenants (the
    /// fan-out: those with an endpoint): with none, nothing is read.
    pub async fn tenants_behind_among(
        &self,
        reader: &str,
        tenants: &[String],
    ) -> Result<Vec<String>, LedgerError> {
        if tenants.is_empty() {
            return Ok(Vec::new());
        }
        Ok(match self {
            // SQLite has no arrays: the names go as one JSON array.
            Storage::Sqlite(s) => {
                let names = serde_json::to_string(tenants)
                    .map_err(|e| LedgerError::Unavailable(format!("tenant names: {e}")))?;
                sqlx::query_scalar(BEHIND_AMONG_SQLITE)
                    .bind(reader)
                    .bind(names)
                    .fetch_all(s.pool())
                    .await?
            }
            Storage::Postgres(s) => {
                sqlx::query_scalar(BEHIND_AMONG_POSTGRES)
                    .bind(reader)
                    .bind(tenants)
                    .fetch_all(s.pool())
                    .await?
            }
        })
    }

    /// How far `reader` is behind, over every tenant.
    pub async fn reader_lag(&self, reader: &str) -> Result<ReaderLag, LedgerError> {
        Ok(on_engine!(self, Storage, s => {
            sqlx::query_as(LAG).bind(reader).fetch_one(s.pool()).await?
        }))
    }

    /// The seq up to which `tenant`'s entries were appended before the
    /// usage columns existed (migration 0005): those are folded from
    /// params. 0 for a tenant with no head.
    pub async fn usage_columns_from(&self, tenant: &str) -> Result<i64, LedgerError> {
        let from: Option<i64> = on_engine!(self, Storage, s => {
            sqlx::query_scalar(USAGE_COLUMNS_FROM).bind(tenant).fetch_optional(s.pool()).await?
        });
        Ok(from.unwrap_or(0))
    }
}

/// The seq of `tenant`'s head, 0 before its first entry, read on a
/// reader's own connection (or transaction): inside its snapshot or write.
pub async fn reader_head_seq<DB: EngineDb>(
    conn: &mut DB::Connection,
    tenant: &str,
) -> Result<i64, LedgerError> {
    let sql = Sql::with(HEAD_SEQ, [Arg::Text(tenant)]);
    Ok(match DB::fetch_optional(conn, &sql).await? {
        Some(row) => DB::int(&row, "seq")?,
        None => 0,
    })
}

/// A reader's connection of either engine, for code that holds the
/// connection's type rather than the engine's (see [`reader_head_seq`]).
pub trait ReaderConnection: Send {
    type Db: EngineDb<Connection = Self>;

    /// The seq of `tenant`'s head, 0 before its first entry.
    fn head_seq(&mut self, tenant: &str) -> impl Future<Output = Result<i64, LedgerError>> + Send {
        reader_head_seq::<Self::Db>(self, tenant)
    }
}

impl ReaderConnection for SqliteConnection {
    type Db = Sqlite;
}

impl ReaderConnection for PgConnection {
    type Db = Postgres;
}
