//! Group commit across tenants: the groups of different tenants that are
//! ready at the same moment share one transaction, and so one fsync. It is
//! the only way a group commits.
//!
//! A tenant's writer already gathers its own requests into groups; with many
//! tenants each posting now and then, every group held one request and paid a
//! transaction and an fsync of its own (SQLite: 1.0 request a group over 300
//! tenants against 30 at one tenant). A committer takes every piece of work
//! waiting when it is free, decides the groups that need reading on one
//! transaction, writes the rows of all together (one statement per table)
//! and commits once. A round whose pieces were all decided ahead is, on
//! PostgreSQL, one statement in autocommit. A piece that fails is told so
//! at once; it never fails the others, which commit without it (a group
//! whose head moved is refused alone; a joint write that fails is written
//! again piece by piece, each in a savepoint). A commit that fails fails
//! every piece of that round, as a failed commit of its own did before (the
//! outcome is unknown: the writers read again).
//!
//! Each tenant keeps its own head, chain and order: the work of one round
//! locks and moves each tenant's head as a transaction of its own would,
//! and a tenant's writer hands over its next group only once the round of
//! the one before has ended. Rounds lock heads in tenant order, so two
//! committers (or two processes) never wait on each other in a circle.
//! Routed by tenant (PostgreSQL on Citus) a round holds one piece.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, Mutex};

use crate::store::{
    head_moved, EngineGroup, GroupTransaction, GroupWrite, PieceTx, ReadAhead, ReadAheadRows,
    Storage,
};
use crate::LedgerError;

/// One tenant's part of a round: its reads on the round's transaction
/// (answered from what the round read ahead where they can be), and the
/// rows it writes, which the round writes (with those of the other pieces,
/// where the engine allows).
pub(crate) type RoundWork = Box<
    dyn for<'t> FnOnce(
            PieceTx<'t>,
        ) -> Pin<
            Box<dyn Future<Output = Result<Option<GroupWrite>, LedgerError>> + Send + 't>,
        > + Send,
>;

/// Most pieces of work in one round: a round holds its tenants' heads (on
/// SQLite, the whole database) until it commits, so a round that grew
/// without bound would make the tenants in the next one wait as long.
pub const MAX_ROUND_WORK: usize = 256;

/// Most requests in one round, summed over its pieces of work.
pub const MAX_ROUND_REQUESTS: usize = 2_000;

/// The outcome of a piece of work: whether what it wrote is committed.
pub(crate) type Committed = oneshot::Receiver<Result<(), LedgerError>>;

struct Piece {
    tenant: String,
    requests: usize,
    work: Work,
    committed: Answer,
}

/// What a piece brings to its round.
enum Work {
    /// A group to decide on the round's transaction, reading ahead what
    /// `reads` says, if it knows.
    Decide {
        reads: Option<ReadAhead>,
        work: RoundWork,
    },
    /// A group decided ahead from its writer's memory: only rows to write,
    /// on top of the head it was decided on.
    Write(GroupWrite),
}

/// Hands work to the committers; cloned by every tenant's writer.
#[derive(Clone)]
pub struct RoundCommitter {
    queue: mpsc::UnboundedSender<Piece>,
}

/// Round statistics, for benchmarks and operators.
#[derive(Debug, Default)]
pub struct RoundStats {
    pub rounds: std::sync::atomic::AtomicU64,
    pub pieces: std::sync::atomic::AtomicU64,
    /// Pieces refused (rolled back to their savepoint, or whose head had
    /// moved) while the rest of their round committed.
    pub pieces_failed: std::sync::atomic::AtomicU64,
}

impl RoundCommitter {
    /// Starts `committers` tasks (at least one), each running one round at
    /// a time (SQLite has one write connection: one committer).
    pub fn start(storage: Storage, committers: usize, stats: Arc<RoundStats>) -> Self {
        let (queue, receiver) = mpsc::unbounded_channel();
        let receiver = Arc::new(Mutex::new(Queue {
            receiver,
            held: VecDeque::new(),
        }));
        let committers = match storage {
            Storage::Sqlite(_) => 1,
            Storage::Postgres(_) => committers.max(1),
        };
        for _ in 0..committers {
            tokio::spawn(commit_rounds(
                storage.clone(),
                receiver.clone(),
                stats.clone(),
            ));
        }
        Self { queue }
    }

    /// Queues `work` of `tenant` (`requests` of them, reading what `reads`
    /// says, if it knows) for the next round;
    /// the receiver says whether it committed. Dropped unanswered only if
    /// the committers stopped: then nothing of it committed.
    pub(crate) fn submit(
        &self,
        tenant: &str,
        requests: usize,
        reads: Option<ReadAhead>,
        work: RoundWork,
    ) -> Committed {
        self.send(tenant, requests, Work::Decide { reads, work })
    }

    /// Queues the rows of a group of `requests` decided ahead for the next
    /// round: written only if its tenant's head is still at `write.start`.
    pub(crate) fn submit_write(&self, requests: usize, write: GroupWrite) -> Committed {
        let tenant = write.tenant.clone();
        self.send(&tenant, requests, Work::Write(write))
    }

    fn send(&self, tenant: &str, requests: usize, work: Work) -> Committed {
        let (committed, outcome) = oneshot::channel();
        let piece = Piece {
            tenant: tenant.to_owned(),
            requests,
            work,
            committed,
        };
        if let Err(mpsc::error::SendError(piece)) = self.queue.send(piece) {
            let _ = piece.committed.send(Err(LedgerError::Unavailable(
                "the committer has stopped".to_owned(),
            )));
        }
        outcome
    }
}

/// The pieces waiting for a round, and those held back for the next one.
struct Queue {
    receiver: mpsc::UnboundedReceiver<Piece>,
    /// Pieces of a tenant that already had a piece in the round being
    /// taken (or one held before them), in the order they came.
    held: VecDeque<Piece>,
}

impl Queue {
    /// The next round: at most `most` pieces and [`MAX_ROUND_REQUESTS`]
    /// requests, and at most one piece of a tenant. A tenant's writer can
    /// have two pieces waiting at once (the rows of a group decided ahead,
    /// and the retry of the group under it that failed); in one round they
    /// would share the tenant's head and its rows read ahead, which are
    /// kept by tenant. The second waits for the next round, and a tenant's
    /// pieces keep the order they came in. `None` once every writer is
    /// gone and nothing is held.
    async fn next_round(&mut self, most: usize) -> Option<Vec<Piece>> {
        let mut round: Vec<Piece> = Vec::new();
        // Tenants with a piece in this round or one still held: a piece of
        // theirs that comes now waits behind it.
        let mut tenants: HashSet<String> = HashSet::new();
        let mut requests = 0;
        let mut still_held = VecDeque::with_capacity(self.held.len());
        while let Some(piece) = self.held.pop_front() {
            let room = round.len() < most && requests < MAX_ROUND_REQUESTS;
            if tenants.insert(piece.tenant.clone()) && room {
                requests += piece.requests;
                round.push(piece);
            } else {
                still_held.push_back(piece);
            }
        }
        self.held = still_held;
        if round.is_empty() {
            let first = self.receiver.recv().await?;
            tenants.insert(first.tenant.clone());
            requests += first.requests;
            round.push(first);
        }
        while round.len() < most && requests < MAX_ROUND_REQUESTS {
            let Ok(piece) = self.receiver.try_recv() else {
                break;
            };
            if tenants.insert(piece.tenant.clone()) {
                requests += piece.requests;
                round.push(piece);
            } else {
                self.held.push_back(piece);
            }
        }
        Some(round)
    }
}

async fn commit_rounds(storage: Storage, queue: Arc<Mutex<Queue>>, stats: Arc<RoundStats>) {
    use std::sync::atomic::Ordering::Relaxed;
    let most = storage.most_groups_a_round(MAX_ROUND_WORK);
    loop {
        let Some(mut round) = queue.lock().await.next_round(most).await else {
            return;
        };
        // A round holds one piece of a tenant, so the sort is the lock
        // order across tenants and keeps each tenant's place.
        round.sort_by(|a, b| a.tenant.cmp(&b.tenant));
        assert!(
            round.windows(2).all(|w| w[0].tenant != w[1].tenant),
            "a round holds at most one piece of a tenant (Queue::next_round)"
        );
        stats.rounds.fetch_add(1, Relaxed);
        stats.pieces.fetch_add(round.len() as u64, Relaxed);
        let failed = if storage.writes_alone() && round.iter().all(Piece::is_write) {
            write_alone(&storage, round).await
        } else {
            run_round(&storage, round).await
        };
        stats.pieces_failed.fetch_add(failed, Relaxed);
    }
}

impl Piece {
    fn is_write(&self) -> bool {
        matches!(self.work, Work::Write(_))
    }
}

/// A round of groups all decided ahead, on an engine that writes them as
/// one statement in autocommit (PostgreSQL): no transaction around it, one
/// round trip. A group whose head moved is refused alone; should the
/// statement fail (a key taken by another process), each group is written
/// again alone, so only the one that fails alone is refused. Returns how
/// many groups were refused while others committed.
async fn write_alone(storage: &Storage, round: Vec<Piece>) -> u64 {
    let mut writes = Vec::with_capacity(round.len());
    for piece in round {
        match piece.work {
            Work::Write(write) => writes.push((write, piece.committed)),
            // Never: the caller checked every piece is a write.
            Work::Decide { .. } => {
                let _ = piece.committed.send(Err(LedgerError::Unavailable(
                    "a group to decide reached a round of writes".to_owned(),
                )));
            }
        }
    }
    let all: Vec<&GroupWrite> = writes.iter().map(|(w, _)| w).collect();
    let together = storage.write_alone(&all).await;
    drop(all);
    let mut failed = 0;
    match together {
        Ok(written) => {
            for ((_, answer), written) in writes.into_iter().zip(written) {
                let outcome = if written { Ok(()) } else { Err(head_moved()) };
                failed += u64::from(!written);
                let _ = answer.send(outcome);
            }
        }
        Err(e) if writes.len() == 1 => {
            // As it is: a key taken must reach the writer as one.
            if let Some((_, answer)) = writes.pop() {
                let _ = answer.send(Err(e));
            }
        }
        Err(_) => {
            for (write, answer) in writes {
                let outcome = one_written(storage.write_alone(&[&write]).await);
                failed += u64::from(outcome.is_err());
                let _ = answer.send(outcome);
            }
        }
    }
    failed
}

/// The outcome of a write of one group: written, its head moved, or failed.
fn one_written(written: Result<Vec<bool>, LedgerError>) -> Result<(), LedgerError> {
    match written?[..] {
        [true] => Ok(()),
        _ => Err(head_moved()),
    }
}

/// Runs one round on a transaction and answers each piece; returns how
/// many pieces were refused while the round went on.
async fn run_round(storage: &Storage, round: Vec<Piece>) -> u64 {
    let mut tx = match storage.begin_group().await {
        Ok(tx) => tx,
        Err(e) => {
            fail_all(round.into_iter().map(|p| p.committed), &e);
            return 0;
        }
    };
    let outcome = reads_then_writes(&mut tx, round).await;
    let (done, failed) = match outcome {
        Ok(outcome) => outcome,
        Err((answers, e)) => {
            fail_all(answers.into_iter(), &e);
            return 0;
        }
    };
    match GroupTransaction::commit(tx).await {
        Ok(()) => {
            for piece in done {
                let _ = piece.send(Ok(()));
            }
        }
        Err(e) => fail_all(done.into_iter(), &e),
    }
    failed
}

type Answer = oneshot::Sender<Result<(), LedgerError>>;

/// What a round left to commit (the pieces to tell once it has), and how
/// many pieces failed on their own; or the failure that fails the round,
/// with every piece still to be told: the transaction is then rolled back.
type Outcome = Result<(Vec<Answer>, u64), (Vec<Answer>, LedgerError)>;

/// Every piece reads and decides first (what they asked for read ahead
/// for all of them, [`EngineGroup::read_ahead`], which also locks the heads
/// of the groups decided ahead where [`EngineGroup::locks_heads`], so that
/// every head of the round is locked in tenant order; a round of groups
/// all decided ahead on SQLite reads nothing), and then the writes of all go out together
/// ([`EngineGroup::write_many`]: one statement per table). A group whose
/// head moved is refused on its own (on SQLite it fails the joint write).
/// Should the joint write fail, the groups are written again one by one,
/// each in a savepoint, and only the ones that fail alone are refused. The
/// reads write nothing a failed piece must take back (a head row at seq 0
/// at most, which locking the head creates anyway). A read that fails in
/// the database fails its piece; on PostgreSQL, where a failed statement
/// aborts the transaction, it fails the round with it (a database fault,
/// not anything a tenant sent).
async fn reads_then_writes(tx: &mut EngineGroup, round: Vec<Piece>) -> Outcome {
    let lock_heads = tx.locks_heads();
    let heads_only: Vec<ReadAhead> = round
        .iter()
        .filter(|p| lock_heads && p.is_write())
        .map(|p| ReadAhead {
            tenant: p.tenant.clone(),
            ..ReadAhead::default()
        })
        .collect();
    let mut heads_only_iter = heads_only.iter();
    let asks: Vec<&ReadAhead> = round
        .iter()
        .filter_map(|p| match &p.work {
            Work::Decide { reads, .. } => reads.as_ref(),
            Work::Write(_) if lock_heads => heads_only_iter.next(),
            Work::Write(_) => None,
        })
        .collect();
    let read: Vec<ReadAheadRows> = if asks.is_empty() {
        Vec::new()
    } else {
        match tx.read_ahead(&asks).await {
            Ok(read) => read,
            Err(e) => return Err((round.into_iter().map(|p| p.committed).collect(), e)),
        }
    };
    drop(asks);
    let mut read = read.into_iter();
    let mut writes = Vec::with_capacity(round.len());
    let mut done = Vec::with_capacity(round.len());
    let mut failed = 0;
    for piece in round {
        match piece.work {
            Work::Write(write) => {
                if lock_heads {
                    // Its head is locked; its rows are not needed.
                    read.next();
                }
                writes.push((write, piece.committed));
            }
            Work::Decide { reads, work } => {
                // The asks were taken in round order: a piece that asked
                // gets its rows.
                let rows = match reads {
                    Some(_) => read.next().unwrap_or_default(),
                    None => ReadAheadRows::default(),
                };
                match work(PieceTx { tx, rows }).await {
                    Ok(Some(write)) => writes.push((write, piece.committed)),
                    Ok(None) => done.push(piece.committed),
                    Err(e) => {
                        failed += 1;
                        let _ = piece.committed.send(Err(e));
                    }
                }
            }
        }
    }
    let all: Vec<&GroupWrite> = writes.iter().map(|(w, _)| w).collect();
    if writes.len() == 1 && done.is_empty() {
        // Alone in its round: a failure rolls back the transaction itself.
        let written = one_written(tx.write_many(&all).await);
        drop(all);
        if let Some((_, answer)) = writes.pop() {
            return match written {
                Ok(()) => Ok((vec![answer], failed)),
                Err(e) => {
                    let _ = answer.send(Err(e));
                    Err((Vec::new(), rolled_back()))
                }
            };
        }
        return Ok((done, failed));
    }
    if all.is_empty() {
        return Ok((done, failed));
    }
    let together = match savepoint(tx).await {
        Ok(()) => tx.write_many(&all).await,
        Err(e) => return Err((answers(writes, done), e)),
    };
    drop(all);
    if let Ok(written) = together {
        if let Err(e) = tx.execute("RELEASE SAVEPOINT piece").await {
            return Err((answers(writes, done), e));
        }
        for ((_, answer), written) in writes.into_iter().zip(written) {
            if written {
                done.push(answer);
            } else {
                // Its head moved: it wrote nothing, the others did.
                failed += 1;
                let _ = answer.send(Err(head_moved()));
            }
        }
        return Ok((done, failed));
    }
    if let Err(e) = undo(tx).await {
        return Err((answers(writes, done), e));
    }
    let mut writes = writes.into_iter();
    while let Some((write, answer)) = writes.next() {
        let written = match savepoint(tx).await {
            Ok(()) => one_written(tx.write_many(&[&write]).await),
            Err(e) => {
                let rest = std::iter::once(answer).chain(writes.map(|(_, a)| a));
                return Err((rest.chain(done).collect(), e));
            }
        };
        let ended = match written {
            Ok(()) => {
                done.push(answer);
                tx.execute("RELEASE SAVEPOINT piece").await
            }
            Err(e) => {
                failed += 1;
                let _ = answer.send(Err(e));
                undo(tx).await
            }
        };
        if let Err(e) = ended {
            return Err((writes.map(|(_, a)| a).chain(done).collect(), e));
        }
    }
    Ok((done, failed))
}

/// The piece alone in its round failed: its round is rolled back whole.
fn rolled_back() -> LedgerError {
    LedgerError::Unavailable("the round's only piece failed".to_owned())
}

async fn savepoint(tx: &mut EngineGroup) -> Result<(), LedgerError> {
    tx.execute("SAVEPOINT piece").await
}

/// Takes back what was written since the last savepoint, and ends it.
async fn undo(tx: &mut EngineGroup) -> Result<(), LedgerError> {
    tx.execute("ROLLBACK TO SAVEPOINT piece").await?;
    tx.execute("RELEASE SAVEPOINT piece").await
}

fn answers(writes: Vec<(GroupWrite, Answer)>, done: Vec<Answer>) -> Vec<Answer> {
    writes.into_iter().map(|(_, a)| a).chain(done).collect()
}

fn fail_all(pieces: impl Iterator<Item = Answer>, e: &LedgerError) {
    for piece in pieces {
        let _ = piece.send(Err(e.shared()));
    }
}

#[cfg(test)]
#[path = "committer_tests.rs"]
mod tests;
