//! The balances rebuild: a tenant's stored balances made `fold(log)` again,
//! computed and written under the head lock. Balances are the ledger's own
//! table, kept current by the writer with each group; the rebuild is for
//! an operator who suspects them (`tally projections rebuild`) and writes
//! only the rows that differ ([`changes`]). Each engine folds the log its
//! own fastest way ([`sqlite`], [`postgres`]).

mod changes;
mod postgres;
mod sqlite;

use sqlx::{ColumnIndex, Decode, Row, Type};

pub use changes::stored_total_is;
use changes::{balance_changes, StoredBalance};

use super::log::{EngineRef, LockedConnection};
use super::rows::fold_hold_row;
use super::storage::Storage;
use crate::fold::LogFold;
use crate::on_engine;
use crate::LedgerError;

/// Replaces a tenant's balances with `fold(tenant's log)`, computed and
/// written under the head lock so no group commits in between. Returns
/// (the head seq folded to, the balances).
pub async fn rebuild_balances(
    storage: &Storage,
    tenant: &str,
) -> Result<(i64, usize), LedgerError> {
    let started = std::time::Instant::now();
    let mut lock = storage.lock_tenant(tenant).await?;
    let head_seq = lock.head().seq;
    let (projection, folded) = match (storage.engine(), lock.connection()) {
        (EngineRef::Sqlite(s), LockedConnection::Sqlite(conn)) => {
            let (projection, folded) = sqlite::fold(s.pool(), conn, tenant, head_seq).await?;
            (projection, Some(folded))
        }
        (EngineRef::Postgres(s), LockedConnection::Postgres(conn)) => (
            postgres::fold(s.pool(), conn, tenant, head_seq).await?,
            None,
        ),
        _ => return Err(mixed_engines()),
    };
    let fold_time = started.elapsed();
    // Only the rows that differ are written (changes.rs); the head lock
    // keeps every writer of balances out meanwhile.
    let stored = on_engine!(lock.connection(), LockedConnection, conn => {
        StoredBalance::from_rows(&sqlx::query(STORED).bind(tenant).fetch_all(conn).await?)?
    });
    let changes = balance_changes(&stored, &projection);
    match lock.connection() {
        LockedConnection::Sqlite(conn) => sqlite::remove(conn, tenant, &changes.remove).await?,
        LockedConnection::Postgres(conn) => postgres::remove(conn, tenant, &changes.remove).await?,
    }
    lock.write_balances(tenant, &changes.write).await?;
    lock.commit().await?;
    tracing::debug!(
        tenant,
        folded,
        fold_ms = fold_time.as_secs_f64() * 1e3,
        write_ms = (started.elapsed() - fold_time).as_secs_f64() * 1e3,
        written = changes.write.len(),
        removed = changes.remove.len(),
        "balances rebuilt"
    );
    Ok((head_seq, projection.len()))
}

/// The stored balance rows of a tenant (`$1`), on either engine. Cast to
/// text: NUMERIC reads as exact text, and on SQLite a damaged row of
/// another type still reads, and is rewritten.
const STORED: &str = "SELECT account, unit, CAST(debits AS TEXT), CAST(credits AS TEXT), \
     CAST(held AS TEXT) FROM balances WHERE tenant_id = $1";

/// Folds one row of `tally_ledger::store::hold_rows_sql` (its columns as
/// text), as read on either engine.
fn fold_hold<'r, R>(log: &mut LogFold, row: &'r R) -> Result<(), LedgerError>
where
    R: Row,
    usize: ColumnIndex<R>,
    &'r str: Decode<'r, R::Database> + Type<R::Database>,
{
    fold_hold_row(
        log,
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
        row.try_get(4)?,
        row.try_get(5)?,
    )
}

/// A store's lock is taken on its own engine: never reached.
fn mixed_engines() -> LedgerError {
    LedgerError::Unavailable("the head lock is not on the store's own engine".to_owned())
}
