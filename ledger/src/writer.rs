//! The per-tenant writer (SPEC §6): every intent of a tenant goes through one
//! task that takes whatever is waiting and decides it in one transaction.
//!
//! Under load, requests that arrive while a group commits form the next
//! group, so the number of transactions grows far slower than the number of
//! requests. Everything is bounded: intents waiting per tenant
//! (`queue_capacity`, beyond which callers get [`LedgerError::Overloaded`] at
//! once instead of memory growing), intents per transaction (`max_group`),
//! the optional wait for more intents (`linger`), and the tenants with a
//! writer: one idle for `idle_after` stops, and with it the balances it
//! remembered, so memory follows the tenants that are active, not every
//! tenant ever seen.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use crate::decide::{decide_existing, Decision};
use crate::entry::StoredEntry;
use crate::intent::{EntryKind, Intent};
use crate::look_ups::{KeyLookUps, KeyTaken};
use crate::recent::{RecentEntries, DEFAULT_RECENT_ENTRIES_BYTES};
use crate::stats::Histogram;
use crate::group::{DecidedWrite, PendingWrite, WriterMemory};
use crate::store::{Fence, Storage};
use crate::LedgerError;

#[derive(Debug, Clone, Copy)]
pub struct WriterConfig {
    /// Most intents decided in one transaction.
    pub max_group: usize,
    /// Most intents waiting per tenant before callers are turned away.
    pub queue_capacity: usize,
    /// How long a writer waits for more intents before committing a group
    /// smaller than `max_group`. Zero (the default) commits at once: groups
    /// then form naturally from what arrived during the previous commit.
    pub linger: Duration,
    /// A tenant's writer that received nothing for this long stops; the
    /// tenant's next request starts a new one (with nothing remembered).
    pub idle_after: Duration,
    /// Once this many keys in a row were looked up and found free, keys are
    /// no longer looked up before the writer: the UNIQUE constraint on the
    /// key is the look-up, and a taken key fails its group, which is then
    /// decided again with every key looked up (and look-ups resume). Zero
    /// always looks keys up. See [`KeyLookUps`].
    pub skip_look_ups_after: usize,
    /// Bytes of recently committed entries held to answer retries without
    /// the writer or the database ([`RecentEntries`]); zero holds none.
    pub recent_entries_bytes: usize,
}

impl Default for WriterConfig {
    fn default() -> Self {
        Self {
            max_group: 1_000,
            queue_capacity: 10_000,
            linger: Duration::ZERO,
            idle_after: DEFAULT_IDLE_AFTER,
            skip_look_ups_after: DEFAULT_SKIP_LOOK_UPS_AFTER,
            recent_entries_bytes: DEFAULT_RECENT_ENTRIES_BYTES,
        }
    }
}

/// Free keys in a row after which keys are no longer looked up before the
/// writer (see [`WriterConfig::skip_look_ups_after`]): a run of new keys
/// this long makes a replay in the next group unlikely, and a replay that
/// does come costs one group decided twice, against the look-up of every
/// one of these keys it saves.
pub const DEFAULT_SKIP_LOOK_UPS_AFTER: usize = 1_000;

/// How long a tenant's writer waits for work before it stops.
pub const DEFAULT_IDLE_AFTER: Duration = Duration::from_secs(60);

/// Where the decisions of one job go.
type Reply = oneshot::Sender<Result<Vec<Decision>, LedgerError>>;

/// Intents submitted together (one request) and where their answers go.
struct Job {
    intents: Vec<Intent>,
    /// Per intent, once looked up before the writer: its key held no entry.
    absent: Vec<bool>,
    reply: Reply,
}

struct TenantQueue {
    sender: mpsc::UnboundedSender<Job>,
    /// Intents queued or being decided; bounded by `queue_capacity`.
    pending: Arc<AtomicUsize>,
}

/// Observations of the writers, for benchmarks and operators (`tally-api`
/// renders them at `GET /metrics`).
#[derive(Debug)]
pub struct WriterStats {
    pub groups: AtomicUsize,
    pub intents: AtomicUsize,
    /// Groups whose transaction failed (after the one retry): every caller
    /// in them got 503 and nothing was committed.
    pub failed_groups: AtomicUsize,
    /// Intents per group transaction.
    pub group_size: Histogram,
    /// Microseconds from `BEGIN` to the end of `COMMIT` (the retry included).
    pub commit_micros: Histogram,
    /// Expired holds this process released (`crate::expiry`).
    pub expired_holds_released: AtomicU64,
    /// Failures of the hold-expiry sweep: a tenant whose expired holds
    /// could not be released, or a listing of expired holds that failed.
    pub expiry_failures: AtomicU64,
    /// Intents answered by the look-up before the writer (replays and
    /// conflicts of committed entries): they never entered a group.
    pub answered_before_group: AtomicU64,
    /// Groups decided from the writer's memory alone, with no read under the
    /// head lock: while the group before them was being written
    /// (pipelining), or after it.
    pub decided_ahead: AtomicU64,
    /// Of those, groups whose write found the head moved (another process
    /// appended) or failed, and that were decided again under the lock.
    /// Not counted: a group whose write found a key taken, or decided on top
    /// of a group that did (see `key_taken_groups`).
    pub decided_ahead_redone: AtomicU64,
    /// Tenant writers stopped after `idle_after` without work.
    pub idle_writers_stopped: AtomicU64,
    /// Intents sent to the writer without their key looked up first, the
    /// look-ups before having found every key free ([`KeyLookUps`]).
    pub not_looked_up: AtomicU64,
    /// Groups whose write found one of their keys taken (a replay or a
    /// conflict not looked up, or a key taken by another process since its
    /// look-up): nothing was written, and the group was decided again with
    /// every key looked up.
    pub key_taken_groups: AtomicU64,
    /// Intents answered from the entries this process recently committed or
    /// found ([`RecentEntries`]): no writer, no database.
    pub answered_from_recent: AtomicU64,
    /// Queries of the look-up before the writer, and the keys they asked
    /// for: their ratio is how well look-ups share their query's fixed cost.
    pub look_up_queries: AtomicU64,
    pub keys_looked_up: AtomicU64,
}

/// Bounds of [`WriterStats::group_size`], in intents (`max_group` ≤ 10,000).
pub const GROUP_SIZE_BOUNDS: [u64; 12] = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000];

/// Bounds of [`WriterStats::commit_micros`], in microseconds (0.5 ms – 10 s).
pub const COMMIT_MICROS_BOUNDS: [u64; 14] = [
    500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000, 5_000_000, 10_000_000,
];

impl Default for WriterStats {
    fn default() -> Self {
        Self {
            groups: AtomicUsize::new(0),
            intents: AtomicUsize::new(0),
            failed_groups: AtomicUsize::new(0),
            group_size: Histogram::new(&GROUP_SIZE_BOUNDS),
            commit_micros: Histogram::new(&COMMIT_MICROS_BOUNDS),
            expired_holds_released: AtomicU64::new(0),
            expiry_failures: AtomicU64::new(0),
            answered_before_group: AtomicU64::new(0),
            decided_ahead: AtomicU64::new(0),
            decided_ahead_redone: AtomicU64::new(0),
            idle_writers_stopped: AtomicU64::new(0),
            not_looked_up: AtomicU64::new(0),
            key_taken_groups: AtomicU64::new(0),
            answered_from_recent: AtomicU64::new(0),
            look_up_queries: AtomicU64::new(0),
            keys_looked_up: AtomicU64::new(0),
        }
    }
}

/// Intents waiting in (or being decided by) the writers of this process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDepth {
    /// Summed over tenants.
    pub total: usize,
    /// The fullest tenant's queue (compare with `queue_capacity`).
    pub max: usize,
    /// Tenants with a writer in this process.
    pub tenants: usize,
}

/// Hands intents to their tenant's writer.
#[derive(Clone)]
pub struct Writers {
    storage: Storage,
    config: WriterConfig,
    queues: Arc<Queues>,
    stats: Arc<WriterStats>,
    recent: Arc<RecentEntries>,
}

/// The tenants with a writer in this process. Jobs are sent to a tenant's
/// queue with this lock held, and a writer retires only with it held and its
/// queue empty: no job can be sent to a writer that has gone.
type Queues = Mutex<HashMap<String, TenantQueue>>;

impl Writers {
    pub fn new(storage: Storage, config: WriterConfig) -> Self {
        Self {
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

    /// The entries held to answer retries.
    pub fn recent(&self) -> &RecentEntries {
        &self.recent
    }

    pub fn config(&self) -> WriterConfig {
        self.config
    }

    /// How many intents wait, now; reads one atomic per tenant.
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

    /// Queues `intent` and waits for its committed decision.
    pub async fn decide(&self, tenant: &str, intent: Intent) -> Result<Decision, LedgerError> {
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
        intents: Vec<Intent>,
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
    fn answered_from_recent(&self, tenant: &str, intents: &[Intent]) -> Option<Vec<Decision>> {
        if !self.recent.enabled() {
            return None;
        }
        let decisions = intents
            .iter()
            .map(|i| match i.kind {
                EntryKind::AccountSettings => None,
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

    fn queue<'a>(
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
            let key_taken = KeyTaken::default();
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
                },
                Arc::downgrade(&self.queues),
            ));
            tokio::spawn(run(
                self.storage.clone(),
                tenant.to_owned(),
                writer_queue,
                Stage {
                    pending: pending.clone(),
                    config: self.config,
                    stats: self.stats.clone(),
                    key_taken: key_taken.clone(),
                },
            ));
            queues.insert(tenant.to_owned(), TenantQueue { sender, pending });
        }
        // Present: either it was alive or it was inserted just above.
        &queues[tenant]
    }
}

/// Most times the look-up task steps aside for requests already received
/// before it sends its query (see [`look_up`]), and the longest it keeps
/// doing so: they bound the wait a stream of arrivals can impose on the
/// first of them on a busy runtime, where one yield may last as long as
/// the tasks queued before it. A look-up query took 0.6–0.7 ms under load;
/// gathering for up to 400 µs kept ~17 keys a query where 1 ms kept ~18,
/// with replays answered sooner (docs/performance-history.md).
const LOOK_UP_GATHER_YIELDS: usize = 32;
const LOOK_UP_GATHER_FOR: Duration = Duration::from_micros(400);

/// Moves the jobs waiting in `rx` into `jobs` while the group has room;
/// whether it took any.
fn take_waiting(
    rx: &mut mpsc::UnboundedReceiver<Job>,
    jobs: &mut Vec<Job>,
    size: &mut usize,
    max_group: usize,
) -> bool {
    let before = jobs.len();
    while *size < max_group {
        let Ok(job) = rx.try_recv() else { break };
        *size += job.intents.len();
        jobs.push(job);
    }
    jobs.len() > before
}

/// What a tenant's look-up task and writer share.
struct Stage {
    /// Intents queued or being decided; bounded by `queue_capacity`.
    pending: Arc<AtomicUsize>,
    config: WriterConfig,
    stats: Arc<WriterStats>,
    /// The writer reports a group that found a key taken; the look-up task
    /// then looks keys up again.
    key_taken: KeyTaken,
}

/// Before the writer: looks up the keys of whatever is waiting in one
/// query, outside any lock, while the writer commits the previous group.
/// A job whose every intent holds a committed entry (a replay, or a
/// conflict) is answered here at once: committed entries are immutable and
/// keys never expire, so the answer is final — a replay is a look-up, not a
/// write. The rest goes to the writer, with the keys found free marked so
/// the group does not look them up again (should one be taken meanwhile,
/// the UNIQUE constraint fails the group and the writer runs it again
/// looking every key up under the lock). After a run of keys all found
/// free, keys go to the writer unlooked, marked free the same way
/// ([`KeyLookUps`]).
async fn look_up(
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
        let mut size = first.intents.len();
        let mut jobs = vec![first];
        take_waiting(&mut rx, &mut jobs, &mut size, config.max_group);
        if !look_ups.needed() {
            for mut job in jobs {
                job.absent = job
                    .intents
                    .iter()
                    .map(|i| i.kind != EntryKind::AccountSettings)
                    .collect();
                stats
                    .not_looked_up
                    .fetch_add(job.intents.len() as u64, Ordering::Relaxed);
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
        // task's wake-up) is shared by more requests (docs/performance-history.md:
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

fn note_look_up(
    look_ups: &mut KeyLookUps,
    done: Result<Option<(usize, usize)>, tokio::task::JoinError>,
) {
    if let Ok(Some((keys, found))) = done {
        look_ups.looked_up(keys, found);
    }
}

/// Looks up the keys of `jobs` in one query and answers each job whose
/// every intent holds a committed entry; forwards the rest to the writer.
/// The keys looked up and the entries found, or `None` if the query
/// failed (every job then went to the writer, which looks keys up itself).
async fn look_up_and_answer(
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
        .flat_map(|j| &j.intents)
        .filter(|i| i.kind != EntryKind::AccountSettings)
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
            .intents
            .iter()
            .map(|i| match i.kind {
                EntryKind::AccountSettings => None,
                kind => by_key
                    .get(&(kind, i.upstream_id.as_str()))
                    .map(|e| decide_existing(e, i)),
            })
            .collect();
        if decided.iter().all(Option::is_some) {
            let n = job.intents.len();
            stats
                .answered_before_group
                .fetch_add(n as u64, Ordering::Relaxed);
            pending.fetch_sub(n, Ordering::AcqRel);
            // The caller may have gone away; nothing depends on it.
            let _ = job.reply.send(Ok(decided.into_iter().flatten().collect()));
        } else {
            job.absent = job
                .intents
                .iter()
                .zip(&decided)
                .map(|(i, d)| d.is_none() && i.kind != EntryKind::AccountSettings)
                .collect();
            forward(&writer, job, &pending);
        }
    }
    Some(counts)
}

/// The next job of a tenant's look-up task; `None` once its channel closed
/// or the tenant's writer retired after `idle_after` without work.
async fn next_job(
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

fn forward(writer: &mpsc::UnboundedSender<Job>, job: Job, pending: &AtomicUsize) {
    let n = job.intents.len();
    if let Err(mpsc::error::SendError(job)) = writer.send(job) {
        pending.fetch_sub(n, Ordering::AcqRel);
        let _ = job.reply.send(Err(LedgerError::Unavailable(
            "the tenant's writer stopped".to_owned(),
        )));
    }
}

/// A group whose decisions are made, to be answered once its write is done.
struct DecidedGroup {
    decisions: Vec<Decision>,
    answers: Answers,
    /// Kept to decide the group again should its write fail.
    job_intents: Vec<Vec<Intent>>,
    /// Decided from memory, with no read under the head lock.
    ahead: bool,
    /// Decided while the group before it was not yet answered, on top of
    /// what that group's write was to leave.
    on_top: bool,
    /// The head it was decided on (`None`: its decision failed).
    start: Option<Fence>,
    size: usize,
    started: Instant,
}

/// A decided group whose write and commit run on their own task, while the
/// writer decides the next group.
struct InFlight {
    write: tokio::task::JoinHandle<Result<(), LedgerError>>,
    /// Fires when the write is done (see [`start_write`]).
    done: Option<oneshot::Receiver<()>>,
    group: DecidedGroup,
}

/// Starts a group's write on its own task. With `after` (the write of the
/// group before, still running), it begins only once that one is done:
/// started at once, it would overtake it — tokio runs the task spawned last
/// first, and a group decided from memory is spawned microseconds after the
/// one before — find the head where that group had not yet moved it, write
/// nothing and be decided a second time. Waiting costs one round trip: the
/// write is a single statement once the head is where it expects.
fn start_write(write: PendingWrite, after: Option<oneshot::Receiver<()>>) -> InFlightWrite {
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

/// What the writer waits for.
enum Next {
    Job(Option<Job>),
    Written(Result<(), LedgerError>),
}

/// The outcome of a write task; one that stopped did not commit.
fn joined(
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

async fn run(storage: Storage, tenant: String, mut rx: mpsc::UnboundedReceiver<Job>, stage: Stage) {
    let Stage {
        pending,
        config,
        stats,
        key_taken,
    } = stage;
    let finished = Finished {
        storage: &storage,
        tenant: &tenant,
        pending: &pending,
        stats: &stats,
        key_taken,
        failed_before: AtomicBool::new(false),
    };
    // A job that did not fit into the previous group starts the next one.
    let mut carry: Option<Job> = None;
    let mut memory = WriterMemory::default();
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
        let mut size = first.intents.len();
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
        // 64 clients into more, smaller transactions (20 intents a group
        // instead of 29) and cost throughput (docs/performance-history.md).
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

        let mut job_intents = Vec::with_capacity(jobs.len());
        let mut replies = Vec::with_capacity(jobs.len());
        let mut absent = Vec::with_capacity(size);
        for job in jobs {
            if job.absent.len() == job.intents.len() {
                absent.extend(job.absent);
            } else {
                absent.extend(std::iter::repeat_n(false, job.intents.len()));
            }
            job_intents.push(job.intents);
            replies.push(job.reply);
        }
        let started = Instant::now();
        let mut answers = Answers::new(&job_intents, replies);
        let intents: Vec<&Intent> = job_intents.iter().flatten().collect();

        // Pipelining: while the group before is written and committed, this
        // one is decided from what the writer remembers of the state that
        // group leaves behind. Its write starts once that group's write is
        // done (`start_write`) and commits only if the head is where it was
        // decided (`Storage::write_ahead`). With no group in flight, the memory holds
        // the state the last group committed: a group it can answer is
        // decided from it too, and written without a read under the lock
        // (on PostgreSQL as one statement, one round trip instead of four).
        // Not while another process appends to the tenant: a group decided
        // from memory would find the head moved and be decided twice.
        let mut before = in_flight.take();
        let ahead = if memory.contended() {
            None
        } else {
            storage
                .decide_ahead(&tenant, &intents, &absent, &mut memory)
                .await
        };
        match ahead {
            Some(DecidedWrite {
                decisions,
                write,
                start,
            }) => {
                drop(intents);
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
                    job_intents,
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
        let decided = storage
            .decide_group(
                &tenant,
                &intents,
                &absent,
                &mut |i, d| answers.decided(i, d),
                &mut memory,
            )
            .await;
        drop(intents);
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
                    job_intents,
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
            job_intents,
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

/// Adds the jobs waiting in `rx` to `jobs`, up to `max_group` intents
/// (a job that does not fit is left in `carry` for the next group),
/// waiting up to `linger` for more.
async fn gather(
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
        if *size + job.intents.len() > config.max_group {
            *carry = Some(job);
            break;
        }
        *size += job.intents.len();
        jobs.push(job);
    }
}

/// Answers groups once their write is done.
struct Finished<'a> {
    storage: &'a Storage,
    tenant: &'a str,
    pending: &'a AtomicUsize,
    stats: &'a WriterStats,
    key_taken: KeyTaken,
    /// Whether the last write answered failed: a group decided on top of it
    /// is then refused because that group never committed, not because
    /// another process appended.
    failed_before: AtomicBool,
}

impl Finished<'_> {
    /// Waits for the write of `f`, then answers it.
    async fn settle(&self, f: InFlight, memory: &mut WriterMemory) {
        self.answer(f.group, joined(f.write.await), memory).await;
    }

    /// Answers the group `f` whose write ended with `written`. A group
    /// whose decision or write failed is run again under the head lock
    /// (its first decisions are not sent): one decided ahead always (the
    /// head may have moved under it, which its write refuses), any other
    /// through the usual one retry ([`retry`]); the memory is then
    /// forgotten.
    async fn answer(
        &self,
        f: DecidedGroup,
        written: Result<(), LedgerError>,
        memory: &mut WriterMemory,
    ) {
        let DecidedGroup {
            decisions,
            mut answers,
            job_intents,
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
                let intents: Vec<&Intent> = job_intents.iter().flatten().collect();
                let final_now = &mut |i: usize, d: &Decision| answers.decided(i, d);
                if ahead {
                    tracing::debug!(tenant = %self.tenant, error = %e, "deciding a group decided ahead again");
                    commit_with_retry(self.storage, self.tenant, &intents, &[], final_now, memory)
                        .await
                } else {
                    retry(self.storage, self.tenant, &intents, e, final_now, memory).await
                }
            }
        };
        let stats = self.stats;
        stats.groups.fetch_add(1, Ordering::Relaxed);
        stats.intents.fetch_add(size, Ordering::Relaxed);
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
            Ok(decisions) => answers.answer_the_rest(decisions),
            Err(e) => {
                tracing::warn!(tenant = %self.tenant, group = size, error = %e, "group failed, nothing committed");
                answers.fail_the_rest(&e);
            }
        }
    }
}

/// A failed group committed nothing, and deciding is idempotent by key, so
/// running it again is safe; one quick retry hides a transient failure
/// (a dropped connection, a serialisation error) from every caller of the
/// group. The retry looks every key up under the lock: a key found free
/// before the writer and taken since fails the first run on the UNIQUE
/// constraint, and the retry then replays it.
async fn commit_with_retry(
    storage: &Storage,
    tenant: &str,
    intents: &[&Intent],
    absent: &[bool],
    final_now: &mut (dyn FnMut(usize, &Decision) + Send),
    memory: &mut WriterMemory,
) -> Result<Vec<Decision>, LedgerError> {
    match storage
        .commit_group_with(tenant, intents, absent, final_now, memory)
        .await
    {
        Err(e) => retry(storage, tenant, intents, e, final_now, memory).await,
        ok => ok,
    }
}

/// The one retry of a group whose first run failed with `error` (see
/// [`commit_with_retry`]); errors a retry cannot cure are returned as
/// they are.
async fn retry(
    storage: &Storage,
    tenant: &str,
    intents: &[&Intent],
    error: LedgerError,
    final_now: &mut (dyn FnMut(usize, &Decision) + Send),
    memory: &mut WriterMemory,
) -> Result<Vec<Decision>, LedgerError> {
    match &error {
        LedgerError::Database(e) if !matches!(e, sqlx::Error::PoolTimedOut) => {
            tracing::info!(tenant = %tenant, error = %e, "retrying group once");
            if !is_unique_violation(e) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            storage
                .commit_group_with(tenant, intents, &[], final_now, memory)
                .await
        }
        _ => Err(error),
    }
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

/// The replies of one group's jobs. A job whose every decision is final
/// before the group commits (replays of committed entries) is answered at
/// once, so a replay does not wait for the insert and fsync of the new
/// entries it happens to share a group with; the others after the commit.
struct Answers {
    /// Per job: its reply, taken once sent.
    replies: Vec<Option<Reply>>,
    /// Per job: the decisions known before the commit.
    early: Vec<Vec<Option<Decision>>>,
    /// Per intent of the group: (job, position in the job).
    slots: Vec<(usize, usize)>,
}

impl Answers {
    fn new(job_intents: &[Vec<Intent>], replies: Vec<Reply>) -> Self {
        let mut slots = Vec::new();
        for (j, intents) in job_intents.iter().enumerate() {
            slots.extend((0..intents.len()).map(|k| (j, k)));
        }
        Self {
            replies: replies.into_iter().map(Some).collect(),
            early: job_intents.iter().map(|i| vec![None; i.len()]).collect(),
            slots,
        }
    }

    /// A decision of intent `i` that is final before the commit.
    fn decided(&mut self, i: usize, decision: &Decision) {
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
    fn answer_the_rest(self, decisions: Vec<Decision>) {
        let mut decisions = decisions.into_iter();
        for (reply, early) in self.replies.into_iter().zip(self.early) {
            let mine: Vec<Decision> = decisions.by_ref().take(early.len()).collect();
            if let Some(reply) = reply {
                // The caller may have gone away; its intents are committed anyway.
                let _ = reply.send(Ok(mine));
            }
        }
    }

    /// The group failed: every job not answered yet gets the error (the
    /// early ones were replays of committed entries, true whatever failed),
    /// transient or permanent as it was.
    fn fail_the_rest(self, error: &LedgerError) {
        for reply in self.replies.into_iter().flatten() {
            let _ = reply.send(Err(error.shared()));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::store::EntryFilter;
    use crate::test_databases::TestDb;
    use std::collections::HashSet;

    fn debit(id: &str, amount: &str) -> Intent {
        let body = serde_json::json!({
            "usage_record_id": id, "account": "cust", "amount": amount, "unit": "USD"
        });
        Intent::usage_debit(body.as_object().unwrap().clone()).unwrap()
    }

    async fn entries(storage: &Storage) -> usize {
        let filter = EntryFilter {
            limit: 100,
            ..EntryFilter::default()
        };
        storage.list_entries("t", &filter).await.unwrap().len()
    }

    /// A key found free before the writer and taken before its group: the
    /// UNIQUE constraint refuses the second entry, and the retry, looking
    /// the key up under the lock, answers a replay.
    #[tokio::test]
    async fn a_key_taken_after_the_look_up_is_replayed_not_posted_twice() {
        let storage = Storage::connect_with("sqlite::memory:", 1).await.unwrap();
        let first = debit("u1", "1");
        storage.commit_group("t", &[&first]).await.unwrap();

        let again = debit("u1", "1");
        let mut memory = WriterMemory::default();
        let stale = storage
            .commit_group_with("t", &[&again], &[true], &mut |_, _| {}, &mut memory)
            .await;
        assert!(
            matches!(&stale, Err(LedgerError::Database(e)) if is_unique_violation(e)),
            "{stale:?}"
        );
        assert_eq!(entries(&storage).await, 1);

        let decisions = commit_with_retry(
            &storage,
            "t",
            &[&again],
            &[true],
            &mut |_, _| {},
            &mut memory,
        )
        .await
        .unwrap();
        assert!(
            matches!(&decisions[..], [Decision::Replayed(e)] if e.seq == 1),
            "{decisions:?}"
        );
        assert_eq!(entries(&storage).await, 1);
    }

    /// Runs the look-up task over `requests` until they are all handled:
    /// their answers, what reached the writer, and how many were answered
    /// before it.
    async fn look_up_alone(
        storage: &Storage,
        requests: Vec<Vec<Intent>>,
    ) -> (Vec<Option<Vec<Decision>>>, Vec<Job>, u64) {
        let (to_look_up, queue) = mpsc::unbounded_channel();
        let (to_writer, mut writer_queue) = mpsc::unbounded_channel();
        let stage = Stage {
            pending: Arc::new(AtomicUsize::new(requests.iter().map(Vec::len).sum())),
            config: WriterConfig::default(),
            stats: Arc::default(),
            key_taken: KeyTaken::default(),
        };
        let stats = stage.stats.clone();
        let mut answers = Vec::new();
        for intents in requests {
            let (reply, answer) = oneshot::channel();
            let job = Job {
                intents,
                absent: Vec::new(),
                reply,
            };
            to_look_up.send(job).unwrap();
            answers.push(answer);
        }
        drop(to_look_up);
        look_up(
            storage.clone(),
            "t".to_owned(),
            queue,
            to_writer,
            stage,
            Weak::new(),
        )
        .await;
        let mut forwarded = Vec::new();
        while let Some(job) = writer_queue.recv().await {
            forwarded.push(job);
        }
        let mut answered = Vec::new();
        for mut answer in answers {
            answered.push(answer.try_recv().ok().map(Result::unwrap));
        }
        let before = stats.answered_before_group.load(Ordering::Relaxed);
        (answered, forwarded, before)
    }

    /// Replays and conflicts of committed entries are answered before the
    /// writer; a request mixing them with a new intent goes to the writer
    /// with only the free key marked.
    #[tokio::test]
    async fn committed_keys_are_answered_before_the_writer() {
        let storage = Storage::connect_with("sqlite::memory:", 1).await.unwrap();
        storage
            .commit_group("t", &[&debit("u1", "1")])
            .await
            .unwrap();
        let requests = || {
            vec![
                vec![debit("u1", "1")],
                vec![debit("u1", "2")],
                vec![debit("u1", "1"), debit("u2", "1")],
            ]
        };

        let (answered, forwarded, before) = look_up_alone(&storage, requests()).await;
        assert!(
            matches!(answered[0].as_deref(), Some([Decision::Replayed(_)])),
            "{answered:?}"
        );
        assert!(
            matches!(answered[1].as_deref(), Some([Decision::Conflict { .. }])),
            "{answered:?}"
        );
        assert!(
            answered[2].is_none(),
            "the mixed request waits for the writer"
        );
        assert_eq!(forwarded.len(), 1);
        assert_eq!(forwarded[0].absent, vec![false, true]);
        assert_eq!(before, 2);
    }

    /// One request of a replay of u1 and a new key u2: it goes to the
    /// writer, which answers the replay and posts u2.
    async fn replay_of_u1_and_new_u2(writers: &Writers) {
        let mixed = writers
            .decide_all("t", vec![debit("u1", "1"), debit("u2", "1")])
            .await
            .unwrap();
        assert!(matches!(mixed[0], Decision::Replayed(_)), "{mixed:?}");
        assert!(matches!(mixed[1], Decision::Created(_)), "{mixed:?}");
    }

    /// Through the writers, sequential requests get the same answers
    /// whichever path they take.
    #[tokio::test]
    async fn replays_and_conflicts_through_the_writers() {
        let storage = Storage::connect_with("sqlite::memory:", 1).await.unwrap();
        let writers = Writers::new(storage.clone(), nothing_recent());
        writers.decide("t", debit("u1", "1")).await.unwrap();
        let replay = writers.decide("t", debit("u1", "1")).await.unwrap();
        assert!(matches!(replay, Decision::Replayed(_)), "{replay:?}");
        let conflict = writers.decide("t", debit("u1", "2")).await.unwrap();
        assert!(
            matches!(conflict, Decision::Conflict { .. }),
            "{conflict:?}"
        );
        replay_of_u1_and_new_u2(&writers).await;
        let stats = writers.stats();
        assert_eq!(
            stats.intents.load(Ordering::Relaxed) as u64
                + stats.answered_before_group.load(Ordering::Relaxed),
            5
        );
        // A request of replays and conflicts opens no transaction, even
        // with the writer idle: only the two requests with a new key did.
        assert_eq!(stats.groups.load(Ordering::Relaxed), 2);
        assert_eq!(stats.answered_before_group.load(Ordering::Relaxed), 2);
        assert_eq!(entries(&storage).await, 2);
    }

    fn debit_of(id: &str, account: &str) -> Intent {
        let body = serde_json::json!({
            "usage_record_id": id, "account": account, "amount": "1", "unit": "USD"
        });
        Intent::usage_debit(body.as_object().unwrap().clone()).unwrap()
    }

    /// `clients` tasks per writer post `per_client` debits of 1 each, spread
    /// over four accounts, all through `writers` (one per simulated process,
    /// each with its own memory, on one database). Then the log verifies,
    /// every key is posted once, and each account's debits add up.
    async fn flood_and_check(
        storage: &Storage,
        writers: &[Writers],
        clients: usize,
        per_client: usize,
    ) {
        let mut tasks = Vec::new();
        for (w, writers) in writers.iter().enumerate() {
            for client in 0..clients {
                let writers = writers.clone();
                tasks.push(tokio::spawn(async move {
                    for n in 0..per_client {
                        let id = format!("w{w}-c{client}-{n}");
                        let account = format!("cust{}", n % 4);
                        let d = writers.decide("t", debit_of(&id, &account)).await.unwrap();
                        assert!(matches!(d, Decision::Created(_)), "{d:?}");
                    }
                }));
            }
        }
        for task in tasks {
            task.await.unwrap();
        }
        let total = writers.len() * clients * per_client;
        let report = crate::verify::verify_tenant(storage, "t", |_| {})
            .await
            .unwrap()
            .unwrap();
        assert_eq!(report.entries, total as i64);
        let filter = EntryFilter {
            limit: 10_000,
            ..EntryFilter::default()
        };
        let posted = storage.list_entries("t", &filter).await.unwrap();
        let keys: HashSet<&str> = posted.iter().map(|e| e.upstream_id.as_str()).collect();
        assert_eq!(keys.len(), total);
        let balances = storage.stored_balances("t").await.unwrap();
        for account in 0..4 {
            let b = balances.get(&format!("cust{account}"), "USD").unwrap();
            assert_eq!(
                b.debits,
                rust_decimal::Decimal::from(total / 4),
                "cust{account}"
            );
        }
    }

    /// Only a full group is decided ahead: groups of at most 4 intents fill
    /// up under a flood of single requests.
    fn small_groups() -> WriterConfig {
        WriterConfig {
            max_group: 4,
            ..WriterConfig::default()
        }
    }

    /// Under a flood, groups are decided from the writer's memory while the
    /// group before them is written, and the ledger is exactly what one
    /// group at a time would have written. With one process, nothing moves
    /// the head under them: each waits for the commit of the group before
    /// and is written, none is decided a second time.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn groups_decided_ahead_leave_the_ledger_exact() {
        for db in TestDb::every_engine(4).await {
            let writers = Writers::new(db.storage.clone(), small_groups());
            flood_and_check(&db.storage, std::slice::from_ref(&writers), 16, 40).await;
            let stats = writers.stats();
            assert!(
                stats.decided_ahead.load(Ordering::Relaxed) > 0,
                "{}: no group was decided ahead",
                db.engine()
            );
            assert_eq!(
                stats.decided_ahead_redone.load(Ordering::Relaxed),
                0,
                "{}: a group decided ahead did not find the head its group before left",
                db.engine()
            );
            db.remove().await;
        }
    }

    /// Two writers of one tenant on one database (two processes): each
    /// moves the head under the other's groups decided ahead, whose writes
    /// then refuse to write and are decided again under the lock. After a
    /// refusal a writer decides under the lock for `CONTENDED_FOR`, so
    /// refusals stay rare: without that, half of the groups were decided
    /// from memory and 20 to 37 of them (of ~80) decided again, in under a
    /// second.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_head_moved_under_a_group_decided_ahead_is_decided_again() {
        for db in TestDb::every_engine(8).await {
            let writers = [
                Writers::new(db.storage.clone(), small_groups()),
                Writers::new(db.storage.clone(), small_groups()),
            ];
            let started = Instant::now();
            flood_and_check(&db.storage, &writers, 8, 40).await;
            let redone: u64 = writers
                .iter()
                .map(|w| w.stats().decided_ahead_redone.load(Ordering::Relaxed))
                .sum();
            assert!(
                redone > 0,
                "{}: no group decided ahead found the head moved",
                db.engine()
            );
            // At most one refusal per writer per `CONTENDED_FOR`, and one
            // more for the refusals of a pipelined pair.
            let windows =
                started.elapsed().as_secs_f64() / crate::group::CONTENDED_FOR.as_secs_f64();
            let bound = 2.0 * writers.len() as f64 * (windows.floor() + 1.0);
            assert!(
                redone as f64 <= bound,
                "{}: {redone} groups decided twice (at most {bound}): decided from memory while contended",
                db.engine()
            );
            db.remove().await;
        }
    }

    /// Commits a first debit, `u1`; the memory its writer is left with.
    async fn first_debit_remembered(storage: &Storage) -> WriterMemory {
        let mut memory = WriterMemory::default();
        storage
            .commit_group_with("t", &[&debit("u1", "1")], &[], &mut |_, _| {}, &mut memory)
            .await
            .unwrap();
        memory
    }

    /// A debit `id`, decided from `memory` alone as entry `seq`; its write.
    async fn decided_from_memory(
        storage: &Storage,
        id: &str,
        seq: i64,
        memory: &mut WriterMemory,
    ) -> crate::group::PendingWrite {
        let next = debit(id, "1");
        let DecidedWrite {
            decisions, write, ..
        } = storage
            .decide_ahead("t", &[&next], &[true], memory)
            .await
            .expect("everything it needs is remembered");
        assert!(matches!(&decisions[..], [Decision::Created(e)] if e.seq == seq));
        write
    }

    /// The write of a group decided ahead may start before the group before
    /// it has committed: it waits for the head, then finds it where that
    /// group left it, and writes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_group_decided_ahead_waits_for_the_commit_before_it() {
        for db in TestDb::every_engine(4).await {
            let storage = &db.storage;
            let mut memory = first_debit_remembered(storage).await;
            // Decided under the head lock, which its transaction holds until
            // the write below commits.
            let first = storage
                .decide_group("t", &[&debit("u2", "1")], &[], &mut |_, _| {}, &mut memory)
                .await
                .unwrap()
                .write;
            let second = tokio::spawn(decided_from_memory(storage, "u3", 3, &mut memory).await);
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(!second.is_finished(), "{}: it did not wait", db.engine());
            first.await.unwrap();
            second.await.unwrap().unwrap_or_else(|e| {
                panic!("{}: the group decided ahead was refused: {e}", db.engine())
            });
            assert_eq!(entries(storage).await, 3, "{}", db.engine());
            db.remove().await;
        }
    }

    /// A group decided ahead writes nothing once the head is not where it
    /// was decided: another process appended, or a rebuild rewrote the
    /// balances (which moves no seq, only the generation).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_group_decided_ahead_writes_nothing_if_the_head_moved() {
        for moved_by_rebuild in [false, true] {
            for db in TestDb::every_engine(4).await {
                let storage = &db.storage;
                let mut memory = first_debit_remembered(storage).await;
                let write = decided_from_memory(storage, "u2", 2, &mut memory).await;
                if moved_by_rebuild {
                    storage.rebuild_balances("t").await.unwrap();
                } else {
                    storage
                        .commit_group("t", &[&debit("other", "1")])
                        .await
                        .unwrap();
                }
                assert!(
                    write.await.is_err(),
                    "{} rebuild: {moved_by_rebuild}",
                    db.engine()
                );
                let posted: Vec<String> = storage
                    .list_entries(
                        "t",
                        &EntryFilter {
                            limit: 10,
                            ..EntryFilter::default()
                        },
                    )
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|e| e.upstream_id)
                    .collect();
                let expected: &[&str] = if moved_by_rebuild {
                    &["u1"]
                } else {
                    &["u1", "other"]
                };
                assert_eq!(posted, expected, "{}", db.engine());
                db.remove().await;
            }
        }
    }

    fn idle_after(ms: u64) -> WriterConfig {
        WriterConfig {
            idle_after: Duration::from_millis(ms),
            ..WriterConfig::default()
        }
    }

    /// A tenant's writer that has nothing to do stops, and takes what it
    /// remembered with it; the tenant's next request starts a new one, which
    /// finds the log as it was.
    #[tokio::test]
    async fn an_idle_writer_stops_and_the_next_request_starts_another() {
        let storage = Storage::connect_with("sqlite::memory:", 1).await.unwrap();
        let writers = Writers::new(storage.clone(), idle_after(50));
        writers.decide("t", debit("u1", "1")).await.unwrap();
        assert_eq!(writers.queue_depth().tenants, 1);
        let stopped = || writers.stats().idle_writers_stopped.load(Ordering::Relaxed);
        let waited = Instant::now();
        while writers.queue_depth().tenants > 0 {
            assert!(
                waited.elapsed() < Duration::from_secs(5),
                "the idle writer never stopped"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(stopped(), 1);

        let replay = writers.decide("t", debit("u1", "1")).await.unwrap();
        assert!(
            matches!(replay, Decision::Replayed(ref e) if e.seq == 1),
            "{replay:?}"
        );
        let created = writers.decide("t", debit("u2", "1")).await.unwrap();
        assert!(
            matches!(created, Decision::Created(ref e) if e.seq == 2),
            "{created:?}"
        );
        assert_eq!(writers.queue_depth().tenants, 1);
        assert_eq!(entries(&storage).await, 2);
    }

    /// Requests arriving while their tenant's writer retires (it stops
    /// after 1 ms without work, so it retires between most of them) are
    /// every one answered, and each key is posted exactly once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn requests_racing_a_retiring_writer_are_all_answered() {
        let storage = Storage::connect_with("sqlite::memory:", 1).await.unwrap();
        let writers = Writers::new(storage.clone(), idle_after(1));
        let mut tasks = Vec::new();
        for client in 0..4 {
            let writers = writers.clone();
            tasks.push(tokio::spawn(async move {
                for n in 0..25u64 {
                    let id = format!("c{client}-{n}");
                    let created = writers.decide("t", debit(&id, "1")).await.unwrap();
                    assert!(matches!(created, Decision::Created(_)), "{created:?}");
                    let replay = writers.decide("t", debit(&id, "1")).await.unwrap();
                    assert!(matches!(replay, Decision::Replayed(_)), "{replay:?}");
                    tokio::time::sleep(Duration::from_micros(500 * (n % 5))).await;
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let filter = EntryFilter {
            limit: 1_000,
            ..EntryFilter::default()
        };
        let posted = storage.list_entries("t", &filter).await.unwrap();
        assert_eq!(posted.len(), 100);
        let keys: HashSet<&str> = posted.iter().map(|e| e.upstream_id.as_str()).collect();
        assert_eq!(keys.len(), 100);
        assert!(
            writers.stats().idle_writers_stopped.load(Ordering::Relaxed) > 0,
            "no writer retired during the run: the race was not exercised"
        );
    }

    /// No entry held in memory: every key reaches the look-up or the writer.
    fn nothing_recent() -> WriterConfig {
        WriterConfig {
            recent_entries_bytes: 0,
            ..WriterConfig::default()
        }
    }

    fn skip_look_ups_after(n: usize) -> WriterConfig {
        WriterConfig {
            skip_look_ups_after: n,
            ..nothing_recent()
        }
    }

    /// A retry of an entry this process committed, or found, is answered
    /// from memory with exactly what the look-up would answer; a request
    /// with one key not held goes the usual way.
    #[tokio::test]
    async fn retries_of_committed_entries_are_answered_from_recent_entries() {
        for db in TestDb::every_engine(2).await {
            let writers = Writers::new(db.storage.clone(), WriterConfig::default());
            let created = writers.decide("t", debit("u1", "1")).await.unwrap();
            let Decision::Created(original) = created else {
                panic!("{created:?}")
            };
            let replay = writers.decide("t", debit("u1", "1")).await.unwrap();
            assert!(
                matches!(&replay, Decision::Replayed(e) if **e == *original),
                "{replay:?}"
            );
            let conflict = writers.decide("t", debit("u1", "2")).await.unwrap();
            assert!(
                matches!(&conflict, Decision::Conflict { entry_id, differing_fields }
                    if *entry_id == original.id && differing_fields == &["amount"]),
                "{conflict:?}"
            );
            // Another tenant's key of the same name is not this one.
            let other = writers.decide("t2", debit("u1", "1")).await.unwrap();
            assert!(matches!(other, Decision::Created(_)), "{other:?}");
            replay_of_u1_and_new_u2(&writers).await;
            let stats = writers.stats();
            assert_eq!(stats.answered_from_recent.load(Ordering::Relaxed), 2);
            assert_eq!(stats.answered_before_group.load(Ordering::Relaxed), 0);
            assert_eq!(stats.intents.load(Ordering::Relaxed), 4);

            // Another process: its first retry is looked up in the
            // database, and what the look-up found answers the next one.
            let other_process = Writers::new(db.storage.clone(), WriterConfig::default());
            for _ in 0..2 {
                let replay = other_process.decide("t", debit("u2", "1")).await.unwrap();
                assert!(matches!(replay, Decision::Replayed(_)), "{replay:?}");
            }
            let stats = other_process.stats();
            assert_eq!(stats.answered_before_group.load(Ordering::Relaxed), 1);
            assert_eq!(stats.answered_from_recent.load(Ordering::Relaxed), 1);
            assert_eq!(stats.intents.load(Ordering::Relaxed), 0);
            assert_eq!(entries(&db.storage).await, 2);
            db.remove().await;
        }
    }

    /// Groups of at most 4, keys unlooked after `after` free ones.
    fn unlooked_small_groups(after: usize) -> WriterConfig {
        WriterConfig {
            skip_look_ups_after: after,
            recent_entries_bytes: 0,
            ..small_groups()
        }
    }

    /// After verifying the tenant's log: its entries, and the debits of
    /// `account` in USD.
    async fn verified_debits(storage: &Storage, account: &str) -> (i64, rust_decimal::Decimal) {
        let report = crate::verify::verify_tenant(storage, "t", |_| {})
            .await
            .unwrap()
            .unwrap();
        let balances = storage.stored_balances("t").await.unwrap();
        (report.entries, balances.get(account, "USD").unwrap().debits)
    }

    /// A debit of 1 on `other`, credited to `@other-revenue`.
    fn other_debit(id: &str) -> Intent {
        let body = serde_json::json!({
            "usage_record_id": id, "account": "other", "amount": "1", "unit": "USD",
            "counter_account": "@other-revenue"
        });
        Intent::usage_debit(body.as_object().unwrap().clone()).unwrap()
    }

    fn created_id(d: &Decision) -> String {
        match d {
            Decision::Created(e) => e.id.clone(),
            other => panic!("expected a new entry, got {other:?}"),
        }
    }

    /// After a run of free keys, keys reach the writer unlooked. A replay
    /// and a conflict among them still get the committed entry's answer,
    /// on the group's second decision, and nothing is posted twice; the
    /// taken key resumes look-ups, and is no sign of another writer (the
    /// next group is still decided from memory).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unlooked_keys_still_replay_and_conflict_and_look_ups_resume() {
        for db in TestDb::every_engine(4).await {
            let engine = db.engine();
            let writers = Writers::new(db.storage.clone(), skip_look_ups_after(8));
            let stats = writers.stats();
            let mut ids = Vec::new();
            // u9 moves two other accounts, which the failed group below
            // does not touch.
            for n in 0..10 {
                let d = if n == 9 {
                    writers.decide("t", other_debit("u9")).await
                } else {
                    writers.decide("t", debit(&format!("u{n}"), "1")).await
                };
                ids.push(created_id(&d.unwrap()));
            }
            assert_eq!(
                stats.not_looked_up.load(Ordering::Relaxed),
                2,
                "{engine}: the keys after a run of 8 free ones go unlooked"
            );

            let replay = writers.decide("t", debit("u0", "1")).await.unwrap();
            match &replay {
                Decision::Replayed(e) => assert_eq!(e.id, ids[0], "{engine}"),
                other => panic!("{engine}: {other:?}"),
            }
            assert_eq!(stats.not_looked_up.load(Ordering::Relaxed), 3, "{engine}");
            assert_eq!(
                stats.key_taken_groups.load(Ordering::Relaxed),
                1,
                "{engine}"
            );

            // Look-ups resumed: a conflict is answered before any group.
            let before = stats.answered_before_group.load(Ordering::Relaxed);
            let conflict = writers.decide("t", debit("u1", "2")).await.unwrap();
            assert!(
                matches!(&conflict, Decision::Conflict { entry_id, .. } if *entry_id == ids[1]),
                "{engine}: {conflict:?}"
            );
            assert_eq!(
                stats.answered_before_group.load(Ordering::Relaxed),
                before + 1,
                "{engine}"
            );
            // ... and the key taken cost nothing more than forgetting what
            // the failed group touched: no lock path as if another process
            // appended, and a group on another account is decided from
            // memory at once.
            let ahead = stats.decided_ahead.load(Ordering::Relaxed);
            created_id(&writers.decide("t", other_debit("u10")).await.unwrap());
            assert_eq!(
                stats.decided_ahead.load(Ordering::Relaxed),
                ahead + 1,
                "{engine}: the group after a key taken is decided from memory"
            );
            created_id(&writers.decide("t", debit("u11", "1")).await.unwrap());

            // Unlooked again after 8 more free keys; then one request holds
            // a new key, a replay, a conflict and a key repeated inside it.
            for n in 12..18 {
                created_id(
                    &writers
                        .decide("t", debit(&format!("u{n}"), "1"))
                        .await
                        .unwrap(),
                );
            }
            let unlooked = stats.not_looked_up.load(Ordering::Relaxed);
            let mixed = writers
                .decide_all(
                    "t",
                    vec![
                        debit("u18", "1"),
                        debit("u2", "1"),
                        debit("u3", "5"),
                        debit("u18", "1"),
                    ],
                )
                .await
                .unwrap();
            assert_eq!(
                stats.not_looked_up.load(Ordering::Relaxed),
                unlooked + 4,
                "{engine}"
            );
            let new_id = created_id(&mixed[0]);
            assert!(
                matches!(&mixed[1], Decision::Replayed(e) if e.id == ids[2]),
                "{engine}: {mixed:?}"
            );
            assert!(
                matches!(&mixed[2], Decision::Conflict { entry_id, .. } if *entry_id == ids[3]),
                "{engine}: {mixed:?}"
            );
            assert!(
                matches!(&mixed[3], Decision::Replayed(e) if e.id == new_id),
                "{engine}: {mixed:?}"
            );
            assert_eq!(
                stats.key_taken_groups.load(Ordering::Relaxed),
                2,
                "{engine}"
            );

            assert_eq!(
                entries(&db.storage).await,
                19,
                "{engine}: u0..u18, once each"
            );
            let (entries, debits) = verified_debits(&db.storage, "cust").await;
            assert_eq!(entries, 19, "{engine}");
            assert_eq!(debits, rust_decimal::Decimal::from(17), "{engine}");
            let (_, debits) = verified_debits(&db.storage, "other").await;
            assert_eq!(debits, rust_decimal::Decimal::from(2), "{engine}");
        }
    }

    /// Many clients post new keys and replays of their own keys while keys
    /// go unlooked and groups are decided ahead: every replay returns the
    /// first entry, and the ledger holds each key once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn replays_among_unlooked_keys_under_a_flood_leave_the_ledger_exact() {
        for db in TestDb::every_engine(4).await {
            let engine = db.engine();
            let config = unlooked_small_groups(16);
            let writers = Writers::new(db.storage.clone(), config);
            let mut tasks = Vec::new();
            for client in 0..8 {
                let writers = writers.clone();
                tasks.push(tokio::spawn(async move {
                    let mut ids = Vec::new();
                    for n in 0..60 {
                        if n % 6 == 5 {
                            let k = n / 2;
                            let d = writers
                                .decide("t", debit_of(&format!("c{client}-{k}"), "cust0"))
                                .await
                                .unwrap();
                            assert!(
                                matches!(&d, Decision::Replayed(e) if e.id == ids[k]),
                                "{d:?}"
                            );
                        } else {
                            let id = format!("c{client}-{}", ids.len());
                            let d = writers.decide("t", debit_of(&id, "cust0")).await.unwrap();
                            ids.push(created_id(&d));
                        }
                    }
                    ids.len()
                }));
            }
            let mut total = 0;
            for task in tasks {
                total += task.await.unwrap();
            }
            let stats = writers.stats();
            assert!(stats.not_looked_up.load(Ordering::Relaxed) > 0, "{engine}");
            assert!(
                stats.key_taken_groups.load(Ordering::Relaxed) > 0,
                "{engine}"
            );
            assert_eq!(
                stats.decided_ahead_redone.load(Ordering::Relaxed),
                0,
                "{engine}: a key taken was taken for another writer's append"
            );
            let (entries, debits) = verified_debits(&db.storage, "cust0").await;
            assert_eq!(entries, total as i64, "{engine}");
            assert_eq!(debits, rust_decimal::Decimal::from(total), "{engine}");
        }
    }

    /// Two processes (two writers on one database) post the same keys at
    /// once while keys go unlooked in both: each key is posted once, both
    /// answers name the same entry, and the ledger verifies.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn two_processes_posting_the_same_unlooked_keys_post_each_once() {
        for db in TestDb::every_engine(8).await {
            let engine = db.engine();
            let config = unlooked_small_groups(8);
            let writers = [
                Writers::new(db.storage.clone(), config),
                Writers::new(db.storage.clone(), config),
            ];
            // A run of free keys in each, so what follows goes unlooked.
            for (w, writers) in writers.iter().enumerate() {
                for n in 0..8 {
                    let d = writers.decide("t", debit_of(&format!("own{w}-{n}"), "cust0"));
                    created_id(&d.await.unwrap());
                }
            }
            let mut tasks = Vec::new();
            for (w, writers) in writers.iter().enumerate() {
                for client in 0..4 {
                    let writers = writers.clone();
                    tasks.push(tokio::spawn(async move {
                        let mut answers = Vec::new();
                        for n in 0..30 {
                            // Both processes post every key, in other orders.
                            let k = if w == 0 { n } else { 29 - n };
                            let id = format!("shared-{client}-{k}");
                            let d = writers.decide("t", debit_of(&id, "cust0")).await.unwrap();
                            let entry = match d {
                                Decision::Created(e) | Decision::Replayed(e) => e.id.clone(),
                                other => panic!("{other:?}"),
                            };
                            answers.push((id, entry));
                        }
                        answers
                    }));
                }
            }
            let mut seen: HashMap<String, String> = HashMap::new();
            for task in tasks {
                for (id, entry) in task.await.unwrap() {
                    let first = seen.entry(id.clone()).or_insert_with(|| entry.clone());
                    assert_eq!(*first, entry, "{engine}: {id} answered two entries");
                }
            }
            assert_eq!(seen.len(), 120, "{engine}");
            let unlooked: u64 = writers
                .iter()
                .map(|w| w.stats().not_looked_up.load(Ordering::Relaxed))
                .sum();
            assert!(unlooked > 0, "{engine}: no key went unlooked");
            let (entries, debits) = verified_debits(&db.storage, "cust0").await;
            assert_eq!(entries, 136, "{engine}: 16 own keys, 120 shared, once each");
            assert_eq!(debits, rust_decimal::Decimal::from(136), "{engine}");
            db.remove().await;
        }
    }
}
