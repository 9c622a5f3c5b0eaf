//! An account's entries read from the log, page by page, and folded.

use std::collections::HashMap;

use rust_decimal::Decimal;
use tally_ledger::entry::{EntryStatus, StoredEntry};
use tally_ledger::fields::ValidationErrors;
use tally_ledger::request::EntryKind;
use tally_ledger::store::{AccountRange, Storage, LOG_PAGE};
use tally_ledger::LedgerError;

use super::fold::{AccountFold, WideBalance};

/// Reads every page of `range` into `fold`, looking up the amounts of holds
/// recorded outside it (cached in `holds` across the ranges of one answer).
/// With `keep`, the entries are kept too, at most `max` of them.
pub(super) async fn fold_range(
    storage: &Storage,
    tenant: &str,
    mut range: AccountRange<'_>,
    fold: &mut AccountFold,
    holds: &mut HashMap<String, Decimal>,
    mut keep: Option<&mut Vec<StoredEntry>>,
    max: usize,
) -> Result<(), LedgerError> {
    loop {
        let page = storage.account_entries(tenant, &range).await?;
        for id in fold.holds_outside(&page)? {
            if holds.contains_key(&id) {
                continue;
            }
            match storage.entry_by_key(tenant, EntryKind::Hold, &id).await? {
                Some(h) if h.status == EntryStatus::Posted => {
                    holds.insert(id, h.amount);
                }
                _ => {
                    return Err(LedgerError::Corrupt(format!(
                        "hold {id} is closed in the log but was never posted"
                    )))
                }
            }
        }
        for e in &page {
            fold.apply(e, holds)?;
        }
        let full = page.len() as i64 == range.limit;
        let last = page.last().map(|e| e.seq);
        if let Some(kept) = keep.as_deref_mut() {
            kept.extend(page);
            if kept.len() > max {
                return Err(LedgerError::Invalid(ValidationErrors::single(
                    "to",
                    format!(
                        "the period holds more than {max} entries of this account; \
                         ask for a shorter period"
                    ),
                )));
            }
        }
        match last {
            Some(seq) if full => range.after_seq = seq,
            _ => return Ok(()),
        }
    }
}

/// The balance of `account` in `unit` folded from its entries with
/// `seq <= as_of_seq`: `GET …/balance?as_of_seq=`.
pub(crate) async fn fold_until_seq(
    storage: &Storage,
    tenant: &str,
    account: &str,
    unit: &str,
    as_of_seq: i64,
) -> Result<WideBalance, LedgerError> {
    let (fold, _) = account_fold_until(storage, tenant, account, unit, as_of_seq).await?;
    Ok(fold.balance())
}

/// `account`'s fold in `unit` over its entries with `seq <= until_seq`,
/// and the amounts of the holds it looked up: where a reader that goes on
/// folding entry by entry starts (the `balance.low` alerts of webhooks).
pub async fn account_fold_until(
    storage: &Storage,
    tenant: &str,
    account: &str,
    unit: &str,
    until_seq: i64,
) -> Result<(AccountFold, HashMap<String, Decimal>), LedgerError> {
    let range = AccountRange {
        account,
        unit,
        after_seq: 0,
        until_seq,
        from: None,
        to: None,
        limit: LOG_PAGE,
    };
    let mut fold = AccountFold::new(account, unit);
    let mut holds = HashMap::new();
    fold_range(storage, tenant, range, &mut fold, &mut holds, None, 0).await?;
    Ok((fold, holds))
}
