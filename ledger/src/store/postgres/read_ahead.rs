//! A commit round's reads for all its pieces at once, on PostgreSQL (see
//! `crate::store::read_ahead`): the heads created where absent and locked
//! in tenant order, then the balances and records as one probe each per
//! (tenant, key), columns bound as arrays so each statement stays prepared.
//! Routed by tenant (Citus), each tenant's reads are its own statements.

use sqlx::Row;

use super::group_tx::PgGroup;
use crate::chain::GENESIS_HASH;
use crate::store::read_ahead::{ReadAhead, ReadAheadRows};
use crate::store::rows::{decode_account_balance, decode_state_record};
use crate::store::shared::sql::BALANCE_COLUMNS;
use crate::store::transaction::{decode_fence, GroupTransaction};
use crate::LedgerError;

impl PgGroup {
    /// Locks (creates at seq 0 where absent) and reads the head of every
    /// tenant in `asks`, and reads the balances and records they ask for;
    /// the rows of each ask, in order.
    pub(crate) async fn read_ahead(
        &mut self,
        asks: &[&ReadAhead],
    ) -> Result<Vec<ReadAheadRows>, LedgerError> {
        if self.routed_by_tenant {
            return self.read_ahead_routed(asks).await;
        }
        let (mut rows, of) = ReadAheadRows::for_asks(asks);
        let tenants: Vec<&str> = asks.iter().map(|a| a.tenant.as_str()).collect();
        sqlx::query(
            "INSERT INTO ledger_heads (tenant_id, seq, hash) \
             SELECT t, 0, $2 FROM UNNEST($1::text[]) AS t ON CONFLICT (tenant_id) DO NOTHING",
        )
        .bind(&tenants)
        .bind(hex::encode(GENESIS_HASH))
        .execute(&mut *self.tx)
        .await?;
        // In tenant order: two rounds never wait on each other in a circle.
        let heads = sqlx::query(
            "SELECT tenant_id, seq, hash, generation FROM ledger_heads \
             WHERE tenant_id = ANY($1) ORDER BY tenant_id FOR UPDATE",
        )
        .bind(&tenants)
        .fetch_all(&mut *self.tx)
        .await?;
        for row in &heads {
            let tenant: String = row.try_get("tenant_id")?;
            if let Some(&i) = of.get(tenant.as_str()) {
                rows[i].fence = Some(decode_fence(Some(row))?);
            }
        }

        let (tenant_of, accounts): (Vec<&str>, Vec<&str>) = asks
            .iter()
            .flat_map(|ask| {
                ask.accounts
                    .iter()
                    .map(|a| (ask.tenant.as_str(), a.as_str()))
            })
            .unzip();
        if !accounts.is_empty() {
            // A probe per pair (`OFFSET 0` keeps it one; see `read_balances`).
            let sql = format!(
                "SELECT b.* FROM UNNEST($1::text[], $2::text[]) AS k(tenant_id, account) \
                 CROSS JOIN LATERAL (SELECT tenant_id, {BALANCE_COLUMNS} FROM balances \
                   WHERE tenant_id = k.tenant_id AND account = k.account OFFSET 0) b"
            );
            for row in sqlx::query(&sql)
                .bind(&tenant_of)
                .bind(&accounts)
                .fetch_all(&mut *self.tx)
                .await?
            {
                let tenant: String = row.try_get("tenant_id")?;
                if let Some(&i) = of.get(tenant.as_str()) {
                    rows[i]
                        .balances
                        .push(decode_account_balance::<sqlx::Postgres>(&row)?);
                }
            }
        }

        let mut record_tenants = Vec::new();
        let mut kinds = Vec::new();
        let mut keys = Vec::new();
        for ask in asks {
            for k in &ask.records {
                record_tenants.push(ask.tenant.as_str());
                kinds.push(k.kind());
                keys.push(k.key());
            }
        }
        if !keys.is_empty() {
            for row in sqlx::query(
                "SELECT r.* FROM UNNEST($1::text[], $2::text[], $3::text[]) AS k(tenant_id, kind, key) \
                 CROSS JOIN LATERAL (SELECT tenant_id, kind, key, value FROM rule_state \
                   WHERE tenant_id = k.tenant_id AND kind = k.kind AND key = k.key OFFSET 0) r",
            )
            .bind(&record_tenants)
            .bind(&kinds)
            .bind(&keys)
            .fetch_all(&mut *self.tx)
            .await?
            {
                let tenant: String = row.try_get("tenant_id")?;
                if let Some(&i) = of.get(tenant.as_str()) {
                    rows[i].records.push(decode_state_record::<sqlx::Postgres>(&row)?);
                }
            }
        }
        Ok(rows)
    }

    /// [`PgGroup::read_ahead`] routed by tenant: each ask's reads name its
    /// tenant alone (a round then holds one tenant's group), the statements
    /// a group reads with under its head lock.
    async fn read_ahead_routed(
        &mut self,
        asks: &[&ReadAhead],
    ) -> Result<Vec<ReadAheadRows>, LedgerError> {
        let (mut rows, _) = ReadAheadRows::for_asks(asks);
        for (ask, rows) in asks.iter().zip(rows.iter_mut()) {
            rows.fence = Some(self.lock_head(&ask.tenant).await?);
            if !ask.accounts.is_empty() {
                let accounts: Vec<&str> = ask.accounts.iter().map(String::as_str).collect();
                rows.balances = self.balances_of(&ask.tenant, &accounts).await?;
            }
            if !ask.records.is_empty() {
                rows.records = self.records_of(&ask.tenant, &ask.records).await?;
            }
        }
        Ok(rows)
    }
}
