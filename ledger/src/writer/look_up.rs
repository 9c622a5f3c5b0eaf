//! The look-up stage before the writer: keys of waiting requests looked up
//! in one query, replays and conflicts of committed entries answered there.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::decide::{decide_existing, Decision};
use crate::entry::StoredEntry;
use crate::look_ups::KeyLookUps;
use crate::request::EntryKind;
use crate::store::Storage;
use crate::LedgerError;

use super::queues::{next_job, Queues};
use super::stats::WriterStats;
use super::{Job, Stage};

/// Most times the look-up task steps aside for requests already received
/// before it sends its query (see [`look_up`]), and the longest it keeps
/// doing so: they bound the wait a stream of arrivals can impose on the
/// first of them on a busy runtime, where one yield may last as long as
/// the tasks queued before it. A look-up query took 0.6–0.7 ms under load;
/// gathering for up to 400 µs kept ~17 keys a query where 1 ms kept ~18,
/// with replays answered sooner (measured with tally-bench).
const LOOK_UP_GATHER_YIELDS: usize = 32;
const LOOK_UP_GATHER_FOR: Duration = Duration::from_micros(400);

/// Moves the jobs waiting in `rx` into `jobs` while the group has room;
/// whether it took any.
pub(super) fn take_waiting(
    rx: &mut mpsc::UnboundedReceiver<Job>,
    jobs: &mut Vec<Job>,
    size: &mut usize,
    max_group: usize,
) -> bool {
    let before = jobs.len();
    while *size < max_group {
        let Ok(job) = rx.try_recv() else { break };
        *size += job.requests.len();
        jobs.push(job);
    }
    jobs.len() > before
}

/// Before the writer: looks up the keys of whatever is waiting in one
/// query, outside any lock, while the writer commits the previous group.
/// A job whose every request holds a committed entry (a replay, or a
/// conflict) is answered here at once: committed entries are immutable and
/// keys never expire, so the answer is final — a replay is a look-up, not a
/// write. The rest goes to the writer, with the keys found free marked so
/// the group does not look them up again (should one be taken meanwhile,
/// the UNIQUE constraint fails the group and the writer runs it again
/// looking every key up under the lock). After a run of keys all found
/// free, keys go to the writer unlooked, marked free the same way
/// (`crate::look_ups::KeyLookUps`).
pub(super) async fn look_up(
    storage: Storage,
    tenant: String,
    mut rx: mpsc::UnboundedReceiver<Job>,
    writer: mpsc::UnboundedSender<Job>,
    stage: Stage,
    queues: Weak<Queues>,
) {
    let Stage {
        pending,
        config,
        stats,
        key_taken,
        commits: _,
        budget: _,
        heads: _,
    } = stage;
    let mut look_ups = KeyLookUps::new(config.skip_look_ups_after, key_taken);
    let mut in_flight: JoinSet<Option<(usize, usize)>> = JoinSet::new();
    let limit = storage.look_ups_in_flight();
    // Returning drops `writer`: the writer task ends once it has answered
    // what it holds, and the tenant's remembered balances with it.
    loop {
        // While queries are in flight the next batch gathers and goes out
        // beside them, instead of waiting for the one before to answer
        // (see [`Storage::look_ups_in_flight`]).
        let first = if in_flight.len() >= limit {
            if let Some(done) = in_flight.join_next().await {
                note_look_up(&mut look_ups, done);
            }
            continue;
        } else if in_flight.is_empty() {
            match next_job(&mut rx, &tenant, &pending, &stats, config, &queues).await {
                Some(job) => job,
                None => break,
            }
        } else {
            tokio::select! {
                done = in_flight.join_next() => {
                    if let Some(done) = done {
                        note_look_up(&mut look_ups, done);
                    }
                    continue;
                }
                job = rx.recv() => match job {
                    Some(job) => job,
                    None => break,
                },
            }
        };
        let mut size = first.requests.len();
        let mut jobs = vec![first];
        take_waiting(&mut rx, &mut jobs, &mut size, config.max_group);
        if !look_ups.needed() {
            for mut job in jobs {
                job.absent = job
                    .requests
                    .iter()
                    .map(|i| i.kind.keyed_by_request())
                    .collect();
                stats
                    .not_looked_up
                    .fetch_add(job.requests.len() as u64, Ordering::Relaxed);
                forward(&writer, job, &pending);
            }
            continue;
        }
        // Requests the server has received but whose tasks have not yet run
        // join this query if the task steps aside first: a yield lets the
        // runtime poll its sockets and run them. It steps aside again while
        // each yield brings more, so an idle tenant's look-up goes at once
        // and a busy one's query carries ~20 keys instead of ~8: the fixed
        // cost of a query (its round trip, the executor's start, this
        // task's wake-up) is shared by more requests (measured with tally-bench:
        // +14–30 % rows/s under 50 % replays on PostgreSQL,
        // +31–46 % under 100 % replays on SQLite).
        let gathering = Instant::now();
        for _ in 0..LOOK_UP_GATHER_YIELDS {
            if size >= config.max_group || gathering.elapsed() >= LOOK_UP_GATHER_FOR {
                break;
            }
            tokio::task::yield_now().await;
            if !take_waiting(&mut rx, &mut jobs, &mut size, config.max_group) {
                break;
            }
        }
        in_flight.spawn(look_up_and_answer(
            storage.clone(),
            tenant.clone(),
            jobs,
            writer.clone(),
            pending.clone(),
            stats.clone(),
        ));
    }
    while let Some(done) = in_flight.join_next().await {
        note_look_up(&mut look_ups, done);
    }
}

pub(super) fn note_look_up(
    look_ups: &mut KeyLookUps,
    done: Result<Option<(usize, usize)>, tokio::task::JoinError>,
) {
    if let Ok(Some((keys, found))) = done {
        look_ups.looked_up(keys, found);
    }
}

/// Looks up the keys of `jobs` in one query and answers each job whose
/// every request holds a committed entry; forwards the rest to the writer.
/// The keys looked up and the entries found, or `None` if the query
/// failed (every job then went to the writer, which looks keys up itself).
pub(super) async fn look_up_and_answer(
    storage: Storage,
    tenant: String,
    jobs: Vec<Job>,
    writer: mpsc::UnboundedSender<Job>,
    pending: Arc<AtomicUsize>,
    stats: Arc<WriterStats>,
) -> Option<(usize, usize)> {
    // Every key is looked up here, never in the group: a look-up moved
    // out of the group costs no extra round trip (the group skips keys
    // found free), runs beside the group being committed, and spares a
    // request of replays a transaction (BEGIN, head lock, COMMIT: four
    // round trips instead of one).
    let mut keys: Vec<(EntryKind, &str)> = jobs
        .iter()
        .flat_map(|j| &j.requests)
        .filter(|i| i.kind.keyed_by_request())
        .map(|i| (i.kind, i.upstream_id.as_str()))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let started = Instant::now();
    let found = if keys.is_empty() {
        Ok(Vec::new())
    } else {
        stats.look_up_queries.fetch_add(1, Ordering::Relaxed);
        stats
            .keys_looked_up
            .fetch_add(keys.len() as u64, Ordering::Relaxed);
        storage.entries_with_keys(&tenant, &keys).await
    };
    tracing::debug!(
        tenant = %tenant,
        keys = keys.len(),
        found = found.as_ref().map_or(0, Vec::len),
        ms = started.elapsed().as_secs_f64() * 1e3,
        "keys looked up before the writer"
    );
    let found: Vec<StoredEntry> = match found {
        Ok(found) => found,
        Err(e) => {
            // Nothing is lost: the writer looks every key up itself.
            tracing::debug!(tenant = %tenant, error = %e, "look-up before the writer failed");
            for job in jobs {
                forward(&writer, job, &pending);
            }
            return None;
        }
    };
    let counts = (keys.len(), found.len());
    // Shared: every replay of a key answers with the same entry.
    let found: Vec<Arc<StoredEntry>> = found.into_iter().map(Arc::new).collect();
    let by_key: HashMap<(EntryKind, &str), &Arc<StoredEntry>> = found
        .iter()
        .map(|e| ((e.kind, e.upstream_id.as_str()), e))
        .collect();
    for mut job in jobs {
        let decided: Vec<Option<Decision>> = job
            .requests
            .iter()
            .map(|i| match i.kind {
                kind if !kind.keyed_by_request() => None,
                kind => by_key
                    .get(&(kind, i.upstream_id.as_str()))
                    .map(|e| decide_existing(e, i)),
            })
            .collect();
        if decided.iter().all(Option::is_some) {
            let n = job.requests.len();
            stats
                .answered_before_group
                .fetch_add(n as u64, Ordering::Relaxed);
            pending.fetch_sub(n, Ordering::AcqRel);
            // The caller may have gone away; nothing depends on it.
            let _ = job.reply.send(Ok(decided.into_iter().flatten().collect()));
        } else {
            job.absent = job
                .requests
                .iter()
                .zip(&decided)
                .map(|(i, d)| d.is_none() && i.kind.keyed_by_request())
                .collect();
            forward(&writer, job, &pending);
        }
    }
    Some(counts)
}

pub(super) fn forward(writer: &mpsc::UnboundedSender<Job>, job: Job, pending: &AtomicUsize) {
    let n = job.requests.len();
    if let Err(mpsc::error::SendError(job)) = writer.send(job) {
        pending.fetch_sub(n, Ordering::AcqRel);
        let _ = job.reply.send(Err(LedgerError::Unavailable(
            "the tenant's writer stopped".to_owned(),
        )));
    }
}
