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
//! Bounded: past [`MEMORY_LIMIT`] accounts or records it starts over, and
//! so does a writer whose next lesson would take every writer of the
//! process together past [`PROCESS_MEMORY_LIMIT`] ([`MemoryBudget`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::balance::AccountBalance;

use crate::rule_state::{StateKey, StateValue};
use crate::store::Fence;

/// Most accounts, and most rule-state records, remembered per tenant
/// (~200 bytes each: at most a few tens of MB).
pub const MEMORY_LIMIT: usize = 100_000;

/// Most accounts and records remembered by all the writers of one process
/// together (~200 bytes each: about 200 MB). With 10,000 tenants each
/// posting now and then, each remembers a few accounts; a few tenants with
/// huge account sets cannot make the sum grow past this.
pub const PROCESS_MEMORY_LIMIT: usize = 1_000_000;

/// What the writers of one process remember, counted together.
#[derive(Debug)]
pub struct MemoryBudget {
    remembered: AtomicUsize,
    limit: usize,
}

impl MemoryBudget {
    pub fn new(limit: usize) -> Self {
        Self {
            remembered: AtomicUsize::new(0),
            limit,
        }
    }

    /// Accounts and records remembered now, by every writer.
    pub fn remembered(&self) -> usize {
        self.remembered.load(Ordering::Relaxed)
    }

    pub fn limit(&self) -> usize {
        self.limit
    }
}

impl Default for MemoryBudget {
    fn default() -> Self {
        Self::new(PROCESS_MEMORY_LIMIT)
    }
}

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
    /// Whether every balance and rule-state record the tenant has stored
    /// is remembered, so that one not remembered is known not to exist:
    /// true from a head at seq 0 (an empty chain has neither, both being
    /// folded from entries) while nothing was forgotten or taken back. A
    /// tenant's new accounts are then decided from memory too, instead of
    /// each group reading them under the lock.
    complete: bool,
    /// When a group decided from this memory was last refused its write.
    refused_at: Option<Instant>,
    /// The process's budget, and what this memory counts in it.
    budget: Option<Arc<MemoryBudget>>,
    counted: usize,
}

impl Drop for WriterMemory {
    fn drop(&mut self) {
        if let Some(budget) = &self.budget {
            budget.remembered.fetch_sub(self.counted, Ordering::Relaxed);
        }
    }
}

impl WriterMemory {
    /// Remembers nothing yet, and counts what it will in `budget`.
    pub fn within(budget: Arc<MemoryBudget>) -> Self {
        let mut memory = Self::default();
        memory.budget = Some(budget);
        memory
    }

    /// Remembers nothing, within the same budget as `self`.
    pub(crate) fn empty_like(&self) -> Self {
        let mut memory = Self::default();
        memory.budget = self.budget.clone();
        memory
    }

    /// Brings this memory's count in the budget up to date.
    fn recount(&mut self) {
        let now = self.balances.len() + self.records.len();
        if let Some(budget) = &self.budget {
            if now >= self.counted {
                budget
                    .remembered
                    .fetch_add(now - self.counted, Ordering::Relaxed);
            } else {
                budget
                    .remembered
                    .fetch_sub(self.counted - now, Ordering::Relaxed);
            }
        }
        self.counted = now;
    }

    /// Whether learning `more` would take every writer past the budget.
    fn over_budget(&self, more: usize) -> bool {
        self.budget
            .as_ref()
            .is_some_and(|b| b.remembered() + more > b.limit)
    }

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
        self.complete = false;
        self.balances.clear();
        self.records.clear();
        // Cleared maps keep their capacity: a writer that starts over
        // shrinks them so the budget's count is what it holds.
        self.balances.shrink_to_fit();
        self.records.shrink_to_fit();
        self.recount();
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
        // An account relearned after `to` existed at `to` too: dropping
        // it leaves a stored balance unremembered.
        self.complete = false;
        self.balances.retain(|_, l| l.at <= seq);
        self.records.retain(|_, l| l.at <= seq);
        self.fence = Some(to);
        self.recount();
    }

    pub(crate) fn balances_of(&self, account: &str) -> Option<&[(String, AccountBalance)]> {
        match self.balances.get(account) {
            Some(l) => Some(l.value.as_slice()),
            None if self.complete => Some(&[]),
            None => None,
        }
    }

    pub(crate) fn record(&self, key: &StateKey) -> Option<&Option<StateValue>> {
        const NONE_STORED: &Option<StateValue> = &None;
        match self.records.get(key) {
            Some(l) => Some(&l.value),
            None if self.complete => Some(NONE_STORED),
            None => None,
        }
    }

    /// The head was locked at `fence`: at seq 0 the tenant has no balance
    /// and no rule state stored, and this memory knows all of it from now
    /// on (until it forgets).
    pub(crate) fn locked_at(&mut self, fence: Fence) {
        self.check(fence);
        if fence.head.seq != 0 {
            return;
        }
        // Anything remembered at seq 0 must be an absence; should the
        // database hold rows no entry made, the memory claims nothing.
        // Scanned only here: every group locks the head, and a memory at
        // any other seq may hold up to `MEMORY_LIMIT` accounts.
        let nothing_stored = self.balances.values().all(|l| l.value.is_empty())
            && self.records.values().all(|l| l.value.is_none());
        if nothing_stored {
            self.fence = Some(fence);
            self.complete = true;
        }
    }

    /// A group wrote what this memory will not learn: it no longer knows
    /// everything stored.
    pub(crate) fn incomplete(&mut self) {
        self.complete = false;
    }

    /// Whether every stored balance and record is remembered (tests).
    pub fn is_complete(&self) -> bool {
        self.complete
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
        let records: Vec<_> = records.into_iter().collect();
        if self.balances.len() + balances.len() > MEMORY_LIMIT
            || self.records.len() > MEMORY_LIMIT
            || self.over_budget(balances.len() + records.len())
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
        self.recount();
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

    /// A head locked at seq 0 has nothing stored: an account or record
    /// never remembered is then known not to exist, until the memory
    /// forgets, is rewound, or a group changes what it will not learn.
    /// A head locked anywhere else claims nothing.
    #[test]
    fn an_empty_chain_makes_the_memory_know_everything_until_it_forgets() {
        let unknown = StateKey::Account("never".to_owned());
        let mut m = WriterMemory::default();
        m.locked_at(fence(5, 0));
        assert!(!m.is_complete());
        assert!(m.balances_of("never").is_none());

        let mut m = WriterMemory::default();
        m.locked_at(fence(0, 0));
        assert!(m.is_complete());
        assert_eq!(m.balances_of("never"), Some(&[][..]));
        assert_eq!(m.record(&unknown), Some(&None));
        m.learn(fence(1, 0), one_account(), []);
        m.locked_at(fence(1, 0));
        assert!(m.is_complete(), "the same fence keeps what it knows");
        assert_eq!(m.balances_of("a").map(<[_]>::len), Some(1));
        m.locked_at(fence(2, 0));
        assert!(!m.is_complete(), "another process moved the head");
        assert!(m.balances_of("never").is_none());

        let mut m = WriterMemory::default();
        m.locked_at(fence(0, 0));
        m.learn(fence(1, 0), one_account(), []);
        m.rewind(fence(0, 0));
        assert!(!m.is_complete(), "a rewind takes back what it knew");
        assert!(m.balances_of("never").is_none());

        let mut m = WriterMemory::default();
        m.locked_at(fence(0, 0));
        m.incomplete();
        assert!(m.balances_of("never").is_none());

        // Something stored that no entry made: nothing is claimed.
        let mut m = WriterMemory::default();
        m.learn(fence(0, 0), one_account(), []);
        m.locked_at(fence(0, 0));
        assert!(!m.is_complete());
    }

    #[test]
    fn the_writers_of_a_process_share_one_budget() {
        let budget = Arc::new(MemoryBudget::new(10));
        let many = |n: usize, prefix: &str| -> HashMap<_, _> {
            (0..n)
                .map(|i| (format!("{prefix}{i}"), Vec::new()))
                .collect()
        };
        let mut a = WriterMemory::within(budget.clone());
        let mut b = WriterMemory::within(budget.clone());
        a.learn(fence(1, 0), many(6, "a"), []);
        b.learn(fence(1, 0), many(3, "b"), []);
        assert_eq!(budget.remembered(), 9);
        // Two more would take the process past 10: b starts over first.
        b.learn(fence(2, 0), many(2, "c"), []);
        assert_eq!((a.accounts(), b.accounts()), (6, 2));
        assert_eq!(budget.remembered(), 8);
        a.rewind(fence(0, 0));
        assert_eq!(budget.remembered(), 2, "a rewind gives back what it drops");
        drop(b);
        assert_eq!(budget.remembered(), 0, "a retired writer gives back all");
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
