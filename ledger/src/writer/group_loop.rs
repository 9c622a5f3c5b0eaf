//! A tenant's writer task: gathers jobs into groups, has each decided
//! (`crate::group`), ahead of the write before it when the writer's memory
//! allows, starts its write on its own task, and answers its jobs once the
//! write is done (replays before it).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use crate::decide::Decision;
use crate::group::{
    decide_in_round, DecidedWrite, Group, PendingWrite, RoundCommitter, WriterMemory,
};
use crate::request::EntryRequest;
use crate::store::Fence;
use crate::LedgerError;

use super::look_up::KeyTaken;
use super::retry::{commit_with_retry, is_unique_violation, retry};
use super::stats::WriterStats;
use super::{Job, Reply, Stage, WriterConfig};

/// What the writer waits for.
enum Next {
    Job(Option<Job>),
    Written(Result<(), LedgerError>),
}

pub(super) async fn run(tenant: String, mut rx: mpsc::UnboundedReceiver<Job>, stage: Stage) {
    let Stage {
        pending,
        config,
        stats,
        key_taken,
        commits,
        budget,
        heads,
    } = stage;
    let finished = Finished {
        commits: &commits,
        tenant: &tenant,
        pending: &pending,
        stats: &stats,
        heads: &heads,
        key_taken,
        failed_before: AtomicBool::new(false),
    };
    // A job that did not fit into the previous group starts the next one.
    let mut carry: Option<Job> = None;
    let mut memory = WriterMemory::within(budget);
    // The group being written, if any: the next one is decided meanwhile.
    let mut in_flight: Option<InFlight> = None;
    loop {
        let first = match carry.take() {
            Some(job) => job,
            None => {
                let next = match in_flight.as_mut() {
                    None => Next::Job(rx.recv().await),
                    Some(f) => tokio::select! {
                        biased;
                        written = &mut f.write => Next::Written(joined(written)),
                        job = rx.recv() => Next::Job(job),
                    },
                };
                match next {
                    Next::Job(Some(job)) => job,
                    Next::Written(written) => {
                        if let Some(f) = in_flight.take() {
                            finished.answer(f.group, written, &mut memory).await;
                        }
                        continue;
                    }
                    Next::Job(None) => {
                        if let Some(f) = in_flight.take() {
                            finished.settle(f, &mut memory).await;
                        }
                        return;
                    }
                }
            }
        };
        let mut size = first.requests.len();
        let mut jobs = vec![first];
        gather(
            &mut rx,
            &mut jobs,
            &mut size,
            &mut carry,
            config,
            config.linger,
        )
        .await;
        // Only a full group is decided ahead. One that can still grow waits
        // for the write before it, and what arrives meanwhile joins it, as
        // before pipelining: deciding it at once split single requests at
        // 64 clients into more, smaller transactions (20 requests a group
        // instead of 29) and cost throughput (measured with tally-bench).
        if carry.is_none() && size < config.max_group {
            if let Some(before) = in_flight.take() {
                finished.settle(before, &mut memory).await;
                gather(
                    &mut rx,
                    &mut jobs,
                    &mut size,
                    &mut carry,
                    config,
                    Duration::ZERO,
                )
                .await;
            }
        }

        let mut job_requests = Vec::with_capacity(jobs.len());
        let mut replies = Vec::with_capacity(jobs.len());
        let mut absent = Vec::with_capacity(size);
        for job in jobs {
            if job.absent.len() == job.requests.len() {
                absent.extend(job.absent);
            } else {
                absent.extend(std::iter::repeat_n(false, job.requests.len()));
            }
            job_requests.push(job.requests);
            replies.push(job.reply);
        }
        let started = Instant::now();
        let mut answers = Answers::new(&job_requests, replies);
        let requests: Vec<&EntryRequest> = job_requests.iter().flatten().collect();

        // Pipelining: while the group before is written and committed, this
        // one is decided from what the writer remembers of the state that
        // group leaves behind. Its write starts once that group's write is
        // done (`start_write`) and commits only if the head is where it was
        // decided (`crate::group::write_ahead_in_round`). With no group in flight, the memory holds
        // the state the last group committed: a group it can answer is
        // decided from it too, and written without a read under the lock
        // (on PostgreSQL, a round of such groups is one statement in
        // autocommit: one round trip instead of four).
        // Not while another process appends to the tenant: a group decided
        // from memory would find the head moved and be decided twice.
        let mut before = in_flight.take();
        let ahead = if memory.contended() {
            None
        } else {
            crate::group::decide_ahead(
                Group::looked_up(&tenant, &requests, &absent),
                &mut memory,
                &commits,
            )
            .await
        };
        match ahead {
            Some(DecidedWrite {
                decisions,
                write,
                start,
                end,
            }) => {
                drop(requests);
                let on_top = before.is_some();
                // Its write starts once the write before is done, not once
                // it is known to have committed: if it failed, the head is
                // elsewhere and this one writes nothing.
                let after = before.as_mut().and_then(|b| b.done.take());
                let (write, done) = start_write(write, after);
                if let Some(before) = before {
                    finished.settle(before, &mut memory).await;
                }
                stats.decided_ahead.fetch_add(1, Ordering::Relaxed);
                let group = DecidedGroup {
                    decisions,
                    answers,
                    job_requests,
                    ahead: true,
                    on_top,
                    start: Some(start),
                    appended_up_to: appended_up_to(start, end),
                    size,
                    started,
                };
                in_flight = Some(InFlight { write, done, group });
                continue;
            }
            // This group needs the database: it is decided under the head
            // lock, once the group before is done.
            None => {
                if let Some(before) = before {
                    finished.settle(before, &mut memory).await;
                }
            }
        }
        let final_now = &mut |i, d: &_| answers.decided(i, d);
        let group = Group::looked_up(&tenant, &requests, &absent);
        let decided = decide_in_round(&commits, group, final_now, &mut memory).await;
        drop(requests);
        let DecidedWrite {
            decisions,
            write,
            start,
            end,
        } = match decided {
            Ok(decided) => decided,
            Err(e) => {
                // Nothing was written: decided again at once, like a group
                // whose write failed.
                let group = DecidedGroup {
                    decisions: Vec::new(),
                    answers,
                    job_requests,
                    ahead: false,
                    on_top: false,
                    start: None,
                    appended_up_to: None,
                    size,
                    started,
                };
                finished.answer(group, Err(e), &mut memory).await;
                continue;
            }
        };
        let group = DecidedGroup {
            decisions,
            answers,
            job_requests,
            ahead: false,
            on_top: false,
            start: Some(start),
            appended_up_to: appended_up_to(start, end),
            size,
            started,
        };
        let (write, done) = start_write(write, None);
        in_flight = Some(InFlight { write, done, group });
    }
}

/// Adds the jobs waiting in `rx` to `jobs`, up to `max_group` requests
/// (a job that does not fit is left in `carry` for the next group),
/// waiting up to `linger` for more.
pub(super) async fn gather(
    rx: &mut mpsc::UnboundedReceiver<Job>,
    jobs: &mut Vec<Job>,
    size: &mut usize,
    carry: &mut Option<Job>,
    config: WriterConfig,
    linger: Duration,
) {
    let deadline = Instant::now() + linger;
    while *size < config.max_group && carry.is_none() {
        let next = match rx.try_recv() {
            Ok(job) => Some(job),
            Err(_) if linger.is_zero() => None,
            Err(_) => {
                let left = deadline.saturating_duration_since(Instant::now());
                tokio::time::timeout(left, rx.recv()).await.ok().flatten()
            }
        };
        let Some(job) = next else { break };
        if *size + job.requests.len() > config.max_group {
            *carry = Some(job);
            break;
        }
        *size += job.requests.len();
        jobs.push(job);
    }
}

// The replies of one group's jobs, early ones before the commit.
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

// A decided group on its way to the database: its decisions and answers,
// its write running on a task of its own, and the outcome of that task.
/// A group whose decisions are made, to be answered once its write is done.
pub(super) struct DecidedGroup {
    pub(super) decisions: Vec<Decision>,
    pub(super) answers: Answers,
    /// Kept to decide the group again should its write fail.
    pub(super) job_requests: Vec<Vec<EntryRequest>>,
    /// Decided from memory, with no read under the head lock.
    pub(super) ahead: bool,
    /// Decided while the group before it was not yet answered, on top of
    /// what that group's write was to leave.
    pub(super) on_top: bool,
    /// The head it was decided on (`None`: its decision failed).
    pub(super) start: Option<Fence>,
    /// The seq of the last entry its write appends (`None`: none).
    pub(super) appended_up_to: Option<i64>,
    pub(super) size: usize,
    pub(super) started: Instant,
}

/// A decided group whose write and commit run on their own task, while the
/// writer decides the next group.
pub(super) struct InFlight {
    pub(super) write: tokio::task::JoinHandle<Result<(), LedgerError>>,
    /// Fires when the write is done (see [`start_write`]).
    pub(super) done: Option<oneshot::Receiver<()>>,
    pub(super) group: DecidedGroup,
}

/// Starts a group's write on its own task. With `after` (the write of the
/// group before, still running), it begins only once that one is done:
/// started at once, it would overtake it — tokio runs the task spawned last
/// first, and a group decided from memory is spawned microseconds after the
/// one before — find the head where that group had not yet moved it, write
/// nothing and be decided a second time. Waiting costs one round trip: the
/// write is a single statement once the head is where it expects.
pub(super) fn start_write(
    write: PendingWrite,
    after: Option<oneshot::Receiver<()>>,
) -> InFlightWrite {
    let (done, done_rx) = oneshot::channel();
    let handle = tokio::spawn(async move {
        if let Some(after) = after {
            // Dropped unsent (a write task that stopped) counts as done.
            let _ = after.await;
        }
        let written = write.await;
        let _ = done.send(());
        written
    });
    (handle, Some(done_rx))
}

type InFlightWrite = (
    tokio::task::JoinHandle<Result<(), LedgerError>>,
    Option<oneshot::Receiver<()>>,
);

/// The outcome of a write task; one that stopped did not commit.
pub(super) fn joined(
    written: Result<Result<(), LedgerError>, tokio::task::JoinError>,
) -> Result<(), LedgerError> {
    written.unwrap_or_else(|e| {
        let message = format!("a group write stopped: {e}");
        // A panic is a bug, which the same request would hit again.
        Err(if e.is_panic() {
            LedgerError::Permanent {
                cause: crate::Cause::Other,
                message,
            }
        } else {
            LedgerError::Unavailable(message)
        })
    })
}

// Answers a group once its write is done: its decisions, or, when its
// decision or write failed, the group run again ([`super::retry`]).
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
            appended_up_to,
            size,
            started,
        } = f;
        let failed_before = self.failed_before.swap(written.is_err(), Ordering::Relaxed);
        let result = match written {
            Ok(()) => Ok((decisions, appended_up_to)),
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
                    let group = Group::new(self.tenant, &requests);
                    commit_with_retry(self.commits, group, final_now, memory).await
                } else {
                    let group = Group::new(self.tenant, &requests);
                    retry(self.commits, group, e, final_now, memory).await
                }
                .map(|c| {
                    let appended = c.appended_up_to();
                    (c.decisions, appended)
                })
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
            Ok((decisions, appended_up_to)) => {
                // Intent operations append too, answered as intents.
                if let Some(seq) = appended_up_to {
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

/// The seq of the last entry a group decided on `start` appends, if its
/// write leaves the head at `end` (`Committed::appended_up_to` on a retry).
fn appended_up_to(start: Fence, end: Fence) -> Option<i64> {
    (end.head.seq > start.head.seq).then_some(end.head.seq)
}
