//! The entry points of the write path: a group decided and committed, a
//! group decided with its write left to run on its own, and a group
//! decided ahead from the writer's memory. The writer commits only in
//! commit rounds (`super::round`): a group decided ahead is written in
//! one; [`commit_group`] and [`decide_in_transaction`], a group in a transaction of
//! its own, serve tests and tools.

use crate::decide::Decision;
use crate::request::EntryRequest;
use crate::store::{GroupTransaction, GroupWrite, Storage};

use super::committer::RoundCommitter;
use crate::LedgerError;

use super::memory::WriterMemory;
use super::pending::{DecidedWrite, PendingWrite};
use super::round::write_ahead_in_round;
use super::run::ahead;
use super::run::decide;
use super::Group;

/// Decides `requests` for `tenant` in one transaction (SPEC §6). Either
/// every decision is committed or none is, and the error says so.
pub async fn commit_group(
    storage: &Storage,
    tenant: &str,
    requests: &[&EntryRequest],
) -> Result<Vec<Decision>, LedgerError> {
    let mut memory = WriterMemory::default();
    let group = Group::new(tenant, requests);
    let decided = decide_in_transaction(storage, group, &mut |_, _| {}, &mut memory).await?;
    Ok(decided.committed(&mut memory).await?.decisions)
}

/// Like [`commit_group`], and tells `final_now` (index,
/// decision) about each decision that is final before the commit: a
/// replay of an entry committed by an earlier transaction. Its caller
/// can answer it at once instead of waiting for the group's fsync.
/// `memory` is what the tenant's writer remembers between its groups.
/// `group.absent[i]` says the key of its request `i` was looked up since
/// the last group and held no entry, so the group need not look it up
/// again (if it was taken meanwhile, the UNIQUE constraint fails the
/// group, which then must be run again with `absent` empty).
#[cfg(test)]
pub(crate) async fn commit_group_with(
    storage: &Storage,
    group: Group<'_>,
    final_now: &mut (dyn FnMut(usize, &Decision) + Send),
    memory: &mut WriterMemory,
) -> Result<Vec<Decision>, LedgerError> {
    let decided = decide_in_transaction(storage, group, final_now, memory).await?;
    Ok(decided.committed(memory).await?.decisions)
}

/// Opens a group transaction, locks the head and decides `requests`
/// under it, like [`commit_group_with`]; returns the decisions
/// and, to be run on their own, the write and commit still due on that
/// transaction. `memory` already holds what the group leaves behind: if
/// the write fails, it must forget.
pub(crate) async fn decide_in_transaction(
    storage: &Storage,
    group: Group<'_>,
    final_now: &mut (dyn FnMut(usize, &Decision) + Send),
    memory: &mut WriterMemory,
) -> Result<DecidedWrite, LedgerError> {
    let mut tx = storage.begin_group().await?;
    let decided = decide(&mut tx, group, final_now, memory)
        .await
        .map(|d| DecidedWrite {
            decisions: d.decisions,
            write: pending_write(tx, d.write),
            start: d.start,
            end: d.end,
        });
    if decided.is_err() {
        memory.forget();
    }
    decided
}

/// Decides `requests` from the writer's memory alone, on top of the
/// group still being written (see [`ahead`]); `None` when the
/// memory cannot answer every read. The returned write may start at
/// once: it goes into the next commit round of `commits`, and writes
/// nothing unless it finds the head where these decisions were made.
/// If it fails, `memory` must forget.
pub(crate) async fn decide_ahead(
    group: Group<'_>,
    memory: &mut WriterMemory,
    commits: &RoundCommitter,
) -> Option<DecidedWrite> {
    let decided = ahead(group, memory).await?;
    let start = decided.start;
    let write = write_ahead_in_round(
        commits.clone(),
        group.tenant.to_owned(),
        group.requests.len(),
        start,
        decided.write,
    );
    Some(DecidedWrite {
        decisions: decided.decisions,
        write,
        start,
        end: decided.end,
    })
}

/// The write of a group decided on `tx`. With nothing to write, `tx` is
/// committed all the same: that releases the head lock before the group
/// counts as done, so a group decided ahead, waiting for that lock, goes on
/// at once (a dropped transaction is rolled back only once its connection
/// is back in the pool).
fn pending_write<T: GroupTransaction + 'static>(tx: T, write: Option<GroupWrite>) -> PendingWrite {
    Box::pin(async move {
        match write {
            Some(write) => write.apply(tx).await,
            None => tx.commit().await,
        }
    })
}
