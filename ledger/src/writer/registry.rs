//! The tenants with a writer in this process: one look-up task and one
//! writer task per active tenant, started on its first request and retired
//! after `idle_after` without work; and admission, the way in: a call's
//! requests answered from the recent entries when they can be, else queued
//! for the tenant's writer within `queue_capacity`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::look_up::{FreshKeys, KeyTaken};
use crate::decide::{decide_existing, Decision};
use crate::group::{MemoryBudget, RoundCommitter, RoundStats};
use crate::recent::RecentEntries;
use crate::request::EntryRequest;
use crate::store::Storage;
use crate::LedgerError;

use super::config::default_committers;
use super::group_loop::run;
use super::look_up::{look_up, Queues, TenantQueue};
use super::stats::{QueueDepth, WriterStats};
use super::{CommittedHeads, Job, Stage, WriterConfig};

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

// Admission: the entry requests of one call are answered from the recent entries
// when they can be, else queued for the tenant's writer within
// `queue_capacity`, and their decisions awaited.
impl Writers {
    /// Queues `request` and waits for its committed decision.
    pub async fn decide(
        &self,
        tenant: &str,
        request: EntryRequest,
    ) -> Result<Decision, LedgerError> {
        let mut decisions = self.decide_all(tenant, vec![request]).await?;
        decisions
            .pop()
            .ok_or_else(|| LedgerError::Unavailable("the writer returned no decision".into()))
    }

    /// Queues `requests` together, in order, and waits for their decisions
    /// (one per request, same order). They are decided in the same group, so a
    /// later request sees the earlier ones: a repeated key is a replay.
    ///
    /// Dropping the returned future does not withdraw the requests: once
    /// queued they are decided, exactly as if the client had timed out.
    pub async fn decide_all(
        &self,
        tenant: &str,
        requests: Vec<EntryRequest>,
    ) -> Result<Vec<Decision>, LedgerError> {
        self.queue_all(tenant, requests)?.decisions().await
    }

    /// Queues `requests` now, before this returns, and hands back what
    /// awaits their decisions. Calls queued one after another are decided
    /// in that order, whoever awaits them: a later call's repeated key is
    /// the replay (or the conflict), never the earlier one's.
    pub fn queue_all(
        &self,
        tenant: &str,
        requests: Vec<EntryRequest>,
    ) -> Result<Queued, LedgerError> {
        if requests.is_empty() {
            return Ok(self.answered(Vec::new()));
        }
        if let Some(decisions) = self.answered_from_recent(tenant, &requests) {
            return Ok(self.answered(decisions));
        }
        let n = requests.len();
        let (reply, answer) = oneshot::channel();
        let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        let queue = self.queue(&mut queues, tenant);
        let before = queue.pending.fetch_add(n, Ordering::AcqRel);
        if before + n > self.config.queue_capacity.max(n) {
            queue.pending.fetch_sub(n, Ordering::AcqRel);
            return Err(LedgerError::Overloaded);
        }
        let job = Job {
            requests,
            absent: Vec::new(),
            reply,
        };
        if queue.sender.send(job).is_err() {
            queue.pending.fetch_sub(n, Ordering::AcqRel);
            return Err(LedgerError::Unavailable(
                "the tenant's writer stopped".to_owned(),
            ));
        }
        Ok(Queued {
            recent: self.recent.clone(),
            awaited: Awaited::Queued { answer, n },
        })
    }

    fn answered(&self, decisions: Vec<Decision>) -> Queued {
        Queued {
            recent: self.recent.clone(),
            awaited: Awaited::Answered(decisions),
        }
    }

    /// Decisions of `requests` when every one of them is a key held in
    /// [`RecentEntries`]: a committed entry is the final answer to its key
    /// (a replay, or a conflict), so neither the writer nor the database is
    /// asked. Otherwise `None`, and the request goes the usual way.
    pub(super) fn answered_from_recent(
        &self,
        tenant: &str,
        requests: &[EntryRequest],
    ) -> Option<Vec<Decision>> {
        if !self.recent.enabled() {
            return None;
        }
        let decisions = requests
            .iter()
            .map(|i| match i.kind {
                kind if !kind.keyed_by_request() => None,
                kind => self
                    .recent
                    .get(tenant, kind, &i.upstream_id)
                    .map(|e| decide_existing(&e, i)),
            })
            .collect::<Option<Vec<Decision>>>()?;
        self.stats
            .answered_from_recent
            .fetch_add(decisions.len() as u64, Ordering::Relaxed);
        Some(decisions)
    }
}

/// Requests queued by [`Writers::queue_all`]: their decisions, once
/// committed. Dropping it does not withdraw them.
pub struct Queued {
    recent: Arc<RecentEntries>,
    awaited: Awaited,
}

enum Awaited {
    /// Answered before any writer (nothing to queue, or recent entries).
    Answered(Vec<Decision>),
    Queued {
        answer: oneshot::Receiver<Result<Vec<Decision>, LedgerError>>,
        n: usize,
    },
}

impl Queued {
    /// The decisions, one per request in order, once committed.
    pub async fn decisions(self) -> Result<Vec<Decision>, LedgerError> {
        let (answer, n) = match self.awaited {
            Awaited::Answered(decisions) => return Ok(decisions),
            Awaited::Queued { answer, n } => (answer, n),
        };
        let decisions = answer
            .await
            .map_err(|_| LedgerError::Unavailable("the tenant's writer stopped".to_owned()))??;
        assert_eq!(decisions.len(), n, "a decision per queued request");
        // Every entry answered is committed (a group's answers go out after
        // its commit; the look-up and the early answers carry entries read
        // committed): from now on each is the final answer to its key. The
        // caller remembers them, not the writer, whose task is on every
        // group's path.
        for decision in &decisions {
            if let Decision::Created(entry) | Decision::Replayed(entry) = decision {
                self.recent.remember(entry);
            }
        }
        Ok(decisions)
    }
}
