//! A group decided, its write and commit still to run on their own.

use super::memory::WriterMemory;
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

impl DecidedWrite {
    /// Runs the write; its decisions once it committed. If it failed,
    /// `memory` forgets: the commit may have happened or not, so nothing
    /// remembered holds.
    pub(crate) async fn committed(
        self,
        memory: &mut WriterMemory,
    ) -> Result<Vec<Decision>, LedgerError> {
        if let Err(e) = self.write.await {
            memory.forget();
            return Err(e);
        }
        Ok(self.decisions)
    }
}
