//! Reads of the rule state (table `rule_state`) outside any group, and its
//! rebuild from the log.

use super::engine_store::{first_row, rows, EngineStore};
use super::log_heads::lock_for_rewrite;
use super::sql::{RECORD, RECORDS_OF_KIND};
use crate::rule_fold::StoredRecord;
use crate::store::engine_db::{Arg, EngineDb, Sql};
use crate::store::rule_state::RulesRebuilt;
use crate::store::transaction::GroupTransaction;
use crate::LedgerError;

/// The tenant's records of one kind: `(key, value)` in key order.
pub(in crate::store) async fn records_of_kind<S: EngineStore>(
    store: &S,
    tenant: &str,
    kind: &str,
) -> Result<Vec<(String, String)>, LedgerError> {
    let sql = Sql::with(RECORDS_OF_KIND, [Arg::Text(tenant), Arg::Text(kind)]);
    rows(store, &sql)
        .await?
        .iter()
        .map(|r| Ok((S::Db::text(r, "key")?, S::Db::text(r, "value")?)))
        .collect()
}

/// One record's value, if it exists.
pub(in crate::store) async fn record<S: EngineStore>(
    store: &S,
    tenant: &str,
    kind: &str,
    key: &str,
) -> Result<Option<String>, LedgerError> {
    let sql = Sql::with(RECORD, [Arg::Text(tenant), Arg::Text(kind), Arg::Text(key)]);
    match first_row(store, &sql).await? {
        Some(r) => Ok(Some(S::Db::text(&r, "value")?)),
        None => Ok(None),
    }
}

/// Every rule-state row of a tenant, as stored.
pub(in crate::store) async fn rule_state_rows<S: EngineStore>(
    store: &S,
    tenant: &str,
) -> Result<Vec<StoredRecord>, LedgerError> {
    crate::store::rule_state::stored::<S::Db>(&mut *store.pool().acquire().await?, tenant).await
}

/// Rebuilds the tenant's rule state from its log under its head lock.
pub(in crate::store) async fn rebuild_rule_state<S: EngineStore>(
    store: &S,
    tenant: &str,
) -> Result<RulesRebuilt, LedgerError> {
    let (mut group, _) = lock_for_rewrite(store, tenant).await?;
    let rebuilt = S::rebuild_rules(&mut group, tenant).await?;
    group.commit().await?;
    Ok(rebuilt)
}
