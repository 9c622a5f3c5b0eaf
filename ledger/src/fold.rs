//! Folding the log into balances, the one definition every reader of the
//! log shares (verification, `as_of_seq` balances, the rebuild): which kinds
//! move money, and how holds move `held`.

use std::collections::HashMap;

use crate::balance::WideDecimal;
use crate::balance::{BalanceProjection, Posting};
use rust_decimal::Decimal;

use crate::entry::{EntryStatus, StoredEntry};
use crate::request::EntryKind;
use crate::LedgerError;

/// Whether a posted entry of this kind moves `amount` from its debit to its
/// credit account. Holds and releases change `held` only; settings and
/// intent entries move nothing.
pub fn moves_money(kind: EntryKind) -> bool {
    !matches!(
        kind,
        EntryKind::Hold | EntryKind::HoldRelease | EntryKind::AccountSettings
    ) && !kind.is_intent()
}

/// The kinds whose effect on balances is not a plain posting.
pub const HOLD_KINDS_SQL: &str = "('hold', 'hold_capture', 'hold_release', 'account_settings')";
/// The kinds that do not move money, for SQL filters.
pub const NON_MONEY_KINDS_SQL: &str = "('hold', 'hold_release', 'account_settings', \
     'intent_claimed', 'intent_released', 'intent_succeeded', 'intent_failed')";

/// A hold that is reserved and not yet captured, released or expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenHold {
    pub account: String,
    pub unit: String,
    pub amount: Decimal,
}

/// Balances (held included) and open holds, folded from the log in seq order.
#[derive(Debug, Default)]
pub struct LogFold {
    pub balances: BalanceProjection,
    pub open_holds: HashMap<String, OpenHold>,
}

/// The exact value of a stored amount. The amount parser admits at most 18
/// fractional digits, so an amount with more is a corrupt row.
fn exact(amount: Decimal, upstream_id: &str) -> Result<WideDecimal, LedgerError> {
    WideDecimal::from_decimal(amount).ok_or_else(|| {
        LedgerError::Corrupt(format!(
            "amount {amount} of {upstream_id} has more than 18 fractional digits"
        ))
    })
}

impl LogFold {
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds one entry; rejected entries change nothing.
    pub fn apply(&mut self, e: &StoredEntry) -> Result<(), LedgerError> {
        if e.status != EntryStatus::Posted {
            return Ok(());
        }
        if moves_money(e.kind) {
            self.balances.apply(&Posting {
                debit_account: &e.debit_account,
                credit_account: &e.credit_account,
                amount: &exact(e.amount, &e.upstream_id)?,
                unit: &e.unit,
            });
        }
        self.apply_holds(
            e.kind,
            &e.upstream_id,
            &e.account,
            &e.unit,
            e.amount,
            &e.params,
        )
    }

    /// The part of a posted entry's effect that is not a posting: `held`
    /// changes and the zero balance a settings entry opens. The rebuild
    /// folds postings in bulk and calls this for [`HOLD_KINDS_SQL`] rows.
    pub fn apply_holds(
        &mut self,
        kind: EntryKind,
        upstream_id: &str,
        account: &str,
        unit: &str,
        amount: Decimal,
        params: &str,
    ) -> Result<(), LedgerError> {
        match kind {
            EntryKind::AccountSettings => self.balances.touch(account, unit),
            EntryKind::Hold => {
                self.balances
                    .add_held(account, unit, &exact(amount, upstream_id)?);
                self.open_holds.insert(
                    upstream_id.to_owned(),
                    OpenHold {
                        account: account.to_owned(),
                        unit: unit.to_owned(),
                        amount,
                    },
                );
            }
            EntryKind::HoldCapture | EntryKind::HoldRelease => {
                let hold_id = serde_json::from_str::<serde_json::Value>(params)
                    .ok()
                    .and_then(|p| p.get("hold_id").and_then(|v| v.as_str()).map(str::to_owned))
                    .ok_or_else(|| {
                        LedgerError::Corrupt(format!(
                            "{} {upstream_id} names no hold_id",
                            kind.as_str()
                        ))
                    })?;
                let hold = self.open_holds.remove(&hold_id).ok_or_else(|| {
                    LedgerError::Corrupt(format!(
                        "{} {upstream_id} closes hold {hold_id}, which is not open",
                        kind.as_str()
                    ))
                })?;
                let released = -exact(hold.amount, &hold_id)?;
                self.balances.add_held(&hold.account, &hold.unit, &released);
            }
            _ => {}
        }
        Ok(())
    }
}
