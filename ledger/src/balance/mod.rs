//! The balance arithmetic a decision needs: per-account totals, their
//! exact sums and the fold of postings into them.
//!
//! The same fold runs inside the ledger's write transaction (over one group
//! of new entries, starting from the stored balances of the accounts they
//! touch) and over the whole log for a rebuild or `tally verify`; using one
//! function for both is what makes "the rebuild is identical" true by
//! construction rather than by testing luck.

mod account;
mod sums;
mod wide;
#[cfg(test)]
mod wide_tests;

pub use account::{AccountBalance, BalanceProjection, Posting, Side};
pub use sums::PostingSums;
pub use wide::WideDecimal;
