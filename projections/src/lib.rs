//! Projections: pure folds of the tally log.
//!
//! Nothing here does I/O. The same fold runs inside the ledger's write
//! transaction (over one group of new entries, starting from the stored
//! balances of the accounts they touch) and over the whole log for a rebuild
//! or `tally verify`; using one function for both is what makes "the rebuild
//! is identical" true by construction rather than by testing luck.

mod balance;
mod sums;
pub mod total;
pub mod wide;

pub use balance::{AccountBalance, BalanceOverflow, BalanceProjection, Posting, Side};
pub use sums::PostingSums;
