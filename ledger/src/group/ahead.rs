//! A group decided ahead: from the writer's memory alone, on top of the
//! group still being written, so that its decision overlaps that write.

use crate::balance::AccountBalance;

use crate::entry::StoredEntry;
use crate::request::EntryKind;
use crate::rule_state::StateKey;
use crate::store::{Fence, GroupTransaction, GroupWrite};
use crate::LedgerError;

use super::memory::WriterMemory;
use super::run::decide;
use super::{Decided, Group};

/// A read the writer's memory cannot answer, while deciding ahead.
const NOT_REMEMBERED: &str = "not remembered";

/// The transaction of a group decided ahead: the head is the one the
/// writer's memory was left at (the end of the group still being written),
/// and every read fails, so that only a group whose every key was found
/// free and whose every balance and record is remembered is decided ahead.
struct FromMemory {
    fence: Fence,
}

impl GroupTransaction for FromMemory {
    async fn lock_head(&mut self, _tenant: &str) -> Result<Fence, LedgerError> {
        Ok(self.fence)
    }

    async fn entries_with_keys(
        &mut self,
        _tenant: &str,
        _keys: &[(EntryKind, &str)],
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        Err(LedgerError::Unavailable(NOT_REMEMBERED.to_owned()))
    }

    async fn balances_of(
        &mut self,
        _tenant: &str,
        _accounts: &[&str],
    ) -> Result<Vec<(String, String, AccountBalance)>, LedgerError> {
        Err(LedgerError::Unavailable(NOT_REMEMBERED.to_owned()))
    }

    async fn entries_by_ids(
        &mut self,
        _tenant: &str,
        _ids: &[&str],
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        Err(LedgerError::Unavailable(NOT_REMEMBERED.to_owned()))
    }

    async fn records_of(
        &mut self,
        _tenant: &str,
        _keys: &[StateKey],
    ) -> Result<Vec<(String, String, String)>, LedgerError> {
        Err(LedgerError::Unavailable(NOT_REMEMBERED.to_owned()))
    }

    async fn write_balances(
        &mut self,
        _tenant: &str,
        _rows: &[(&str, &str, AccountBalance)],
    ) -> Result<(), LedgerError> {
        Err(LedgerError::Unavailable(NOT_REMEMBERED.to_owned()))
    }

    async fn write_group(&mut self, _write: &GroupWrite) -> Result<(), LedgerError> {
        Err(LedgerError::Unavailable(NOT_REMEMBERED.to_owned()))
    }

    async fn commit(self) -> Result<(), LedgerError> {
        Err(LedgerError::Unavailable(NOT_REMEMBERED.to_owned()))
    }
}

/// Decides `group` on top of the group still being written, from the
/// writer's memory alone, which already holds what that group leaves
/// behind. `None` when the memory cannot answer every read (the group is
/// then decided the usual way, under the head lock, once the write before
/// it is done); the memory is then unchanged. The decisions hold only if
/// `Storage::write_ahead` finds the head where they were decided.
pub(crate) async fn ahead(group: Group<'_>, memory: &mut WriterMemory) -> Option<Decided> {
    let mut tx = FromMemory {
        fence: memory.fence()?,
    };
    decide(&mut tx, group, &mut |_, _| {}, memory).await.ok()
}
