//! A group decided, its write and commit still to run on their own.

use crate::decide::Decision;
use crate::store::Fence;
use crate::LedgerError;

/// A group's write and commit, ready to run on its own task.
pub(crate) type PendingWrite =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), LedgerError>> + Send>>;

/// A group decided, its write still to run.
pub(crate) struct DecidedWrite {
    pub decisions: Vec<Decision>,
    pub write: PendingWrite,
    /// The head it was decided on: should the write find a key taken (and
    /// so write nothing), the writer's memory rewinds to it.
    pub start: Fence,
}
