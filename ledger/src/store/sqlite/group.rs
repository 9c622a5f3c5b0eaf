//! A group's transaction on SQLite: this process's write turn, then
//! `BEGIN IMMEDIATE`; multi-row statements in chunks below the
//! bound-parameter limit.

use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection, Transaction};

use super::columns::{entry, ENTRY_COLUMNS, ROWS_PER_INSERT};
use crate::amount::canonical;
use crate::balance::AccountBalance;
use crate::chain::Head;
use crate::entry::{format_recorded_at, StoredEntry, UsageColumns};
use crate::intent::EntryKind;
use crate::state::{StateKey, StateRow};
use crate::store::rows::decode_balance;
use crate::store::rules::RulesRebuilt;
use crate::store::shared::engine_group;
use crate::store::transaction::{head_moved, Fence, GroupWrite};
use crate::LedgerError;

/// What the writer inserts: [`ENTRY_COLUMNS`] and the usage columns of
/// migration 0005 ([`UsageColumns`]).
const INSERTED_COLUMNS: &str = "tenant_id, seq, id, kind, upstream_id, status, rejection_code, \
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
        let (rebuilt, writes) = crate::store::rules::rebuild_sqlite(&mut self.tx, tenant).await?;
        self.write_records(tenant, &writes).await?;
        Ok(rebuilt)
    }

    async fn write_records(&mut self, tenant: &str, rows: &[StateRow]) -> Result<(), LedgerError> {
        for chunk in rows.chunks(ROWS_PER_INSERT / 2) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "INSERT INTO rule_state (tenant_id, kind, key, value, expires_at) ",
            );
            q.push_values(chunk, |mut b, r| {
                b.push_bind(tenant)
                    .push_bind(r.kind)
                    .push_bind(&r.key)
                    .push_bind(&r.value)
                    .push_bind(&r.expires_at);
            });
            q.push(
                " ON CONFLICT (tenant_id, kind, key) DO UPDATE SET \
                 value = excluded.value, expires_at = excluded.expires_at",
            );
            q.build().execute(&mut *self.tx).await?;
        }
        Ok(())
    }

    async fn insert_entries(&mut self, entries: &[StoredEntry]) -> Result<(), LedgerError> {
        for chunk in entries.chunks(ROWS_PER_INSERT / 2) {
            let mut q =
                QueryBuilder::<Sqlite>::new(format!("INSERT INTO entries ({INSERTED_COLUMNS}) "));
            q.push_values(chunk, |mut b, e| {
                let usage = UsageColumns::of(e);
                let (meter, day, quantity) = match usage {
                    Some(u) => (Some(u.meter), Some(u.day), Some(canonical(u.quantity))),
                    None => (None, None, None),
                };
                b.push_bind(&e.tenant_id)
                    .push_bind(e.seq)
                    .push_bind(&e.id)
                    .push_bind(e.kind.as_str())
                    .push_bind(&e.upstream_id)
                    .push_bind(e.status.as_str())
                    .push_bind(&e.rejection_code)
                    .push_bind(&e.rejection_message)
                    .push_bind(&e.account)
                    .push_bind(&e.debit_account)
                    .push_bind(&e.credit_account)
                    .push_bind(canonical(e.amount))
                    .push_bind(&e.unit)
                    .push_bind(&e.params)
                    .push_bind(&e.fingerprint)
                    .push_bind(format_recorded_at(&e.recorded_at))
                    .push_bind(canonical(e.balance_after))
                    .push_bind(&e.prev_hash)
                    .push_bind(&e.hash)
                    .push_bind(meter)
                    .push_bind(day)
                    .push_bind(quantity);
            });
            q.build().execute(&mut *self.tx).await?;
        }
        Ok(())
    }

    /// Moves the head from `start` to `head`; fails, for the transaction
    /// to roll back, if it is not at `start`.
    async fn write_head(
        &mut self,
        tenant: &str,
        start: &Fence,
        head: &Head,
    ) -> Result<(), LedgerError> {
        let moved = sqlx::query(
            "UPDATE ledger_heads SET seq = ?, hash = ? \
             WHERE tenant_id = ? AND seq = ? AND hash = ? AND generation = ?",
        )
        .bind(head.seq)
        .bind(hex::encode(head.hash))
        .bind(tenant)
        .bind(start.head.seq)
        .bind(hex::encode(start.head.hash))
        .bind(start.generation)
        .execute(&mut *self.tx)
        .await?;
        if moved.rows_affected() != 1 {
            return Err(head_moved());
        }
        Ok(())
    }
}

engine_group! {
    group = SqliteGroup,
    keyed_entries = keyed_entries,
}

impl SqliteGroup {
    async fn lock_head_row(&mut self, tenant: &str) -> Result<Fence, LedgerError> {
        // BEGIN IMMEDIATE already holds the database's write lock.
        self.create_head(tenant).await?;
        let select = "SELECT seq, hash, generation FROM ledger_heads WHERE tenant_id = $1";
        Ok(self
            .read_fence(select, tenant)
            .await?
            .unwrap_or(Fence::EMPTY))
    }

    async fn read_balances(
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
                out.push((
                    row.try_get("account")?,
                    row.try_get("unit")?,
                    decode_balance(&row)?,
                ));
            }
        }
        Ok(out)
    }

    async fn read_entries_by_ids(
        &mut self,
        tenant: &str,
        ids: &[&str],
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        entries_in(&mut self.tx, tenant, None, "id", ids).await
    }

    async fn read_records(
        &mut self,
        tenant: &str,
        keys: &[StateKey],
    ) -> Result<Vec<(String, String, String)>, LedgerError> {
        let mut out = Vec::new();
        for chunk in keys.chunks(ROWS_PER_INSERT / 2) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "SELECT kind, key, value FROM rule_state WHERE tenant_id = ",
            );
            q.push_bind(tenant).push(" AND (kind, key) IN (VALUES ");
            let mut sep = q.separated(", ");
            for k in chunk {
                sep.push("(")
                    .push_bind_unseparated(k.kind())
                    .push_unseparated(", ")
                    .push_bind_unseparated(k.key())
                    .push_unseparated(")");
            }
            q.push(")");
            for row in q.build().fetch_all(&mut *self.tx).await? {
                out.push((
                    row.try_get("kind")?,
                    row.try_get("key")?,
                    row.try_get("value")?,
                ));
            }
        }
        Ok(out)
    }

    async fn upsert_balances(
        &mut self,
        tenant: &str,
        rows: &[(&str, &str, AccountBalance)],
    ) -> Result<(), LedgerError> {
        for chunk in rows.chunks(ROWS_PER_INSERT) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "INSERT INTO balances (tenant_id, account, unit, debits, credits, held) ",
            );
            q.push_values(chunk, |mut b, (account, unit, bal)| {
                b.push_bind(tenant)
                    .push_bind(*account)
                    .push_bind(*unit)
                    .push_bind(canonical(bal.debits))
                    .push_bind(canonical(bal.credits))
                    .push_bind(canonical(bal.held));
            });
            q.push(
                " ON CONFLICT (tenant_id, account, unit) DO UPDATE SET \
                 debits = excluded.debits, credits = excluded.credits, held = excluded.held",
            );
            q.build().execute(&mut *self.tx).await?;
        }
        Ok(())
    }

    async fn write_all(&mut self, write: &GroupWrite) -> Result<(), LedgerError> {
        // In-process: statements cost no round trip, so one each. The head
        // first: a group whose head moved fails before it writes a row.
        self.write_head(&write.tenant, &write.start, &write.head)
            .await?;
        self.insert_entries(&write.entries).await?;
        self.upsert_balances(&write.tenant, &write.balance_rows())
            .await?;
        if !write.records.is_empty() {
            self.write_records(&write.tenant, &write.records).await?;
        }
        Ok(())
    }
}
