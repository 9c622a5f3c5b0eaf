//! The reads, api keys and rule-state rebuild of a store, for either engine.

/// Writes, for one engine, the reads that differ between the engines only
/// in the constants and functions given:
/// - `$store`, `$db`: the store type and its `sqlx::Database`;
/// - `entry`: decodes an entry row selected with `entry_columns`;
/// - `balance_columns`: `account, unit, debits, credits, held` as text;
/// - `time`: a `DateTime<Utc>` as the engine binds `recorded_at`;
/// - `keyed_entries`: the engine's look-up of entries by idempotency key;
/// - `rule_rows`: the engine's read of a tenant's rule state, as stored;
/// - `created_at`: an api key row's `created_at` as fixed-width UTC text;
/// - `group`: the engine's group transaction (`begin_group`);
/// - `log_page`: the SQL around the walks of a log page and the engine's
///   read of the page's rows;
/// - `insert_api_key`: the insert and the `created_at` this process binds
///   as `$4`, if the SQL does not take the database's clock;
/// - `balance_rows_sql`: an account's balances (`unit, debits, credits,
///   held`) beside the head seq (`head_seq`) in one statement: one
///   snapshot, and a row with no balance if the account has none.
///
/// The group (`group`) has a method `rebuild_rules`, the engine's rebuild
/// of rule state on the transaction holding the head lock.
///
/// Besides the methods it writes the free functions `log_walk` (the entries
/// of a log page, for `list_entries`) and `range_branch`.
macro_rules! engine_reads {
    (
        store = $store:ty,
        db = $db:ty,
        entry = $entry:path,
        entry_columns = $cols:expr,
        balance_columns = $bcols:expr,
        time = $time:path,
        keyed_entries = $keyed:path,
        rule_rows = $rules:path,
        created_at = $created:path,
        group = $group:ty,
        log_page = ($page_open:expr, $page_close:expr, $read_page:path),
        insert_api_key = ($insert_key_sql:expr, $created_now:path),
        balance_rows_sql = $balance_rows_sql:expr $(,)?
    ) => {
        /// The entries of one page of `GET /v1/entries`. With an account,
        /// the page is the merge of two index-ordered walks (debit side,
        /// credit side), each stopping after `limit` rows. A single
        /// `debit_account = x OR credit_account = x` query was planned as a
        /// walk of the whole log in seq order once the prepared statement
        /// went generic (measured: 202 ms per page at 300,000 entries).
        fn log_walk<'a>(
            q: &mut sqlx::QueryBuilder<'a, $db>,
            tenant: &'a str,
            f: &'a $crate::store::rows::EntryFilter,
        ) {
            match &f.account {
                None => branch(q, tenant, f, None),
                Some(account) => {
                    q.push("SELECT * FROM (SELECT * FROM (");
                    branch(q, tenant, f, Some(("debit_account", account)));
                    q.push(") d UNION ALL SELECT * FROM (");
                    branch(q, tenant, f, Some(("credit_account", account)));
                    q.push(") c) u ORDER BY seq LIMIT ").push_bind(f.limit);
                }
            }
        }

        /// One index-ordered walk of the log for `GET /v1/entries`.
        fn branch<'a>(
            q: &mut sqlx::QueryBuilder<'a, $db>,
            tenant: &'a str,
            f: &'a $crate::store::rows::EntryFilter,
            side: Option<(&'static str, &'a String)>,
        ) {
            q.push(format!("SELECT {} FROM entries WHERE tenant_id = ", $cols))
                .push_bind(tenant);
            if let Some((column, account)) = side {
                q.push(format!(" AND {column} = ")).push_bind(account);
                // An entry with the account on both sides (a settings entry) is
                // listed once, by the debit-side walk.
                if column == "credit_account" {
                    q.push(" AND debit_account <> ").push_bind(account);
                }
            }
            // By upstream ID the unique key finds the few entries. Compared
            // or ordered by `seq` itself, both engines walked the log in seq
            // order instead (300–600 ms over 1,000,000 entries, debug
            // build): `+seq` is the same value without that index.
            let seq = if f.upstream_id.is_some() { "+seq" } else { "seq" };
            q.push(format!(" AND {seq} > ")).push_bind(f.after_seq);
            if let Some(upto) = f.upto_seq {
                q.push(" AND seq <= ").push_bind(upto);
            }
            if let Some(kind) = f.kind {
                q.push(" AND kind = ").push_bind(kind.as_str());
            }
            if let Some(status) = f.status {
                q.push(" AND status = ").push_bind(status.as_str());
            }
            if let Some(upstream_id) = &f.upstream_id {
                // With every kind named, the unique key (tenant, kind,
                // upstream_id) finds it in one probe per kind instead of a
                // walk of the whole log.
                if f.kind.is_none() {
                    q.push(" AND kind IN (");
                    let mut kinds = q.separated(", ");
                    for k in $crate::request::EntryKind::ALL {
                        kinds.push_bind(k.as_str());
                    }
                    q.push(")");
                }
                q.push(" AND upstream_id = ").push_bind(upstream_id);
            }
            if let Some(from) = f.from {
                q.push(" AND recorded_at >= ").push_bind($time(from));
            }
            if let Some(to) = f.to {
                q.push(" AND recorded_at < ").push_bind($time(to));
            }
            q.push(format!(" ORDER BY {seq} LIMIT ")).push_bind(f.limit);
        }

        /// One index-ordered walk of an account's entries for
        /// `account_entries`; `column` is the side it walks.
        fn range_branch<'a>(
            q: &mut sqlx::QueryBuilder<'a, $db>,
            tenant: &'a str,
            r: &$crate::store::rows::AccountRange<'a>,
            column: &'static str,
        ) {
            q.push(format!("SELECT {} FROM entries WHERE tenant_id = ", $cols))
                .push_bind(tenant)
                .push(format!(" AND {column} = "))
                .push_bind(r.account);
            if column == "credit_account" {
                q.push(" AND debit_account <> ").push_bind(r.account);
            }
            q.push(" AND seq > ")
                .push_bind(r.after_seq)
                .push(" AND seq <= ")
                .push_bind(r.until_seq)
                .push(" AND unit = ")
                .push_bind(r.unit);
            if let Some(from) = r.from {
                q.push(" AND recorded_at >= ").push_bind($time(from));
            }
            if let Some(to) = r.to {
                q.push(" AND recorded_at < ").push_bind($time(to));
            }
            q.push(" ORDER BY seq LIMIT ").push_bind(r.limit);
        }

        impl $store {
            pub async fn ping(&self) -> Result<(), $crate::LedgerError> {
                sqlx::query($crate::store::shared::sql::PING)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            pub async fn insert_api_key(
                &self,
                tenant: &str,
                key_hash: &str,
                scopes: &str,
            ) -> Result<(), $crate::LedgerError> {
                let mut insert = sqlx::query($insert_key_sql)
                    .bind(tenant)
                    .bind(key_hash)
                    .bind(scopes);
                if let Some(created_at) = $created_now() {
                    insert = insert.bind(created_at);
                }
                insert.execute(&self.pool).await?;
                Ok(())
            }

            pub async fn balance_rows(
                &self,
                tenant: &str,
                account: &str,
            ) -> Result<(Vec<$crate::store::rows::BalanceRow>, i64), $crate::LedgerError> {
                use sqlx::Row;
                let rows = sqlx::query($balance_rows_sql)
                    .bind(tenant)
                    .bind(account)
                    .fetch_all(&self.pool)
                    .await?;
                let mut seq = 0;
                let mut out = Vec::new();
                for r in &rows {
                    seq = r.try_get("head_seq")?;
                    if let Some(unit) = r.try_get::<Option<String>, _>("unit")? {
                        out.push($crate::store::rows::BalanceRow {
                            unit,
                            balance: $crate::store::rows::decode_balance(r)?,
                        });
                    }
                }
                Ok((out, seq))
            }

            pub async fn rebuild_rule_state(
                &self,
                tenant: &str,
            ) -> Result<$crate::store::rules::RulesRebuilt, $crate::LedgerError> {
                use $crate::store::transaction::GroupTransaction;
                let (mut group, _) = self.lock_for_rewrite(tenant).await?;
                let rebuilt = group.rebuild_rules(tenant).await?;
                group.commit().await?;
                Ok(rebuilt)
            }

            /// A page of `GET /v1/entries`.
            pub async fn list_entries(
                &self,
                tenant: &str,
                f: &$crate::store::rows::EntryFilter,
            ) -> Result<Vec<$crate::entry::StoredEntry>, $crate::LedgerError> {
                let mut q = sqlx::QueryBuilder::<$db>::new($page_open);
                log_walk(&mut q, tenant, f);
                q.push($page_close);
                $read_page(&self.pool, q).await
            }

            /// Begins a group holding `tenant`'s head lock (so no group
            /// commits until it ends) and bumps the head's generation:
            /// writers must not trust what they remember across the
            /// rewrite that follows. The head as locked comes with it.
            pub(crate) async fn lock_for_rewrite(
                &self,
                tenant: &str,
            ) -> Result<($group, $crate::chain::Head), $crate::LedgerError> {
                use $crate::store::transaction::GroupTransaction;
                let mut group = self.begin_group().await?;
                let head = group.lock_head(tenant).await?.head;
                sqlx::query($crate::store::shared::sql::BUMP_GENERATION)
                    .bind(tenant)
                    .execute(&mut *group.tx)
                    .await?;
                Ok((group, head))
            }

            pub async fn list_api_keys(
                &self,
                tenant: Option<&str>,
            ) -> Result<Vec<$crate::keys::StoredApiKey>, $crate::LedgerError> {
                use sqlx::Row;
                let rows = sqlx::query($crate::store::shared::sql::LIST_API_KEYS)
                    .bind(tenant)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter()
                    .map(|r| {
                        Ok($crate::keys::StoredApiKey {
                            tenant_id: r.try_get("tenant_id")?,
                            key_hash: r.try_get("key_hash")?,
                            scopes: r.try_get("scopes")?,
                            created_at: $created(r)?,
                        })
                    })
                    .collect()
            }

            pub async fn delete_api_key(
                &self,
                tenant: &str,
                key_hash: &str,
            ) -> Result<bool, $crate::LedgerError> {
                let done = sqlx::query($crate::store::shared::sql::DELETE_API_KEY)
                    .bind(tenant)
                    .bind(key_hash)
                    .execute(&self.pool)
                    .await?;
                Ok(done.rows_affected() > 0)
            }

            pub async fn find_api_key(
                &self,
                key_hash: &str,
            ) -> Result<Option<(String, String)>, $crate::LedgerError> {
                use sqlx::Row;
                let row = sqlx::query($crate::store::shared::sql::FIND_API_KEY)
                    .bind(key_hash)
                    .fetch_optional(&self.pool)
                    .await?;
                Ok(match row {
                    Some(r) => Some((r.try_get("tenant_id")?, r.try_get("scopes")?)),
                    None => None,
                })
            }

            pub async fn entry_by_id(
                &self,
                tenant: &str,
                id: &str,
            ) -> Result<Option<$crate::entry::StoredEntry>, $crate::LedgerError> {
                let sql = format!(
                    "SELECT {} FROM entries WHERE tenant_id = $1 AND id = $2",
                    $cols
                );
                let row = sqlx::query(&sql)
                    .bind(tenant)
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map($entry).transpose()
            }

            /// Entries holding one of `keys`, read outside any group
            /// (committed entries only).
            pub async fn entries_with_keys(
                &self,
                tenant: &str,
                keys: &[($crate::request::EntryKind, &str)],
            ) -> Result<Vec<$crate::entry::StoredEntry>, $crate::LedgerError> {
                let mut conn = self.pool.acquire().await?;
                $keyed(&mut conn, tenant, keys).await
            }

            pub async fn entry_by_key(
                &self,
                tenant: &str,
                kind: $crate::request::EntryKind,
                upstream_id: &str,
            ) -> Result<Option<$crate::entry::StoredEntry>, $crate::LedgerError> {
                let sql = format!(
                    "SELECT {} FROM entries WHERE tenant_id = $1 AND kind = $2 AND upstream_id = $3",
                    $cols
                );
                let row = sqlx::query(&sql)
                    .bind(tenant)
                    .bind(kind.as_str())
                    .bind(upstream_id)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map($entry).transpose()
            }

            pub async fn postings_until(
                &self,
                tenant: &str,
                account: &str,
                as_of_seq: i64,
            ) -> Result<Vec<$crate::entry::StoredEntry>, $crate::LedgerError> {
                let sql = format!(
                    "SELECT {} FROM entries WHERE tenant_id = $1 AND seq <= $2 \
                     AND status = 'posted' AND (debit_account = $3 OR credit_account = $3) \
                     ORDER BY seq",
                    $cols
                );
                let rows = sqlx::query(&sql)
                    .bind(tenant)
                    .bind(as_of_seq)
                    .bind(account)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map($entry).collect()
            }

            pub async fn account_entries(
                &self,
                tenant: &str,
                r: &$crate::store::rows::AccountRange<'_>,
            ) -> Result<Vec<$crate::entry::StoredEntry>, $crate::LedgerError> {
                // Two index-ordered walks (debit side, credit side), merged,
                // as in list_entries. An entry naming the account on both
                // sides (account settings) comes from the debit walk only.
                let mut q = sqlx::QueryBuilder::<$db>::new("SELECT * FROM (SELECT * FROM (");
                range_branch(&mut q, tenant, r, "debit_account");
                q.push(") d UNION ALL SELECT * FROM (");
                range_branch(&mut q, tenant, r, "credit_account");
                q.push(") c) u ORDER BY seq LIMIT ").push_bind(r.limit);
                let rows = q.build().fetch_all(&self.pool).await?;
                rows.iter().map($entry).collect()
            }

            pub async fn tenants(&self) -> Result<Vec<String>, $crate::LedgerError> {
                Ok(sqlx::query_scalar($crate::store::shared::sql::TENANTS)
                    .fetch_all(&self.pool)
                    .await?)
            }

            pub async fn head(
                &self,
                tenant: &str,
            ) -> Result<$crate::chain::Head, $crate::LedgerError> {
                let row = sqlx::query($crate::store::shared::sql::HEAD)
                    .bind(tenant)
                    .fetch_optional(&self.pool)
                    .await?;
                $crate::store::rows::decode_head(row.as_ref())
            }

            pub async fn stored_balances(
                &self,
                tenant: &str,
            ) -> Result<$crate::balance::BalanceProjection, $crate::LedgerError> {
                use sqlx::Row;
                let sql = format!("SELECT {} FROM balances WHERE tenant_id = $1", $bcols);
                let rows = sqlx::query(&sql).bind(tenant).fetch_all(&self.pool).await?;
                let mut p = $crate::balance::BalanceProjection::new();
                for r in &rows {
                    let account: String = r.try_get("account")?;
                    let unit: String = r.try_get("unit")?;
                    p.insert(&account, &unit, $crate::store::rows::decode_balance(r)?);
                }
                Ok(p)
            }

            pub async fn records_of_kind(
                &self,
                tenant: &str,
                kind: &str,
            ) -> Result<Vec<(String, String)>, $crate::LedgerError> {
                use sqlx::Row;
                let rows = sqlx::query($crate::store::shared::sql::RECORDS_OF_KIND)
                    .bind(tenant)
                    .bind(kind)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter()
                    .map(|r| Ok((r.try_get("key")?, r.try_get("value")?)))
                    .collect()
            }

            pub async fn record(
                &self,
                tenant: &str,
                kind: &str,
                key: &str,
            ) -> Result<Option<String>, $crate::LedgerError> {
                use sqlx::Row;
                let row = sqlx::query($crate::store::shared::sql::RECORD)
                    .bind(tenant)
                    .bind(kind)
                    .bind(key)
                    .fetch_optional(&self.pool)
                    .await?;
                Ok(match row {
                    Some(r) => Some(r.try_get("value")?),
                    None => None,
                })
            }

            /// Tenants with an open hold that expired at or before `now`
            /// (fixed-width UTC text).
            pub async fn tenants_with_expired_holds(
                &self,
                now: &str,
            ) -> Result<Vec<String>, $crate::LedgerError> {
                Ok(sqlx::query_scalar($crate::store::shared::sql::TENANTS_WITH_EXPIRED_HOLDS)
                    .bind(now)
                    .fetch_all(&self.pool)
                    .await?)
            }

            /// One tenant's open holds that expired at or before `now`.
            pub async fn expired_holds(
                &self,
                tenant: &str,
                now: &str,
                limit: i64,
            ) -> Result<Vec<String>, $crate::LedgerError> {
                Ok(sqlx::query_scalar($crate::store::shared::sql::EXPIRED_HOLDS)
                    .bind(tenant)
                    .bind(now)
                    .bind(limit)
                    .fetch_all(&self.pool)
                    .await?)
            }

            /// Every rule-state row of a tenant, as stored.
            pub async fn rule_state_rows(
                &self,
                tenant: &str,
            ) -> Result<Vec<$crate::rule_fold::StoredRecord>, $crate::LedgerError> {
                let mut conn = self.pool.acquire().await?;
                $rules(&mut conn, tenant).await
            }
        }
    };
}
pub(in crate::store) use engine_reads;
