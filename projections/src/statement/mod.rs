//! Statements of an account over a period, and balances at a time
//! (docs/audit.md, "Statements and balances at a time").
//!
//! Time here is `recorded_at`, the ledger's own clock (UTC, microseconds).
//! "The balance at T" is the fold of the account's entries recorded at or
//! before T. With several `tally` processes `recorded_at` may step back
//! across `seq` by their clock skew, so the entries recorded before a time
//! need not be a seq prefix of the log. The fold below therefore gives every
//! entry an effect of its own, whatever else is in the set — a posting moves
//! `debits`/`credits`, a hold adds its amount to `held`, a capture or release
//! takes the whole hold's amount off `held` — which is exactly what
//! [`tally_ledger::fold::LogFold`] computes over a seq prefix (a test holds the two
//! to each other), and it makes the arithmetic of a statement exact:
//! opening + movements = closing, always.
//!
//! The figures are [`tally_ledger::balance::WideDecimal`]s, like every total
//! of the ledger: exact at any size.
//!
//! Every read of one answer is bounded by the ledger head it started at, so
//! concurrent writes cannot make its parts disagree.

pub(crate) mod fold;
#[cfg(test)]
mod tests;
pub(crate) mod walk;

use std::collections::HashMap;

use chrono::{DateTime, TimeDelta, Utc};
use tally_ledger::entry::format_recorded_at;
use tally_ledger::fields::ValidationErrors;
use tally_ledger::store::{AccountRange, Storage, LOG_PAGE};
use tally_ledger::LedgerError;

pub use fold::{
    adds_up, ceil_micros, floor_micros, AccountFold, AccountStatement, BalanceFigures, Movements,
    WideBalance, MAX_STATEMENT_ENTRIES,
};

use crate::balances::read::{pick_row, BalanceView};
pub use walk::account_fold_until;
use walk::fold_range;

fn in_the_future(field: &str, t: DateTime<Utc>, now: DateTime<Utc>) -> Option<LedgerError> {
    (t > now).then(|| {
        LedgerError::Invalid(ValidationErrors::single(
            field,
            format!(
                "is in the future (the ledger's clock reads {}): a balance there is not known yet",
                format_recorded_at(&now)
            ),
        ))
    })
}

/// The balance of `account` in `unit` as of `as_of`: the fold of its
/// entries with `recorded_at <= as_of`. `as_of_seq` in the answer is the
/// highest seq folded (0 if none). A time after the ledger's clock is 422.
pub async fn read_balance_at(
    storage: &Storage,
    tenant: &str,
    account: &str,
    unit: Option<&str>,
    as_of: DateTime<Utc>,
) -> Result<BalanceView, LedgerError> {
    if let Some(e) = in_the_future("as_of", as_of, Utc::now()) {
        return Err(e);
    }
    let (rows, head_seq) = storage.balance_rows(tenant, account).await?;
    let row = pick_row(&rows, unit)?;
    let range = AccountRange {
        account,
        unit: &row.unit,
        after_seq: 0,
        until_seq: head_seq,
        from: None,
        to: Some(floor_micros(as_of) + TimeDelta::microseconds(1)),
        limit: LOG_PAGE,
    };
    let mut fold = AccountFold::new(account, &row.unit);
    let mut holds = HashMap::new();
    fold_range(storage, tenant, range, &mut fold, &mut holds, None, 0).await?;
    Ok(BalanceView::new(
        account,
        &row.unit,
        &fold.balance(),
        fold.last_seq,
    ))
}

/// The statement of `account` in `unit` for `from <= recorded_at < to`.
pub async fn read_statement(
    storage: &Storage,
    tenant: &str,
    account: &str,
    unit: Option<&str>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<AccountStatement, LedgerError> {
    read_statement_limited(
        storage,
        tenant,
        account,
        unit,
        (from, to),
        Utc::now(),
        MAX_STATEMENT_ENTRIES,
    )
    .await
}

/// [`read_statement`] with the clock and the bound given.
pub async fn read_statement_limited(
    storage: &Storage,
    tenant: &str,
    account: &str,
    unit: Option<&str>,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    now: DateTime<Utc>,
    max_entries: usize,
) -> Result<AccountStatement, LedgerError> {
    if let Some(e) = in_the_future("to", to, now) {
        return Err(e);
    }
    let (from, to) = (ceil_micros(from), ceil_micros(to));
    if from >= to {
        return Err(LedgerError::Invalid(ValidationErrors::single(
            "to",
            "must be later than from (from is inclusive, to exclusive)",
        )));
    }
    let (rows, head_seq) = storage.balance_rows(tenant, account).await?;
    let row = pick_row(&rows, unit)?;
    let unit = row.unit.as_str();
    let range = |from: Option<DateTime<Utc>>, to: DateTime<Utc>| AccountRange {
        account,
        unit,
        after_seq: 0,
        until_seq: head_seq,
        from,
        to: Some(to),
        limit: LOG_PAGE,
    };
    let mut holds = HashMap::new();
    let mut opening = AccountFold::new(account, unit);
    fold_range(
        storage,
        tenant,
        range(None, from),
        &mut opening,
        &mut holds,
        None,
        0,
    )
    .await?;
    let mut period = AccountFold::new(account, unit);
    let mut entries = Vec::new();
    fold_range(
        storage,
        tenant,
        range(Some(from), to),
        &mut period,
        &mut holds,
        Some(&mut entries),
        max_entries,
    )
    .await?;
    let mut closing = AccountFold::new(account, unit);
    fold_range(
        storage,
        tenant,
        range(None, to),
        &mut closing,
        &mut holds,
        None,
        0,
    )
    .await?;

    let (open, moved, close) = (opening.balance(), period.balance(), closing.balance());
    if !adds_up(&open, &moved, &close) || opening.entries + period.entries != closing.entries {
        tracing::error!(
            tenant,
            account,
            unit,
            from = %format_recorded_at(&from),
            to = %format_recorded_at(&to),
            head_seq,
            opening = ?open,
            movements = ?moved,
            closing = ?close,
            opening_entries = opening.entries,
            period_entries = period.entries,
            closing_entries = closing.entries,
            "statement does not add up: opening + movements != closing; refusing to answer"
        );
        return Err(LedgerError::Corrupt(format!(
            "statement of {account} ({unit}) does not add up"
        )));
    }
    Ok(AccountStatement {
        account: account.to_owned(),
        unit: unit.to_owned(),
        from: format_recorded_at(&from),
        to: format_recorded_at(&to),
        opening_balance: BalanceFigures::new(&open),
        movements: Movements {
            debits: moved.debits.to_string(),
            credits: moved.credits.to_string(),
            net: moved.posted().to_string(),
            held: moved.held.to_string(),
            entries: entries.len(),
        },
        closing_balance: BalanceFigures::new(&close),
        entries,
        as_of_seq: closing.last_seq,
    })
}
