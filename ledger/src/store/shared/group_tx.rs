//! The head-row steps of a group transaction, alike on both engines.

use crate::store::engine_db::{Arg, EngineDb, Sql};
use crate::store::transaction::{fence_from, Fence};
use crate::LedgerError;

/// Creates the tenant's head at seq 0 unless it exists.
pub(in crate::store) async fn create_head<DB: EngineDb>(
    conn: &mut DB::Connection,
    tenant: &str,
) -> Result<(), LedgerError> {
    let genesis = hex::encode(crate::chain::GENESIS_HASH);
    let sql = Sql::with(
        super::sql::CREATE_HEAD,
        [Arg::Text(tenant), Arg::Text(&genesis)],
    );
    DB::execute(conn, &sql).await?;
    Ok(())
}

/// The head row `select` reads (`SELECT seq, hash, generation`, `$1` the
/// tenant) as a fence, if there is one.
pub(in crate::store) async fn read_fence<DB: EngineDb>(
    conn: &mut DB::Connection,
    select: &'static str,
    tenant: &str,
) -> Result<Option<Fence>, LedgerError> {
    let sql = Sql::with(select, [Arg::Text(tenant)]);
    let Some(row) = DB::fetch_optional(conn, &sql).await? else {
        return Ok(None);
    };
    Ok(Some(fence_from(
        DB::int(&row, "seq")?,
        &DB::text(&row, "hash")?,
        DB::int(&row, "generation")?,
    )?))
}
