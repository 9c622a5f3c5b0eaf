//! The I/O of one group transaction (SPEC §6), the same shape on every
//! engine: the reads a group needs under the tenant's head lock, and the
//! rows it writes. What is read and written is decided elsewhere
//! (in the group module); this is plain data in and out.

use std::future::Future;

use sqlx::{ColumnIndex, Decode, Row, Type};

use crate::balance::AccountBalance;

use crate::chain::Head;
use crate::entry::StoredEntry;
use crate::request::EntryKind;
use crate::rule_state::{StateKey, StateRow};
use crate::LedgerError;

/// The head a group was decided on, and a writer's memory is valid at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fence {
    pub head: Head,
    pub generation: i64,
}

impl Fence {
    /// The fence of a tenant with no head row: the empty chain.
    pub(crate) const EMPTY: Fence = Fence {
        head: Head::EMPTY,
        generation: 0,
    };
}

/// The primitives an engine provides inside one write transaction. Dropping
/// the value without `commit` rolls everything back.
pub(crate) trait GroupTransaction: Send {
    /// Locks the tenant's head row (creating it at seq 0) and reads it. Held
    /// until commit: it serialises every group of the tenant, across processes.
    fn lock_head(
        &mut self,
        tenant: &str,
    ) -> impl Future<Output = Result<Fence, LedgerError>> + Send;

    /// Entries already holding one of `keys`.
    fn entries_with_keys(
        &mut self,
        tenant: &str,
        keys: &[(EntryKind, &str)],
    ) -> impl Future<Output = Result<Vec<StoredEntry>, LedgerError>> + Send;

    /// Stored balances of `accounts`: (account, unit, balance).
    fn balances_of(
        &mut self,
        tenant: &str,
        accounts: &[&str],
    ) -> impl Future<Output = Result<Vec<(String, String, AccountBalance)>, LedgerError>> + Send;

    /// Entries with these ids (the targets of reversals).
    fn entries_by_ids(
        &mut self,
        tenant: &str,
        ids: &[&str],
    ) -> impl Future<Output = Result<Vec<StoredEntry>, LedgerError>> + Send;

    /// Rule-state rows `(kind, key, value)` for these keys; absent ones are skipped.
    fn records_of(
        &mut self,
        tenant: &str,
        keys: &[StateKey],
    ) -> impl Future<Output = Result<Vec<(String, String, String)>, LedgerError>> + Send;

    /// Writes absolute balances (the head lock makes read-then-write safe).
    fn write_balances(
        &mut self,
        tenant: &str,
        rows: &[(&str, &str, AccountBalance)],
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// Everything a group writes: its entries, the balances and records
    /// they changed, and the head moved from `write.start` to `write.head`.
    /// Writes nothing and fails if the head is not at `write.start` (another
    /// group or process appended, or a rebuild bumped the generation). An
    /// engine may send it as one statement.
    fn write_group(
        &mut self,
        write: &GroupWrite,
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;

    fn commit(self) -> impl Future<Output = Result<(), LedgerError>> + Send;
}

/// The rows one group writes (see [`GroupTransaction::write_group`]).
pub(crate) struct GroupWrite {
    pub tenant: String,
    /// The entries to insert, in seq order.
    pub entries: Vec<StoredEntry>,
    /// Absolute balances to upsert: (account, unit, balance).
    pub balances: Vec<(String, String, AccountBalance)>,
    /// Rule-state rows to upsert.
    pub records: Vec<StateRow>,
    /// The head the group was decided on: it writes only on top of it.
    pub start: Fence,
    /// The head it leaves.
    pub head: Head,
}

/// The head of a group's write was not the one it was decided on.
pub(crate) fn head_moved() -> LedgerError {
    LedgerError::Unavailable("the head moved under a group decided ahead".to_owned())
}

impl GroupWrite {
    /// Writes the group and commits it.
    pub(crate) async fn apply<T: GroupTransaction>(&self, mut tx: T) -> Result<(), LedgerError> {
        let started = std::time::Instant::now();
        tx.write_group(self).await?;
        let written = started.elapsed();
        tx.commit().await?;
        tracing::debug!(
            entries = self.entries.len(),
            write_ms = written.as_secs_f64() * 1e3,
            commit_ms = (started.elapsed() - written).as_secs_f64() * 1e3,
            "group written"
        );
        Ok(())
    }
}

/// The head row as a writer's fence (`SELECT seq, hash, generation`).
pub(crate) fn decode_fence<'r, R>(row: Option<&'r R>) -> Result<Fence, LedgerError>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    match row {
        Some(r) => fence_from(
            r.try_get("seq")?,
            &r.try_get::<String, _>("hash")?,
            r.try_get("generation")?,
        ),
        None => Ok(Fence::EMPTY),
    }
}

/// The fence of a head row's `seq`, `hash` (hex) and `generation`.
pub(crate) fn fence_from(seq: i64, hash: &str, generation: i64) -> Result<Fence, LedgerError> {
    Ok(Fence {
        head: Head {
            seq,
            hash: crate::chain::decode_hash(hash)
                .ok_or_else(|| LedgerError::Corrupt(format!("head hash {hash:?}")))?,
        },
        generation,
    })
}
