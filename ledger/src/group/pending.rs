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
    /// The head its write leaves once committed (`start` when it appends
    /// nothing).
    pub end: Fence,
}

impl DecidedWrite {
    /// Runs the write; its decisions and the head it left once it
    /// committed. If it failed, `memory` forgets: the commit may have
    /// happened or not, so nothing remembered holds.
    pub(crate) async fn committed(
        self,
        memory: &mut WriterMemory,
    ) -> Result<Committed, LedgerError> {
        if let Err(e) = self.write.await {
            memory.forget();
            return Err(e);
        }
        Ok(Committed {
            decisions: self.decisions,
            start: self.start,
            end: self.end,
        })
    }
}

/// A group committed: its decisions, and the heads it was decided on and
/// left.
#[derive(Debug)]
pub(crate) struct Committed {
    pub decisions: Vec<Decision>,
    pub start: Fence,
    pub end: Fence,
}

impl Committed {
    /// The head's seq if the group appended to the log: entries answered
    /// as `Created`, and the log entries of intent operations, which are
    /// answered as an intent, alike.
    pub(crate) fn appended_up_to(&self) -> Option<i64> {
        (self.end.head.seq > self.start.head.seq).then_some(self.end.head.seq)
    }
}
