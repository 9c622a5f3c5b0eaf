//! The round's transaction as one piece of a commit round sees it: its
//! reads answered from what the round read ahead (`super::read_ahead`)
//! where that covers them, else on the transaction.

use std::collections::HashSet;

use crate::balance::AccountBalance;
use crate::entry::StoredEntry;
use crate::request::EntryKind;
use crate::rule_state::StateKey;
use crate::LedgerError;

use super::engine_group::EngineGroup;
use super::read_ahead::ReadAheadRows;
use super::transaction::{Fence, GroupTransaction, GroupWrite};

/// The round's transaction as one piece sees it.
pub(crate) struct PieceTx<'t> {
    pub(crate) tx: &'t mut EngineGroup,
    pub(crate) rows: ReadAheadRows,
}

impl GroupTransaction for PieceTx<'_> {
    async fn lock_head(&mut self, tenant: &str) -> Result<Fence, LedgerError> {
        match self.rows.fence {
            Some(fence) => Ok(fence),
            None => self.tx.lock_head(tenant).await,
        }
    }

    async fn entries_with_keys(
        &mut self,
        tenant: &str,
        keys: &[(EntryKind, &str)],
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        self.tx.entries_with_keys(tenant, keys).await
    }

    async fn balances_of(
        &mut self,
        tenant: &str,
        accounts: &[&str],
    ) -> Result<Vec<(String, String, AccountBalance)>, LedgerError> {
        if !accounts.iter().all(|a| self.rows.accounts.contains(*a)) {
            return self.tx.balances_of(tenant, accounts).await;
        }
        let wanted: HashSet<&str> = accounts.iter().copied().collect();
        Ok(self
            .rows
            .balances
            .iter()
            .filter(|(a, _, _)| wanted.contains(a.as_str()))
            .cloned()
            .collect())
    }

    async fn entries_by_ids(
        &mut self,
        tenant: &str,
        ids: &[&str],
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        self.tx.entries_by_ids(tenant, ids).await
    }

    async fn records_of(
        &mut self,
        tenant: &str,
        keys: &[StateKey],
    ) -> Result<Vec<(String, String, String)>, LedgerError> {
        if !keys.iter().all(|k| self.rows.records_asked.contains(k)) {
            return self.tx.records_of(tenant, keys).await;
        }
        let wanted: HashSet<(&str, &str)> = keys.iter().map(|k| (k.kind(), k.key())).collect();
        Ok(self
            .rows
            .records
            .iter()
            .filter(|(kind, key, _)| wanted.contains(&(kind.as_str(), key.as_str())))
            .cloned()
            .collect())
    }

    async fn write_balances(
        &mut self,
        tenant: &str,
        rows: &[(&str, &str, AccountBalance)],
    ) -> Result<(), LedgerError> {
        self.tx.write_balances(tenant, rows).await
    }

    async fn write_group(&mut self, write: &GroupWrite) -> Result<(), LedgerError> {
        self.tx.write_group(write).await
    }

    /// A piece never commits: its round does.
    async fn commit(self) -> Result<(), LedgerError> {
        Err(LedgerError::Unavailable(
            "a piece of a commit round does not commit on its own".to_owned(),
        ))
    }
}
