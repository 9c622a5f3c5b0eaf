//! What groups write on SQLite: the rows of one group, or of the groups of
//! several tenants in one commit round, as one statement per table (each
//! row names its tenant). A statement costs a hop to sqlx's SQLite worker
//! thread; in a round of 100 one-request groups, writing them table by table
//! takes 4 hops instead of 400.

use sqlx::{QueryBuilder, Sqlite};

use super::columns::ROWS_PER_INSERT;
use super::group_tx::{SqliteGroup, INSERTED_COLUMNS};
use crate::amount::canonical;
use crate::balance::AccountBalance;
use crate::entry::{format_recorded_at, StoredEntry, UsageColumns};
use crate::rule_state::StateRow;
use crate::store::transaction::{head_moved, GroupWrite};
use crate::LedgerError;

/// A balance row to upsert: (tenant, account, unit, balance).
pub(super) type BalanceRow<'a> = (&'a str, &'a str, &'a str, AccountBalance);

impl SqliteGroup {
    /// Writes `writes` (of distinct tenants): every head is moved from its
    /// `start` to its `head`, or nothing is written and the call fails,
    /// the transaction then to be rolled back (to a savepoint).
    pub(crate) async fn write_many(&mut self, writes: &[&GroupWrite]) -> Result<(), LedgerError> {
        // In-process: statements cost no round trip, so one per table. The
        // heads first: a group whose head moved fails before a row is written.
        self.move_heads(writes).await?;
        let entries: Vec<&StoredEntry> = writes.iter().flat_map(|w| &w.entries).collect();
        self.insert_entries(&entries).await?;
        let balances: Vec<BalanceRow> = writes
            .iter()
            .flat_map(|w| {
                w.balances
                    .iter()
                    .map(|(a, u, b)| (w.tenant.as_str(), a.as_str(), u.as_str(), b.clone()))
            })
            .collect();
        self.upsert_balance_rows(&balances).await?;
        let records: Vec<(&str, &StateRow)> = writes
            .iter()
            .flat_map(|w| w.records.iter().map(|r| (w.tenant.as_str(), r)))
            .collect();
        self.write_records(&records).await
    }

    pub(super) async fn write_records(
        &mut self,
        rows: &[(&str, &StateRow)],
    ) -> Result<(), LedgerError> {
        for chunk in rows.chunks(ROWS_PER_INSERT / 2) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "INSERT INTO rule_state (tenant_id, kind, key, value, expires_at) ",
            );
            q.push_values(chunk, |mut b, (tenant, r)| {
                b.push_bind(*tenant)
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

    async fn insert_entries(&mut self, entries: &[&StoredEntry]) -> Result<(), LedgerError> {
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
                    .push_bind(e.balance_after.to_string())
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

    /// Moves each head from its write's `start` to its `head`; fails, for
    /// the transaction to roll back, if any is not at its `start`.
    async fn move_heads(&mut self, writes: &[&GroupWrite]) -> Result<(), LedgerError> {
        // Six parameters a head: chunks stay below the bound-parameter limit.
        for chunk in writes.chunks(ROWS_PER_INSERT / 3) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "UPDATE ledger_heads SET seq = v.column5, hash = v.column6 FROM (",
            );
            q.push_values(chunk, |mut b, w| {
                b.push_bind(&w.tenant)
                    .push_bind(w.start.head.seq)
                    .push_bind(hex::encode(w.start.head.hash))
                    .push_bind(w.start.generation)
                    .push_bind(w.head.seq)
                    .push_bind(hex::encode(w.head.hash));
            });
            q.push(
                ") AS v WHERE ledger_heads.tenant_id = v.column1 AND ledger_heads.seq = v.column2 \
                 AND ledger_heads.hash = v.column3 AND ledger_heads.generation = v.column4",
            );
            let moved = q.build().execute(&mut *self.tx).await?;
            if moved.rows_affected() != chunk.len() as u64 {
                return Err(head_moved());
            }
        }
        Ok(())
    }

    pub(super) async fn upsert_balance_rows(
        &mut self,
        rows: &[BalanceRow<'_>],
    ) -> Result<(), LedgerError> {
        for chunk in rows.chunks(ROWS_PER_INSERT) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "INSERT INTO balances (tenant_id, account, unit, debits, credits, held) ",
            );
            q.push_values(chunk, |mut b, (tenant, account, unit, bal)| {
                b.push_bind(*tenant)
                    .push_bind(*account)
                    .push_bind(*unit)
                    .push_bind(bal.debits.to_string())
                    .push_bind(bal.credits.to_string())
                    .push_bind(bal.held.to_string());
            });
            q.push(
                " ON CONFLICT (tenant_id, account, unit) DO UPDATE SET \
                 debits = excluded.debits, credits = excluded.credits, held = excluded.held",
            );
            q.build().execute(&mut *self.tx).await?;
        }
        Ok(())
    }
}
