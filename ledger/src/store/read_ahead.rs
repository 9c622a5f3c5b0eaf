//! Reads of a shared round made for all its pieces at once: each piece
//! says beforehand which heads, balances and rule-state records its group
//! will read ([`ReadAhead`]); the round reads them for every piece in one
//! statement per table, and each piece's reads are answered from those
//! rows ([`PieceTx`]) wherever they cover what it asks, else read on the
//! round's transaction as usual. Everything is read inside the round's
//! transaction, under the write lock, so the rows are the ones a read of
//! the piece's own would have found.

use std::collections::{HashMap, HashSet};

use crate::balance::AccountBalance;
use crate::entry::StoredEntry;
use crate::intent::EntryKind;
use crate::state::StateKey;
use crate::LedgerError;

use super::engine_group::EngineGroup;
use super::transaction::{Fence, GroupTransaction, GroupWrite};

/// What one piece's group is going to read.
#[derive(Debug, Default)]
pub(crate) struct ReadAhead {
    pub tenant: String,
    /// Accounts whose balances (every unit) it reads.
    pub accounts: Vec<String>,
    /// Rule-state records it reads.
    pub records: Vec<StateKey>,
}

/// The rows read ahead for one piece.
#[derive(Debug, Default)]
pub(crate) struct ReadAheadRows {
    /// The head, locked (created at seq 0 if absent); `None`: not read.
    pub fence: Option<Fence>,
    pub accounts: HashSet<String>,
    /// (account, unit, balance) of those accounts.
    pub balances: Vec<(String, String, AccountBalance)>,
    pub records_asked: HashSet<StateKey>,
    /// (kind, key, value) of those records that exist.
    pub records: Vec<(String, String, String)>,
}

impl ReadAheadRows {
    /// Empty rows for each ask, knowing what it asked for, and the index
    /// of each ask's tenant, for an engine's reads to fill.
    pub(crate) fn for_asks<'a>(asks: &[&'a ReadAhead]) -> (Vec<Self>, HashMap<&'a str, usize>) {
        let rows = asks
            .iter()
            .map(|ask| ReadAheadRows {
                accounts: ask.accounts.iter().cloned().collect(),
                records_asked: ask.records.iter().cloned().collect(),
                ..ReadAheadRows::default()
            })
            .collect();
        let of = asks
            .iter()
            .enumerate()
            .map(|(i, ask)| (ask.tenant.as_str(), i))
            .collect();
        (rows, of)
    }
}

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
            "a piece of a shared round does not commit on its own".to_owned(),
        ))
    }
}
