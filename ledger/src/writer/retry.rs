//! The one retry of a failed group.

use std::time::Duration;

use crate::decide::Decision;
use crate::group::RoundCommitter;
use crate::group::{commit_in_round, Committed, Group, WriterMemory};
use crate::LedgerError;

/// A failed group committed nothing, and deciding is idempotent by key, so
/// running it again is safe; one quick retry hides a transient failure
/// (a dropped connection, a serialisation error) from every caller of the
/// group. Both runs commit in a commit round. The retry looks every key up under the lock: a key found free
/// before the writer and taken since fails the first run on the UNIQUE
/// constraint, and the retry then replays it.
pub(super) async fn commit_with_retry(
    commits: &RoundCommitter,
    group: Group<'_>,
    final_now: &mut (dyn FnMut(usize, &Decision) + Send),
    memory: &mut WriterMemory,
) -> Result<Committed, LedgerError> {
    match commit_in_round(commits, group, final_now, memory).await {
        Err(e) => retry(commits, group, e, final_now, memory).await,
        ok => ok,
    }
}

/// The one retry of a group whose first run failed with `error` (see
/// [`commit_with_retry`]); errors a retry cannot cure are returned as
/// they are.
pub(super) async fn retry(
    commits: &RoundCommitter,
    group: Group<'_>,
    error: LedgerError,
    final_now: &mut (dyn FnMut(usize, &Decision) + Send),
    memory: &mut WriterMemory,
) -> Result<Committed, LedgerError> {
    match &error {
        LedgerError::Database(e) if !matches!(e, sqlx::Error::PoolTimedOut) => {
            tracing::info!(tenant = %group.tenant, error = %e, "retrying group once");
            if !is_unique_violation(e) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let again = Group::new(group.tenant, group.requests);
            commit_in_round(commits, again, final_now, memory).await
        }
        _ => Err(error),
    }
}

pub(super) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}
