//! SQLite: the embedded default. One file, WAL, `synchronous=FULL` so a 2xx
//! survives power loss, `BEGIN IMMEDIATE` so a group takes the write lock
//! before it reads (no upgrade deadlock between processes).

pub(super) mod columns;
mod group_tx;
mod group_write;
mod packed;
mod read_ahead;
mod wal;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteRow, SqliteSynchronous};
use sqlx::{Row, Sqlite, SqliteConnection, SqlitePool};

use super::engine_db::{Arg, EngineDb, Sql};
use super::rule_state::RulesRebuilt;
use super::shared::EngineStore;
use crate::entry::{format_recorded_at, StoredEntry};
use crate::request::EntryKind;
use crate::LedgerError;
use columns::{entry, ENTRY_COLUMNS};
use group_tx::keyed_entries;
pub(crate) use group_tx::SqliteGroup;
pub use group_tx::SqliteWrite;
pub use packed::for_each_packed;
use packed::PackedEntry;
use wal::{checkpoint_wal, WAL_RESTART_ABOVE_BYTES};

/// Page cache of the write connection, in KiB (SQLite's negative
/// `cache_size`): the pages a flood of groups keeps touching (the tips of
/// the seq-ordered indexes, the balances, the head) and some of the
/// randomly-hit key index. Larger is not better: at each commit SQLite
/// walks the cache's hash table (`pcache1TruncateUnsafe`, 5 % of the
/// server's CPU at 64 MiB), which small groups pay in full. Measured on
/// 100,000 entries, two runs each,
/// single POSTs @64 / batches of 1,000 in rows/s: 2 MB (SQLite's default)
/// 5,669 5,498 / 11,267 12,200; 16 MiB 5,103 5,019 / 14,119 14,996;
/// 64 MiB 4,535 4,279 / 14,465 11,869; on 1,000,000 entries 16 MiB beat
/// 2 MB on both (4,640 / 10,274 against 4,508 / 8,667). The other
/// connections keep the default: another's commit drops their caches.
const WRITER_CACHE_KIB: i64 = -16_384;

/// How much of the database file each connection maps for reading.
const MMAP_BYTES: &str = "2147418112";

#[derive(Clone)]
pub struct SqliteStore {
    pub(crate) pool: SqlitePool,
    /// The one connection every write transaction of this process runs on
    /// (behind `write_gate`), with a larger page cache. SQLite keeps a
    /// connection's page cache across its own transactions but drops it
    /// whenever another connection has written: with groups spread over the
    /// whole pool, every group started on a cold cache and read its index
    /// pages again from the WAL (pread) or the map, allocating and freeing
    /// every page buffer.
    pub(crate) write_pool: SqlitePool,
    /// Taken before `BEGIN IMMEDIATE` by every write transaction of this
    /// process (groups, the usage projector). SQLite has one write lock,
    /// and a connection that finds it taken polls with sleeps of 1, 2, 5,
    /// 10 … ms: a group arriving during the projector's 3 ms commit waited
    /// 8 ms or more. Queued on this mutex, it starts the moment the lock is
    /// free. Other processes on the same file still meet the busy timeout.
    write_gate: Arc<tokio::sync::Mutex<()>>,
}

impl EngineStore for SqliteStore {
    type Db = Sqlite;
    type Group = SqliteGroup;

    const ENTRY_COLUMNS: &'static str = ENTRY_COLUMNS;

    fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// SQLite stores `recorded_at` as fixed-width UTC text, which compares
    /// in time order.
    fn recorded_at_arg(time: DateTime<Utc>) -> Arg<'static> {
        Arg::OwnedText(format_recorded_at(&time))
    }

    fn decode_entry(row: &SqliteRow) -> Result<StoredEntry, LedgerError> {
        entry(row)
    }

    /// SQLite stores an api key's `created_at` as fixed-width UTC text.
    fn created_at(row: &SqliteRow) -> Result<String, LedgerError> {
        Ok(row.try_get("created_at")?)
    }

    async fn keyed_entries(
        conn: &mut SqliteConnection,
        tenant: &str,
        keys: &[(EntryKind, &str)],
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        keyed_entries(conn, tenant, keys).await
    }

    /// A page of the log, packed by SQLite as one JSON array: sqlx hands
    /// SQLite rows over one at a time from its worker thread, which cost
    /// more than everything else a page of the log needs.
    async fn read_page(&self, walk: Sql<'_>) -> Result<Vec<StoredEntry>, LedgerError> {
        let sql = walk.wrap(
            &format!(
                "SELECT json_group_array(json_array({ENTRY_COLUMNS}) ORDER BY seq) AS page FROM ("
            ),
            ")",
        );
        let row = Sqlite::fetch_optional(&mut *self.pool.acquire().await?, &sql).await?;
        let packed = match row {
            Some(row) => Sqlite::text(&row, "page")?,
            None => return Ok(Vec::new()),
        };
        let rows: Vec<PackedEntry> = serde_json::from_str(&packed)
            .map_err(|e| LedgerError::Corrupt(format!("packed entries: {e}")))?;
        rows.into_iter().map(PackedEntry::into_entry).collect()
    }

    async fn begin_group(&self) -> Result<SqliteGroup, LedgerError> {
        SqliteStore::begin_group(self).await
    }

    fn group_connection(group: &mut SqliteGroup) -> &mut SqliteConnection {
        &mut group.tx
    }

    async fn rebuild_rules(
        group: &mut SqliteGroup,
        tenant: &str,
    ) -> Result<RulesRebuilt, LedgerError> {
        group.rebuild_rules(tenant).await
    }
}

impl SqliteStore {
    pub async fn connect(url: &str, pool_size: u32) -> Result<Self, LedgerError> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(30))
            .foreign_keys(true)
            // Checkpoints run in the background task below, not inside the
            // commit that happens to cross the WAL threshold (that commit's
            // callers saw the whole checkpoint as latency).
            .pragma("wal_autocheckpoint", "0")
            // Reads map the database file instead of copying each page from
            // the OS cache with a system call: a rebuild's scan of 1,000,000
            // entries (~700 MB of pages) spent a third of its time in
            // pread. SQLite clamps this to its compiled maximum (2 GB here);
            // pages past it are read as before. Writes still go through
            // the WAL as before.
            .pragma("mmap_size", MMAP_BYTES);
        let pool = super::rows::pool_options::<Sqlite>(pool_size)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options.clone())
            .await?;
        super::migration_checksums::accept_reworded_sqlite(&pool).await?;
        sqlx::migrate!("../migrations/sqlite").run(&pool).await?;
        let write_pool = super::rows::pool_options::<Sqlite>(1)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(
                options
                    .clone()
                    .pragma("cache_size", WRITER_CACHE_KIB.to_string()),
            )
            .await?;
        let write_gate = Arc::<tokio::sync::Mutex<()>>::default();
        tokio::spawn(checkpoint_wal(
            pool.clone(),
            options,
            write_gate.clone(),
            WAL_RESTART_ABOVE_BYTES,
        ));
        Ok(Self {
            pool,
            write_pool,
            write_gate,
        })
    }

    /// A write transaction: this process's turn first, then SQLite's write
    /// lock (`BEGIN IMMEDIATE`). The turn is held until the transaction ends.
    pub async fn begin_write(&self) -> Result<SqliteWrite, LedgerError> {
        let t0 = std::time::Instant::now();
        let turn = self.write_gate.clone().lock_owned().await;
        let t_turn = t0.elapsed();
        let tx = self.write_pool.begin_with("BEGIN IMMEDIATE").await?;
        tracing::debug!(
            turn_ms = t_turn.as_secs_f64() * 1e3,
            begin_ms = (t0.elapsed() - t_turn).as_secs_f64() * 1e3,
            "sqlite write began"
        );
        Ok(SqliteWrite { tx, _turn: turn })
    }

    pub(super) async fn begin_group(&self) -> Result<SqliteGroup, LedgerError> {
        Ok(SqliteGroup {
            tx: self.begin_write().await?,
        })
    }
}
