//! Reading a balance, now or as of a past seq.

use serde::Serialize;
use tally_ledger::balance::AccountBalance;
use tally_ledger::fields::ValidationErrors;
use tally_ledger::store::{BalanceRow, Storage};
use tally_ledger::LedgerError;

/// The body of `GET /v1/accounts/{account}/balance`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BalanceView {
    pub account: String,
    pub unit: String,
    pub debits: String,
    pub credits: String,
    /// `credits − debits`.
    pub posted: String,
    /// Reserved by open holds.
    pub held: String,
    /// `posted − held`.
    pub available: String,
    /// The log position the balance is as of.
    pub as_of_seq: i64,
}

impl BalanceView {
    pub fn new(account: &str, unit: &str, b: &AccountBalance, as_of_seq: i64) -> Self {
        Self {
            account: account.to_owned(),
            unit: unit.to_owned(),
            debits: b.debits.to_string(),
            credits: b.credits.to_string(),
            posted: b.posted().to_string(),
            held: b.held.to_string(),
            available: b.available().to_string(),
            as_of_seq,
        }
    }
}

/// The balance row of `unit`, or the only one when `unit` is not given: a
/// system account holding several units needs it (422 listing them). No
/// row (an account without entries, or not in that unit) is 404.
pub(crate) fn pick_row<'a>(
    rows: &'a [BalanceRow],
    unit: Option<&str>,
) -> Result<&'a BalanceRow, LedgerError> {
    match unit {
        Some(u) => rows.iter().find(|r| r.unit == u),
        None if rows.len() > 1 => {
            let units: Vec<&str> = rows.iter().map(|r| r.unit.as_str()).collect();
            return Err(LedgerError::Invalid(ValidationErrors::single(
                "unit",
                format!(
                    "is required: this account holds balances in several units ({})",
                    units.join(", ")
                ),
            )));
        }
        None => rows.first(),
    }
    .ok_or(LedgerError::NotFound)
}

/// The balance of `account` in `unit` (needed only for system accounts,
/// which hold one balance per unit), now or as of `as_of_seq`.
pub async fn read_balance(
    storage: &Storage,
    tenant: &str,
    account: &str,
    unit: Option<&str>,
    as_of_seq: Option<i64>,
) -> Result<BalanceView, LedgerError> {
    let (rows, head_seq) = storage.balance_rows(tenant, account).await?;
    let row = pick_row(&rows, unit)?;
    let Some(seq) = as_of_seq else {
        return Ok(BalanceView::new(account, &row.unit, &row.balance, head_seq));
    };
    if seq > head_seq {
        return Err(LedgerError::Invalid(ValidationErrors::single(
            "as_of_seq",
            format!("is beyond the ledger head (seq {head_seq})"),
        )));
    }
    // The account's own entries only: a capture that credits a system
    // account closes a hold that is not among them (statement::AccountFold).
    let balance =
        crate::statement::walk::fold_until_seq(storage, tenant, account, &row.unit, seq).await?;
    Ok(BalanceView::new(account, &row.unit, &balance, seq))
}
