//! Answers a group once its write is done: its decisions, or, when its
//! decision or write failed, the group run again ([`super::retry`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::decide::Decision;
use crate::group::RoundCommitter;
use crate::group::WriterMemory;
use crate::look_ups::KeyTaken;
use crate::request::EntryRequest;
use crate::LedgerError;

use super::in_flight::{joined, DecidedGroup, InFlight};
use super::retry::{commit_with_retry, is_unique_violation, retry};
use super::stats::WriterStats;

/// Answers groups once their write is done.
pub(super) struct Finished<'a> {
    /// The rounds every group commits in, its second run too.
    pub(super) commits: &'a RoundCommitter,
    pub(super) tenant: &'a str,
    pub(super) pending: &'a AtomicUsize,
    pub(super) stats: &'a WriterStats,
    pub(super) heads: &'a super::CommittedHeads,
    pub(super) key_taken: KeyTaken,
    /// Whether the last write answered failed: a group decided on top of it
    /// is then refused because that group never committed, not because
    /// another process appended.
    pub(super) failed_before: AtomicBool,
}

impl Finished<'_> {
    /// Waits for the write of `f`, then answers it.
    pub(super) async fn settle(&self, f: InFlight, memory: &mut WriterMemory) {
        self.answer(f.group, joined(f.write.await), memory).await;
    }

    /// Answers the group `f` whose write ended with `written`. A group
    /// whose decision or write failed is run again under the head lock
    /// (its first decisions are not sent): one decided ahead always (the
    /// head may have moved under it, which its write refuses), any other
    /// through the usual one retry ([`retry`]); the memory is then
    /// forgotten.
    pub(super) async fn answer(
        &self,
        f: DecidedGroup,
        written: Result<(), LedgerError>,
        memory: &mut WriterMemory,
    ) {
        let DecidedGroup {
            decisions,
            mut answers,
            job_requests,
            ahead,
            on_top,
            start,
            size,
            started,
        } = f;
        let failed_before = self.failed_before.swap(written.is_err(), Ordering::Relaxed);
        let result = match written {
            Ok(()) => Ok(decisions),
            Err(e) => {
                // A key taken is no sign of another writer: a replay sent
                // unlooked (`KeyLookUps`) or a key taken since its look-up.
                let key_taken = matches!(&e, LedgerError::Database(d) if is_unique_violation(d));
                if key_taken {
                    self.stats.key_taken_groups.fetch_add(1, Ordering::Relaxed);
                    self.key_taken.report();
                }
                match start {
                    // Decided on top of a group that wrote nothing: what it
                    // taught the memory went with that group's (rewound or
                    // forgotten), and the memory now holds that group's
                    // second run. Refused for that, not for another writer.
                    _ if on_top && failed_before => {}
                    // Nothing was written: only what this group (and any
                    // decided on top of it) taught is taken back.
                    Some(start) if key_taken => memory.rewind(start),
                    _ if ahead => {
                        self.stats
                            .decided_ahead_redone
                            .fetch_add(1, Ordering::Relaxed);
                        memory.refused();
                    }
                    _ => memory.forget(),
                }
                let requests: Vec<&EntryRequest> = job_requests.iter().flatten().collect();
                let final_now = &mut |i: usize, d: &Decision| answers.decided(i, d);
                if ahead {
                    tracing::debug!(tenant = %self.tenant, error = %e, "deciding a group decided ahead again");
                    commit_with_retry(self.commits, self.tenant, &requests, &[], final_now, memory)
                        .await
                } else {
                    retry(self.commits, self.tenant, &requests, e, final_now, memory).await
                }
            }
        };
        let stats = self.stats;
        stats.groups.fetch_add(1, Ordering::Relaxed);
        stats.requests.fetch_add(size, Ordering::Relaxed);
        stats.group_size.observe(size as u64);
        stats
            .commit_micros
            .observe(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
        if result.is_err() {
            stats.failed_groups.fetch_add(1, Ordering::Relaxed);
        }
        tracing::debug!(
            tenant = %self.tenant,
            group = size,
            elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
            ok = result.is_ok(),
            "group decided"
        );
        self.pending.fetch_sub(size, Ordering::AcqRel);
        match result {
            Ok(decisions) => {
                let head = decisions.iter().filter_map(created_seq).max();
                if let Some(seq) = head {
                    self.heads.advanced(self.tenant, seq);
                }
                answers.answer_the_rest(decisions)
            }
            Err(e) => {
                tracing::warn!(tenant = %self.tenant, group = size, error = %e, "group failed, nothing committed");
                answers.fail_the_rest(&e);
            }
        }
    }
}

/// The seq of an entry this group appended.
fn created_seq(d: &Decision) -> Option<i64> {
    match d {
        Decision::Created(e) => Some(e.seq),
        _ => None,
    }
}
