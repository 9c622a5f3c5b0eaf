//! A group's transaction on PostgreSQL: the head row's `FOR UPDATE` lock,
//! and a probe per key, account, id or record.

use sqlx::{PgConnection, Postgres, Transaction};

use super::columns::{entry, ENTRY_COLUMNS};
use super::keyed::{probe, KeyColumn};
use crate::balance::AccountBalance;
use crate::entry::StoredEntry;
use crate::request::EntryKind;
use crate::rule_state::StateKey;
use crate::store::rows::{decode_account_balance, decode_state_record};
use crate::store::rule_state::RulesRebuilt;
use crate::store::shared::group_tx::{create_head, read_fence};
use crate::store::shared::sql::BALANCE_COLUMNS;
use crate::store::transaction::head_moved;
use crate::store::transaction::{Fence, GroupTransaction, GroupWrite};
use crate::LedgerError;

/// Entries holding one of `keys`: a probe of the UNIQUE
/// (tenant_id, kind, upstream_id) index per key.
pub(super) async fn keyed_entries(
    conn: &mut PgConnection,
    tenant: &str,
    keys: &[(EntryKind, &str)],
) -> Result<Vec<StoredEntry>, LedgerError> {
    let kinds: Vec<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
    let ids: Vec<&str> = keys.iter().map(|(_, id)| *id).collect();
    let keys: [KeyColumn<'_>; 2] = [("kind", &kinds), ("upstream_id", &ids)];
    let rows = probe(conn, tenant, ("entries", ENTRY_COLUMNS), &keys).await?;
    rows.iter().map(entry).collect()
}

const LOCK: &str = "SELECT seq, hash, generation FROM ledger_heads WHERE tenant_id = $1 FOR UPDATE";

pub(crate) struct PgGroup {
    pub(crate) tx: Transaction<'static, Postgres>,
    /// Every statement names one tenant (see `PostgresStore::routed_by_tenant`).
    pub(crate) routed_by_tenant: bool,
}

impl PgGroup {
    /// Rebuilds the tenant's rule state from its log ([`crate::store::rules`]),
    /// its deletes and upserts bound as arrays.
    pub(super) async fn rebuild_rules(
        &mut self,
        tenant: &str,
    ) -> Result<RulesRebuilt, LedgerError> {
        crate::store::rule_state::rebuild_pg(&mut self.tx, tenant).await
    }

    /// The tenant's head, locked, if it exists.
    pub(super) async fn locked_head(&mut self, tenant: &str) -> Result<Option<Fence>, LedgerError> {
        read_fence::<Postgres>(&mut self.tx, LOCK, tenant).await
    }
}

impl GroupTransaction for PgGroup {
    async fn lock_head(&mut self, tenant: &str) -> Result<Fence, LedgerError> {
        if let Some(fence) = read_fence::<Postgres>(&mut self.tx, LOCK, tenant).await? {
            return Ok(fence);
        }
        create_head::<Postgres>(&mut self.tx, tenant).await?;
        Ok(read_fence::<Postgres>(&mut self.tx, LOCK, tenant)
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
        let keys: [KeyColumn<'_>; 1] = [("account", accounts)];
        let table = ("balances", BALANCE_COLUMNS);
        let rows = probe(&mut self.tx, tenant, table, &keys).await?;
        rows.iter()
            .map(decode_account_balance::<Postgres>)
            .collect()
    }

    async fn entries_by_ids(
        &mut self,
        tenant: &str,
        ids: &[&str],
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        let keys: [KeyColumn<'_>; 1] = [("id", ids)];
        let rows = probe(&mut self.tx, tenant, ("entries", ENTRY_COLUMNS), &keys).await?;
        rows.iter().map(entry).collect()
    }

    async fn records_of(
        &mut self,
        tenant: &str,
        keys: &[StateKey],
    ) -> Result<Vec<(String, String, String)>, LedgerError> {
        // One primary-key probe per record.
        let kinds: Vec<&str> = keys.iter().map(StateKey::kind).collect();
        let ids: Vec<&str> = keys.iter().map(StateKey::key).collect();
        let keys: [KeyColumn<'_>; 2] = [("kind", &kinds), ("key", &ids)];
        let table = ("rule_state", "kind, key, value");
        let rows = probe(&mut self.tx, tenant, table, &keys).await?;
        rows.iter().map(decode_state_record::<Postgres>).collect()
    }

    async fn write_balances(
        &mut self,
        tenant: &str,
        rows: &[(&str, &str, AccountBalance)],
    ) -> Result<(), LedgerError> {
        let accounts: Vec<&str> = rows.iter().map(|r| r.0).collect();
        let units: Vec<&str> = rows.iter().map(|r| r.1).collect();
        let amounts = |f: fn(&AccountBalance) -> &crate::balance::WideDecimal| {
            rows.iter()
                .map(|r| f(&r.2).to_string())
                .collect::<Vec<String>>()
        };
        // Routed by tenant (Citus), the tenant comes from its head row, so
        // the statement is pushed down whole to the tenant's node (see
        // `write_routed`); the head row exists, locked by the group.
        const ONE_SERVER: &str = "INSERT INTO balances (tenant_id, account, unit, debits, \
               credits, held) \
             SELECT $1, * FROM UNNEST($2::text[], $3::text[], $4::text[]::numeric[], \
               $5::text[]::numeric[], $6::text[]::numeric[]) \
             ON CONFLICT (tenant_id, account, unit) DO UPDATE SET \
               debits = EXCLUDED.debits, credits = EXCLUDED.credits, held = EXCLUDED.held";
        const ROUTED: &str = "INSERT INTO balances (tenant_id, account, unit, debits, \
               credits, held) \
             SELECT h.tenant_id, b.* FROM ledger_heads h, UNNEST($2::text[], $3::text[], \
               $4::text[]::numeric[], $5::text[]::numeric[], $6::text[]::numeric[]) AS b \
             WHERE h.tenant_id = $1 \
             ON CONFLICT (tenant_id, account, unit) DO UPDATE SET \
               debits = EXCLUDED.debits, credits = EXCLUDED.credits, held = EXCLUDED.held";
        sqlx::query(if self.routed_by_tenant {
            ROUTED
        } else {
            ONE_SERVER
        })
        .bind(tenant)
        .bind(&accounts)
        .bind(&units)
        .bind(amounts(|b| &b.debits))
        .bind(amounts(|b| &b.credits))
        .bind(amounts(|b| &b.held))
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    async fn write_group(&mut self, write: &GroupWrite) -> Result<(), LedgerError> {
        match self.write_many(&[write]).await?[..] {
            [true] => Ok(()),
            _ => Err(head_moved()),
        }
    }

    async fn commit(self) -> Result<(), LedgerError> {
        self.tx.commit().await?;
        Ok(())
    }
}
