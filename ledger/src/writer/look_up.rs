//! The look-up stage before the writer: keys of waiting requests looked up
//! in one query, replays and conflicts of committed entries answered there.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesOrdered, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::decide::{decide_existing, Decision};
use crate::entry::StoredEntry;
use crate::request::EntryKind;
use crate::store::Storage;
use crate::LedgerError;

use super::stats::WriterStats;
use super::{Job, Stage, WriterConfig};

// The queues of the tenants with a writer in this process, and how a
// tenant's look-up task takes its next job or retires its writer when idle.
pub(super) struct TenantQueue {
    pub(super) sender: mpsc::UnboundedSender<Job>,
    /// Requests queued or being decided; bounded by `queue_capacity`.
    pub(super) pending: Arc<AtomicUsize>,
}

/// The tenants with a writer in this process. Jobs are sent to a tenant's
/// queue with this lock held, and a writer retires only with it held and its
/// queue empty: no job can be sent to a writer that has gone.
pub(super) type Queues = Mutex<HashMap<String, TenantQueue>>;

/// The next job of a tenant's look-up task; `None` once its channel closed
/// or the tenant's writer retired after `idle_after` without work.
pub(super) async fn next_job(
    rx: &mut mpsc::UnboundedReceiver<Job>,
    tenant: &str,
    pending: &Arc<AtomicUsize>,
    stats: &WriterStats,
    config: WriterConfig,
    queues: &Weak<Queues>,
) -> Option<Job> {
    loop {
        let Ok(job) = tokio::time::timeout(config.idle_after, rx.recv()).await else {
            let Some(queues) = queues.upgrade() else {
                continue;
            };
            let mut queues = queues.lock().unwrap_or_else(|p| p.into_inner());
            // Jobs are sent with this lock held: whatever was sent before it
            // was taken is in the channel now, and nothing more can be.
            match rx.try_recv() {
                Ok(job) => return Some(job),
                Err(mpsc::error::TryRecvError::Disconnected) => return None,
                Err(mpsc::error::TryRecvError::Empty) => {}
            }
            if pending.load(Ordering::Acquire) > 0 {
                // The writer is still deciding what it was handed.
                continue;
            }
            if queues
                .get(tenant)
                .is_some_and(|q| Arc::ptr_eq(&q.pending, pending))
            {
                queues.remove(tenant);
            }
            stats.idle_writers_stopped.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(tenant, "idle writer stopped");
            return None;
        };
        return job;
    }
}

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
/// (`KeyLookUps`).
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
    // Look-ups run beside each other, but what they leave for the writer
    // goes to it in the order the jobs were queued: a later job's repeated
    // key must be the replay or the conflict, never the earlier one's
    // (`Writers::queue_all`; an import relies on it for a file's order).
    let mut in_flight: FuturesOrdered<JoinHandle<LookedUp>> = FuturesOrdered::new();
    let limit = storage.look_ups_in_flight();
    // Returning drops `writer`: the writer task ends once it has answered
    // what it holds, and the tenant's remembered balances with it.
    loop {
        // While queries are in flight the next batch gathers and goes out
        // beside them, instead of waiting for the one before to answer
        // (see [`Storage::look_ups_in_flight`]).
        let first = if in_flight.len() >= limit {
            if let Some(done) = in_flight.next().await {
                hand_on(&mut look_ups, done, &writer, &pending);
            }
            continue;
        } else if in_flight.is_empty() {
            match next_job(&mut rx, &tenant, &pending, &stats, config, &queues).await {
                Some(job) => job,
                None => break,
            }
        } else {
            tokio::select! {
                done = in_flight.next() => {
                    if let Some(done) = done {
                        hand_on(&mut look_ups, done, &writer, &pending);
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
            for job in &mut jobs {
                job.absent = job
                    .requests
                    .iter()
                    .map(|i| i.kind.keyed_by_request())
                    .collect();
                stats
                    .not_looked_up
                    .fetch_add(job.requests.len() as u64, Ordering::Relaxed);
            }
            if in_flight.is_empty() {
                for job in jobs {
                    forward(&writer, job, &pending);
                }
            } else {
                // Behind the look-ups still running, in order.
                in_flight.push_back(tokio::spawn(async move {
                    LookedUp {
                        forward: jobs,
                        counts: None,
                    }
                }));
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
        in_flight.push_back(tokio::spawn(look_up_and_answer(
            storage.clone(),
            tenant.clone(),
            jobs,
            pending.clone(),
            stats.clone(),
        )));
    }
    while let Some(done) = in_flight.next().await {
        hand_on(&mut look_ups, done, &writer, &pending);
    }
}

/// What one look-up leaves for the writer.
pub(super) struct LookedUp {
    /// The jobs not answered by the look-up, in the order they were queued.
    forward: Vec<Job>,
    /// (keys looked up, entries found); `None` if no query ran or it failed.
    counts: Option<(usize, usize)>,
}

/// Hands a finished look-up's jobs to the writer and notes what it found.
fn hand_on(
    look_ups: &mut KeyLookUps,
    done: Result<LookedUp, tokio::task::JoinError>,
    writer: &mpsc::UnboundedSender<Job>,
    pending: &AtomicUsize,
) {
    // A look-up that panicked dropped its jobs' replies: their callers
    // are answered that the writer stopped, and nothing was written.
    let Ok(LookedUp {
        forward: jobs,
        counts,
    }) = done
    else {
        return;
    };
    for job in jobs {
        forward(writer, job, pending);
    }
    if let Some((keys, found)) = counts {
        look_ups.looked_up(keys, found);
    }
}

/// Looks up the keys of `jobs` in one query and answers each job whose
/// every request holds a committed entry; the rest are left for the
/// writer, in order. If the query failed every job is left for it (the
/// writer looks keys up itself).
pub(super) async fn look_up_and_answer(
    storage: Storage,
    tenant: String,
    jobs: Vec<Job>,
    pending: Arc<AtomicUsize>,
    stats: Arc<WriterStats>,
) -> LookedUp {
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
            return LookedUp {
                forward: jobs,
                counts: None,
            };
        }
    };
    let counts = (keys.len(), found.len());
    // Shared: every replay of a key answers with the same entry.
    let found: Vec<Arc<StoredEntry>> = found.into_iter().map(Arc::new).collect();
    let by_key: HashMap<(EntryKind, &str), &Arc<StoredEntry>> = found
        .iter()
        .map(|e| ((e.kind, e.upstream_id.as_str()), e))
        .collect();
    let mut left = Vec::with_capacity(jobs.len());
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
            left.push(job);
        }
    }
    LookedUp {
        forward: left,
        counts: Some(counts),
    }
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

// Whether a tenant's keys are looked up before its writer.
//
// The look-up in front of the writer answers replays and conflicts without
// a group, and tells the group which keys are free. When traffic is new
// usage (the common case: a retry is the exception), every look-up finds
// nothing, and it costs a round trip and an index probe per key that the
// group's INSERT repeats anyway: the UNIQUE constraint on the key is what
// makes a second post impossible, look-up or not. So after a run of keys
// all found free, keys go to the writer unlooked, marked free; a key that
// was taken after all fails its group on the constraint (nothing is
// written), the writer decides the group again with every key looked up
// under the head lock, and reports it here: look-ups resume until the next
// run of free keys.
//
// The run is counted twice: by the tenant, and across every tenant of the
// process ([`FreshKeys`]). Keys go unlooked once either run is long. A
// platform of many tenants that each post now and then would otherwise
// look up every key for ever (300 tenants at 64 clients: ~7 keys a second
// each, so a tenant's own run of 1,000 takes minutes, and its writer is
// retired, forgetting the run, after a minute idle), while one tenant's
// flood of new keys stops looking up within a second. A key found or
// reported taken ends its tenant's run and the process-wide one: a tenant
// that keeps replaying old keys keeps look-ups on for every tenant without
// a run of its own, which costs them what every key cost before, and no
// more. A replay that arrives unlooked costs its group one decision more,
// never a wrong answer.
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
