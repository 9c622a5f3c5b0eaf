//! Intents: any costly action outside the ledger done once, under a fenced
//! lease, its outcome stored for ever (docs/intents.md).
//!
//! An intent's every change of state is an entry of its tenant's log
//! (`intent_claimed`, `intent_released`, `intent_succeeded`,
//! `intent_failed`), decided by the tenant's writer like any entry
//! (`decide/intents.rs`), so one live lease holds across every process
//! sharing the database, and `complete`'s ledger entries commit in the same
//! group as its outcome. Its current state is a rule-state record
//! (`rule_state` kind `intent`), folded from those entries.
//!
//! - `record.rs`: the record, its statuses, the status a reader sees.
//! - `ops.rs`: the four operations as the writer decides them, parsed.

mod ops;
mod record;

pub use ops::{
    fields, ClaimOp, CompleteOp, FailOp, HeartbeatOp, IntentOp, LeaseToken, MAX_INTENT_ID_BYTES,
};
pub use record::{
    claim_upstream_id, intent_id_of_upstream, IntentError, IntentOutcome, IntentRecord,
    IntentStatus,
};
