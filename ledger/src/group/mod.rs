//! One group of a tenant's requests, decided and written in one transaction
//! (SPEC §6). The write path runs one way: the writer (`crate::writer`)
//! hands a group here; it is loaded under the tenant's head lock
//! ([`load`]), decided by [`crate::decide`] and turned into the rows it
//! writes ([`run`]); the store (`crate::store`) only reads and writes those
//! rows, through [`crate::store::GroupTransaction`].
//!
//! - [`commit`]: `commit_group*`, `decide_in_transaction`, `decide_ahead`:
//!   the entry points the writer calls.
//! - [`run`]: one group run: load, decide, build its write, teach the
//!   writer's memory what it leaves; or decided ahead, from that memory
//!   alone, on top of the group still being written.
//! - [`committer`]: the committer tasks and their rounds: the groups of
//!   many tenants decided on one transaction and committed together,
//!   through the store's I/O (read ahead, savepoints, the joint write).
//! - [`round`]: a tenant's group in a round, committed with the others.
//! - [`memory`]: what a tenant's writer remembers between its groups.

mod commit;
mod committer;
mod load;
mod memory;
mod pending;
mod round;
mod run;

use crate::decide::Decision;
use crate::request::EntryRequest;
use crate::store::{Fence, GroupWrite};

pub use commit::commit_group;
#[cfg(test)]
pub(crate) use commit::commit_group_with;
pub(crate) use commit::decide_ahead;
#[cfg(test)]
pub(crate) use commit::decide_in_transaction;
pub use committer::{RoundCommitter, RoundStats, MAX_ROUND_REQUESTS, MAX_ROUND_WORK};
pub use memory::{MemoryBudget, WriterMemory, CONTENDED_FOR, MEMORY_LIMIT, PROCESS_MEMORY_LIMIT};
pub(crate) use pending::{Committed, DecidedWrite, PendingWrite};
pub(crate) use round::{commit_in_round, decide_in_round};

/// The requests of one group of a tenant, as one value down the write
/// path (see [`commit_group_with`]).
#[derive(Clone, Copy)]
pub(crate) struct Group<'a> {
    pub tenant: &'a str,
    pub requests: &'a [&'a EntryRequest],
    /// Per request (or empty): its key was found free just before.
    pub absent: &'a [bool],
}

impl<'a> Group<'a> {
    /// A group none of whose keys was looked up before.
    pub fn new(tenant: &'a str, requests: &'a [&'a EntryRequest]) -> Self {
        Self {
            tenant,
            requests,
            absent: &[],
        }
    }

    /// A group whose keys were looked up before: `absent[i]` says the key
    /// of `requests[i]` was found free.
    pub fn looked_up(
        tenant: &'a str,
        requests: &'a [&'a EntryRequest],
        absent: &'a [bool],
    ) -> Self {
        Self {
            tenant,
            requests,
            absent,
        }
    }
}

/// What one group decided, owned, so that its write can run on its own
/// while the writer decides the next group.
pub(crate) struct Decided {
    pub decisions: Vec<Decision>,
    /// `None` when the group has nothing to write.
    pub write: Option<GroupWrite>,
    /// The head the group was decided on.
    pub start: Fence,
    /// The head its write leaves (`start` when it appends nothing).
    pub end: Fence,
}
