//! The replies of one group's jobs, early ones before the commit.

use crate::decide::Decision;
use crate::request::EntryRequest;
use crate::LedgerError;

use super::Reply;

/// The replies of one group's jobs. A job whose every decision is final
/// before the group commits (replays of committed entries) is answered at
/// once, so a replay does not wait for the insert and fsync of the new
/// entries it happens to share a group with; the others after the commit.
pub(super) struct Answers {
    /// Per job: its reply, taken once sent.
    pub(super) replies: Vec<Option<Reply>>,
    /// Per job: the decisions known before the commit.
    pub(super) early: Vec<Vec<Option<Decision>>>,
    /// Per request of the group: (job, position in the job).
    pub(super) slots: Vec<(usize, usize)>,
}

impl Answers {
    pub(super) fn new(job_requests: &[Vec<EntryRequest>], replies: Vec<Reply>) -> Self {
        let mut slots = Vec::new();
        for (j, requests) in job_requests.iter().enumerate() {
            slots.extend((0..requests.len()).map(|k| (j, k)));
        }
        Self {
            replies: replies.into_iter().map(Some).collect(),
            early: job_requests.iter().map(|i| vec![None; i.len()]).collect(),
            slots,
        }
    }

    /// A decision of request `i` that is final before the commit.
    pub(super) fn decided(&mut self, i: usize, decision: &Decision) {
        let Some(&(j, k)) = self.slots.get(i) else {
            return;
        };
        self.early[j][k] = Some(decision.clone());
        if self.early[j].iter().all(Option::is_some) {
            if let Some(reply) = self.replies[j].take() {
                let all = self.early[j].iter().flatten().cloned().collect();
                // The caller may have gone away; nothing depends on it.
                let _ = reply.send(Ok(all));
            }
        }
    }

    /// After the commit: every job not answered yet gets its decisions.
    pub(super) fn answer_the_rest(self, decisions: Vec<Decision>) {
        let mut decisions = decisions.into_iter();
        for (reply, early) in self.replies.into_iter().zip(self.early) {
            let mine: Vec<Decision> = decisions.by_ref().take(early.len()).collect();
            if let Some(reply) = reply {
                // The caller may have gone away; its requests are committed anyway.
                let _ = reply.send(Ok(mine));
            }
        }
    }

    /// The group failed: every job not answered yet gets the error (the
    /// early ones were replays of committed entries, true whatever failed),
    /// transient or permanent as it was.
    pub(super) fn fail_the_rest(self, error: &LedgerError) {
        for reply in self.replies.into_iter().flatten() {
            let _ = reply.send(Err(error.shared()));
        }
    }
}
