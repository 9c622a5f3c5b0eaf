//! What a tenant's writer remembers between its groups: the balances and
//! rule state it has read or written, so the next group does not read them
//! again.
//!
//! Remembering is only sound while nobody else wrote: the memory is fenced
//! by the head it last saw (seq, hash, generation). Every group locks the
//! head first; if the head is not the fence (another process appended, or
//! `tally projections rebuild` rewrote the projections and bumped the
//! generation), everything is forgotten and read again. A group whose
//! commit may or may not have happened forgets everything too. A group known
//! not to have written anything (its write found a key taken) takes back only
//! what it and the groups decided on top of it taught ([`WriterMemory::rewind`]):
//! each remembered thing carries the head sequence it was learned at.
//! Bounded: past [`MEMORY_LIMIT`] accounts or records it starts over.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::balance::AccountBalance;

use crate::state::{StateKey, StateValue};
use crate::store::Fence;

/// Most accounts, and most rule-state records, remembered per tenant
/// (~200 bytes each: at most a few tens of MB).
pub const MEMORY_LIMIT: usize = 100_000;

/// After a group decided from memory could not be written (another process
/// appended to the tenant, most likely), how long the writer decides its
/// groups under the head lock instead: while another process appends, a
/// group decided from memory would nearly always find the head moved and be
/// decided twice.
pub const CONTENDED_FOR: Duration = Duration::from_secs(1);

/// A remembered value and the head sequence of the group that taught it.
#[derive(Debug)]
struct Learned<T> {
    at: i64,
    value: T,
}

/// See the module documentation. `Default` remembers nothing.
#[derive(Debug, Default)]
pub struct WriterMemory {
    fence: Option<Fence>,
    /// Every unit's balance of each remembered account (empty: none
    /// stored), with the head sequence it was learned at.
    balances: HashMap<String, Learned<Vec<(String, AccountBalance)>>>,
    /// Rule-state records; `None` remembers that there is none.
    records: HashMap<StateKey, Learned<Option<StateValue>>>,
    /// When a group decided from this memory was last refused its write.
    refused_at: Option<Instant>,
}

impl WriterMemory {
    /// Keeps what is remembered only if it was remembered at `fence`.
    pub(crate) fn check(&mut self, fence: Fence) {
        if self.fence != Some(fence) {
            self.forget();
        }
    }

    /// The head what is remembered is valid at; `None` when nothing is.
    pub(crate) fn fence(&self) -> Option<Fence> {
        self.fence
    }

    pub fn forget(&mut self) {
        self.fence = None;
        self.balances.clear();
        self.records.clear();
    }

    /// A group decided from this memory could not be written: forgets
    /// everything, and [`WriterMemory::contended`] holds for
    /// [`CONTENDED_FOR`].
    pub(crate) fn refused(&mut self) {
        self.forget();
        self.refused_at = Some(Instant::now());
    }

    /// Whether a group decided from this memory was refused its write less
    /// than [`CONTENDED_FOR`] ago: groups are then decided under the lock.
    pub(crate) fn contended(&self) -> bool {
        self.refused_at.is_some_and(|t| t.elapsed() < CONTENDED_FOR)
    }

    /// The groups learned after `to` wrote nothing (one found a key taken,
    /// and the rest were decided on top of it): what they taught is
    /// forgotten, and the memory is what it was at `to`.
    pub(crate) fn rewind(&mut self, to: Fence) {
        let seq = to.head.seq;
        self.balances.retain(|_, l| l.at <= seq);
        self.records.retain(|_, l| l.at <= seq);
        self.fence = Some(to);
    }

    pub(crate) fn balances_of(&self, account: &str) -> Option<&[(String, AccountBalance)]> {
        self.balances.get(account).map(|l| l.value.as_slice())
    }

    pub(crate) fn record(&self, key: &StateKey) -> Option<&Option<StateValue>> {
        self.records.get(key).map(|l| &l.value)
    }

    /// After a group that ended at `fence` (committed, or wrote nothing):
    /// `balances` are the complete stored balances of the accounts it read,
    /// `records` the value (or absence) of every record it read or wrote.
    pub(crate) fn learn(
        &mut self,
        fence: Fence,
        balances: HashMap<String, Vec<(String, AccountBalance)>>,
        records: impl IntoIterator<Item = (StateKey, Option<StateValue>)>,
    ) {
        if self.balances.len() + balances.len() > MEMORY_LIMIT || self.records.len() > MEMORY_LIMIT
        {
            self.forget();
        }
        self.fence = Some(fence);
        let at = fence.head.seq;
        self.balances.extend(
            balances
                .into_iter()
                .map(|(k, value)| (k, Learned { at, value })),
        );
        self.records.extend(
            records
                .into_iter()
                .map(|(k, value)| (k, Learned { at, value })),
        );
    }

    /// Accounts remembered (for tests and metrics).
    pub fn accounts(&self) -> usize {
        self.balances.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::Head;

    fn fence(seq: i64, generation: i64) -> Fence {
        Fence {
            head: Head {
                seq,
                hash: [seq as u8; 32],
            },
            generation,
        }
    }

    fn one_account() -> HashMap<String, Vec<(String, AccountBalance)>> {
        HashMap::from([(
            "a".to_owned(),
            vec![("USD".to_owned(), AccountBalance::default())],
        )])
    }

    #[test]
    fn a_moved_head_or_generation_forgets_everything() {
        let mut m = WriterMemory::default();
        m.learn(fence(3, 0), one_account(), []);
        m.check(fence(3, 0));
        assert!(m.balances_of("a").is_some());
        m.check(fence(4, 0));
        assert!(m.balances_of("a").is_none());

        m.learn(fence(4, 0), one_account(), []);
        m.check(fence(4, 1));
        assert!(
            m.balances_of("a").is_none(),
            "a rebuild bumped the generation"
        );
    }

    #[test]
    fn a_rewind_forgets_what_groups_after_the_fence_taught() {
        let mut m = WriterMemory::default();
        m.learn(fence(3, 0), one_account(), []);
        let b = HashMap::from([("b".to_owned(), Vec::new())]);
        m.learn(fence(5, 0), b, []);
        let a_again = HashMap::from([("a".to_owned(), Vec::new())]);
        m.learn(fence(7, 0), a_again, []);
        m.rewind(fence(3, 0));
        assert_eq!(m.fence(), Some(fence(3, 0)));
        assert!(m.balances_of("a").is_none(), "a changed after seq 3");
        assert!(m.balances_of("b").is_none(), "b learned after seq 3");
        m.learn(fence(4, 0), one_account(), []);
        m.rewind(fence(4, 0));
        assert!(m.balances_of("a").is_some(), "learned at the fence itself");
    }

    #[test]
    fn memory_is_bounded() {
        let mut m = WriterMemory::default();
        let many: HashMap<_, _> = (0..MEMORY_LIMIT)
            .map(|i| (format!("acct{i}"), Vec::new()))
            .collect();
        m.learn(fence(1, 0), many, []);
        assert_eq!(m.accounts(), MEMORY_LIMIT);
        m.learn(fence(2, 0), one_account(), []);
        assert_eq!(m.accounts(), 1, "over the limit it starts over");
    }
}
