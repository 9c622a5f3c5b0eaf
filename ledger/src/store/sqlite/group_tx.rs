//! A group's transaction on SQLite: this process's write turn, then
//! `BEGIN IMMEDIATE`; multi-row statements in chunks below the
//! bound-parameter limit.

use sqlx::{QueryBuilder, Sqlite, SqliteConnection, Transaction};

use super::columns::{entry, ENTRY_COLUMNS, ROWS_PER_INSERT};
use crate::balance::AccountBalance;
use crate::entry::StoredEntry;
use crate::request::EntryKind;
use crate::rule_state::{StateKey, StateRow};
use crate::store::rows::{decode_account_balance, decode_state_record};
use crate::store::rule_state::RulesRebuilt;
use crate::store::shared::group_tx::{create_head, read_fence};
use crate::store::transaction::{Fence, GroupTransaction, GroupWrite};
use crate::LedgerError;

/// What the writer inserts: [`ENTRY_COLUMNS`] and the usage columns of
/// migration 0005 ([`UsageColumns`]).
pub(super) const INSERTED_COLUMNS: &str =
    "tenant_id, seq, id, kind, upstream_id, status, rejection_code, \
    rejection_message, account, debit_account, credit_account, amount, unit, params, \
    fingerprint, recorded_at, balance_after, prev_hash, hash, \
    usage_meter, usage_day, usage_quantity";

/// Entries of `tenant` (of `kind`, if given) whose `column` is one of
/// `values`, read in chunks below SQLite's bound-parameter limit; with
/// `kind` bound, the lookup walks the UNIQUE (tenant_id, kind, upstream_id)
/// index instead of the table.
async fn entries_in(
    conn: &mut SqliteConnection,
    tenant: &str,
    kind: Option<EntryKind>,
    column: &'static str,
    values: &[&str],
) -> Result<Vec<StoredEntry>, LedgerError> {
    let mut found = Vec::new();
    for chunk in values.chunks(ROWS_PER_INSERT) {
        let mut q = QueryBuilder::<Sqlite>::new(format!(
            "SELECT {ENTRY_COLUMNS} FROM entries WHERE tenant_id = "
        ));
        q.push_bind(tenant);
        if let Some(kind) = kind {
            q.push(" AND kind = ").push_bind(kind.as_str());
        }
        q.push(format!(" AND {column} IN ("));
        let mut sep = q.separated(", ");
        for value in chunk {
            sep.push_bind(*value);
        }
        q.push(")");
        for row in q.build().fetch_all(&mut *conn).await? {
            found.push(entry(&row)?);
        }
    }
    Ok(found)
}

/// Entries holding one of `keys`: one query per kind with `kind = ?` bound,
/// so SQLite walks the UNIQUE (tenant_id, kind, upstream_id) index instead
/// of the table.
pub(super) async fn keyed_entries(
    conn: &mut SqliteConnection,
    tenant: &str,
    keys: &[(EntryKind, &str)],
) -> Result<Vec<StoredEntry>, LedgerError> {
    let mut found = Vec::new();
    for kind in EntryKind::ALL {
        let ids: Vec<&str> = keys
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, id)| *id)
            .collect();
        if !ids.is_empty() {
            found.extend(entries_in(conn, tenant, Some(kind), "upstream_id", &ids).await?);
        }
    }
    Ok(found)
}

/// A write transaction holding this process's turn (see `write_gate`).
/// Fields drop in order: the transaction rolls back before the turn passes.
pub struct SqliteWrite {
    pub(super) tx: Transaction<'static, Sqlite>,
    pub(super) _turn: tokio::sync::OwnedMutexGuard<()>,
}

impl std::ops::Deref for SqliteWrite {
    type Target = sqlx::SqliteConnection;
    fn deref(&self) -> &Self::Target {
        &self.tx
    }
}

impl std::ops::DerefMut for SqliteWrite {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.tx
    }
}

impl SqliteWrite {
    pub async fn commit(self) -> Result<(), LedgerError> {
        self.tx.commit().await?;
        Ok(())
    }

    pub async fn rollback(self) -> Result<(), LedgerError> {
        self.tx.rollback().await?;
        Ok(())
    }
}

pub(crate) struct SqliteGroup {
    pub(crate) tx: SqliteWrite,
}

impl SqliteGroup {
    /// Rebuilds the tenant's rule state from its log ([`crate::store::rules`]):
    /// the rows that differ are written here, in chunks.
    pub(super) async fn rebuild_rules(
        &mut self,
        tenant: &str,
    ) -> Result<RulesRebuilt, LedgerError> {
        let (rebuilt, writes) =
            crate::store::rule_state::rebuild_sqlite(&mut self.tx, tenant).await?;
        let rows: Vec<(&str, &StateRow)> = writes.iter().map(|r| (tenant, r)).collect();
        self.write_records(&rows).await?;
        Ok(rebuilt)
    }
}

impl GroupTransaction for SqliteGroup {
    async fn lock_head(&mut self, tenant: &str) -> Result<Fence, LedgerError> {
        // BEGIN IMMEDIATE already holds the database's write lock.
        create_head::<Sqlite>(&mut self.tx, tenant).await?;
        let select = "SELECT seq, hash, generation FROM ledger_heads WHERE tenant_id = $1";
        Ok(read_fence::<Sqlite>(&mut self.tx, select, tenant)
            .await?
            .unwrap_or(Fence::EMPTY))
    }

    async fn entries_with_keys(
        &mut self,
        tenant: &str,
        keys: &[(EntryKind, &str)],
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        keyed_entries(&mut self.tx, tenant, keys).await
    }

    async fn balances_of(
        &mut self,
        tenant: &str,
        accounts: &[&str],
    ) -> Result<Vec<(String, String, AccountBalance)>, LedgerError> {
        let mut out = Vec::new();
        for chunk in accounts.chunks(ROWS_PER_INSERT) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "SELECT account, unit, debits, credits, held FROM balances WHERE tenant_id = ",
            );
            q.push_bind(tenant).push(" AND account IN (");
            let mut sep = q.separated(", ");
            for a in chunk {
                sep.push_bind(*a);
            }
            q.push(")");
            for row in q.build().fetch_all(&mut *self.tx).await? {
                out.push(decode_account_balance::<Sqlite>(&row)?);
            }
        }
        Ok(out)
    }

    async fn entries_by_ids(
        &mut self,
        tenant: &str,
        ids: &[&str],
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        entries_in(&mut self.tx, tenant, None, "id", ids).await
    }

    async fn records_of(
        &mut self,
        tenant: &str,
        keys: &[StateKey],
    ) -> Result<Vec<(String, String, String)>, LedgerError> {
        let mut out = Vec::new();
        for chunk in keys.chunks(ROWS_PER_INSERT / 2) {
            // Joined from a VALUES table: SQLite walks the primary key for
            // each pair, where `(kind, key) IN (VALUES …)` reads every
            // record of the tenant.
            let mut q = QueryBuilder::<Sqlite>::new("WITH v(k, y) AS (");
            q.push_values(chunk, |mut b, k| {
                b.push_bind(k.kind()).push_bind(k.key());
            });
            q.push(
                ") SELECT r.kind, r.key, r.value FROM v JOIN rule_state r \
                 ON r.tenant_id = ",
            );
            q.push_bind(tenant)
                .push(" AND r.kind = v.k AND r.key = v.y");
            for row in q.build().fetch_all(&mut *self.tx).await? {
                out.push(decode_state_record::<Sqlite>(&row)?);
            }
        }
        Ok(out)
    }

    async fn write_balances(
        &mut self,
        tenant: &str,
        rows: &[(&str, &str, AccountBalance)],
    ) -> Result<(), LedgerError> {
        let rows: Vec<_> = rows
            .iter()
            .map(|(account, unit, b)| (tenant, *account, *unit, b.clone()))
            .collect();
        self.upsert_balance_rows(&rows).await
    }

    async fn write_group(&mut self, write: &GroupWrite) -> Result<(), LedgerError> {
        self.write_many(&[write]).await
    }

    async fn commit(self) -> Result<(), LedgerError> {
        self.tx.commit().await
    }
}
