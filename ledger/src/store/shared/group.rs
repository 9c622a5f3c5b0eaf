//! The half of a group transaction both engines run alike.

/// Writes [`GroupTransaction`](crate::store::transaction::GroupTransaction)
/// for an engine's group: the look-up by keys (`keyed_entries`) and the
/// commit, alike on both engines, here; the rest from the group's own
/// methods `lock_head_row`, `read_balances`, `read_entries_by_ids`,
/// `read_records`, `upsert_balances` and `write_all`, whose SQL differs.
macro_rules! engine_group {
    (group = $group:ty, keyed_entries = $keyed:path $(,)?) => {
        impl $crate::store::transaction::GroupTransaction for $group {
            async fn lock_head(
                &mut self,
                tenant: &str,
            ) -> Result<$crate::store::transaction::Fence, $crate::LedgerError> {
                self.lock_head_row(tenant).await
            }

            async fn entries_with_keys(
                &mut self,
                tenant: &str,
                keys: &[($crate::request::EntryKind, &str)],
            ) -> Result<Vec<$crate::entry::StoredEntry>, $crate::LedgerError> {
                $keyed(&mut self.tx, tenant, keys).await
            }

            async fn balances_of(
                &mut self,
                tenant: &str,
                accounts: &[&str],
            ) -> Result<Vec<(String, String, $crate::balance::AccountBalance)>, $crate::LedgerError>
            {
                self.read_balances(tenant, accounts).await
            }

            async fn entries_by_ids(
                &mut self,
                tenant: &str,
                ids: &[&str],
            ) -> Result<Vec<$crate::entry::StoredEntry>, $crate::LedgerError> {
                self.read_entries_by_ids(tenant, ids).await
            }

            async fn records_of(
                &mut self,
                tenant: &str,
                keys: &[$crate::state::StateKey],
            ) -> Result<Vec<(String, String, String)>, $crate::LedgerError> {
                self.read_records(tenant, keys).await
            }

            async fn write_balances(
                &mut self,
                tenant: &str,
                rows: &[(&str, &str, $crate::balance::AccountBalance)],
            ) -> Result<(), $crate::LedgerError> {
                self.upsert_balances(tenant, rows).await
            }

            async fn write_group(
                &mut self,
                write: &$crate::store::transaction::GroupWrite,
            ) -> Result<(), $crate::LedgerError> {
                self.write_all(write).await
            }

            async fn commit(self) -> Result<(), $crate::LedgerError> {
                self.tx.commit().await?;
                Ok(())
            }
        }

        impl $group {
            /// Creates the tenant's head at seq 0 unless it exists.
            async fn create_head(&mut self, tenant: &str) -> Result<(), $crate::LedgerError> {
                sqlx::query($crate::store::shared::sql::CREATE_HEAD)
                    .bind(tenant)
                    .bind(hex::encode($crate::chain::GENESIS_HASH))
                    .execute(&mut *self.tx)
                    .await?;
                Ok(())
            }

            /// The head row `select` reads (`SELECT seq, hash, generation`,
            /// `$1` the tenant) as a fence, if there is one.
            async fn read_fence(
                &mut self,
                select: &'static str,
                tenant: &str,
            ) -> Result<Option<$crate::store::transaction::Fence>, $crate::LedgerError> {
                let row = sqlx::query(select)
                    .bind(tenant)
                    .fetch_optional(&mut *self.tx)
                    .await?;
                row.as_ref()
                    .map(|r| $crate::store::transaction::decode_fence(Some(r)))
                    .transpose()
            }
        }
    };
}
pub(in crate::store) use engine_group;
