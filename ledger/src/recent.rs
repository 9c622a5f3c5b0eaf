//! Entries this process committed or found lately, by key, so that a retry
//! is answered without the tenant's writer and without the database.
//!
//! Retries come soon after the request they repeat: a client that timed out
//! sends again within seconds, a webhook sender within minutes. Until now
//! each one cost a look-up query; the answer was already in this process a
//! moment before. A committed entry is immutable and its key never expires,
//! so an entry held here is the final answer to its key in every process and
//! forever: the replay (same fingerprint) or the conflict (another one). Only
//! committed entries are held, never the absence of one, so nothing here can
//! make a second post possible; a key missing here is looked up as before.
//!
//! Bounded by bytes, not entries (an entry's parameters may be up to the
//! body limit), across every tenant of the process: the oldest entries go
//! first, one at a time as new ones come, so no request ever pays for
//! freeing a whole generation at once.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex};

use crate::entry::StoredEntry;
use crate::request::EntryKind;

/// Default bound of [`RecentEntries`]: 64 MiB (about 78,000 usage debits of
/// the benchmark, ~860 bytes each as counted).
pub const DEFAULT_RECENT_ENTRIES_BYTES: usize = 64 * 1024 * 1024;

/// Independent locks, so two threads answering retries seldom wait for
/// each other; each holds an equal share of the bound.
const SHARDS: usize = 8;

/// What an entry is counted as: its text and the bookkeeping around it.
fn footprint(e: &StoredEntry) -> usize {
    const OVERHEAD: usize = std::mem::size_of::<StoredEntry>() + 64;
    OVERHEAD
        + e.tenant_id.len()
        + e.id.len()
        + e.upstream_id.len()
        + e.rejection_code.as_ref().map_or(0, String::len)
        + e.rejection_message.as_ref().map_or(0, String::len)
        + e.account.len()
        + e.debit_account.len()
        + e.credit_account.len()
        + e.unit.len()
        + e.params.len()
        + e.fingerprint.len()
        + e.prev_hash.len()
        + e.hash.len()
}

/// The recently committed entries of this process, by (tenant, kind, key).
#[derive(Debug)]
pub struct RecentEntries {
    shards: Vec<Mutex<Shard>>,
    /// Bytes each shard may hold.
    shard_budget: usize,
    hasher: std::collections::hash_map::RandomState,
}

/// The map's keys are already SipHash values of the key: hashing them
/// again would only cost time.
#[derive(Debug, Default)]
struct AlreadyHashed(u64);

impl Hasher for AlreadyHashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed here; fold anything else all the same.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

#[derive(Debug, Default)]
struct Shard {
    /// By the hash of the key; the entry's own tenant, kind and key are
    /// compared on every hit, so two keys of one hash only miss.
    by_key: HashMap<u64, Arc<StoredEntry>, BuildHasherDefault<AlreadyHashed>>,
    /// Oldest first, with the footprint counted when it came in.
    order: VecDeque<(u64, Arc<StoredEntry>, usize)>,
    bytes: usize,
}

impl RecentEntries {
    /// Holds up to about `budget` bytes of entries; zero holds none.
    pub fn new(budget: usize) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            shard_budget: budget / SHARDS,
            hasher: std::collections::hash_map::RandomState::new(),
        }
    }

    /// Whether anything is held.
    pub fn enabled(&self) -> bool {
        self.shard_budget > 0
    }

    fn hash(&self, tenant: &str, kind: EntryKind, key: &str) -> u64 {
        self.hasher.hash_one((tenant, kind.as_str(), key))
    }

    fn shard(&self, hash: u64) -> std::sync::MutexGuard<'_, Shard> {
        // A panic while a shard was held left it consistent (every change
        // below is a push, a pop or an insert), so its lock is taken anyway.
        self.shards[(hash as usize) % SHARDS]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The committed entry of `tenant` under (`kind`, `key`), if held here.
    pub fn get(&self, tenant: &str, kind: EntryKind, key: &str) -> Option<Arc<StoredEntry>> {
        if !self.enabled() {
            return None;
        }
        let hash = self.hash(tenant, kind, key);
        let found = self.shard(hash).by_key.get(&hash).cloned()?;
        (found.tenant_id == tenant && found.kind == kind && found.upstream_id == key)
            .then_some(found)
    }

    /// Holds `entry`, which must be committed. Entries of no key (account
    /// settings) are not held: they are not answered by key.
    pub fn remember(&self, entry: &Arc<StoredEntry>) {
        if !self.enabled() || !entry.kind.keyed_by_request() {
            return;
        }
        let size = footprint(entry);
        if size > self.shard_budget {
            return;
        }
        let hash = self.hash(&entry.tenant_id, entry.kind, &entry.upstream_id);
        let mut shard = self.shard(hash);
        if let Some(held) = shard.by_key.get(&hash) {
            if held.tenant_id == entry.tenant_id && held.seq == entry.seq {
                // Already held (found again by a look-up): keep its place.
                return;
            }
        }
        shard.by_key.insert(hash, entry.clone());
        shard.order.push_back((hash, entry.clone(), size));
        shard.bytes += size;
        while shard.bytes > self.shard_budget {
            let Some((old_hash, old, old_size)) = shard.order.pop_front() else {
                break;
            };
            shard.bytes -= old_size;
            // The key may since hold a newer entry (another tenant's key of
            // the same hash): only this one goes.
            if shard
                .by_key
                .get(&old_hash)
                .is_some_and(|held| Arc::ptr_eq(held, &old))
            {
                shard.by_key.remove(&old_hash);
            }
        }
    }

    /// Entries held now, and the bytes they are counted as.
    pub fn size(&self) -> (usize, usize) {
        self.shards.iter().fold((0, 0), |(n, b), s| {
            let s = s.lock().unwrap_or_else(|p| p.into_inner());
            (n + s.by_key.len(), b + s.bytes)
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::entry::EntryStatus;
    use chrono::Utc;
    use rust_decimal::Decimal;

    fn entry(tenant: &str, seq: i64, key: &str, params: usize) -> Arc<StoredEntry> {
        Arc::new(StoredEntry {
            tenant_id: tenant.into(),
            seq,
            id: format!("ent_{seq}"),
            kind: EntryKind::UsageDebit,
            upstream_id: key.into(),
            status: EntryStatus::Posted,
            rejection_code: None,
            rejection_message: None,
            account: "cust_1".into(),
            debit_account: "cust_1".into(),
            credit_account: "@revenue".into(),
            amount: Decimal::ONE,
            unit: "USD".into(),
            params: "x".repeat(params),
            fingerprint: "sha256:00".into(),
            recorded_at: Utc::now(),
            balance_after: crate::balance::WideDecimal::from(1),
            prev_hash: String::new(),
            hash: String::new(),
        })
    }

    #[test]
    fn an_entry_is_found_only_under_its_own_tenant_kind_and_key() {
        let recent = RecentEntries::new(1 << 20);
        recent.remember(&entry("t1", 1, "k1", 10));
        let found = recent.get("t1", EntryKind::UsageDebit, "k1").unwrap();
        assert_eq!(found.seq, 1);
        assert!(recent.get("t2", EntryKind::UsageDebit, "k1").is_none());
        assert!(recent.get("t1", EntryKind::Payment, "k1").is_none());
        assert!(recent.get("t1", EntryKind::UsageDebit, "k2").is_none());
    }

    #[test]
    fn the_oldest_entries_go_first_and_the_bound_holds() {
        // One shard's share is 1/8 of the budget; entries of ~1 KiB.
        let budget = 8 * 16 * 1024;
        let recent = RecentEntries::new(budget);
        for seq in 0..2_000 {
            recent.remember(&entry("t", seq, &format!("k{seq}"), 1_000));
        }
        let (held, bytes) = recent.size();
        assert!(bytes <= budget, "{bytes} bytes held, bound {budget}");
        assert!(held > 50, "the bound is used: {held} held");
        assert!(recent.get("t", EntryKind::UsageDebit, "k1999").is_some());
        assert!(recent.get("t", EntryKind::UsageDebit, "k0").is_none());
    }

    #[test]
    fn an_entry_remembered_twice_is_held_once() {
        let recent = RecentEntries::new(1 << 20);
        recent.remember(&entry("t", 7, "k1", 10));
        recent.remember(&entry("t", 7, "k1", 10));
        assert_eq!(recent.size().0, 1);
        let one = recent.size().1;
        recent.remember(&entry("t", 8, "k2", 10));
        assert_eq!(recent.size().1, 2 * one);
    }

    #[test]
    fn zero_holds_nothing_and_an_entry_larger_than_a_share_is_not_held() {
        let none = RecentEntries::new(0);
        none.remember(&entry("t", 1, "k", 10));
        assert!(none.get("t", EntryKind::UsageDebit, "k").is_none());
        let small = RecentEntries::new(8 * 1024);
        small.remember(&entry("t", 1, "k", 4_096));
        assert!(small.get("t", EntryKind::UsageDebit, "k").is_none());
        assert_eq!(small.size(), (0, 0));
    }
}
