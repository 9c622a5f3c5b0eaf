//! Builds the write of a decided group: the rows the store inserts and
//! upserts, and the head it moves.

use crate::decide::{GroupOutcome, GroupState};
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
    (Some(write), end)
}
