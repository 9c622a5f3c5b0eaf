//! Replay and conflict: the answer to a request whose key already holds
//! an entry.

use std::sync::Arc;

use crate::entry::StoredEntry;
use crate::fingerprint::differing_fields;
use crate::request::EntryRequest;

use super::Decision;

/// The answer to a request whose key already holds `existing`: a replay of
/// it when the fingerprints match, a conflict otherwise. Entries are
/// immutable and keys never expire, so this answer is final the moment the
/// entry is committed, whoever reads it.
pub fn decide_existing(existing: &Arc<StoredEntry>, request: &EntryRequest) -> Decision {
    if request.fingerprint.is_text_of(&existing.fingerprint) {
        Decision::Replayed(existing.clone())
    } else {
        Decision::Conflict {
            entry_id: existing.id.clone(),
            differing_fields: differing_fields(&existing.params, &request.params_map),
        }
    }
}
