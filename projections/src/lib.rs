//! The read models of the tally log, kept beside the ledger and never
//! needed by it: usage summaries and their projector ([`usage`]),
//! statements and balances at a time ([`statement`], [`balances`]), the
//! rebuild of stored balances, and the checks of every read model against
//! a fresh fold of the log ([`verify`]). The ledger offers them a narrow
//! interface (`tally_ledger::store`: reads of the log, the engine's pool,
//! the tenant's head lock); each read model's SQL stands beside the code
//! that runs it, one file per engine.

pub mod balances;
pub mod statement;
pub mod usage;
pub mod verify;
