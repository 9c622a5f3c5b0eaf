//! A decided group on its way to the database: its decisions and answers,
//! its write running on a task of its own, and the outcome of that task.
//! Shared by the group loop, which starts writes, and by
//! [`super::finish`], which answers them.

use std::time::Instant;

use tokio::sync::oneshot;

use crate::decide::Decision;
use crate::group::PendingWrite;
use crate::request::EntryRequest;
use crate::store::Fence;
use crate::LedgerError;

use super::answers::Answers;

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
