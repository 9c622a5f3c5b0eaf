//! Builds the write of a decided group: the rows the store inserts and
//! upserts, and the head it moves.

use crate::chain::entry_hash;
use crate::decide::{GroupOutcome, GroupState};
use crate::entry::StoredEntry;
use crate::hex_text::lower_hex;
use crate::store::{Fence, GroupWrite};

/// The write of a group decided on `fence` (`None`: nothing to write), and
/// the head it leaves. Takes the new entries out of `outcome`.
pub(super) fn build_write(
    tenant: &str,
    fence: Fence,
    state: &GroupState,
    outcome: &mut GroupOutcome,
) -> (Option<GroupWrite>, Fence) {
    let mut end = fence;
    if outcome.new_entries.is_empty() {
        return (None, end);
    }
    end.head = state.head;
    let balances = outcome
        .changed_balances(state)
        .into_iter()
        .map(|(a, u, b)| (a.to_owned(), u.to_owned(), b))
        .collect();
    let write = GroupWrite {
        tenant: tenant.to_owned(),
        entries: std::mem::take(&mut outcome.new_entries),
        balances,
        records: outcome
            .changed_records(state)
            .into_iter()
            .map(|(k, v)| v.to_row(k))
            .collect(),
        start: fence,
        head: state.head,
    };
    assert_chained(&write.entries, fence, end);
    (Some(write), end)
}

/// The rows a write hands the engine continue the chain from the fence it
/// was decided on, with no gap, and end at the head it stores: each `seq`
/// one past the one before, each `prev_hash` the hash before it. A broken
/// link written would be found only by the next `tally verify`, after
/// entries had been chained onto it; so it stops the writer here. A string
/// comparison an entry, and one hash recomputed a write (the last entry's,
/// over the very struct the engine binds): cheap next to the write.
fn assert_chained(entries: &[StoredEntry], start: Fence, end: Fence) {
    let mut seq = start.head.seq;
    let mut hash = lower_hex(&start.head.hash);
    for entry in entries {
        assert_eq!(entry.seq, seq + 1, "the next seq is the head's + 1");
        assert_eq!(
            entry.prev_hash, hash,
            "an entry links to the hash before it"
        );
        seq = entry.seq;
        hash.clone_from(&entry.hash);
    }
    assert_eq!(seq, end.head.seq, "a write ends at the head it stores");
    assert_eq!(
        hash,
        lower_hex(&end.head.hash),
        "a write ends at the head it stores"
    );
    if let Some(last) = entries.last() {
        let prev = if entries.len() > 1 {
            entries[entries.len() - 2].hash.clone()
        } else {
            lower_hex(&start.head.hash)
        };
        let Some(prev) = crate::chain::decode_hash(&prev) else {
            panic!("a hash the chain computed is 64 hex digits");
        };
        assert_eq!(
            last.hash,
            lower_hex(&entry_hash(&prev, last)),
            "the chain hash covers the row that is written"
        );
    }
}
