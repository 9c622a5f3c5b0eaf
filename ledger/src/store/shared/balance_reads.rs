//! Reads of the stored balances outside any group.

use super::engine_store::{rows, EngineStore};
use crate::balance::BalanceProjection;
use crate::store::engine_db::{Arg, EngineDb, Sql};
use crate::store::rows::{balance_from_text, BalanceRow};
use crate::LedgerError;

/// An account's balance in each unit, and the head seq they were read at.
pub(in crate::store) async fn balance_rows<S: EngineStore>(
    store: &S,
    tenant: &str,
    account: &str,
) -> Result<(Vec<BalanceRow>, i64), LedgerError> {
    let sql = Sql::with(
        super::sql::BALANCE_ROWS,
        [Arg::Text(tenant), Arg::Text(account)],
    );
    let mut seq = 0;
    let mut out = Vec::new();
    for r in &rows(store, &sql).await? {
        seq = S::Db::int(r, "head_seq")?;
        if let Some(unit) = S::Db::opt_text(r, "unit")? {
            out.push(BalanceRow {
                unit,
                balance: balance_from_text(|c| S::Db::text(r, c))?,
            });
        }
    }
    Ok((out, seq))
}

/// Every stored balance of the tenant.
pub(in crate::store) async fn stored_balances<S: EngineStore>(
    store: &S,
    tenant: &str,
) -> Result<BalanceProjection, LedgerError> {
    let text = format!(
        "SELECT {} FROM balances WHERE tenant_id = $1",
        super::sql::BALANCE_COLUMNS
    );
    let mut p = BalanceProjection::new();
    for r in &rows(store, &Sql::with(&text, [Arg::Text(tenant)])).await? {
        let account = S::Db::text(r, "account")?;
        let unit = S::Db::text(r, "unit")?;
        p.insert(&account, &unit, balance_from_text(|c| S::Db::text(r, c))?);
    }
    Ok(p)
}
