//! The api keys (table `api_keys`): stored by hash, never in clear.

use super::engine_store::{first_row, rows, EngineStore};
use super::sql::{DELETE_API_KEY, FIND_API_KEY, LIST_API_KEYS};
use crate::keys::StoredApiKey;
use crate::store::engine_db::{Arg, EngineDb, Sql};
use crate::LedgerError;
use chrono::Utc;

pub(in crate::store) async fn insert_api_key<S: EngineStore>(
    store: &S,
    tenant: &str,
    key_hash: &str,
    scopes: &str,
) -> Result<(), LedgerError> {
    // This process's clock on both engines, bound the way each stores time.
    let sql = Sql::with(
        "INSERT INTO api_keys (tenant_id, key_hash, scopes, created_at) VALUES ($1, $2, $3, $4)",
        [
            Arg::Text(tenant),
            Arg::Text(key_hash),
            Arg::Text(scopes),
            S::recorded_at_arg(Utc::now()),
        ],
    );
    S::Db::execute(&mut *store.pool().acquire().await?, &sql).await?;
    Ok(())
}

/// Every key, or the tenant's.
pub(in crate::store) async fn list_api_keys<S: EngineStore>(
    store: &S,
    tenant: Option<&str>,
) -> Result<Vec<StoredApiKey>, LedgerError> {
    let sql = Sql::with(LIST_API_KEYS, [Arg::OptText(tenant)]);
    rows(store, &sql)
        .await?
        .iter()
        .map(|r| {
            Ok(StoredApiKey {
                tenant_id: S::Db::text(r, "tenant_id")?,
                key_hash: S::Db::text(r, "key_hash")?,
                scopes: S::Db::text(r, "scopes")?,
                created_at: S::created_at(r)?,
            })
        })
        .collect()
}

/// Whether a key was deleted.
pub(in crate::store) async fn delete_api_key<S: EngineStore>(
    store: &S,
    tenant: &str,
    key_hash: &str,
) -> Result<bool, LedgerError> {
    let sql = Sql::with(DELETE_API_KEY, [Arg::Text(tenant), Arg::Text(key_hash)]);
    Ok(S::Db::execute(&mut *store.pool().acquire().await?, &sql).await? > 0)
}

/// The tenant and scopes of the key with this hash.
pub(in crate::store) async fn find_api_key<S: EngineStore>(
    store: &S,
    key_hash: &str,
) -> Result<Option<(String, String)>, LedgerError> {
    match first_row(store, &Sql::with(FIND_API_KEY, [Arg::Text(key_hash)])).await? {
        Some(r) => Ok(Some((
            S::Db::text(&r, "tenant_id")?,
            S::Db::text(&r, "scopes")?,
        ))),
        None => Ok(None),
    }
}
