//! A tenant's group in a round shared with other tenants
//! ([`RoundCommitter`]): decided under its head lock on the round's
//! transaction, or written there once decided ahead. The writer sees the
//! same [`DecidedWrite`] as from a transaction of its own; only the commit
//! is shared.

use tokio::sync::oneshot;

use crate::decide::Decision;
use crate::names::is_system_account;
use crate::request::EntryRequest;
use crate::rule_state::StateKey;
use crate::store::{Fence, GroupWrite, ReadAhead};

use super::committer::{RoundCommitter, RoundWork};
use crate::LedgerError;

use super::memory::WriterMemory;
use super::pending::{Committed, DecidedWrite, PendingWrite};
use super::run::decide;
use super::Group;

/// What a group decided in a round hands back to its writer, before the
/// round commits: the memory lent to it, and its decisions (with the
/// indexes of those final before the commit) or why it could not decide.
type Handed = (
    WriterMemory,
    Result<(Vec<Decision>, Fence, Fence, Vec<usize>), LedgerError>,
);

fn committer_stopped() -> LedgerError {
    LedgerError::Unavailable("the committer stopped before the group ran".to_owned())
}

/// Like [`super::decide_in_transaction`], in the next commit round: the group is
/// decided under its head lock on the round's transaction and its rows are
/// written there; the returned write resolves when the round commits. The
/// memory is lent to the round and handed back with the decisions.
pub(crate) async fn decide_in_round(
    commits: &RoundCommitter,
    group: Group<'_>,
    final_now: &mut (dyn FnMut(usize, &Decision) + Send),
    memory: &mut WriterMemory,
) -> Result<DecidedWrite, LedgerError> {
    // Owned copies: the round runs on the committer's task. A copy costs
    // about a microsecond a request, against the fsync it shares.
    let Group {
        tenant,
        requests,
        absent,
    } = group;
    let owned: Vec<EntryRequest> = requests.iter().map(|i| (*i).clone()).collect();
    let absent = absent.to_vec();
    let lent = std::mem::replace(memory, memory.empty_like());
    let (hand, handed) = oneshot::channel::<Handed>();
    let owner = tenant.to_owned();
    let reads = read_ahead(tenant, requests, &lent);
    let work: RoundWork = Box::new(move |mut tx| {
        Box::pin(async move {
            let mut memory = lent;
            let refs: Vec<&EntryRequest> = owned.iter().collect();
            let group = Group::looked_up(&owner, &refs, &absent);
            let mut finals = Vec::new();
            let decided = decide(&mut tx, group, &mut |i, _| finals.push(i), &mut memory).await;
            let decided = match decided {
                Ok(decided) => decided,
                Err(e) => {
                    memory.forget();
                    let shared = e.shared();
                    let _ = hand.send((memory, Err(e)));
                    return Err(shared);
                }
            };
            // The decisions go back before the write: a write that fails
            // reaches the writer through the round's answer, as the write of
            // a group of its own would.
            let heads = (decided.start, decided.end);
            let _ = hand.send((memory, Ok((decided.decisions, heads.0, heads.1, finals))));
            Ok(decided.write)
        })
    });
    let committed = commits.submit(tenant, requests.len(), Some(reads), work);
    match handed.await {
        Ok((returned, decided)) => {
            *memory = returned;
            let (decisions, start, end, finals) = decided?;
            for i in finals {
                final_now(i, &decisions[i]);
            }
            let write: PendingWrite =
                Box::pin(
                    async move { committed.await.unwrap_or_else(|_| Err(committer_stopped())) },
                );
            Ok(DecidedWrite {
                decisions,
                write,
                start,
                end,
            })
        }
        // Never run: its round could not begin, or the committer stopped.
        Err(_) => Err(match committed.await {
            Ok(Err(e)) => e,
            _ => committer_stopped(),
        }),
    }
}

/// Like [`super::commit_group_with`], in the next commit round: decided
/// there ([`decide_in_round`]) and committed with it. `memory` is
/// forgotten if the write fails (its commit may have happened or not).
pub(crate) async fn commit_in_round(
    commits: &RoundCommitter,
    group: Group<'_>,
    final_now: &mut (dyn FnMut(usize, &Decision) + Send),
    memory: &mut WriterMemory,
) -> Result<Committed, LedgerError> {
    decide_in_round(commits, group, final_now, memory)
        .await?
        .committed(memory)
        .await
}

/// The write of a group decided ahead, in the round that is next when the
/// returned future is first polled (after the write before it is done):
/// only on top of `start`. A group with nothing to write still checks its
/// head: its refusals were decided on the state at `start`, so it is
/// written as a head moved from `start` to where it is.
pub(crate) fn write_ahead_in_round(
    commits: RoundCommitter,
    tenant: String,
    requests: usize,
    start: Fence,
    write: Option<GroupWrite>,
) -> PendingWrite {
    Box::pin(async move {
        let write = write.unwrap_or_else(|| GroupWrite {
            tenant,
            entries: Vec::new(),
            balances: Vec::new(),
            records: Vec::new(),
            start,
            head: start.head,
        });
        commits
            .submit_write(requests, write)
            .await
            .unwrap_or_else(|_| Err(committer_stopped()))
    })
}

/// What a group of `requests` will read that `memory` does not hold: the
/// balances and settings of the accounts its requests name (those of holds,
/// refunds and reversals are found only while deciding, and read then).
fn read_ahead(tenant: &str, requests: &[&EntryRequest], memory: &WriterMemory) -> ReadAhead {
    let mut accounts: Vec<String> = requests
        .iter()
        .flat_map(|i| i.named_accounts())
        .filter(|a| memory.balances_of(a).is_none())
        .map(str::to_owned)
        .collect();
    accounts.sort_unstable();
    accounts.dedup();
    let mut records: Vec<StateKey> = requests
        .iter()
        .flat_map(|i| i.named_accounts())
        .filter(|a| !is_system_account(a))
        .map(|a| StateKey::Account(a.to_owned()))
        .filter(|k| memory.record(k).is_none())
        .collect();
    records.sort_unstable();
    records.dedup();
    ReadAhead {
        tenant: tenant.to_owned(),
        accounts,
        records,
    }
}
