//! `balance.low`: an account's available balance crossing below its
//! `alerts.low_balance`, read off the log.
//!
//! An account is *below* after an entry when a threshold is in effect and
//! `available < threshold`. The event fires at each entry that takes the
//! account from not below to below: a debit that crosses it, or a settings
//! change that sets (or raises) the threshold above the balance. Rising back
//! to or above the threshold re-arms it. Both are functions of the log in
//! `seq` order, so every process derives the same crossings.

use std::collections::HashMap;

use rust_decimal::Decimal;
use tally_ledger::balance::WideDecimal;
use tally_ledger::entry::{EntryStatus, StoredEntry};
use tally_ledger::request::EntryKind;
use tally_ledger::rule_state::{low_balance_from_json, StateKey, StateValue};
use tally_ledger::store::Storage;
use tally_ledger::LedgerError;
use tally_projections::balances::BalanceView;
use tally_projections::statement::{account_fold_until, AccountFold};

use crate::event::{balance_low_event, Event};

/// Accounts a tenant's tracker remembers before it starts over (it can
/// always read them again).
const MAX_ACCOUNTS: usize = 100_000;

/// One account followed entry by entry.
struct Followed {
    fold: AccountFold,
    holds: HashMap<String, Decimal>,
    threshold: Decimal,
    below: bool,
    unit: String,
}

/// What a tenant's tracker knows of an account at its position.
enum Known {
    /// No threshold in effect: nothing to follow until a settings entry.
    NoAlert,
    Followed(Box<Followed>),
}

/// A tenant's alerts at a log position: every account touched since it
/// started, followed from the log.
pub struct TenantAlerts {
    /// The last seq folded.
    pub at: i64,
    accounts: HashMap<String, Known>,
}

impl TenantAlerts {
    pub fn at(seq: i64) -> Self {
        Self {
            at: seq,
            accounts: HashMap::new(),
        }
    }

    /// The `balance.low` events of `e`, the entry after [`Self::at`].
    pub async fn follow(
        &mut self,
        storage: &Storage,
        tenant: &str,
        e: &StoredEntry,
    ) -> Result<Vec<Event>, LedgerError> {
        if self.accounts.len() > MAX_ACCOUNTS {
            self.accounts.clear();
        }
        let mut events = Vec::new();
        let mut touched = vec![e.debit_account.as_str()];
        if e.credit_account != e.debit_account {
            touched.push(e.credit_account.as_str());
        }
        for account in touched {
            if account.starts_with('@') {
                continue;
            }
            let sets = (e.kind == EntryKind::AccountSettings
                && e.status == EntryStatus::Posted
                && e.account == account)
                .then(|| threshold_in(e))
                .transpose()?;
            if !self.accounts.contains_key(account) {
                let known = match threshold_at(storage, tenant, account, e.seq - 1).await? {
                    Some(t) => follow_from(storage, tenant, account, &e.unit, e.seq - 1, t).await?,
                    None => Known::NoAlert,
                };
                self.accounts.insert(account.to_owned(), known);
            }
            let Some(known) = self.accounts.get_mut(account) else {
                continue;
            };
            if let (Known::NoAlert, Some(Some(t))) = (&*known, sets) {
                // Without a threshold the account was not below anything.
                *known = follow_from(storage, tenant, account, &e.unit, e.seq - 1, t).await?;
                if let Known::Followed(f) = known {
                    f.below = false;
                }
            }
            let Known::Followed(f) = known else {
                continue;
            };
            if f.unit != e.unit {
                continue;
            }
            for id in f.fold.holds_outside(std::slice::from_ref(e))? {
                if let Some(h) = storage.entry_by_key(tenant, EntryKind::Hold, &id).await? {
                    f.holds.insert(id, h.amount);
                }
            }
            f.fold.apply(e, &f.holds)?;
            if let Some(new) = sets {
                match new {
                    Some(t) => f.threshold = t,
                    None => {
                        *known = Known::NoAlert;
                        continue;
                    }
                }
            }
            let balance = f.fold.balance();
            let threshold = WideDecimal::from_decimal(f.threshold).unwrap_or_default();
            let below = balance.available() < threshold;
            if below && !f.below {
                let view = BalanceView::new(account, &f.unit, &balance, e.seq);
                let body = serde_json::to_value(&view).map_err(|x| {
                    LedgerError::Corrupt(format!("a balance does not serialise: {x}"))
                })?;
                events.push(balance_low_event(
                    tenant,
                    e,
                    account,
                    &tally_ledger::amount::canonical(f.threshold),
                    body,
                ));
            }
            f.below = below;
        }
        self.at = e.seq;
        Ok(events)
    }
}

/// The threshold a settings entry sets (`None`: it sets none).
fn threshold_in(e: &StoredEntry) -> Result<Option<Decimal>, LedgerError> {
    let params: serde_json::Value = serde_json::from_str(&e.params)
        .map_err(|_| LedgerError::Corrupt(format!("entry {}: params are not JSON", e.id)))?;
    match params.get("alerts") {
        None => Ok(None),
        Some(v) => low_balance_from_json(v)
            .map_err(|m| LedgerError::Corrupt(format!("entry {}: alerts {m}", e.id))),
    }
}

/// The account's threshold in effect after `seq`: from its settings now
/// if they were set by then, else from the settings entry in effect then
/// (found walking back its versions, `<account>#<version>`).
async fn threshold_at(
    storage: &Storage,
    tenant: &str,
    account: &str,
    seq: i64,
) -> Result<Option<Decimal>, LedgerError> {
    let Some(StateValue::Account(now)) = storage
        .record(tenant, &StateKey::Account(account.to_owned()))
        .await?
    else {
        return Ok(None);
    };
    if now.seq <= seq {
        return Ok(now.low_balance);
    }
    let mut version = now.version - 1;
    while version > 0 {
        let key = format!("{account}#{version}");
        match storage
            .entry_by_key(tenant, EntryKind::AccountSettings, &key)
            .await?
        {
            Some(e) if e.seq <= seq => return threshold_in(&e),
            _ => version -= 1,
        }
    }
    Ok(None)
}

async fn follow_from(
    storage: &Storage,
    tenant: &str,
    account: &str,
    unit: &str,
    seq: i64,
    threshold: Decimal,
) -> Result<Known, LedgerError> {
    let (fold, holds) = account_fold_until(storage, tenant, account, unit, seq).await?;
    let limit = WideDecimal::from_decimal(threshold).unwrap_or_default();
    let below = fold.balance().available() < limit;
    Ok(Known::Followed(Box::new(Followed {
        fold,
        holds,
        threshold,
        below,
        unit: unit.to_owned(),
    })))
}
