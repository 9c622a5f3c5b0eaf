//! Usage summaries: per tenant, account, meter, UTC day and unit, the
//! quantity, amount and number of posted usage debits, net of reversals.
//!
//! This file is the pure fold (no I/O): the projector that keeps the
//! `usage_summaries` table, `tally projections rebuild` and `tally verify`
//! all fold entries through [`UsageFold::apply`], so "a rebuild is identical"
//! holds by construction. The SQL is in `sqlite.rs` and `postgres.rs`
//! beside this file; the design is in `docs/usage-summaries.md`.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use chrono::NaiveDate;
use rust_decimal::Decimal;
use tally_ledger::balance::WideDecimal;
use tally_ledger::entry::{
    params_of, usage_terms, EntryStatus, StoredEntry, UsageParams, UsageSource,
};
use tally_ledger::request::EntryKind;
use tally_ledger::LedgerError;

/// The name of the usage projector's row in `projector_checkpoints`.
pub const USAGE_PROJECTOR: &str = "usage";

/// One row of the summary: whose usage, of what, on which UTC day, in which unit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UsageKey {
    pub account: String,
    /// `""` when the entry names no meter.
    pub meter: String,
    pub day: NaiveDate,
    pub unit: String,
}

/// What one key adds up to. Deltas (a reversal) may be negative.
///
/// The sums are exact whatever their size: a day of 28-digit quantities
/// adds up past what one amount (or a `Decimal`) may hold, and a summary
/// is an aggregate the writer never decides on (docs/usage-summaries.md).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageTotals {
    pub quantity: WideDecimal,
    pub amount: WideDecimal,
    pub entries: i64,
}

impl UsageTotals {
    /// The totals of one usage debit.
    pub fn of_one(quantity: Decimal, amount: Decimal) -> Result<UsageTotals, LedgerError> {
        let exact = |d: Decimal, what: &str| {
            WideDecimal::from_decimal(d).ok_or_else(|| {
                LedgerError::Corrupt(format!(
                    "usage {what} {d} has more than 18 fractional digits"
                ))
            })
        };
        Ok(UsageTotals {
            quantity: exact(quantity, "quantity")?,
            amount: exact(amount, "amount")?,
            entries: 1,
        })
    }

    /// `self + other`; only the count of entries can overflow (past 2^63).
    pub fn checked_add(&self, other: &UsageTotals) -> Result<UsageTotals, LedgerError> {
        Ok(UsageTotals {
            quantity: &self.quantity + &other.quantity,
            amount: &self.amount + &other.amount,
            entries: self.entries.checked_add(other.entries).ok_or_else(|| {
                LedgerError::Corrupt("usage count of entries overflows".to_owned())
            })?,
        })
    }

    fn negated(&self) -> UsageTotals {
        UsageTotals {
            quantity: -&self.quantity,
            amount: -&self.amount,
            entries: -self.entries,
        }
    }

    /// True when every total is zero (a day whose usage was all reversed).
    pub fn is_zero(&self) -> bool {
        self.quantity.is_zero() && self.amount.is_zero() && self.entries == 0
    }
}

/// The key and totals a posted usage debit contributes; `None` for any
/// other entry.
pub fn usage_of(entry: &StoredEntry) -> Result<Option<(UsageKey, UsageTotals)>, LedgerError> {
    usage_of_source(&UsageSource::from(entry))
}

/// [`usage_of`] over the columns the fold reads.
pub fn usage_of_source(
    source: &UsageSource<'_>,
) -> Result<Option<(UsageKey, UsageTotals)>, LedgerError> {
    if source.kind != EntryKind::UsageDebit || source.status != EntryStatus::Posted {
        return Ok(None);
    }
    usage_with_params(source, params_of(source)?).map(Some)
}

/// The usage of a posted usage debit whose parameters were already read
/// (`source.params` is not looked at).
pub fn usage_with_params(
    source: &UsageSource<'_>,
    params: UsageParams<'_>,
) -> Result<(UsageKey, UsageTotals), LedgerError> {
    let (meter, day, quantity) = usage_terms(source, params)?;
    let totals = UsageTotals::of_one(quantity, source.amount)?;
    Ok((
        UsageKey {
            account: source.account.to_owned(),
            meter: meter.into_owned(),
            day,
            unit: source.unit.to_owned(),
        },
        totals,
    ))
}

/// Usage being added up over a scan of the log: a hash map probed with a
/// reused key, so an entry whose key is already there costs one lookup and
/// no allocation (the ordered [`UsageFold`] cost a B-tree walk of string
/// comparisons and three allocations per entry: 18 % of a rebuild's CPU).
#[derive(Debug)]
pub struct UsageScan {
    totals: HashMap<UsageKey, UsageTotals>,
    probe: UsageKey,
}

impl Default for UsageScan {
    fn default() -> Self {
        UsageScan {
            totals: HashMap::new(),
            probe: UsageKey {
                account: String::new(),
                meter: String::new(),
                day: NaiveDate::MIN,
                unit: String::new(),
            },
        }
    }
}

impl UsageScan {
    /// Adds the usage of a posted usage debit whose parameters were already
    /// read (`source.params` is not looked at).
    pub fn add_usage(
        &mut self,
        source: &UsageSource<'_>,
        params: UsageParams<'_>,
    ) -> Result<(), LedgerError> {
        let (meter, day, quantity) = usage_terms(source, params)?;
        let totals = UsageTotals::of_one(quantity, source.amount)?;
        self.add_to_key(source.account, &meter, day, source.unit, &totals)
    }

    /// Adds `totals` to the row of one usage key, given by its parts.
    pub fn add_to_key(
        &mut self,
        account: &str,
        meter: &str,
        day: NaiveDate,
        unit: &str,
        totals: &UsageTotals,
    ) -> Result<(), LedgerError> {
        let probe = &mut self.probe;
        probe.account.clear();
        probe.account.push_str(account);
        probe.meter.clear();
        probe.meter.push_str(meter);
        probe.day = day;
        probe.unit.clear();
        probe.unit.push_str(unit);
        match self.totals.get_mut(probe) {
            Some(slot) => *slot = slot.checked_add(totals)?,
            None => {
                self.totals.insert(probe.clone(), totals.clone());
            }
        }
        Ok(())
    }

    /// Adds the usage of `source` if it is a posted usage debit.
    pub fn add_source(&mut self, source: &UsageSource<'_>) -> Result<(), LedgerError> {
        if source.kind != EntryKind::UsageDebit || source.status != EntryStatus::Posted {
            return Ok(());
        }
        self.add_usage(source, params_of(source)?)
    }

    pub fn into_fold(self) -> Result<UsageFold, LedgerError> {
        let mut fold = UsageFold::new();
        for (key, totals) in self.totals {
            fold.add(key, &totals)?;
        }
        Ok(fold)
    }
}

/// The entry a posted reversal names (its `entry_id` parameter), which must
/// be looked up before the reversal can be folded. `None` for any other entry.
pub fn reversal_target(entry: &StoredEntry) -> Result<Option<String>, LedgerError> {
    reversal_target_of(&UsageSource::from(entry))
}

/// [`reversal_target`] over the columns the fold reads.
pub fn reversal_target_of(source: &UsageSource<'_>) -> Result<Option<String>, LedgerError> {
    if source.kind != EntryKind::Reversal || source.status != EntryStatus::Posted {
        return Ok(None);
    }
    Ok(params_of(source)?.entry_id.map(Cow::into_owned))
}

/// Usage summaries folded from entries, in memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageFold {
    totals: BTreeMap<UsageKey, UsageTotals>,
}

impl UsageFold {
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds one entry. `original` is the entry [`reversal_target`] named,
    /// if the entry is a reversal (ignored otherwise): a reversal of a
    /// posted usage debit takes that debit's totals back out of the
    /// debit's own key (its day and meter). Every other entry changes nothing.
    pub fn apply(
        &mut self,
        entry: &StoredEntry,
        original: Option<&StoredEntry>,
    ) -> Result<(), LedgerError> {
        if let Some((key, totals)) = usage_of(entry)? {
            return self.add(key, &totals);
        }
        if entry.kind != EntryKind::Reversal || entry.status != EntryStatus::Posted {
            return Ok(());
        }
        match original {
            Some(original) if original.tenant_id == entry.tenant_id => {
                self.take_back(entry.seq, original)
            }
            _ => Ok(()),
        }
    }

    /// Folds a posted reversal at `reversal_seq` of the same tenant as
    /// `original`, the entry it names: the original's usage, if it is a
    /// posted usage debit before the reversal, comes back out.
    pub fn take_back(
        &mut self,
        reversal_seq: i64,
        original: &StoredEntry,
    ) -> Result<(), LedgerError> {
        if original.seq >= reversal_seq {
            return Ok(());
        }
        if let Some((key, totals)) = usage_of(original)? {
            self.add(key, &totals.negated())?;
        }
        Ok(())
    }

    /// Adds `delta` to `key`'s totals. A key once touched stays in the fold
    /// even if it nets to zero, so the rows written do not depend on how
    /// the log was cut into rounds.
    pub fn add(&mut self, key: UsageKey, delta: &UsageTotals) -> Result<(), LedgerError> {
        let slot = self.totals.entry(key).or_default();
        *slot = slot.checked_add(delta)?;
        Ok(())
    }

    /// Adds every key of `other` (a fold of another part of the log: the
    /// totals are exact sums, so the split cannot change the result).
    pub fn merge(&mut self, other: UsageFold) -> Result<(), LedgerError> {
        if self.totals.is_empty() {
            self.totals = other.totals;
            return Ok(());
        }
        for (key, totals) in other.totals {
            self.add(key, &totals)?;
        }
        Ok(())
    }

    pub fn get(&self, key: &UsageKey) -> Option<&UsageTotals> {
        self.totals.get(key)
    }

    /// Sets `key`'s totals, whatever they were.
    pub fn insert(&mut self, key: UsageKey, totals: UsageTotals) {
        self.totals.insert(key, totals);
    }

    pub fn iter(&self) -> impl Iterator<Item = (&UsageKey, &UsageTotals)> {
        self.totals.iter()
    }

    pub fn len(&self) -> usize {
        self.totals.len()
    }

    pub fn is_empty(&self) -> bool {
        self.totals.is_empty()
    }
}

#[cfg(test)]
#[path = "fold_tests.rs"]
mod tests;
