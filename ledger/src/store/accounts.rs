//! A tenant's accounts, a page at a time (`GET /v1/accounts`): the stored
//! balances of its customer accounts in account order, optionally those
//! whose id contains some text.

use sqlx::Row;

use super::log::EngineRef;
use super::rows::decode_balance;
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

/// The page, both engines: `$text` casts the stored totals to text and
/// `$find` is the engine's substring position function.
macro_rules! page_sql {
    ($text:literal, $find:literal) => {
        concat!(
            "SELECT account, unit, debits",
            $text,
            " AS debits, credits",
            $text,
            " AS credits, held",
            $text,
            " AS held FROM balances \
             WHERE tenant_id = $1 AND account NOT LIKE '@%' \
               AND ($2 IS NULL OR account > $2) \
               AND ($3 IS NULL OR ",
            $find,
            "(lower(account), lower($3)) > 0) \
             ORDER BY account, unit LIMIT $4"
        )
    };
}

impl Storage {
    /// A page of the tenant's customer accounts with their balances
    /// (system accounts, `@…`, hold one balance per unit and are read one
    /// by one).
    pub async fn list_accounts(
        &self,
        tenant: &str,
        f: &AccountFilter,
    ) -> Result<Vec<AccountRow>, LedgerError> {
        macro_rules! fetch {
            ($pool:expr, $sql:expr) => {{
                let rows = sqlx::query($sql)
                    .bind(tenant)
                    .bind(&f.after)
                    .bind(&f.contains)
                    .bind(f.limit)
                    .fetch_all($pool)
                    .await?;
                rows.iter()
                    .map(|r| {
                        Ok(AccountRow {
                            account: r.try_get("account")?,
                            unit: r.try_get("unit")?,
                            balance: decode_balance(r)?,
                        })
                    })
                    .collect()
            }};
        }
        match self.engine() {
            EngineRef::Sqlite(s) => fetch!(s.pool(), page_sql!("", "instr")),
            EngineRef::Postgres(s) => fetch!(s.pool(), page_sql!("::text", "strpos")),
        }
    }
}
