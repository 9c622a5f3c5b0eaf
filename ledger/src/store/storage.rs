//! [`Storage`]: the one interface the rest of tally sees, dispatching to
//! the engine a URL chose.

use chrono::{DateTime, Utc};

use super::postgres::PostgresStore;
use super::rows::{AccountRange, BalanceRow, EntryFilter, PoolStats, DEFAULT_POOL_SIZE};
use super::rule_state::RulesRebuilt;
use super::shared::{
    self, api_keys, balance_reads, entry_reads, expired_holds, log_heads, rule_records,
};
use super::sqlite::SqliteStore;
use crate::balance::BalanceProjection;
use crate::chain::Head;
use crate::entry::StoredEntry;
use crate::keys::{ApiKey, StoredApiKey};
use crate::on_engine;
use crate::request::EntryKind;
use crate::rule_state::{StateKey, StateValue};
use crate::LedgerError;

/// A database, SQLite or PostgreSQL, chosen by URL.
#[derive(Clone)]
pub enum Storage {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

impl Storage {
    /// Connects and applies the migrations of the engine the URL names.
    pub async fn connect(url: &str) -> Result<Storage, LedgerError> {
        Self::connect_with(url, DEFAULT_POOL_SIZE).await
    }

    /// Like [`Storage::connect`] with at most `pool_size` connections.
    pub async fn connect_with(url: &str, pool_size: u32) -> Result<Storage, LedgerError> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Storage::Postgres(
                PostgresStore::connect(url, pool_size).await?,
            ))
        } else if url.starts_with("sqlite:") {
            Ok(Storage::Sqlite(SqliteStore::connect(url, pool_size).await?))
        } else {
            Err(LedgerError::UnsupportedUrl(format!(
                "{url:?}: expected sqlite://PATH or postgres://…"
            )))
        }
    }

    pub fn engine_name(&self) -> &'static str {
        match self {
            Storage::Sqlite(_) => "sqlite",
            Storage::Postgres(_) => "postgres",
        }
    }

    /// Look-up queries one tenant may have in flight at once. On
    /// PostgreSQL a looked-up replay otherwise waited for the query before
    /// its own to answer: with four in flight its mean latency under 50 %
    /// replays fell by 13 % and 100 % replays rose by 5–12 % in every one
    /// of four alternating pairs. At
    /// most a quarter of the pool, so look-ups never starve the writers of
    /// connections. SQLite gained nothing measurable (its look-ups are this
    /// process's CPU), so it keeps one.
    pub fn look_ups_in_flight(&self) -> usize {
        match self {
            Storage::Sqlite(_) => 1,
            Storage::Postgres(s) => {
                (s.pool.options().get_max_connections() as usize / 4).clamp(1, 4)
            }
        }
    }

    /// The connection pool's use, now (no I/O).
    pub fn pool_stats(&self) -> PoolStats {
        let (open, idle, max) = on_engine!(self, Storage, s => (
            s.pool.size(),
            s.pool.num_idle(),
            s.pool.options().get_max_connections(),
        ));
        let idle = u32::try_from(idle).unwrap_or(u32::MAX).min(open);
        PoolStats {
            open,
            idle,
            in_use: open - idle,
            max,
        }
    }

    pub async fn ping(&self) -> Result<(), LedgerError> {
        on_engine!(self, Storage, s => shared::engine_store::ping(s).await)
    }

    pub async fn insert_api_key(
        &self,
        tenant: &str,
        key_hash: &str,
        scopes: &str,
    ) -> Result<(), LedgerError> {
        on_engine!(self, Storage, s => api_keys::insert_api_key(s, tenant, key_hash, scopes).await)
    }

    /// Every key (of `tenant` only, if given), by tenant and creation.
    pub async fn list_api_keys(
        &self,
        tenant: Option<&str>,
    ) -> Result<Vec<StoredApiKey>, LedgerError> {
        on_engine!(self, Storage, s => api_keys::list_api_keys(s, tenant).await)
    }

    /// Deletes the tenant's key with this hash; whether there was one.
    pub async fn delete_api_key(&self, tenant: &str, key_hash: &str) -> Result<bool, LedgerError> {
        on_engine!(self, Storage, s => api_keys::delete_api_key(s, tenant, key_hash).await)
    }

    pub async fn find_api_key(&self, key_hash: &str) -> Result<Option<ApiKey>, LedgerError> {
        let row = on_engine!(self, Storage, s => api_keys::find_api_key(s, key_hash).await?);
        Ok(row.map(|(tenant_id, scopes)| ApiKey {
            tenant_id,
            // Scopes were validated when the key was created.
            scopes: crate::keys::parse_scopes(&scopes).unwrap_or_default(),
        }))
    }

    pub async fn entry_by_id(
        &self,
        tenant: &str,
        id: &str,
    ) -> Result<Option<StoredEntry>, LedgerError> {
        on_engine!(self, Storage, s => entry_reads::entry_by_id(s, tenant, id).await)
    }

    /// Entries holding one of `keys`, as committed now (no lock taken).
    pub async fn entries_with_keys(
        &self,
        tenant: &str,
        keys: &[(EntryKind, &str)],
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        on_engine!(self, Storage, s => entry_reads::entries_with_keys(s, tenant, keys).await)
    }

    /// The entry holding an idempotency key, if any.
    pub async fn entry_by_key(
        &self,
        tenant: &str,
        kind: EntryKind,
        upstream_id: &str,
    ) -> Result<Option<StoredEntry>, LedgerError> {
        on_engine!(self, Storage, s => entry_reads::entry_by_key(s, tenant, kind, upstream_id).await)
    }

    pub async fn list_entries(
        &self,
        tenant: &str,
        filter: &EntryFilter,
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        on_engine!(self, Storage, s => entry_reads::list_entries(s, tenant, filter).await)
    }

    /// The stored balances of `account` (one per unit; several only for
    /// system accounts) and the head seq they are current at, read in one
    /// consistent statement.
    pub async fn balance_rows(
        &self,
        tenant: &str,
        account: &str,
    ) -> Result<(Vec<BalanceRow>, i64), LedgerError> {
        on_engine!(self, Storage, s => balance_reads::balance_rows(s, tenant, account).await)
    }

    /// Posted entries touching `account` with `seq <= as_of_seq`, in seq order.
    pub async fn postings_until(
        &self,
        tenant: &str,
        account: &str,
        as_of_seq: i64,
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        on_engine!(self, Storage, s => entry_reads::postings_until(s, tenant, account, as_of_seq).await)
    }

    /// Entries of one account in one unit within `range` (any status), in
    /// seq order, at most `range.limit`.
    pub async fn account_entries(
        &self,
        tenant: &str,
        range: &AccountRange<'_>,
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        on_engine!(self, Storage, s => entry_reads::account_entries(s, tenant, range).await)
    }

    pub async fn tenants(&self) -> Result<Vec<String>, LedgerError> {
        on_engine!(self, Storage, s => log_heads::tenants(s).await)
    }

    pub async fn head(&self, tenant: &str) -> Result<Head, LedgerError> {
        on_engine!(self, Storage, s => log_heads::head(s, tenant).await)
    }

    /// Every stored balance of a tenant.
    pub async fn stored_balances(&self, tenant: &str) -> Result<BalanceProjection, LedgerError> {
        on_engine!(self, Storage, s => balance_reads::stored_balances(s, tenant).await)
    }

    /// Every rule-state record of one kind: (key, JSON value), by key.
    pub async fn records_of_kind(
        &self,
        tenant: &str,
        kind: &str,
    ) -> Result<Vec<(String, String)>, LedgerError> {
        on_engine!(self, Storage, s => rule_records::records_of_kind(s, tenant, kind).await)
    }

    /// One rule-state record (an account's settings, a hold, …).
    pub async fn record(
        &self,
        tenant: &str,
        key: &StateKey,
    ) -> Result<Option<StateValue>, LedgerError> {
        let text = on_engine!(self, Storage, s => rule_records::record(s, tenant, key.kind(), key.key()).await?);
        match text {
            None => Ok(None),
            Some(t) => StateValue::from_json(key, &t).map(Some).ok_or_else(|| {
                LedgerError::Corrupt(format!("rule state {} {:?}: {t:?}", key.kind(), key.key()))
            }),
        }
    }

    /// Tenants with an open hold that expired by `now`. The sweep's one
    /// query across tenants: it returns tenant ids only (docs/scaling.md).
    pub async fn tenants_with_expired_holds(
        &self,
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, LedgerError> {
        let now = crate::entry::format_recorded_at(&now);
        on_engine!(self, Storage, s => expired_holds::tenants_with_expired_holds(s, &now).await)
    }

    /// hold_ids of a tenant's open holds that expired by `now`, the oldest
    /// first, at most `limit`.
    pub async fn expired_holds(
        &self,
        tenant: &str,
        now: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<String>, LedgerError> {
        let now = crate::entry::format_recorded_at(&now);
        on_engine!(self, Storage, s => expired_holds::expired_holds(s, tenant, &now, limit).await)
    }

    /// Every rule-state row of a tenant, as stored (`tally verify`).
    pub async fn rule_state_rows(
        &self,
        tenant: &str,
    ) -> Result<Vec<crate::rule_fold::StoredRecord>, LedgerError> {
        on_engine!(self, Storage, s => rule_records::rule_state_rows(s, tenant).await)
    }

    /// Makes a tenant's rule state the fold of its log
    /// ([`crate::rule_fold`]), under the head lock, bumping the head's
    /// generation so no writer trusts the records it remembers.
    pub async fn rebuild_rule_state(&self, tenant: &str) -> Result<RulesRebuilt, LedgerError> {
        on_engine!(self, Storage, s => rule_records::rebuild_rule_state(s, tenant).await)
    }
}
