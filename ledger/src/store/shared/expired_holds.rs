//! The holds whose expiry has passed, for the expiry sweep
//! (`crate::expiry`).

use super::engine_store::{rows, texts, EngineStore};
use super::sql::{EXPIRED_HOLDS, TENANTS_WITH_EXPIRED_HOLDS};
use crate::store::engine_db::{Arg, Sql};
use crate::LedgerError;

/// Tenants with an open hold that expired at or before `now` (fixed-width
/// UTC text).
pub(in crate::store) async fn tenants_with_expired_holds<S: EngineStore>(
    store: &S,
    now: &str,
) -> Result<Vec<String>, LedgerError> {
    let sql = Sql::with(TENANTS_WITH_EXPIRED_HOLDS, [Arg::Text(now)]);
    texts::<S>(&rows(store, &sql).await?, "tenant_id")
}

/// One tenant's open holds that expired at or before `now`.
pub(in crate::store) async fn expired_holds<S: EngineStore>(
    store: &S,
    tenant: &str,
    now: &str,
    limit: i64,
) -> Result<Vec<String>, LedgerError> {
    let args = [Arg::Text(tenant), Arg::Text(now), Arg::Int(limit)];
    texts::<S>(&rows(store, &Sql::with(EXPIRED_HOLDS, args)).await?, "key")
}
