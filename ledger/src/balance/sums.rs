//! Sums of postings over a part of the log, exact at any size.
//!
//! A rebuild adds up the log in parts (seq ranges or heap blocks read at
//! once), each summed exactly as [`WideDecimal`]s and then added into the
//! balances: the order of the parts does not change the totals.

use hashbrown::HashMap;

use super::account::{BalanceProjection, Side};
use super::wide::WideDecimal;

/// Debits and credits per unit and account over some entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PostingSums {
    by_unit: HashMap<String, HashMap<String, [WideDecimal; 2]>>,
}

fn index(side: Side) -> usize {
    match side {
        Side::Debit => 0,
        Side::Credit => 1,
    }
}

impl PostingSums {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `amount` to one side of one account.
    pub fn add(&mut self, account: &str, unit: &str, side: Side, amount: &WideDecimal) {
        let sums = self
            .by_unit
            .entry_ref(unit)
            .or_default()
            .entry_ref(account)
            .or_default();
        sums[index(side)] += amount;
    }

    /// Adds every sum of `other` (another part of the log).
    pub fn merge(&mut self, other: PostingSums) {
        if self.by_unit.is_empty() {
            *self = other;
            return;
        }
        for (unit, accounts) in other.by_unit {
            for (account, [debits, credits]) in accounts {
                self.add(&account, &unit, Side::Debit, &debits);
                self.add(&account, &unit, Side::Credit, &credits);
            }
        }
    }

    /// Adds the sums into `into`'s debits and credits, exactly.
    pub fn add_into(&self, into: &mut BalanceProjection) {
        for (unit, accounts) in &self.by_unit {
            for (account, sums) in accounts {
                for side in [Side::Debit, Side::Credit] {
                    into.add(account, unit, side, &sums[index(side)]);
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn w(s: &str) -> WideDecimal {
        WideDecimal::parse(s).unwrap()
    }

    #[test]
    fn parts_add_up_exactly_at_any_size() {
        let mut first = PostingSums::new();
        first.add("cust", "USD", Side::Debit, &w("0.5"));
        let mut second = PostingSums::new();
        second.add("cust", "USD", Side::Debit, &w("0.5"));
        second.add(
            "cust",
            "USD",
            Side::Debit,
            &w("9999999999999999999999999999"),
        );
        second.add(
            "cust",
            "USD",
            Side::Debit,
            &w("9999999999999999999999999999"),
        );
        second.add("@revenue", "USD", Side::Credit, &w("1"));
        first.merge(second);
        let mut p = BalanceProjection::new();
        first.add_into(&mut p);
        let cust = p.get("cust", "USD").unwrap();
        assert_eq!(cust.debits.to_string(), "19999999999999999999999999999");
        assert!(cust.credits.is_zero());
        assert_eq!(p.get("@revenue", "USD").unwrap().credits.to_string(), "1");
    }
}
