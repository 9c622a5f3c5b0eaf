//! Stored balances as a read model: reads now and at a past seq, and their
//! check against a fresh fold of the log (`tally verify`). The writer keeps
//! them current with each group, and the ledger rebuilds them
//! ([`rebuild_balances`]); the arithmetic is the ledger's
//! (`tally_ledger::balance`).

pub mod read;
pub mod verify;

pub use read::{read_balance, BalanceView};
pub use tally_ledger::store::rebuild_balances;
