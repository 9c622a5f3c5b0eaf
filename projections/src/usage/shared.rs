//! The SQL and the code both engines run alike for the usage summaries,
//! written once. sqlx-sqlite reads `$1, $2` as the first and second
//! argument, so the same text serves both; what differs (the summary
//! columns, how a snapshot begins) each engine hands to [`usage_reads!`].

/// Creates the projector's checkpoint row at seq 0 unless it exists.
pub(super) const LOCK_CHECKPOINT: &str =
    "INSERT INTO projector_checkpoints (tenant_id, projector, seq) \
     VALUES ($1, $2, 0) ON CONFLICT (tenant_id, projector) DO NOTHING";

pub(super) const CHECKPOINT: &str =
    "SELECT seq FROM projector_checkpoints WHERE tenant_id = $1 AND projector = $2";

pub(super) const SET_CHECKPOINT: &str =
    "UPDATE projector_checkpoints SET seq = $1 WHERE tenant_id = $2 AND projector = $3";

pub(super) const USAGE_COLUMNS_FROM: &str =
    "SELECT usage_columns_from FROM ledger_heads WHERE tenant_id = $1";

pub(super) const HEAD_SEQ: &str = "SELECT seq FROM ledger_heads WHERE tenant_id = $1";

/// Writes, in an engine's module, the reads of the usage summaries and the
/// checkpoint steps of a write:
/// - `db`, `pool`, `connection`: the engine's sqlx types;
/// - `summary_columns`: `account, meter, day, unit, quantity, amount,
///   entries`, the totals as exact text;
/// - `snapshot`: begins a read-only transaction that sees one snapshot.
macro_rules! usage_reads {
    (
        db = $db:ty,
        pool = $pool:ty,
        connection = $conn:ty,
        summary_columns = $cols:literal,
        snapshot = $snapshot:path $(,)?
    ) => {
        /// The seq up to which the usage summaries of `tenant` are complete.
        pub(super) async fn checkpoint(
            pool: &$pool,
            tenant: &str,
        ) -> Result<i64, tally_ledger::LedgerError> {
            let seq: Option<i64> = sqlx::query_scalar($crate::usage::shared::CHECKPOINT)
                .bind(tenant)
                .bind($crate::usage::fold::USAGE_PROJECTOR)
                .fetch_optional(pool)
                .await?;
            Ok(seq.unwrap_or(0))
        }

        /// See `super::usage_columns_from`.
        pub(super) async fn usage_columns_from(
            pool: &$pool,
            tenant: &str,
        ) -> Result<i64, tally_ledger::LedgerError> {
            let from: Option<i64> = sqlx::query_scalar($crate::usage::shared::USAGE_COLUMNS_FROM)
                .bind(tenant)
                .fetch_optional(pool)
                .await?;
            Ok(from.unwrap_or(0))
        }

        /// The stored usage rows of one account, the checkpoint and the
        /// head, read from one snapshot.
        pub(super) async fn usage_rows(
            pool: &$pool,
            tenant: &str,
            q: &$crate::usage::rows::UsageQuery,
        ) -> Result<$crate::usage::rows::UsageRead, tally_ledger::LedgerError> {
            use $crate::usage::rows::day_text;
            let from = q.from.map(day_text);
            let to = q.to.map(day_text);
            let mut tx = $snapshot(pool).await?;
            let mut b = sqlx::QueryBuilder::<$db>::new(concat!(
                "SELECT ",
                $cols,
                " FROM usage_summaries WHERE tenant_id = "
            ));
            b.push_bind(tenant)
                .push(" AND account = ")
                .push_bind(&q.account);
            if let Some(m) = &q.meter {
                b.push(" AND meter = ").push_bind(m);
            }
            if let Some(f) = &from {
                b.push(" AND day >= ").push_bind(f);
            }
            if let Some(t) = &to {
                b.push(" AND day < ").push_bind(t);
            }
            b.push(" ORDER BY meter, day, unit");
            let rows = b.build().fetch_all(&mut *tx).await?;
            let checkpoint: Option<i64> = sqlx::query_scalar($crate::usage::shared::CHECKPOINT)
                .bind(tenant)
                .bind($crate::usage::fold::USAGE_PROJECTOR)
                .fetch_optional(&mut *tx)
                .await?;
            let head: Option<i64> = sqlx::query_scalar($crate::usage::shared::HEAD_SEQ)
                .bind(tenant)
                .fetch_optional(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok($crate::usage::rows::UsageRead {
                rows: rows
                    .iter()
                    .map($crate::usage::rows::decode_usage_row)
                    .collect::<Result<_, _>>()?,
                checkpoint: checkpoint.unwrap_or(0),
                head_seq: head.unwrap_or(0),
            })
        }

        /// Every stored usage row of `tenant` and the checkpoint, from one
        /// snapshot.
        pub(super) async fn stored_usage(
            pool: &$pool,
            tenant: &str,
        ) -> Result<
            (
                Vec<(
                    $crate::usage::fold::UsageKey,
                    $crate::usage::fold::UsageTotals,
                )>,
                Option<i64>,
            ),
            tally_ledger::LedgerError,
        > {
            let mut tx = $snapshot(pool).await?;
            let checkpoint: Option<i64> = sqlx::query_scalar($crate::usage::shared::CHECKPOINT)
                .bind(tenant)
                .bind($crate::usage::fold::USAGE_PROJECTOR)
                .fetch_optional(&mut *tx)
                .await?;
            let rows = sqlx::query(concat!(
                "SELECT ",
                $cols,
                " FROM usage_summaries WHERE tenant_id = $1"
            ))
            .bind(tenant)
            .fetch_all(&mut *tx)
            .await?;
            tx.commit().await?;
            let rows = rows
                .iter()
                .map($crate::usage::rows::decode_usage_row)
                .collect::<Result<Vec<_>, _>>()?;
            Ok((rows, checkpoint))
        }

        /// Creates the checkpoint row unless it exists and reads it with
        /// `select` (which may lock it), inside a write.
        async fn locked_checkpoint(
            conn: &mut $conn,
            tenant: &str,
            select: &'static str,
        ) -> Result<i64, tally_ledger::LedgerError> {
            sqlx::query($crate::usage::shared::LOCK_CHECKPOINT)
                .bind(tenant)
                .bind($crate::usage::fold::USAGE_PROJECTOR)
                .execute(&mut *conn)
                .await?;
            Ok(sqlx::query_scalar(select)
                .bind(tenant)
                .bind($crate::usage::fold::USAGE_PROJECTOR)
                .fetch_one(&mut *conn)
                .await?)
        }

        /// Moves the checkpoint to `to`, inside the write that brought the
        /// summaries there.
        async fn set_checkpoint(
            conn: &mut $conn,
            tenant: &str,
            to: i64,
        ) -> Result<(), tally_ledger::LedgerError> {
            sqlx::query($crate::usage::shared::SET_CHECKPOINT)
                .bind(to)
                .bind(tenant)
                .bind($crate::usage::fold::USAGE_PROJECTOR)
                .execute(&mut *conn)
                .await?;
            Ok(())
        }
    };
}
pub(super) use usage_reads;

/// Writes, in an engine's module, `write_usage` (see `super::write_usage`):
/// the checkpoint locked and checked, a rebuild's stale rows removed, the
/// fold added and the checkpoint moved, in one transaction. The engine
/// gives:
/// - `store`, `begin`: what the write runs on and how its transaction
///   begins;
/// - `read_ahead` (optional): what is read before the write begins (`Err`
///   if that already finds the checkpoint moved); without it, `()`;
/// - `lock`: the checkpoint's `SELECT` inside the write;
/// - `stored`: every summary row of a tenant, as text (`entries` an integer);
/// - `remove`: deletes summary rows by key; `add`: adds the fold's deltas,
///   given what was read ahead.
macro_rules! usage_write {
    (@read_ahead ; $store:ident, $tenant:ident, $expected:ident, $fold:ident) => {
        ()
    };
    (@read_ahead $ahead:path ; $store:ident, $tenant:ident, $expected:ident, $fold:ident) => {
        match $ahead($store, $tenant, $expected, $fold).await? {
            Ok(read) => read,
            Err(stale) => return Ok(stale),
        }
    };
    (
        store = $store:ty,
        begin = $begin:path,
        $(read_ahead = $ahead:path,)?
        lock = $lock:expr,
        stored = $stored:expr,
        remove = $remove:path,
        add = $add:path $(,)?
    ) => {
        /// See `super::write_usage`.
        pub(super) async fn write_usage(
            store: &$store,
            tenant: &str,
            expected: Option<i64>,
            to: i64,
            mut fold: &$crate::usage::fold::UsageFold,
        ) -> Result<$crate::usage::rows::Written, tally_ledger::LedgerError> {
            use $crate::usage::rows::Written;
            // A rebuild (`expected` None) writes only the rows that differ
            // from what is stored (changes.rs): these.
            let replaced: $crate::usage::fold::UsageFold;
            let read_ahead = $crate::usage::shared::usage_write!(
                @read_ahead $($ahead)? ; store, tenant, expected, fold
            );
            let mut tx = $begin(store).await?;
            let current = locked_checkpoint(&mut tx, tenant, $lock).await?;
            match expected {
                Some(seq) if seq != current => {
                    tx.rollback().await?;
                    return Ok(Written::Stale(current));
                }
                Some(_) => {}
                None => {
                    let stored = sqlx::query($stored)
                        .bind(tenant)
                        .fetch_all(&mut *tx)
                        .await?;
                    let changes = $crate::changes::usage_changes(
                        $crate::changes::StoredUsage::from_rows(&stored)?,
                        fold,
                    );
                    $remove(&mut tx, tenant, &changes.remove).await?;
                    replaced = changes.write;
                    fold = &replaced;
                }
            }
            $add(&mut tx, tenant, fold, read_ahead).await?;
            set_checkpoint(&mut tx, tenant, to).await?;
            tx.commit().await?;
            Ok(Written::Done)
        }
    };
}
pub(super) use usage_write;
