//! The reads and the write of the usage summaries that both engines run
//! alike, written once over the engine's database
//! ([`tally_ledger::store::EngineDb`]). What differs between the engines
//! (the summary columns, how a snapshot begins, how the fold is added to
//! the stored rows) each engine gives through [`UsageEngine`], in
//! `sqlite.rs` and `postgres.rs`. sqlx-sqlite reads `$1, $2` as the first
//! and second argument, so the same SQL text serves both.

use std::future::Future;
use std::ops::DerefMut;

use sqlx::{Database, Transaction};
use tally_ledger::store::{reader_head_seq, Arg, EngineDb, Sql};
use tally_ledger::LedgerError;

use super::changes::{usage_changes, StoredUsage};
use super::fold::{UsageFold, UsageKey, UsageTotals, USAGE_PROJECTOR};
use super::rows::{day_text, decode_usage_row, UsageQuery, UsageRead, Written};

/// Creates the projector's checkpoint row at seq 0 unless it exists.
const CREATE_CHECKPOINT: &str = "INSERT INTO projector_checkpoints (tenant_id, projector, seq) \
     VALUES ($1, $2, 0) ON CONFLICT (tenant_id, projector) DO NOTHING";

pub(super) const CHECKPOINT: &str =
    "SELECT seq FROM projector_checkpoints WHERE tenant_id = $1 AND projector = $2";

const SET_CHECKPOINT: &str =
    "UPDATE projector_checkpoints SET seq = $1 WHERE tenant_id = $2 AND projector = $3";

/// What one engine does its own way; the rest is written once, below.
pub(super) trait UsageEngine: Sync {
    type Db: EngineDb;
    /// A write transaction of the engine.
    type Write: DerefMut<Target = <Self::Db as Database>::Connection> + Send;
    /// What the engine reads before its write begins (`()` if nothing).
    type ReadAhead: Send;

    /// `account, meter, day, unit, quantity, amount, entries`, the totals
    /// as exact text.
    const SUMMARY_COLUMNS: &'static str;
    /// The same columns for a rebuild, read so that even a damaged row
    /// decodes (and is then rewritten).
    const STORED_COLUMNS: &'static str;
    /// The checkpoint's `SELECT` inside a write (which may lock the row).
    const LOCKED_CHECKPOINT: &'static str;

    /// Begins a read-only transaction that sees one snapshot.
    fn snapshot(
        &self,
    ) -> impl Future<Output = Result<Transaction<'static, Self::Db>, LedgerError>> + Send;

    fn begin_write(&self) -> impl Future<Output = Result<Self::Write, LedgerError>> + Send;

    fn commit(write: Self::Write) -> impl Future<Output = Result<(), LedgerError>> + Send;

    fn rollback(write: Self::Write) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// What is read before the write begins: `Err` if that already finds
    /// the checkpoint moved from `expected`.
    fn read_ahead(
        &self,
        tenant: &str,
        expected: Option<i64>,
        fold: &UsageFold,
    ) -> impl Future<Output = Result<Result<Self::ReadAhead, Written>, LedgerError>> + Send;

    /// Deletes the summary rows of `tenant` with these keys.
    fn remove_rows(
        conn: &mut <Self::Db as Database>::Connection,
        tenant: &str,
        keys: &[[String; 4]],
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// Adds the fold's deltas to the stored rows, given what was read
    /// ahead.
    fn add_fold(
        conn: &mut <Self::Db as Database>::Connection,
        tenant: &str,
        fold: &UsageFold,
        read_ahead: Self::ReadAhead,
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;
}

/// The seq up to which the usage summaries of `tenant` are complete.
pub(super) async fn checkpoint<DB: EngineDb>(
    conn: &mut DB::Connection,
    tenant: &str,
) -> Result<i64, LedgerError> {
    let sql = Sql::with(CHECKPOINT, [Arg::Text(tenant), Arg::Text(USAGE_PROJECTOR)]);
    Ok(match DB::fetch_optional(conn, &sql).await? {
        Some(row) => DB::int(&row, "seq")?,
        None => 0,
    })
}

/// The stored usage rows of one account, the checkpoint and the head,
/// read from one snapshot.
pub(super) async fn usage_rows<E: UsageEngine>(
    engine: &E,
    tenant: &str,
    q: &UsageQuery,
) -> Result<UsageRead, LedgerError> {
    let from = q.from.map(day_text);
    let to = q.to.map(day_text);
    let mut sql = Sql::new("SELECT ");
    sql.push(E::SUMMARY_COLUMNS)
        .push(" FROM usage_summaries WHERE tenant_id = ")
        .bind(Arg::Text(tenant))
        .push(" AND account = ")
        .bind(Arg::Text(&q.account));
    if let Some(m) = &q.meter {
        sql.push(" AND meter = ").bind(Arg::Text(m));
    }
    if let Some(f) = &from {
        sql.push(" AND day >= ").bind(Arg::Text(f));
    }
    if let Some(t) = &to {
        sql.push(" AND day < ").bind(Arg::Text(t));
    }
    sql.push(" ORDER BY meter, day, unit");
    let mut tx = engine.snapshot().await?;
    let rows = E::Db::fetch_all(&mut tx, &sql).await?;
    let checkpoint = checkpoint::<E::Db>(&mut tx, tenant).await?;
    let head_seq = reader_head_seq::<E::Db>(&mut tx, tenant).await?;
    tx.commit().await?;
    Ok(UsageRead {
        rows: rows
            .iter()
            .map(decode_usage_row::<E::Db>)
            .collect::<Result<_, _>>()?,
        checkpoint,
        head_seq,
    })
}

/// Every stored usage row of `tenant` and the checkpoint, from one
/// snapshot.
pub(super) async fn stored_usage<E: UsageEngine>(
    engine: &E,
    tenant: &str,
) -> Result<(Vec<(UsageKey, UsageTotals)>, i64), LedgerError> {
    let mut sql = Sql::new("SELECT ");
    sql.push(E::SUMMARY_COLUMNS)
        .push(" FROM usage_summaries WHERE tenant_id = ")
        .bind(Arg::Text(tenant));
    let mut tx = engine.snapshot().await?;
    let checkpoint = checkpoint::<E::Db>(&mut tx, tenant).await?;
    let rows = E::Db::fetch_all(&mut tx, &sql).await?;
    tx.commit().await?;
    let rows = rows
        .iter()
        .map(decode_usage_row::<E::Db>)
        .collect::<Result<Vec<_>, _>>()?;
    Ok((rows, checkpoint))
}

/// The checkpoint locked and checked, a rebuild's stale rows removed, the
/// fold added and the checkpoint moved to `to`, in one transaction (see
/// `super::engine::write_usage`).
pub(super) async fn write_usage<E: UsageEngine>(
    engine: &E,
    tenant: &str,
    expected: Option<i64>,
    to: i64,
    mut fold: &UsageFold,
) -> Result<Written, LedgerError> {
    // A rebuild (`expected` None) writes only the rows that differ from
    // what is stored (changes.rs): these.
    let replaced: UsageFold;
    let read_ahead = match engine.read_ahead(tenant, expected, fold).await? {
        Ok(read) => read,
        Err(stale) => return Ok(stale),
    };
    let mut tx = engine.begin_write().await?;
    let current = locked_checkpoint::<E>(&mut tx, tenant).await?;
    match expected {
        Some(seq) if seq != current => {
            E::rollback(tx).await?;
            return Ok(Written::Stale(current));
        }
        Some(_) => {}
        None => {
            let mut sql = Sql::new("SELECT ");
            sql.push(E::STORED_COLUMNS)
                .push(" FROM usage_summaries WHERE tenant_id = ")
                .bind(Arg::Text(tenant));
            let stored = E::Db::fetch_all(&mut tx, &sql).await?;
            let changes = usage_changes(StoredUsage::from_rows::<E::Db>(&stored)?, fold);
            E::remove_rows(&mut tx, tenant, &changes.remove).await?;
            replaced = changes.write;
            fold = &replaced;
        }
    }
    E::add_fold(&mut tx, tenant, fold, read_ahead).await?;
    let sql = Sql::with(
        SET_CHECKPOINT,
        [Arg::Int(to), Arg::Text(tenant), Arg::Text(USAGE_PROJECTOR)],
    );
    E::Db::execute(&mut tx, &sql).await?;
    E::commit(tx).await?;
    Ok(Written::Done)
}

/// Creates the checkpoint row unless it exists and reads it with the
/// engine's `SELECT` (which may lock it), inside a write.
async fn locked_checkpoint<E: UsageEngine>(
    conn: &mut <E::Db as Database>::Connection,
    tenant: &str,
) -> Result<i64, LedgerError> {
    let sql = Sql::with(
        CREATE_CHECKPOINT,
        [Arg::Text(tenant), Arg::Text(USAGE_PROJECTOR)],
    );
    E::Db::execute(conn, &sql).await?;
    let sql = Sql::with(
        E::LOCKED_CHECKPOINT,
        [Arg::Text(tenant), Arg::Text(USAGE_PROJECTOR)],
    );
    let row = E::Db::fetch_optional(conn, &sql).await?.ok_or_else(|| {
        LedgerError::Corrupt(format!(
            "usage checkpoint of {tenant:?} missing after its insert"
        ))
    })?;
    Ok(E::Db::int(&row, "seq")?)
}
