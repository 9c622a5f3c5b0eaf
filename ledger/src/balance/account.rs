use hashbrown::HashMap;

use super::wide::WideDecimal;

/// The running totals of one account in one unit.
///
/// Exact at any size (docs/ledger-rules.md, "Limits"): `debits` and
/// `credits` only grow, so a digit limit on them is a ceiling a tenant
/// grows into, after which its account could take no entry at all. A
/// [`WideDecimal`] stays an `i128` while the total fits one (every
/// realistic total), so the common path pays no big-integer arithmetic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountBalance {
    pub debits: WideDecimal,
    pub credits: WideDecimal,
    pub held: WideDecimal,
}

impl AccountBalance {
    /// `credits − debits`: a customer who used more than they paid is
    /// negative. Exact whatever the size of the totals.
    pub fn posted(&self) -> WideDecimal {
        &self.credits - &self.debits
    }

    /// `posted − held`.
    pub fn available(&self) -> WideDecimal {
        &self.posted() - &self.held
    }
}

/// One double-entry movement: `amount` leaves `debit_account` and reaches
/// `credit_account`, both in `unit`.
#[derive(Debug, Clone, Copy)]
pub struct Posting<'a> {
    pub debit_account: &'a str,
    pub credit_account: &'a str,
    pub amount: &'a WideDecimal,
    pub unit: &'a str,
}

/// Which total of an account an amount adds to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Debit,
    Credit,
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

    /// Applies one posting, exactly: no total has a ceiling, so a posting
    /// always applies.
    pub fn apply(&mut self, posting: &Posting<'_>) {
        self.slot(posting.debit_account, posting.unit).debits += posting.amount;
        self.slot(posting.credit_account, posting.unit).credits += posting.amount;
    }

    /// Adds `amount` to one side of one account: the fold of a set of
    /// postings grouped by account (the rebuild reads the log that way).
    /// Postings fold to the same totals whether applied one by one through
    /// [`BalanceProjection::apply`] or summed per side here: the addition
    /// is exact, so the order does not matter.
    pub fn add(&mut self, account: &str, unit: &str, side: Side, amount: &WideDecimal) {
        let balance = self.slot(account, unit);
        match side {
            Side::Debit => balance.debits += amount,
            Side::Credit => balance.credits += amount,
        }
    }

    /// Changes the amount held on an account (a hold reserves, a capture or
    /// release gives back). Held money stays posted; only `available` moves.
    pub fn add_held(&mut self, account: &str, unit: &str, delta: &WideDecimal) {
        self.slot(account, unit).held += delta;
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
    pub fn unit_total(&self, unit: &str) -> WideDecimal {
        let mut sum = WideDecimal::ZERO;
        for balance in self.by_unit.get(unit).into_iter().flat_map(|a| a.values()) {
            sum += &balance.posted();
        }
        sum
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
    use super::*;

    fn w(s: &str) -> WideDecimal {
        WideDecimal::parse(s).unwrap()
    }

    const NINES: &str = "9999999999999999999999999999";

    fn post(p: &mut BalanceProjection, debit: &str, credit: &str, amount: &str) {
        p.apply(&Posting {
            debit_account: debit,
            credit_account: credit,
            amount: &w(amount),
            unit: "USD",
        });
    }

    #[test]
    fn a_posting_moves_money_and_keeps_the_unit_at_zero() {
        let mut p = BalanceProjection::new();
        post(&mut p, "cust", "@revenue", "1.25");
        post(&mut p, "@payments", "cust", "5");
        let cust = p.get("cust", "USD").unwrap();
        assert_eq!(cust.debits, w("1.25"));
        assert_eq!(cust.credits, w("5"));
        assert_eq!(cust.posted(), w("3.75"));
        assert_eq!(p.get("@revenue", "USD").unwrap().posted(), w("1.25"));
        assert_eq!(p.unit_total("USD"), WideDecimal::ZERO);
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
            post(&mut one_by_one, debit, credit, amount);
        }
        for (debit, credit, amount) in postings.iter().rev() {
            per_side.add(credit, "USD", Side::Credit, &w(amount));
            per_side.add(debit, "USD", Side::Debit, &w(amount));
        }
        assert_eq!(one_by_one, per_side);
    }

    #[test]
    fn totals_have_no_ceiling_and_are_never_rounded() {
        let mut p = BalanceProjection::new();
        post(&mut p, "cust", "@revenue", NINES);
        post(&mut p, "cust", "@revenue", NINES);
        // rust_decimal would round this sum back; here it is exact.
        post(&mut p, "cust", "@revenue", "0.000000000000000001");
        let revenue = p.get("@revenue", "USD").unwrap();
        assert_eq!(
            revenue.credits.to_string(),
            "19999999999999999999999999998.000000000000000001"
        );
        let cust = p.get("cust", "USD").unwrap();
        assert_eq!(
            cust.posted().to_string(),
            "-19999999999999999999999999998.000000000000000001"
        );
        p.add_held("cust", "USD", &w(NINES));
        assert_eq!(
            p.get("cust", "USD").unwrap().available().to_string(),
            "-29999999999999999999999999997.000000000000000001"
        );
        assert_eq!(p.unit_total("USD"), WideDecimal::ZERO);
        // A reversal brings the totals' difference back; the totals grow.
        post(&mut p, "@revenue", "cust", NINES);
        assert_eq!(
            p.get("cust", "USD").unwrap().posted().to_string(),
            "-9999999999999999999999999999.000000000000000001"
        );
    }
}
