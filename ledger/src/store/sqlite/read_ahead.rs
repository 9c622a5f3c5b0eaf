//! A commit round's reads for all its pieces at once, on SQLite: one
//! statement per table (see `crate::store::read_ahead`). Lists of pairs are
//! joined from a `VALUES` table: SQLite walks the primary key for each
//! pair, where `(a, b) IN (VALUES …)` scans the whole table.

use sqlx::{QueryBuilder, Row, Sqlite};

use super::columns::ROWS_PER_INSERT;
use super::group_tx::SqliteGroup;
use crate::chain::GENESIS_HASH;
use crate::store::read_ahead::{ReadAhead, ReadAheadRows};
use crate::store::rows::{decode_account_balance, decode_state_record};
use crate::store::transaction::decode_fence;
use crate::LedgerError;

impl SqliteGroup {
    /// Locks (creates at seq 0 where absent) and reads the head of every
    /// tenant in `asks`, and reads the balances and records they ask for;
    /// the rows of each ask, in order.
    pub(crate) async fn read_ahead(
        &mut self,
        asks: &[&ReadAhead],
    ) -> Result<Vec<ReadAheadRows>, LedgerError> {
        let (mut rows, of) = ReadAheadRows::for_asks(asks);
        let genesis = hex::encode(GENESIS_HASH);
        for chunk in asks.chunks(ROWS_PER_INSERT) {
            let mut q =
                QueryBuilder::<Sqlite>::new("INSERT INTO ledger_heads (tenant_id, seq, hash) ");
            q.push_values(chunk, |mut b, ask| {
                b.push_bind(&ask.tenant)
                    .push_bind(0_i64)
                    .push_bind(&genesis);
            });
            q.push(" ON CONFLICT (tenant_id) DO NOTHING");
            q.build().execute(&mut *self.tx).await?;

            let mut q = QueryBuilder::<Sqlite>::new(
                "SELECT tenant_id, seq, hash, generation FROM ledger_heads WHERE tenant_id IN (",
            );
            let mut sep = q.separated(", ");
            for ask in chunk {
                sep.push_bind(&ask.tenant);
            }
            q.push(")");
            for row in q.build().fetch_all(&mut *self.tx).await? {
                let tenant: String = row.try_get("tenant_id")?;
                if let Some(&i) = of.get(tenant.as_str()) {
                    rows[i].fence = Some(decode_fence(Some(&row))?);
                }
            }
        }

        let accounts: Vec<(&str, &str)> = asks
            .iter()
            .flat_map(|ask| {
                ask.accounts
                    .iter()
                    .map(|a| (ask.tenant.as_str(), a.as_str()))
            })
            .collect();
        for chunk in accounts.chunks(ROWS_PER_INSERT) {
            let mut q = QueryBuilder::<Sqlite>::new("WITH v(t, a) AS (");
            q.push_values(chunk, |mut b, (tenant, account)| {
                b.push_bind(*tenant).push_bind(*account);
            });
            q.push(
                ") SELECT b.tenant_id, b.account, b.unit, b.debits, b.credits, b.held \
                 FROM v JOIN balances b ON b.tenant_id = v.t AND b.account = v.a",
            );
            for row in q.build().fetch_all(&mut *self.tx).await? {
                let tenant: String = row.try_get("tenant_id")?;
                if let Some(&i) = of.get(tenant.as_str()) {
                    rows[i]
                        .balances
                        .push(decode_account_balance::<Sqlite>(&row)?);
                }
            }
        }

        let records: Vec<(&str, &str, &str)> = asks
            .iter()
            .flat_map(|ask| {
                ask.records
                    .iter()
                    .map(|k| (ask.tenant.as_str(), k.kind(), k.key()))
            })
            .collect();
        for chunk in records.chunks(ROWS_PER_INSERT) {
            let mut q = QueryBuilder::<Sqlite>::new("WITH v(t, k, y) AS (");
            q.push_values(chunk, |mut b, (tenant, kind, key)| {
                b.push_bind(*tenant).push_bind(*kind).push_bind(*key);
            });
            q.push(
                ") SELECT r.tenant_id, r.kind, r.key, r.value FROM v JOIN rule_state r \
                 ON r.tenant_id = v.t AND r.kind = v.k AND r.key = v.y",
            );
            for row in q.build().fetch_all(&mut *self.tx).await? {
                let tenant: String = row.try_get("tenant_id")?;
                if let Some(&i) = of.get(tenant.as_str()) {
                    rows[i].records.push(decode_state_record::<Sqlite>(&row)?);
                }
            }
        }
        Ok(rows)
    }
}
