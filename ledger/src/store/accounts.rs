//! A tenant's accounts, a page at a time (`GET /v1/accounts`): the stored
//! balances of its customer accounts in account order, optionally those
//! whose id contains some text.

use sqlx::{Postgres, Sqlite};

use super::engine_db::{Arg, EngineDb, Sql};
use super::log::EngineRef;
use super::rows::balance_from_text;
use super::storage::Storage;
use crate::balance::AccountBalance;
use crate::LedgerError;

/// One account of a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountRow {
    pub account: String,
    pub unit: String,
    pub balance: AccountBalance,
}

/// Which accounts a page holds.
#[derive(Debug, Clone, Default)]
pub struct AccountFilter {
    /// Accounts after this id (byte order).
    pub after: Option<String>,
    /// Accounts whose id contains this text, ASCII letters in any case.
    pub contains: Option<String>,
    pub limit: i64,
}

/// The page, on SQLite: the stored totals are text already, and `instr`
/// finds a substring.
const PAGE_SQLITE: &str = "SELECT account, unit, debits, credits, held FROM balances \
     WHERE tenant_id = $1 AND account NOT LIKE '@%' \
       AND ($2 IS NULL OR account > $2) \
       AND ($3 IS NULL OR instr(lower(account), lower($3)) > 0) \
     ORDER BY account, unit LIMIT $4";

/// The page, on PostgreSQL: the totals cast to text, `strpos`.
const PAGE_POSTGRES: &str = "SELECT account, unit, debits::text AS debits, \
       credits::text AS credits, held::text AS held FROM balances \
     WHERE tenant_id = $1 AND account NOT LIKE '@%' \
       AND ($2 IS NULL OR account > $2) \
       AND ($3 IS NULL OR strpos(lower(account), lower($3)) > 0) \
     ORDER BY account, unit LIMIT $4";

impl Storage {
    /// A page of the tenant's customer accounts with their balances
    /// (system accounts, `@…`, hold one balance per unit and are read one
    /// by one).
    pub async fn list_accounts(
        &self,
        tenant: &str,
        f: &AccountFilter,
    ) -> Result<Vec<AccountRow>, LedgerError> {
        match self.engine() {
            EngineRef::Sqlite(s) => {
                page::<Sqlite>(&mut *s.pool().acquire().await?, PAGE_SQLITE, tenant, f).await
            }
            EngineRef::Postgres(s) => {
                page::<Postgres>(&mut *s.pool().acquire().await?, PAGE_POSTGRES, tenant, f).await
            }
        }
    }
}

/// Reads one page with the engine's `text` of the query.
async fn page<DB: EngineDb>(
    conn: &mut DB::Connection,
    text: &str,
    tenant: &str,
    f: &AccountFilter,
) -> Result<Vec<AccountRow>, LedgerError> {
    let sql = Sql::with(
        text,
        [
            Arg::Text(tenant),
            Arg::OptText(f.after.as_deref()),
            Arg::OptText(f.contains.as_deref()),
            Arg::Int(f.limit),
        ],
    );
    DB::fetch_all(conn, &sql)
        .await?
        .iter()
        .map(|r| {
            Ok(AccountRow {
                account: DB::text(r, "account")?,
                unit: DB::text(r, "unit")?,
                balance: balance_from_text(|c| DB::text(r, c))?,
            })
        })
        .collect()
}
