//! Rule state read as stored, and rebuilt from the log
//! ([`crate::rule_fold`]): the SQL of both engines.
//!
//! The rebuild runs on the transaction that holds the tenant's head lock
//! and bumped its generation, so no group commits in between and no writer
//! trusts the records it remembered from before. Like the balance rebuild,
//! it writes only the rows that differ from the fold and deletes the rows
//! the fold has not: a sound ledger's rebuild rewrites nothing.

use futures_util::{Stream, StreamExt, TryStreamExt};
use sqlx::{PgConnection, QueryBuilder, SqliteConnection};

use crate::entry::StoredEntry;
use crate::rule_fold::{compare, RuleFold, StoredRecord, RULE_KINDS_SQL};
use crate::rule_state::StateRow;
use crate::store::engine_db::{Arg, EngineDb, Sql};
use crate::store::postgres::keyed::{self, KeyColumn};
use crate::LedgerError;

/// Rows per multi-row statement.
const ROWS_PER_STATEMENT: usize = 250;

/// What a rule-state rebuild did for one tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RulesRebuilt {
    /// Entries of the kinds that change rule state, folded.
    pub entries: u64,
    /// Records the log implies.
    pub records: usize,
    /// Rows written (missing or different) and deleted (extra).
    pub written: usize,
    pub removed: usize,
}

/// Every rule-state row of a tenant, as stored, on `conn`.
pub(super) async fn stored<DB: EngineDb>(
    conn: &mut DB::Connection,
    tenant: &str,
) -> Result<Vec<StoredRecord>, LedgerError> {
    let sql = Sql::with(
        "SELECT kind, key, value, expires_at FROM rule_state WHERE tenant_id = $1 \
         ORDER BY kind, key",
        [Arg::Text(tenant)],
    );
    let rows = DB::fetch_all(conn, &sql).await?;
    rows.iter()
        .map(|r| {
            Ok(StoredRecord {
                kind: DB::text(r, "kind")?,
                key: DB::text(r, "key")?,
                value: DB::text(r, "value")?,
                expires_at: DB::opt_text(r, "expires_at")?,
            })
        })
        .collect()
}

/// Folds, in seq order, the entries that change rule state.
/// `ORDER BY +seq` on SQLite: found through the kind index, then sorted
/// (see [`super::rows::hold_rows_sql`]).
fn rule_entries_sql(columns: &str, placeholder: &str, order: &str) -> String {
    format!(
        "SELECT {columns} FROM entries WHERE tenant_id = {placeholder} \
         AND kind IN {RULE_KINDS_SQL} ORDER BY {order}"
    )
}

/// The tenant's rule entries, streamed in seq order, folded; and how many
/// there were.
async fn fold_entries<S>(entries: S) -> Result<(RuleFold, u64), LedgerError>
where
    S: Stream<Item = Result<StoredEntry, LedgerError>>,
{
    let mut entries = std::pin::pin!(entries);
    let mut fold = RuleFold::new();
    let mut count = 0u64;
    while let Some(entry) = entries.try_next().await? {
        fold.apply(&entry)?;
        count += 1;
    }
    Ok((fold, count))
}

/// What a rebuild changes: the rows to write (missing or different) and
/// the (kind, key) of the stored rows the fold has not, to delete.
fn repairs(fold: &RuleFold, stored: &[StoredRecord]) -> (Vec<StateRow>, Vec<(String, String)>) {
    let differences = compare(fold, stored);
    let writes = differences.iter().filter_map(|d| d.repair(fold)).collect();
    let removes = differences
        .iter()
        .filter(|d| d.repair(fold).is_none())
        .map(|d| {
            let (kind, key) = d.row_key();
            (kind.to_owned(), key.to_owned())
        })
        .collect();
    (writes, removes)
}

/// Deletes the extra rows and returns, with what was done, the rows to
/// write (missing or different): the caller upserts them with the same
/// statement its groups write rule state with.
pub(super) async fn rebuild_sqlite(
    conn: &mut SqliteConnection,
    tenant: &str,
) -> Result<(RulesRebuilt, Vec<StateRow>), LedgerError> {
    let sql = rule_entries_sql(super::sqlite::columns::ENTRY_COLUMNS, "?", "+seq");
    let rows = sqlx::query(&sql).bind(tenant).fetch(&mut *conn);
    let (fold, entries) = fold_entries(rows.map(|r| super::sqlite::columns::entry(&r?))).await?;
    let stored = stored::<sqlx::Sqlite>(conn, tenant).await?;
    let (writes, removes) = repairs(&fold, &stored);
    for chunk in removes.chunks(ROWS_PER_STATEMENT) {
        let mut q = QueryBuilder::<sqlx::Sqlite>::new("DELETE FROM rule_state WHERE tenant_id = ");
        q.push_bind(tenant).push(" AND (kind, key) IN (VALUES ");
        let mut sep = q.separated(", ");
        for (kind, key) in chunk {
            sep.push("(")
                .push_bind_unseparated(kind.as_str())
                .push_unseparated(", ")
                .push_bind_unseparated(key.as_str())
                .push_unseparated(")");
        }
        q.push(")");
        q.build().execute(&mut *conn).await?;
    }
    let rebuilt = RulesRebuilt {
        entries,
        records: fold.records.len(),
        written: writes.len(),
        removed: removes.len(),
    };
    Ok((rebuilt, writes))
}

pub(super) async fn rebuild_pg(
    conn: &mut PgConnection,
    tenant: &str,
) -> Result<RulesRebuilt, LedgerError> {
    let sql = rule_entries_sql(super::postgres::columns::ENTRY_COLUMNS, "$1", "seq");
    let rows = sqlx::query(&sql).bind(tenant).fetch(&mut *conn);
    let (fold, entries) = fold_entries(rows.map(|r| super::postgres::columns::entry(&r?))).await?;
    let stored = stored::<sqlx::Postgres>(conn, tenant).await?;
    let (writes, removes) = repairs(&fold, &stored);
    let (kinds, keys): (Vec<&str>, Vec<&str>) = removes
        .iter()
        .map(|(kind, key)| (kind.as_str(), key.as_str()))
        .unzip();
    let row_keys: [KeyColumn<'_>; 2] = [("kind", &kinds), ("key", &keys)];
    keyed::delete(conn, tenant, "rule_state", &row_keys).await?;
    for chunk in writes.chunks(ROWS_PER_STATEMENT * 40) {
        let kinds: Vec<&str> = chunk.iter().map(|r| r.kind).collect();
        let keys: Vec<&str> = chunk.iter().map(|r| r.key.as_str()).collect();
        let values: Vec<&str> = chunk.iter().map(|r| r.value.as_str()).collect();
        let expiries: Vec<Option<&str>> = chunk.iter().map(|r| r.expires_at.as_deref()).collect();
        sqlx::query(
            "INSERT INTO rule_state (tenant_id, kind, key, value, expires_at) \
             SELECT $1, r.* FROM UNNEST($2::text[], $3::text[], $4::text[], $5::text[]) AS r \
             ON CONFLICT (tenant_id, kind, key) DO UPDATE SET \
               value = EXCLUDED.value, expires_at = EXCLUDED.expires_at",
        )
        .bind(tenant)
        .bind(&kinds)
        .bind(&keys)
        .bind(&values)
        .bind(&expiries)
        .execute(&mut *conn)
        .await?;
    }
    Ok(RulesRebuilt {
        entries,
        records: fold.records.len(),
        written: writes.len(),
        removed: kinds.len(),
    })
}
