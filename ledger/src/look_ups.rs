//! Whether a tenant's keys are looked up before its writer.
//!
//! The look-up in front of the writer answers replays and conflicts without
//! a group, and tells the group which keys are free. When traffic is new
//! usage (the common case: a retry is the exception), every look-up finds
//! nothing, and it costs a round trip and an index probe per key that the
//! group's INSERT repeats anyway: the UNIQUE constraint on the key is what
//! makes a second post impossible, look-up or not. So after a run of keys
//! all found free, keys go to the writer unlooked, marked free; a key that
//! was taken after all fails its group on the constraint (nothing is
//! written), the writer decides the group again with every key looked up
//! under the head lock, and reports it here: look-ups resume until the next
//! run of free keys.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The look-up task's side: decides, batch by batch, whether to look up.
#[derive(Debug)]
pub(crate) struct KeyLookUps {
    /// Free keys in a row after which look-ups stop; zero never stops them.
    after: usize,
    /// Keys looked up in a row that held no entry.
    free_in_a_row: usize,
    taken: KeyTaken,
}

/// The writer's side: reports a group whose write found a key taken.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyTaken(Arc<AtomicBool>);

impl KeyTaken {
    pub(crate) fn report(&self) {
        self.0.store(true, Ordering::Release);
    }
}

impl KeyLookUps {
    pub(crate) fn new(after: usize, taken: KeyTaken) -> Self {
        Self {
            after,
            free_in_a_row: 0,
            taken,
        }
    }

    /// Whether the keys of the next batch are to be looked up.
    pub(crate) fn needed(&mut self) -> bool {
        if self.taken.0.swap(false, Ordering::AcqRel) {
            self.free_in_a_row = 0;
        }
        self.after == 0 || self.free_in_a_row < self.after
    }

    /// `keys` were looked up and `found` of them held an entry.
    pub(crate) fn looked_up(&mut self, keys: usize, found: usize) {
        self.free_in_a_row = if found == 0 {
            self.free_in_a_row.saturating_add(keys)
        } else {
            0
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn look_ups_stop_after_a_run_of_free_keys_and_resume_once_a_key_is_taken() {
        let taken = KeyTaken::default();
        let mut l = KeyLookUps::new(10, taken.clone());
        assert!(l.needed());
        l.looked_up(6, 0);
        assert!(l.needed(), "6 free keys are not yet a run of 10");
        l.looked_up(4, 0);
        assert!(!l.needed(), "10 free keys in a row");
        assert!(!l.needed(), "until a key is reported taken");
        taken.report();
        assert!(l.needed(), "a taken key resumes look-ups");
        l.looked_up(9, 0);
        assert!(l.needed(), "the run starts over");
        l.looked_up(1, 0);
        assert!(!l.needed());
    }

    #[test]
    fn a_key_found_starts_the_run_over() {
        let mut l = KeyLookUps::new(10, KeyTaken::default());
        l.looked_up(9, 0);
        l.looked_up(5, 1);
        assert!(l.needed());
        l.looked_up(9, 0);
        assert!(l.needed(), "9 free since the key found");
    }

    #[test]
    fn zero_always_looks_up() {
        let mut l = KeyLookUps::new(0, KeyTaken::default());
        l.looked_up(1_000_000, 0);
        assert!(l.needed());
    }
}
