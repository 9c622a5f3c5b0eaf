//! The tenants with a writer in this process: one look-up task and one
//! writer task per active tenant, started on its first request and retired
//! after `idle_after` without work.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::group::MemoryBudget;
use crate::group::{RoundCommitter, RoundStats};
use crate::look_ups::{FreshKeys, KeyTaken};
use crate::recent::RecentEntries;
use crate::store::Storage;

use super::config::default_committers;
use super::group_loop::run;
use super::look_up::look_up;
use super::queues::{Queues, TenantQueue};
use super::stats::{QueueDepth, WriterStats};
use super::{CommittedHeads, Stage, WriterConfig};

/// Hands requests to their tenant's writer.
#[derive(Clone)]
pub struct Writers {
    pub(super) storage: Storage,
    pub(super) config: WriterConfig,
    pub(super) queues: Arc<Queues>,
    pub(super) stats: Arc<WriterStats>,
    pub(super) recent: Arc<RecentEntries>,
    pub(super) commits: RoundCommitter,
    pub(super) round_stats: Arc<RoundStats>,
    pub(super) budget: Arc<MemoryBudget>,
    /// Free keys in a row across every tenant (`crate::look_ups`).
    pub(super) fresh_keys: FreshKeys,
    /// Told every commit of this process.
    pub(super) heads: CommittedHeads,
}

impl Writers {
    /// Must be called inside a tokio runtime: it starts the committers.
    pub fn new(storage: Storage, config: WriterConfig) -> Self {
        let round_stats = Arc::<RoundStats>::default();
        // At least one: every group commits in a commit round (zero once
        // meant each group in a transaction of its own, a path now gone).
        let committers = config
            .committers
            .unwrap_or_else(|| default_committers(&storage))
            .max(1);
        let commits = RoundCommitter::start(storage.clone(), committers, round_stats.clone());
        Self {
            commits,
            round_stats,
            budget: Arc::default(),
            fresh_keys: FreshKeys::default(),
            heads: CommittedHeads::default(),
            storage,
            config,
            queues: Arc::default(),
            stats: Arc::default(),
            recent: Arc::new(RecentEntries::new(config.recent_entries_bytes)),
        }
    }

    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    pub fn stats(&self) -> &WriterStats {
        &self.stats
    }

    /// The heads this process's commits moved, for whoever waits on them.
    pub fn heads(&self) -> &CommittedHeads {
        &self.heads
    }

    /// What the writers remember, against the process's limit.
    pub fn memory_budget(&self) -> &MemoryBudget {
        &self.budget
    }

    /// The rounds shared by tenants' groups, and how full they were.
    pub fn round_stats(&self) -> &RoundStats {
        &self.round_stats
    }

    /// The entries held to answer retries.
    pub fn recent(&self) -> &RecentEntries {
        &self.recent
    }

    pub fn config(&self) -> WriterConfig {
        self.config
    }

    /// How many requests wait, now; reads one atomic per tenant.
    pub fn queue_depth(&self) -> QueueDepth {
        let queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        let mut depth = QueueDepth {
            tenants: queues.len(),
            ..QueueDepth::default()
        };
        for queue in queues.values() {
            let n = queue.pending.load(Ordering::Acquire);
            depth.total += n;
            depth.max = depth.max.max(n);
        }
        depth
    }
}

impl Writers {
    pub(super) fn queue<'a>(
        &self,
        queues: &'a mut HashMap<String, TenantQueue>,
        tenant: &str,
    ) -> &'a TenantQueue {
        let alive = queues
            .get(tenant)
            .map(|q| !q.sender.is_closed())
            .unwrap_or(false);
        if !alive {
            let (sender, receiver) = mpsc::unbounded_channel();
            let (to_writer, writer_queue) = mpsc::unbounded_channel();
            let pending = Arc::new(AtomicUsize::new(0));
            let key_taken = KeyTaken::sharing(&self.fresh_keys);
            tokio::spawn(look_up(
                self.storage.clone(),
                tenant.to_owned(),
                receiver,
                to_writer,
                Stage {
                    pending: pending.clone(),
                    config: self.config,
                    stats: self.stats.clone(),
                    key_taken: key_taken.clone(),
                    commits: self.commits.clone(),
                    budget: self.budget.clone(),
                    heads: self.heads.clone(),
                },
                Arc::downgrade(&self.queues),
            ));
            tokio::spawn(run(
                tenant.to_owned(),
                writer_queue,
                Stage {
                    pending: pending.clone(),
                    config: self.config,
                    stats: self.stats.clone(),
                    key_taken: key_taken.clone(),
                    commits: self.commits.clone(),
                    budget: self.budget.clone(),
                    heads: self.heads.clone(),
                },
            ));
            queues.insert(tenant.to_owned(), TenantQueue { sender, pending });
        }
        // Present: either it was alive or it was inserted just above.
        &queues[tenant]
    }
}
