//! Reads of a commit round made for all its pieces at once: each piece
//! says beforehand which heads, balances and rule-state records its group
//! will read ([`ReadAhead`]); the round reads them for every piece in one
//! statement per table, and each piece's reads are answered from those
//! rows (`super::piece_tx::PieceTx`) wherever they cover what it asks, else read on the
//! round's transaction as usual. Everything is read inside the round's
//! transaction, under the write lock, so the rows are the ones a read of
//! the piece's own would have found.

use std::collections::{HashMap, HashSet};

use crate::balance::AccountBalance;
use crate::rule_state::StateKey;

use super::transaction::Fence;

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
            .collect::<HashMap<_, _>>();
        assert_eq!(of.len(), asks.len(), "one ask per tenant in a round");
        (rows, of)
    }
}
