//! SQLite: the embedded default. One file, WAL, `synchronous=FULL` so a 2xx
//! survives power loss, `BEGIN IMMEDIATE` so a group takes the write lock
//! before it reads (no upgrade deadlock between processes).

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::balance::{AccountBalance, BalanceProjection};
use chrono::{DateTime, Utc};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteRow, SqliteSynchronous};
use sqlx::{ConnectOptions, QueryBuilder, Row, Sqlite, SqliteConnection, SqlitePool, Transaction};

use super::transaction::{head_moved, Fence, GroupTransaction, GroupWrite};
use super::{
    decode_balance, decode_entry, decode_fence, decode_head, parse_decimal, AccountRange,
    BalanceRow, EntryFilter,
};
use crate::amount::canonical;
use crate::chain::{Head, GENESIS_HASH};
use crate::entry::UsageColumns;
use crate::entry::{format_recorded_at, EntryStatus, StoredEntry};
use crate::intent::EntryKind;
use crate::keys::StoredApiKey;
use crate::state::{StateKey, StateRow};
use crate::LedgerError;

pub(super) const ENTRY_COLUMNS: &str =
    "tenant_id, seq, id, kind, upstream_id, status, rejection_code, \
    rejection_message, account, debit_account, credit_account, amount, unit, params, \
    fingerprint, recorded_at, balance_after, prev_hash, hash";

/// What the writer inserts: [`ENTRY_COLUMNS`] and the usage columns of
/// migration 0005 ([`UsageColumns`]).
const INSERTED_COLUMNS: &str = "tenant_id, seq, id, kind, upstream_id, status, rejection_code, \
    rejection_message, account, debit_account, credit_account, amount, unit, params, \
    fingerprint, recorded_at, balance_after, prev_hash, hash, \
    usage_meter, usage_day, usage_quantity";

/// SQLite allows 32,766 bound parameters per statement; stay well below.
const ROWS_PER_INSERT: usize = 500;

/// The WAL is made to start over once it holds more than this (see
/// [`checkpoint_once`]); it bounds the file. High, because each start-over
/// holds this process's writes back while the last frames are copied: with a
/// TRUNCATE checkpoint at 64 MiB that ran every few seconds under single
/// POSTs at 64 clients and their p99 went from 19 to 27 ms.
const WAL_RESTART_ABOVE_BYTES: i64 = 1024 * 1024 * 1024;

/// New frames per pass below which the checkpointer stops copying beside
/// the writes and copies the rest holding the write turn (4 MiB of 4 KiB
/// pages). The copy is short; the fsync of the database that ends it is
/// most of the hold (24–85 ms measured right after the passes).
const WAL_BACKLOG_UNDER_TURN: i64 = 1_000;

/// Longest the restarting checkpoint waits for readers of the old frames
/// (SQLite's busy handler, which sleeps 1, 2, 5 … ms): look-ups and the
/// usage projector's reads are short, and this bounds what a long one can
/// add to the writes' wait. A restart that gives up is tried again the
/// next second.
const WAL_RESTART_WAIT: Duration = Duration::from_millis(10);

/// Most PASSIVE passes over a WAL past its bound before the turn is taken
/// whatever the backlog: each pass copies what the writes appended during
/// the one before, so a handful brings it down unless the writes outrun
/// the copying, in which case waiting longer would not help.
const WAL_PASSES_BEFORE_TURN: usize = 8;

/// Page cache of the write connection, in KiB (SQLite's negative
/// `cache_size`): the pages a flood of groups keeps touching (the tips of
/// the seq-ordered indexes, the balances, the head) and some of the
/// randomly-hit key index. Larger is not better: at each commit SQLite
/// walks the cache's hash table (`pcache1TruncateUnsafe`, 5 % of the
/// server's CPU at 64 MiB), which small groups pay in full. Measured
/// (docs/performance-history.md), 100,000 entries, two runs each,
/// single POSTs @64 / batches of 1,000 in rows/s: 2 MB (SQLite's default)
/// 5,669 5,498 / 11,267 12,200; 16 MiB 5,103 5,019 / 14,119 14,996;
/// 64 MiB 4,535 4,279 / 14,465 11,869; on 1,000,000 entries 16 MiB beat
/// 2 MB on both (4,640 / 10,274 against 4,508 / 8,667). The other
/// connections keep the default: another's commit drops their caches.
const WRITER_CACHE_KIB: i64 = -16_384;

/// How much of the database file each connection maps for reading.
const MMAP_BYTES: &str = "2147418112";

/// One entry of a packed page: [`ENTRY_COLUMNS`] in order.
#[derive(serde::Deserialize)]
struct PackedEntry(
    String,
    i64,
    String,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
);

impl PackedEntry {
    fn into_entry(self) -> Result<StoredEntry, LedgerError> {
        let PackedEntry(
            tenant_id,
            seq,
            id,
            kind,
            upstream_id,
            status,
            rejection_code,
            rejection_message,
            account,
            debit_account,
            credit_account,
            amount,
            unit,
            params,
            fingerprint,
            recorded_at,
            balance_after,
            prev_hash,
            hash,
        ) = self;
        Ok(StoredEntry {
            tenant_id,
            seq,
            id,
            kind: EntryKind::parse(&kind)
                .ok_or_else(|| LedgerError::Corrupt(format!("unknown kind {kind:?}")))?,
            upstream_id,
            status: EntryStatus::parse(&status)
                .ok_or_else(|| LedgerError::Corrupt(format!("unknown status {status:?}")))?,
            rejection_code,
            rejection_message,
            account,
            debit_account,
            credit_account,
            amount: parse_decimal(&amount, "amount")?,
            unit,
            params,
            fingerprint,
            recorded_at: DateTime::parse_from_rfc3339(&recorded_at)
                .map_err(|_| LedgerError::Corrupt(format!("recorded_at {recorded_at:?}")))?
                .with_timezone(&Utc),
            balance_after: super::parse_total(&balance_after, "balance_after")?,
            prev_hash,
            hash,
        })
    }
}

#[derive(Clone)]
pub struct SqliteStore {
    pub(crate) pool: SqlitePool,
    /// The one connection every write transaction of this process runs on
    /// (behind `write_gate`), with a larger page cache. SQLite keeps a
    /// connection's page cache across its own transactions but drops it
    /// whenever another connection has written: with groups spread over the
    /// whole pool, every group started on a cold cache and read its index
    /// pages again from the WAL (pread) or the map, allocating and freeing
    /// every page buffer (docs/performance-history.md).
    pub(crate) write_pool: SqlitePool,
    /// Taken before `BEGIN IMMEDIATE` by every write transaction of this
    /// process (groups, the usage projector). SQLite has one write lock,
    /// and a connection that finds it taken polls with sleeps of 1, 2, 5,
    /// 10 … ms: a group arriving during the projector's 3 ms commit waited
    /// 8 ms or more. Queued on this mutex, it starts the moment the lock is
    /// free. Other processes on the same file still meet the busy timeout.
    write_gate: Arc<tokio::sync::Mutex<()>>,
}

pub(super) fn entry(row: &SqliteRow) -> Result<StoredEntry, LedgerError> {
    let text: String = row.try_get("recorded_at")?;
    let recorded_at = DateTime::parse_from_rfc3339(&text)
        .map_err(|_| LedgerError::Corrupt(format!("recorded_at {text:?}")))?
        .with_timezone(&Utc);
    decode_entry(row, recorded_at)
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
        let pool = super::pool_options::<Sqlite>(pool_size)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options.clone())
            .await?;
        super::migration_checksums::accept_reworded_sqlite(&pool).await?;
        sqlx::migrate!("../migrations/sqlite").run(&pool).await?;
        let write_pool = super::pool_options::<Sqlite>(1)
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

    pub async fn ping(&self) -> Result<(), LedgerError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    pub async fn insert_api_key(
        &self,
        tenant: &str,
        key_hash: &str,
        scopes: &str,
    ) -> Result<(), LedgerError> {
        sqlx::query(
            "INSERT INTO api_keys (tenant_id, key_hash, scopes, created_at) VALUES (?, ?, ?, ?)",
        )
        .bind(tenant)
        .bind(key_hash)
        .bind(scopes)
        .bind(format_recorded_at(&Utc::now()))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn list_api_keys(
        &self,
        tenant: Option<&str>,
    ) -> Result<Vec<StoredApiKey>, LedgerError> {
        let rows = sqlx::query(
            "SELECT tenant_id, key_hash, scopes, created_at FROM api_keys \
             WHERE ?1 IS NULL OR tenant_id = ?1 ORDER BY tenant_id, created_at, key_hash",
        )
        .bind(tenant)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(StoredApiKey {
                    tenant_id: r.try_get("tenant_id")?,
                    key_hash: r.try_get("key_hash")?,
                    scopes: r.try_get("scopes")?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect()
    }

    pub async fn delete_api_key(&self, tenant: &str, key_hash: &str) -> Result<bool, LedgerError> {
        let done = sqlx::query("DELETE FROM api_keys WHERE tenant_id = ? AND key_hash = ?")
            .bind(tenant)
            .bind(key_hash)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    pub async fn find_api_key(
        &self,
        key_hash: &str,
    ) -> Result<Option<(String, String)>, LedgerError> {
        let row = sqlx::query("SELECT tenant_id, scopes FROM api_keys WHERE key_hash = ?")
            .bind(key_hash)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(r) => Some((r.try_get("tenant_id")?, r.try_get("scopes")?)),
            None => None,
        })
    }

    pub async fn entry_by_id(
        &self,
        tenant: &str,
        id: &str,
    ) -> Result<Option<StoredEntry>, LedgerError> {
        let sql = format!("SELECT {ENTRY_COLUMNS} FROM entries WHERE tenant_id = ? AND id = ?");
        let row = sqlx::query(&sql)
            .bind(tenant)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(entry).transpose()
    }

    /// Entries holding one of `keys`, read outside any group (committed
    /// entries only).
    pub async fn entries_with_keys(
        &self,
        tenant: &str,
        keys: &[(EntryKind, &str)],
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        let mut conn = self.pool.acquire().await?;
        keyed_entries(&mut conn, tenant, keys).await
    }

    pub async fn entry_by_key(
        &self,
        tenant: &str,
        kind: EntryKind,
        upstream_id: &str,
    ) -> Result<Option<StoredEntry>, LedgerError> {
        let sql = format!(
            "SELECT {ENTRY_COLUMNS} FROM entries WHERE tenant_id = ? AND kind = ? AND upstream_id = ?"
        );
        let row = sqlx::query(&sql)
            .bind(tenant)
            .bind(kind.as_str())
            .bind(upstream_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(entry).transpose()
    }

    pub async fn list_entries(
        &self,
        tenant: &str,
        f: &EntryFilter,
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        // With an account, the page is the merge of two index-ordered walks
        // (debit side, credit side), each stopping after `limit` rows. A
        // single `debit_account = x OR credit_account = x` query was planned
        // as a walk of the whole log in seq order once the prepared statement
        // went generic (measured: 202 ms per page at 300,000 entries).
        //
        // sqlx hands SQLite rows over one at a time from its worker thread,
        // which cost more than everything else a page of the log needs: the
        // page comes back as one JSON array that SQLite builds.
        let mut q = QueryBuilder::<Sqlite>::new(format!(
            "SELECT json_group_array(json_array({ENTRY_COLUMNS}) ORDER BY seq) FROM ("
        ));
        match &f.account {
            None => branch(&mut q, tenant, f, None),
            Some(account) => {
                q.push("SELECT * FROM (SELECT * FROM (");
                branch(&mut q, tenant, f, Some(("debit_account", account)));
                q.push(") d UNION ALL SELECT * FROM (");
                branch(&mut q, tenant, f, Some(("credit_account", account)));
                q.push(") c) u ORDER BY seq LIMIT ").push_bind(f.limit);
            }
        }
        q.push(")");
        let packed: String = q.build_query_scalar().fetch_one(&self.pool).await?;
        let rows: Vec<PackedEntry> = serde_json::from_str(&packed)
            .map_err(|e| LedgerError::Corrupt(format!("packed entries: {e}")))?;
        rows.into_iter().map(PackedEntry::into_entry).collect()
    }

    pub async fn balance_rows(
        &self,
        tenant: &str,
        account: &str,
    ) -> Result<(Vec<BalanceRow>, i64), LedgerError> {
        let mut tx = self.pool.begin().await?;
        let rows = sqlx::query(
            "SELECT unit, debits, credits, held FROM balances \
             WHERE tenant_id = ? AND account = ? ORDER BY unit",
        )
        .bind(tenant)
        .bind(account)
        .fetch_all(&mut *tx)
        .await?;
        let seq: Option<i64> =
            sqlx::query_scalar("SELECT seq FROM ledger_heads WHERE tenant_id = ?")
                .bind(tenant)
                .fetch_optional(&mut *tx)
                .await?;
        tx.commit().await?;
        let rows = rows
            .iter()
            .map(|r| {
                Ok(BalanceRow {
                    unit: r.try_get("unit")?,
                    balance: decode_balance(r)?,
                })
            })
            .collect::<Result<Vec<_>, LedgerError>>()?;
        Ok((rows, seq.unwrap_or(0)))
    }

    pub async fn postings_until(
        &self,
        tenant: &str,
        account: &str,
        as_of_seq: i64,
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        let sql = format!(
            "SELECT {ENTRY_COLUMNS} FROM entries WHERE tenant_id = ? AND seq <= ? \
             AND status = 'posted' AND (debit_account = ? OR credit_account = ?) ORDER BY seq"
        );
        let rows = sqlx::query(&sql)
            .bind(tenant)
            .bind(as_of_seq)
            .bind(account)
            .bind(account)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(entry).collect()
    }

    pub async fn account_entries(
        &self,
        tenant: &str,
        r: &AccountRange<'_>,
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        // Two index-ordered walks (debit side, credit side), merged, as in
        // list_entries. An entry naming the account on both sides (account
        // settings) comes from the debit walk only.
        let mut q = QueryBuilder::<Sqlite>::new("SELECT * FROM (SELECT * FROM (");
        range_branch(&mut q, tenant, r, "debit_account");
        q.push(") d UNION ALL SELECT * FROM (");
        range_branch(&mut q, tenant, r, "credit_account");
        q.push(") c) u ORDER BY seq LIMIT ").push_bind(r.limit);
        let rows = q.build().fetch_all(&self.pool).await?;
        rows.iter().map(entry).collect()
    }

    pub async fn tenants(&self) -> Result<Vec<String>, LedgerError> {
        Ok(
            sqlx::query_scalar("SELECT tenant_id FROM ledger_heads ORDER BY tenant_id")
                .fetch_all(&self.pool)
                .await?,
        )
    }

    pub async fn head(&self, tenant: &str) -> Result<Head, LedgerError> {
        let row = sqlx::query("SELECT seq, hash FROM ledger_heads WHERE tenant_id = ?")
            .bind(tenant)
            .fetch_optional(&self.pool)
            .await?;
        decode_head(row.as_ref())
    }

    pub async fn stored_balances(&self, tenant: &str) -> Result<BalanceProjection, LedgerError> {
        let rows = sqlx::query(
            "SELECT account, unit, debits, credits, held FROM balances WHERE tenant_id = ?",
        )
        .bind(tenant)
        .fetch_all(&self.pool)
        .await?;
        let mut p = BalanceProjection::new();
        for r in &rows {
            let account: String = r.try_get("account")?;
            let unit: String = r.try_get("unit")?;
            p.insert(&account, &unit, decode_balance(r)?);
        }
        Ok(p)
    }

    pub async fn records_of_kind(
        &self,
        tenant: &str,
        kind: &str,
    ) -> Result<Vec<(String, String)>, LedgerError> {
        let rows = sqlx::query(
            "SELECT key, value FROM rule_state WHERE tenant_id = ? AND kind = ? ORDER BY key",
        )
        .bind(tenant)
        .bind(kind)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("key")?, r.try_get("value")?)))
            .collect()
    }

    pub async fn record(
        &self,
        tenant: &str,
        kind: &str,
        key: &str,
    ) -> Result<Option<String>, LedgerError> {
        let row = sqlx::query(
            "SELECT value FROM rule_state WHERE tenant_id = ? AND kind = ? AND key = ?",
        )
        .bind(tenant)
        .bind(kind)
        .bind(key)
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row {
            Some(r) => Some(r.try_get("value")?),
            None => None,
        })
    }

    /// Open holds of every tenant that expired at or before `now` (fixed-width UTC text).
    pub async fn expired_holds(
        &self,
        now: &str,
        limit: i64,
    ) -> Result<Vec<(String, String)>, LedgerError> {
        let rows = sqlx::query(
            "SELECT tenant_id, key FROM ( \
               SELECT tenant_id, key, expires_at, \
                 row_number() OVER (PARTITION BY tenant_id ORDER BY expires_at) AS n \
               FROM rule_state WHERE expires_at IS NOT NULL AND expires_at <= ?) \
             WHERE n <= ? ORDER BY expires_at",
        )
        .bind(now)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("tenant_id")?, r.try_get("key")?)))
            .collect()
    }

    /// Every rule-state row of a tenant, as stored.
    pub async fn rule_state_rows(
        &self,
        tenant: &str,
    ) -> Result<Vec<crate::rule_fold::StoredRecord>, LedgerError> {
        let mut conn = self.pool.acquire().await?;
        super::rules::stored_sqlite(&mut conn, tenant).await
    }

    pub async fn rebuild_rule_state(
        &self,
        tenant: &str,
    ) -> Result<super::rules::RulesRebuilt, LedgerError> {
        let mut group = self.begin_group().await?;
        group.lock_head(tenant).await?;
        // Writers must not trust records they remember across this rewrite.
        sqlx::query("UPDATE ledger_heads SET generation = generation + 1 WHERE tenant_id = ?")
            .bind(tenant)
            .execute(&mut *group.tx)
            .await?;
        let (rebuilt, writes) = super::rules::rebuild_sqlite(&mut group.tx, tenant).await?;
        group.write_records(tenant, &writes).await?;
        group.commit().await?;
        Ok(rebuilt)
    }
}

/// One index-ordered walk of the log for `GET /v1/entries`.
fn branch<'a>(
    q: &mut QueryBuilder<'a, Sqlite>,
    tenant: &'a str,
    f: &'a EntryFilter,
    side: Option<(&'static str, &'a String)>,
) {
    q.push(format!(
        "SELECT {ENTRY_COLUMNS} FROM entries WHERE tenant_id = "
    ))
    .push_bind(tenant);
    if let Some((column, account)) = side {
        q.push(format!(" AND {column} = ")).push_bind(account);
        // An entry with the account on both sides (a settings entry) is
        // listed once, by the debit-side walk.
        if column == "credit_account" {
            q.push(" AND debit_account <> ").push_bind(account);
        }
    }
    q.push(" AND seq > ").push_bind(f.after_seq);
    if let Some(upto) = f.upto_seq {
        q.push(" AND seq <= ").push_bind(upto);
    }
    if let Some(kind) = f.kind {
        q.push(" AND kind = ").push_bind(kind.as_str());
    }
    // Fixed-width UTC text compares in time order.
    if let Some(from) = f.from {
        q.push(" AND recorded_at >= ")
            .push_bind(format_recorded_at(&from));
    }
    if let Some(to) = f.to {
        q.push(" AND recorded_at < ")
            .push_bind(format_recorded_at(&to));
    }
    q.push(" ORDER BY seq LIMIT ").push_bind(f.limit);
}

/// One index-ordered walk of an account's entries for
/// [`SqliteStore::account_entries`]; `column` is the side it walks.
fn range_branch<'a>(
    q: &mut QueryBuilder<'a, Sqlite>,
    tenant: &'a str,
    r: &AccountRange<'a>,
    column: &'static str,
) {
    q.push(format!(
        "SELECT {ENTRY_COLUMNS} FROM entries WHERE tenant_id = "
    ))
    .push_bind(tenant)
    .push(format!(" AND {column} = "))
    .push_bind(r.account);
    if column == "credit_account" {
        q.push(" AND debit_account <> ").push_bind(r.account);
    }
    q.push(" AND seq > ")
        .push_bind(r.after_seq)
        .push(" AND seq <= ")
        .push_bind(r.until_seq)
        .push(" AND unit = ")
        .push_bind(r.unit);
    // Fixed-width UTC text compares in time order.
    if let Some(from) = r.from {
        q.push(" AND recorded_at >= ")
            .push_bind(format_recorded_at(&from));
    }
    if let Some(to) = r.to {
        q.push(" AND recorded_at < ")
            .push_bind(format_recorded_at(&to));
    }
    q.push(" ORDER BY seq LIMIT ").push_bind(r.limit);
}

/// Copies the WAL back into the database file once a second, off the
/// commit path. PASSIVE never blocks writers or readers.
async fn checkpoint_wal(
    pool: SqlitePool,
    options: SqliteConnectOptions,
    write_gate: Arc<tokio::sync::Mutex<()>>,
    restart_above: i64,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    // Its own connection, which waits at most `WAL_RESTART_WAIT` for the
    // write lock and for readers: the restarting checkpoint holds this
    // process's writes back while it waits.
    let options = options.busy_timeout(WAL_RESTART_WAIT);
    let mut conn: Option<SqliteConnection> = None;
    loop {
        tick.tick().await;
        if pool.is_closed() {
            return;
        }
        if conn.is_none() {
            match options.connect().await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    tracing::warn!(error = %e, "WAL checkpointer cannot connect; will retry");
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        if let Err(e) = checkpoint_once(c, &write_gate, restart_above).await {
            tracing::warn!(error = %e, "WAL checkpoint failed; will retry");
            conn = None;
        }
    }
}

/// One round of the checkpointer: a PASSIVE checkpoint (copies what it can
/// without waiting for anyone). SQLite starts the WAL over only when a
/// writer begins after every frame was copied, which under a steady stream
/// of groups never happens: the file grew to 6 GB while 1,000,000 entries
/// were loaded (docs/performance-history.md). So once the WAL holds more
/// than `restart_above` bytes, the round makes that moment happen. It copies
/// beside the writes, pass after pass, until few frames are left (each
/// pass copies what was appended during the one before), then takes this
/// process's write turn, so no group appends, and runs a RESTART
/// checkpoint: it copies the last frames and waits (at most
/// [`WAL_RESTART_WAIT`]) for readers of the old frames to finish. The next
/// group then writes from the start of the file, which keeps its size.
///
/// Not a TRUNCATE checkpoint right after one PASSIVE pass, which was tried:
/// it held every writer back while it copied the frames
/// appended during that pass and emptied the file, 0.53–0.64 s every ~9 s
/// under a flood of batches. Now the writes wait 7–135 ms (the last copy
/// ends with an fsync of the database, slow right after the passes)
/// (docs/performance-history.md).
async fn checkpoint_once(
    conn: &mut SqliteConnection,
    write_gate: &tokio::sync::Mutex<()>,
    restart_above: i64,
) -> Result<(), sqlx::Error> {
    let (_, mut frames, _) = wal_checkpoint(conn, "PASSIVE").await?;
    let page_size: i64 = sqlx::query_scalar("PRAGMA page_size")
        .fetch_one(&mut *conn)
        .await?;
    if frames.saturating_mul(page_size) <= restart_above {
        return Ok(());
    }
    // A pass copies the frames there were when it began; what the writes
    // append meanwhile is the next pass's work, and what is left when the
    // passes stop is copied holding the turn. They stop once a pass finds
    // few new frames (or fewer than before: the WAL started over by itself).
    let first = frames;
    let mut passes = 1;
    let mut backlog = frames;
    while backlog > WAL_BACKLOG_UNDER_TURN && passes < WAL_PASSES_BEFORE_TURN {
        let (_, now, _) = wal_checkpoint(conn, "PASSIVE").await?;
        backlog = now - frames;
        frames = now;
        passes += 1;
    }
    let started = std::time::Instant::now();
    let (busy, waited) = {
        let _turn = write_gate.lock().await;
        let waited = started.elapsed();
        (wal_checkpoint(conn, "RESTART").await?.0, waited)
    };
    tracing::debug!(
        frames = first,
        passes,
        backlog,
        wait_ms = waited.as_secs_f64() * 1e3,
        held_ms = (started.elapsed() - waited).as_secs_f64() * 1e3,
        restarted = busy == 0,
        "WAL over its bound"
    );
    Ok(())
}

/// `PRAGMA wal_checkpoint(mode)`: whether it was blocked, the frames in the
/// WAL and the frames copied into the database (SQLite's three columns).
async fn wal_checkpoint(
    conn: &mut SqliteConnection,
    mode: &'static str,
) -> Result<(i64, i64, i64), sqlx::Error> {
    sqlx::query_as(&format!("PRAGMA wal_checkpoint({mode})"))
        .fetch_one(&mut *conn)
        .await
}

/// Entries of `tenant` (of `kind`, if given) whose `column` is one of
/// `values`, read in chunks below SQLite's bound-parameter limit; with
/// `kind` bound, the lookup walks the UNIQUE (tenant_id, kind, upstream_id)
/// index instead of the table.
async fn entries_in(
    conn: &mut SqliteConnection,
    tenant: &str,
    kind: Option<EntryKind>,
    column: &'static str,
    values: &[&str],
) -> Result<Vec<StoredEntry>, LedgerError> {
    let mut found = Vec::new();
    for chunk in values.chunks(ROWS_PER_INSERT) {
        let mut q = QueryBuilder::<Sqlite>::new(format!(
            "SELECT {ENTRY_COLUMNS} FROM entries WHERE tenant_id = "
        ));
        q.push_bind(tenant);
        if let Some(kind) = kind {
            q.push(" AND kind = ").push_bind(kind.as_str());
        }
        q.push(format!(" AND {column} IN ("));
        let mut sep = q.separated(", ");
        for value in chunk {
            sep.push_bind(*value);
        }
        q.push(")");
        for row in q.build().fetch_all(&mut *conn).await? {
            found.push(entry(&row)?);
        }
    }
    Ok(found)
}

/// Entries holding one of `keys`: one query per kind with `kind = ?` bound,
/// so SQLite walks the UNIQUE (tenant_id, kind, upstream_id) index instead
/// of the table.
async fn keyed_entries(
    conn: &mut SqliteConnection,
    tenant: &str,
    keys: &[(EntryKind, &str)],
) -> Result<Vec<StoredEntry>, LedgerError> {
    let mut found = Vec::new();
    for kind in EntryKind::ALL {
        let ids: Vec<&str> = keys
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, id)| *id)
            .collect();
        if !ids.is_empty() {
            found.extend(entries_in(conn, tenant, Some(kind), "upstream_id", &ids).await?);
        }
    }
    Ok(found)
}

/// A write transaction holding this process's turn (see `write_gate`).
/// Fields drop in order: the transaction rolls back before the turn passes.
pub struct SqliteWrite {
    tx: Transaction<'static, Sqlite>,
    _turn: tokio::sync::OwnedMutexGuard<()>,
}

impl std::ops::Deref for SqliteWrite {
    type Target = sqlx::SqliteConnection;
    fn deref(&self) -> &Self::Target {
        &self.tx
    }
}

impl std::ops::DerefMut for SqliteWrite {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.tx
    }
}

impl SqliteWrite {
    pub async fn commit(self) -> Result<(), LedgerError> {
        self.tx.commit().await?;
        Ok(())
    }

    pub async fn rollback(self) -> Result<(), LedgerError> {
        self.tx.rollback().await?;
        Ok(())
    }
}

pub(super) struct SqliteGroup {
    pub(super) tx: SqliteWrite,
}

impl SqliteGroup {
    async fn write_records(&mut self, tenant: &str, rows: &[StateRow]) -> Result<(), LedgerError> {
        for chunk in rows.chunks(ROWS_PER_INSERT / 2) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "INSERT INTO rule_state (tenant_id, kind, key, value, expires_at) ",
            );
            q.push_values(chunk, |mut b, r| {
                b.push_bind(tenant)
                    .push_bind(r.kind)
                    .push_bind(&r.key)
                    .push_bind(&r.value)
                    .push_bind(&r.expires_at);
            });
            q.push(
                " ON CONFLICT (tenant_id, kind, key) DO UPDATE SET \
                 value = excluded.value, expires_at = excluded.expires_at",
            );
            q.build().execute(&mut *self.tx).await?;
        }
        Ok(())
    }

    async fn insert_entries(&mut self, entries: &[StoredEntry]) -> Result<(), LedgerError> {
        for chunk in entries.chunks(ROWS_PER_INSERT / 2) {
            let mut q =
                QueryBuilder::<Sqlite>::new(format!("INSERT INTO entries ({INSERTED_COLUMNS}) "));
            q.push_values(chunk, |mut b, e| {
                let usage = UsageColumns::of(e);
                let (meter, day, quantity) = match usage {
                    Some(u) => (Some(u.meter), Some(u.day), Some(canonical(u.quantity))),
                    None => (None, None, None),
                };
                b.push_bind(&e.tenant_id)
                    .push_bind(e.seq)
                    .push_bind(&e.id)
                    .push_bind(e.kind.as_str())
                    .push_bind(&e.upstream_id)
                    .push_bind(e.status.as_str())
                    .push_bind(&e.rejection_code)
                    .push_bind(&e.rejection_message)
                    .push_bind(&e.account)
                    .push_bind(&e.debit_account)
                    .push_bind(&e.credit_account)
                    .push_bind(canonical(e.amount))
                    .push_bind(&e.unit)
                    .push_bind(&e.params)
                    .push_bind(&e.fingerprint)
                    .push_bind(format_recorded_at(&e.recorded_at))
                    .push_bind(canonical(e.balance_after))
                    .push_bind(&e.prev_hash)
                    .push_bind(&e.hash)
                    .push_bind(meter)
                    .push_bind(day)
                    .push_bind(quantity);
            });
            q.build().execute(&mut *self.tx).await?;
        }
        Ok(())
    }

    /// Moves the head from `start` to `head`; fails, for the transaction
    /// to roll back, if it is not at `start`.
    async fn write_head(
        &mut self,
        tenant: &str,
        start: &Fence,
        head: &Head,
    ) -> Result<(), LedgerError> {
        let moved = sqlx::query(
            "UPDATE ledger_heads SET seq = ?, hash = ? \
             WHERE tenant_id = ? AND seq = ? AND hash = ? AND generation = ?",
        )
        .bind(head.seq)
        .bind(hex::encode(head.hash))
        .bind(tenant)
        .bind(start.head.seq)
        .bind(hex::encode(start.head.hash))
        .bind(start.generation)
        .execute(&mut *self.tx)
        .await?;
        if moved.rows_affected() != 1 {
            return Err(head_moved());
        }
        Ok(())
    }
}

impl GroupTransaction for SqliteGroup {
    async fn lock_head(&mut self, tenant: &str) -> Result<Fence, LedgerError> {
        // BEGIN IMMEDIATE already holds the database's write lock.
        sqlx::query(
            "INSERT INTO ledger_heads (tenant_id, seq, hash) VALUES (?, 0, ?) \
             ON CONFLICT (tenant_id) DO NOTHING",
        )
        .bind(tenant)
        .bind(hex::encode(GENESIS_HASH))
        .execute(&mut *self.tx)
        .await?;
        let row = sqlx::query("SELECT seq, hash, generation FROM ledger_heads WHERE tenant_id = ?")
            .bind(tenant)
            .fetch_optional(&mut *self.tx)
            .await?;
        decode_fence(row.as_ref())
    }

    async fn entries_with_keys(
        &mut self,
        tenant: &str,
        keys: &[(EntryKind, &str)],
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        keyed_entries(&mut self.tx, tenant, keys).await
    }

    async fn balances_of(
        &mut self,
        tenant: &str,
        accounts: &[&str],
    ) -> Result<Vec<(String, String, AccountBalance)>, LedgerError> {
        let mut out = Vec::new();
        for chunk in accounts.chunks(ROWS_PER_INSERT) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "SELECT account, unit, debits, credits, held FROM balances WHERE tenant_id = ",
            );
            q.push_bind(tenant).push(" AND account IN (");
            let mut sep = q.separated(", ");
            for a in chunk {
                sep.push_bind(*a);
            }
            q.push(")");
            for row in q.build().fetch_all(&mut *self.tx).await? {
                out.push((
                    row.try_get("account")?,
                    row.try_get("unit")?,
                    decode_balance(&row)?,
                ));
            }
        }
        Ok(out)
    }

    async fn entries_by_ids(
        &mut self,
        tenant: &str,
        ids: &[&str],
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        entries_in(&mut self.tx, tenant, None, "id", ids).await
    }

    async fn records_of(
        &mut self,
        tenant: &str,
        keys: &[StateKey],
    ) -> Result<Vec<(String, String, String)>, LedgerError> {
        let mut out = Vec::new();
        for chunk in keys.chunks(ROWS_PER_INSERT / 2) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "SELECT kind, key, value FROM rule_state WHERE tenant_id = ",
            );
            q.push_bind(tenant).push(" AND (kind, key) IN (VALUES ");
            let mut sep = q.separated(", ");
            for k in chunk {
                sep.push("(")
                    .push_bind_unseparated(k.kind())
                    .push_unseparated(", ")
                    .push_bind_unseparated(k.key())
                    .push_unseparated(")");
            }
            q.push(")");
            for row in q.build().fetch_all(&mut *self.tx).await? {
                out.push((
                    row.try_get("kind")?,
                    row.try_get("key")?,
                    row.try_get("value")?,
                ));
            }
        }
        Ok(out)
    }

    async fn write_balances(
        &mut self,
        tenant: &str,
        rows: &[(&str, &str, AccountBalance)],
    ) -> Result<(), LedgerError> {
        for chunk in rows.chunks(ROWS_PER_INSERT) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "INSERT INTO balances (tenant_id, account, unit, debits, credits, held) ",
            );
            q.push_values(chunk, |mut b, (account, unit, bal)| {
                b.push_bind(tenant)
                    .push_bind(*account)
                    .push_bind(*unit)
                    .push_bind(canonical(bal.debits))
                    .push_bind(canonical(bal.credits))
                    .push_bind(canonical(bal.held));
            });
            q.push(
                " ON CONFLICT (tenant_id, account, unit) DO UPDATE SET \
                 debits = excluded.debits, credits = excluded.credits, held = excluded.held",
            );
            q.build().execute(&mut *self.tx).await?;
        }
        Ok(())
    }

    async fn write_group(&mut self, write: &GroupWrite) -> Result<(), LedgerError> {
        // In-process: statements cost no round trip, so one each. The head
        // first: a group whose head moved fails before it writes a row.
        self.write_head(&write.tenant, &write.start, &write.head)
            .await?;
        self.insert_entries(&write.entries).await?;
        self.write_balances(&write.tenant, &write.balance_rows())
            .await?;
        if !write.records.is_empty() {
            self.write_records(&write.tenant, &write.records).await?;
        }
        Ok(())
    }

    async fn commit(self) -> Result<(), LedgerError> {
        self.tx.commit().await?;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A WAL over the bound starts over: its last frames are copied under
    /// the write turn, and the next writes go to the start of the file,
    /// which does not grow. One under the bound is left to PASSIVE passes,
    /// which never take the turn.
    #[tokio::test]
    async fn the_checkpointer_restarts_a_wal_over_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.db");
        let store = SqliteStore::connect(&format!("sqlite://{}", path.display()), 2)
            .await
            .unwrap();
        let wal = || std::fs::metadata(dir.path().join("wal.db-wal")).map_or(0, |m| m.len());
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
            .unwrap()
            .pragma("wal_autocheckpoint", "0")
            .busy_timeout(WAL_RESTART_WAIT);
        let mut conn = options.connect().await.unwrap();
        let gate = tokio::sync::Mutex::new(());
        let write = || async {
            for i in 0..50 {
                sqlx::query("INSERT INTO api_keys (tenant_id, key_hash, scopes, created_at) VALUES ('t', ?, 'read', '2026-01-01T00:00:00Z')")
                    .bind(format!("k{i}-{}", uuid::Uuid::now_v7()))
                    .execute(&store.pool)
                    .await
                    .unwrap();
            }
        };
        write().await;
        // Under the bound: PASSIVE passes beside the writes, never the turn.
        let turn = gate.lock().await;
        let under = tokio::time::timeout(
            Duration::from_millis(300),
            checkpoint_once(&mut conn, &gate, i64::MAX),
        )
        .await;
        assert!(
            under.is_ok(),
            "under the bound the round does not wait for the write turn"
        );
        under.unwrap().unwrap();

        // Over the bound: the last copy waits for the turn.
        write().await;
        let waited = tokio::time::timeout(
            Duration::from_millis(300),
            checkpoint_once(&mut conn, &gate, 0),
        )
        .await;
        assert!(
            waited.is_err(),
            "over the bound the restart waits for the write turn"
        );
        drop(turn);
        checkpoint_once(&mut conn, &gate, 0).await.unwrap();
        let size = wal();
        assert!(size > 0);
        write().await;
        assert_eq!(
            wal(),
            size,
            "the next writes go to the start of the file, which does not grow"
        );
    }
}
