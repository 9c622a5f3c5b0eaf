//! The answer to one request.

use std::sync::Arc;

use crate::entry::StoredEntry;
use crate::rule_state::AccountSettings;

/// request as sent (it depends on nothing that can change) or, for
/// `NotFound`, resolves itself once the referenced object exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `field` names an account whose unit is already `existing_unit`.
    UnitMismatch {
        field: &'static str,
        account: String,
        existing_unit: String,
    },
    /// The hold, payment or entry `field` names does not exist.
    NotFound { field: &'static str, id: String },
    /// The request cannot apply to what it names.
    Invalid {
        field: &'static str,
        message: String,
    },
    /// The server's release of an expired hold found it already closed.
    HoldAlreadyClosed,
    /// A ledger entry sent with an intent's completion that was refused
    /// (its lease lost): nothing of the completion is written.
    Withheld,
}

/// The answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// A new entry (posted, or rejected by a ledger rule) was appended.
    Created(Arc<StoredEntry>),
    /// The key already held an entry with the same fingerprint.
    Replayed(Arc<StoredEntry>),
    /// The key already held an entry with another fingerprint.
    Conflict {
        entry_id: String,
        differing_fields: Vec<String>,
    },
    /// Refused before reaching the log; nothing is stored.
    Refused(Refusal),
    /// Account settings already as requested; nothing is stored.
    Unchanged(AccountSettings),
    /// An operation on an intent (`crate::intents`).
    Intent(super::IntentAnswer),
}
