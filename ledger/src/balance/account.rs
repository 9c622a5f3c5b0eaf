use hashbrown::HashMap;
use rust_decimal::Decimal;

use super::total;

/// The running totals of one account in one unit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountBalance {
    pub debits: Decimal,
    pub credits: Decimal,
    pub held: Decimal,
}

impl AccountBalance {
    /// `credits − debits`: a customer who used more than they paid is negative.
    ///
    /// Exact for every balance the ledger stores or folds: their totals,
    /// `posted` and `available` included, stay inside the amount domain
    /// ([`super::total`]), which a `Decimal` subtraction never rounds. (A
    /// total stored before that rule may lie outside; the subtraction then
    /// saturates rather than panics.)
    pub fn posted(&self) -> Decimal {
        self.credits.saturating_sub(self.debits)
    }

    pub fn available(&self) -> Decimal {
        self.posted().saturating_sub(self.held)
    }

    /// The first of this balance's totals (`debits`, `credits`, `held`,
    /// `posted`, `available`) outside the amount domain; `None` when all
    /// are inside.
    pub fn total_out_of_domain(&self) -> Option<&'static str> {
        if !total::in_domain(self.debits) {
            return Some("debits");
        }
        if !total::in_domain(self.credits) {
            return Some("credits");
        }
        if !total::in_domain(self.held) {
            return Some("held");
        }
        let Some(posted) = total::sub(self.credits, self.debits) else {
            return Some("posted");
        };
        if total::sub(posted, self.held).is_none() {
            return Some("available");
        }
        None
    }
}

/// One double-entry movement: `amount` leaves `debit_account` and reaches
/// `credit_account`, both in `unit`.
#[derive(Debug, Clone, Copy)]
pub struct Posting<'a> {
    pub debit_account: &'a str,
    pub credit_account: &'a str,
    pub amount: Decimal,
    pub unit: &'a str,
}

/// Which total of an account an amount adds to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Debit,
    Credit,
}

/// A total of `account` would leave the amount domain ([`super::total`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BalanceOverflow {
    pub account: String,
}

/// Balances per unit and account.
///
/// Keyed unit-first so a lookup borrows `&str` and allocates nothing: the
/// rebuild folds millions of entries through `apply`. The maps are
/// hashbrown's with foldhash (seeded per process, not the standard
/// library's SipHash): SipHash and the repeated probes of a two-level
/// lookup were ~17 % of a SQLite balance rebuild.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BalanceProjection {
    by_unit: HashMap<String, HashMap<String, AccountBalance>>,
}

impl BalanceProjection {
    pub fn new() -> Self {
        Self::default()
    }

    /// Seeds the projection with a stored balance (the write path loads the
    /// touched accounts before folding a group on top of them).
    pub fn insert(&mut self, account: &str, unit: &str, balance: AccountBalance) {
        self.by_unit
            .entry(unit.to_owned())
            .or_default()
            .insert(account.to_owned(), balance);
    }

    pub fn get(&self, account: &str, unit: &str) -> Option<&AccountBalance> {
        self.by_unit
            .get(unit)
            .and_then(|accounts| accounts.get(account))
    }

    /// Applies one posting, adding exactly ([`super::total::add`]). When a
    /// total would leave the amount domain nothing is changed.
    pub fn apply(&mut self, posting: &Posting<'_>) -> Result<(), BalanceOverflow> {
        let debited = total::add(
            self.get(posting.debit_account, posting.unit)
                .map(|b| b.debits)
                .unwrap_or_default(),
            posting.amount,
        )
        .ok_or_else(|| BalanceOverflow {
            account: posting.debit_account.to_owned(),
        })?;
        let credited = total::add(
            self.get(posting.credit_account, posting.unit)
                .map(|b| b.credits)
                .unwrap_or_default(),
            posting.amount,
        )
        .ok_or_else(|| BalanceOverflow {
            account: posting.credit_account.to_owned(),
        })?;
        self.slot(posting.debit_account, posting.unit).debits = debited;
        self.slot(posting.credit_account, posting.unit).credits = credited;
        Ok(())
    }

    /// Adds `amount` to one side of one account: the fold of a set of
    /// postings grouped by account (the rebuild reads the log that way).
    /// Postings fold to the same totals whether applied one by one through
    /// [`BalanceProjection::apply`] or summed per side here: decimal addition
    /// is exact, so the order does not matter. When the total would leave
    /// the amount domain nothing is changed.
    pub fn add(
        &mut self,
        account: &str,
        unit: &str,
        side: Side,
        amount: Decimal,
    ) -> Result<(), BalanceOverflow> {
        let balance = self.slot(account, unit);
        let sum = match side {
            Side::Debit => &mut balance.debits,
            Side::Credit => &mut balance.credits,
        };
        *sum = total::add(*sum, amount).ok_or_else(|| BalanceOverflow {
            account: account.to_owned(),
        })?;
        Ok(())
    }

    /// Changes the amount held on an account (a hold reserves, a capture or
    /// release gives back). Held money stays posted; only `available` moves.
    pub fn add_held(
        &mut self,
        account: &str,
        unit: &str,
        delta: Decimal,
    ) -> Result<(), BalanceOverflow> {
        let balance = self.slot(account, unit);
        balance.held = total::add(balance.held, delta).ok_or_else(|| BalanceOverflow {
            account: account.to_owned(),
        })?;
        Ok(())
    }

    /// Makes sure the account has a balance in `unit` (zero if new): an
    /// account whose settings fix its unit before any money moves.
    pub fn touch(&mut self, account: &str, unit: &str) {
        self.slot(account, unit);
    }

    fn slot(&mut self, account: &str, unit: &str) -> &mut AccountBalance {
        // `entry_ref` allocates the key only when it is new.
        self.by_unit
            .entry_ref(unit)
            .or_default()
            .entry_ref(account)
            .or_default()
    }

    /// Every (account, unit, balance), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, &AccountBalance)> {
        self.by_unit.iter().flat_map(|(unit, accounts)| {
            accounts
                .iter()
                .map(move |(account, balance)| (account.as_str(), unit.as_str(), balance))
        })
    }

    /// Sum of `posted` over every account of `unit`; double entry keeps it zero.
    pub fn unit_total(&self, unit: &str) -> Decimal {
        self.by_unit
            .get(unit)
            .map(|accounts| accounts.values().map(AccountBalance::posted).sum())
            .unwrap_or_default()
    }

    pub fn len(&self) -> usize {
        self.by_unit.values().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[test]
    fn a_posting_moves_money_and_keeps_the_unit_at_zero() {
        let mut p = BalanceProjection::new();
        p.apply(&Posting {
            debit_account: "cust",
            credit_account: "@revenue",
            amount: d("1.25"),
            unit: "USD",
        })
        .unwrap();
        p.apply(&Posting {
            debit_account: "@payments",
            credit_account: "cust",
            amount: d("5"),
            unit: "USD",
        })
        .unwrap();
        let cust = p.get("cust", "USD").unwrap();
        assert_eq!(cust.debits, d("1.25"));
        assert_eq!(cust.credits, d("5"));
        assert_eq!(cust.posted(), d("3.75"));
        assert_eq!(p.get("@revenue", "USD").unwrap().posted(), d("1.25"));
        assert_eq!(p.unit_total("USD"), Decimal::ZERO);
        assert!(p.get("cust", "credits").is_none());
    }

    #[test]
    fn adding_per_side_equals_applying_postings() {
        let postings = [
            ("a", "@r", "1.5"),
            ("b", "@r", "2"),
            ("@p", "a", "10"),
            ("a", "b", "0.25"),
        ];
        let mut one_by_one = BalanceProjection::new();
        let mut per_side = BalanceProjection::new();
        for (debit, credit, amount) in postings {
            one_by_one
                .apply(&Posting {
                    debit_account: debit,
                    credit_account: credit,
                    amount: d(amount),
                    unit: "USD",
                })
                .unwrap();
        }
        for (debit, credit, amount) in postings.iter().rev() {
            per_side
                .add(credit, "USD", Side::Credit, d(amount))
                .unwrap();
            per_side.add(debit, "USD", Side::Debit, d(amount)).unwrap();
        }
        assert_eq!(one_by_one, per_side);
    }

    #[test]
    fn leaving_the_domain_changes_nothing() {
        let nines = d("9999999999999999999999999999");
        let mut p = BalanceProjection::new();
        p.insert(
            "cust",
            "USD",
            AccountBalance {
                debits: nines,
                ..Default::default()
            },
        );
        let before = p.clone();
        let err = p
            .apply(&Posting {
                debit_account: "cust",
                credit_account: "@revenue",
                amount: d("1"),
                unit: "USD",
            })
            .unwrap_err();
        assert_eq!(err.account, "cust");
        assert_eq!(p, before);
        // rust_decimal would round this sum back to `nines`.
        let err = p
            .add("cust", "USD", Side::Debit, d("0.000000000000000001"))
            .unwrap_err();
        assert_eq!(err.account, "cust");
        assert_eq!(p, before);
        p.add_held("cust", "USD", nines).unwrap();
        let held = p.clone();
        assert!(p.add_held("cust", "USD", d("1")).is_err());
        assert_eq!(p, held);
        // A new account starts at zero.
        p.add("new", "USD", Side::Credit, nines).unwrap();
        assert_eq!(p.get("new", "USD").unwrap().credits, nines);
        assert!(p.add("new2", "USD", Side::Credit, Decimal::MAX).is_err());
    }

    #[test]
    fn derived_totals_are_checked_too() {
        let nines = d("9999999999999999999999999999");
        let b = |debits: &str, credits: &str, held: &str| AccountBalance {
            debits: d(debits),
            credits: d(credits),
            held: d(held),
        };
        assert_eq!(b("1", "2", "0").total_out_of_domain(), None);
        assert_eq!(
            AccountBalance {
                debits: nines,
                credits: Decimal::ZERO,
                held: Decimal::ZERO
            }
            .total_out_of_domain(),
            None
        );
        assert_eq!(
            AccountBalance {
                debits: nines,
                credits: d("0.000000000000000001"),
                held: Decimal::ZERO
            }
            .total_out_of_domain(),
            Some("posted")
        );
        assert_eq!(
            AccountBalance {
                debits: Decimal::ZERO,
                credits: nines,
                held: d("-1")
            }
            .total_out_of_domain(),
            Some("available")
        );
    }
}
