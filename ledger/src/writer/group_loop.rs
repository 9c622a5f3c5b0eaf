//! A tenant's writer task: gathers jobs into groups, has each decided
//! (`crate::group`), ahead of the write before it when the writer's memory
//! allows, and starts its write on its own task.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::group::{decide_in_round, DecidedWrite, WriterMemory};
use crate::request::EntryRequest;
use crate::LedgerError;

use super::answers::Answers;
use super::finish::Finished;
use super::in_flight::{joined, start_write, DecidedGroup, InFlight};
use super::{Job, Stage, WriterConfig};

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
            crate::group::decide_ahead(&tenant, &requests, &absent, &mut memory, &commits).await
        };
        match ahead {
            Some(DecidedWrite {
                decisions,
                write,
                start,
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
        let decided = decide_in_round(
            &commits,
            &tenant,
            &requests,
            &absent,
            final_now,
            &mut memory,
        )
        .await;
        drop(requests);
        let DecidedWrite {
            decisions,
            write,
            start,
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
