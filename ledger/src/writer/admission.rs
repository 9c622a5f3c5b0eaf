//! Admission: a request's intents are answered from the recent entries
//! when they can be, else queued for the tenant's writer within
//! `queue_capacity`, and their decisions awaited.

use std::sync::atomic::Ordering;

use tokio::sync::oneshot;

use crate::decide::{decide_existing, Decision};
use crate::request::EntryRequest;
use crate::LedgerError;

use super::registry::Writers;
use super::Job;

impl Writers {
    /// Queues `intent` and waits for its committed decision.
    pub async fn decide(
        &self,
        tenant: &str,
        intent: EntryRequest,
    ) -> Result<Decision, LedgerError> {
        let mut decisions = self.decide_all(tenant, vec![intent]).await?;
        decisions
            .pop()
            .ok_or_else(|| LedgerError::Unavailable("the writer returned no decision".into()))
    }

    /// Queues `intents` together, in order, and waits for their decisions
    /// (one per intent, same order). They are decided in the same group, so a
    /// later intent sees the earlier ones: a repeated key is a replay.
    ///
    /// Dropping the returned future does not withdraw the intents: once
    /// queued they are decided, exactly as if the client had timed out.
    pub async fn decide_all(
        &self,
        tenant: &str,
        intents: Vec<EntryRequest>,
    ) -> Result<Vec<Decision>, LedgerError> {
        if intents.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(decisions) = self.answered_from_recent(tenant, &intents) {
            return Ok(decisions);
        }
        let n = intents.len();
        let (reply, answer) = oneshot::channel();
        {
            let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            let queue = self.queue(&mut queues, tenant);
            let before = queue.pending.fetch_add(n, Ordering::AcqRel);
            if before + n > self.config.queue_capacity.max(n) {
                queue.pending.fetch_sub(n, Ordering::AcqRel);
                return Err(LedgerError::Overloaded);
            }
            let job = Job {
                intents,
                absent: Vec::new(),
                reply,
            };
            if queue.sender.send(job).is_err() {
                queue.pending.fetch_sub(n, Ordering::AcqRel);
                return Err(LedgerError::Unavailable(
                    "the tenant's writer stopped".to_owned(),
                ));
            }
        }
        let decisions = answer
            .await
            .map_err(|_| LedgerError::Unavailable("the tenant's writer stopped".to_owned()))??;
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

    /// Decisions of `intents` when every one of them is a key held in
    /// [`RecentEntries`]: a committed entry is the final answer to its key
    /// (a replay, or a conflict), so neither the writer nor the database is
    /// asked. Otherwise `None`, and the request goes the usual way.
    pub(super) fn answered_from_recent(
        &self,
        tenant: &str,
        intents: &[EntryRequest],
    ) -> Option<Vec<Decision>> {
        if !self.recent.enabled() {
            return None;
        }
        let decisions = intents
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
