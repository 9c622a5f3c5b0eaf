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
//!
//! The run is counted twice: by the tenant, and across every tenant of the
//! process ([`FreshKeys`]). Keys go unlooked once either run is long. A
//! platform of many tenants that each post now and then would otherwise
//! look up every key for ever (300 tenants at 64 clients: ~7 keys a second
//! each, so a tenant's own run of 1,000 takes minutes, and its writer is
//! retired, forgetting the run, after a minute idle), while one tenant's
//! flood of new keys stops looking up within a second. A key found or
//! reported taken ends its tenant's run and the process-wide one: a tenant
//! that keeps replaying old keys keeps look-ups on for every tenant without
//! a run of its own, which costs them what every key cost before, and no
//! more. A replay that arrives unlooked costs its group one decision more,
//! never a wrong answer.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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

/// Keys looked up and found free in a row across every tenant of the
/// process; shared by all their [`KeyLookUps`].
#[derive(Debug, Clone, Default)]
pub(crate) struct FreshKeys(Arc<AtomicUsize>);

impl FreshKeys {
    fn free(&self, keys: usize) {
        // Relaxed: the count is a hint, read by the next batch of any
        // tenant; the UNIQUE constraint is the guarantee.
        self.0.fetch_add(keys, Ordering::Relaxed);
    }

    fn taken(&self) {
        self.0.store(0, Ordering::Relaxed);
    }

    fn run(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// The writer's side: reports a group whose write found a key taken.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyTaken {
    tenant: Arc<AtomicBool>,
    process: FreshKeys,
}

impl KeyTaken {
    /// A tenant's reporter, whose reports also end the process-wide run.
    pub(crate) fn sharing(process: &FreshKeys) -> Self {
        Self {
            tenant: Arc::default(),
            process: process.clone(),
        }
    }

    pub(crate) fn report(&self) {
        self.process.taken();
        self.tenant.store(true, Ordering::Release);
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
        if self.taken.tenant.swap(false, Ordering::AcqRel) {
            self.free_in_a_row = 0;
        }
        self.after == 0
            || (self.free_in_a_row < self.after && self.taken.process.run() < self.after)
    }

    /// `keys` were looked up and `found` of them held an entry.
    pub(crate) fn looked_up(&mut self, keys: usize, found: usize) {
        if found == 0 {
            self.free_in_a_row = self.free_in_a_row.saturating_add(keys);
            self.taken.process.free(keys);
        } else {
            self.free_in_a_row = 0;
            self.taken.process.taken();
        }
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
    fn a_run_across_tenants_stops_every_tenants_look_ups() {
        let process = FreshKeys::default();
        let mut tenants: Vec<KeyLookUps> = (0..5)
            .map(|_| KeyLookUps::new(10, KeyTaken::sharing(&process)))
            .collect();
        for t in tenants.iter_mut().take(4) {
            assert!(t.needed());
            t.looked_up(2, 0);
        }
        assert!(
            tenants[4].needed(),
            "8 free keys across tenants are not yet a run of 10"
        );
        tenants[0].looked_up(2, 0);
        assert!(
            !tenants[4].needed(),
            "a tenant that never looked up skips once the process saw 10 free keys in a row"
        );
    }

    #[test]
    fn a_key_taken_in_one_tenant_resumes_look_ups_in_all() {
        let process = FreshKeys::default();
        let reporter = KeyTaken::sharing(&process);
        let mut a = KeyLookUps::new(10, reporter.clone());
        let mut b = KeyLookUps::new(10, KeyTaken::sharing(&process));
        a.looked_up(10, 0);
        assert!(!b.needed());
        reporter.report();
        assert!(
            b.needed(),
            "a key taken in tenant a ends the process-wide run"
        );
        assert!(a.needed(), "and tenant a's own");
        a.looked_up(10, 0);
        assert!(!b.needed());
        b.looked_up(3, 1);
        let mut c = KeyLookUps::new(10, KeyTaken::sharing(&process));
        assert!(
            c.needed(),
            "a key found by tenant b ends the process-wide run"
        );
        assert!(!a.needed(), "tenant a's own run of 10 free keys stands");
    }

    #[test]
    fn zero_always_looks_up() {
        let mut l = KeyLookUps::new(0, KeyTaken::default());
        l.looked_up(1_000_000, 0);
        assert!(l.needed());
    }
}
