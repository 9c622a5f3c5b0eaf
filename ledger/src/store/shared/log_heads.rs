//! The tenants' heads (table `ledger_heads`) read outside any group, and
//! the lock a rewrite (a rebuild) holds on one.

use super::engine_store::{first_row, rows, texts, EngineStore};
use super::sql::{BUMP_GENERATION, HEAD, TENANTS};
use crate::chain::Head;
use crate::store::engine_db::{Arg, EngineDb, Sql};
use crate::store::transaction::{fence_from, GroupTransaction};
use crate::LedgerError;

/// Every tenant with a head, in tenant order.
pub(in crate::store) async fn tenants<S: EngineStore>(
    store: &S,
) -> Result<Vec<String>, LedgerError> {
    texts::<S>(&rows(store, &Sql::new(TENANTS)).await?, "tenant_id")
}

/// The tenant's head; the empty chain before its first entry.
pub(in crate::store) async fn head<S: EngineStore>(
    store: &S,
    tenant: &str,
) -> Result<Head, LedgerError> {
    match first_row(store, &Sql::with(HEAD, [Arg::Text(tenant)])).await? {
        Some(r) => Ok(fence_from(S::Db::int(&r, "seq")?, &S::Db::text(&r, "hash")?, 0)?.head),
        None => Ok(Head::EMPTY),
    }
}

/// Begins a group holding `tenant`'s head lock (so no group commits until
/// it ends) and bumps the head's generation: writers must not trust what
/// they remember across the rewrite that follows. The head as locked comes
/// with it.
pub(in crate::store) async fn lock_for_rewrite<S: EngineStore>(
    store: &S,
    tenant: &str,
) -> Result<(S::Group, Head), LedgerError> {
    let mut group = store.begin_group().await?;
    let head = group.lock_head(tenant).await?.head;
    let bump = Sql::with(BUMP_GENERATION, [Arg::Text(tenant)]);
    S::Db::execute(S::group_connection(&mut group), &bump).await?;
    Ok((group, head))
}
