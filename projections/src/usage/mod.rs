//! The usage summaries: the pure fold ([`fold`]), the projector that keeps
//! the `usage_summaries` table ([`projector`]), reads, the rebuild and the
//! fresh fold `tally verify` compares with. Each engine's own SQL is in
//! its own file; the reads and the write both engines run alike are in
//! `shared.rs`; what does not touch the database is here, once. The design
//! is in `docs/usage-summaries.md`.
//!
//! A round reads the entries after the checkpoint outside any transaction
//! (the log is immutable), folds them in memory, then in one short
//! transaction locks the checkpoint row, re-checks it and adds the deltas.
//! If another process advanced the checkpoint meanwhile, the round writes
//! nothing: several `tally` processes may project one database and no
//! entry is ever counted twice.

mod changes;
mod engine;
pub mod fold;
mod postgres;
pub mod projector;
mod rows;
mod shared;
mod sqlite;
#[cfg(test)]
mod tests;
pub mod verify;
mod view;

pub use tally_ledger::entry::DAY_FORMAT;

pub use engine::{fold_usage, rebuild_usage, stored_usage, usage_checkpoint, usage_rows};
pub use fold::{UsageFold, UsageKey, UsageScan, UsageTotals, USAGE_PROJECTOR};
pub use projector::{
    project_usage, project_usage_to_head, run_usage_projector, usage_lagging_tenants, usage_lags,
    ProjectorStats, UsageLag,
};
pub use rows::{UsageQuery, UsageRead, USAGE_PAGE};
pub use view::{read_usage, summarise, Granularity, UsagePeriod, UsageView};
