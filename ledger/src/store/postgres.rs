//! PostgreSQL: production. Many `tally` processes may share one database;
//! the `FOR UPDATE` lock on the tenant's head row serialises their groups,
//! and the UNIQUE constraint on (tenant_id, kind, upstream_id) stays the
//! final arbiter. Amounts are NUMERIC, bound and read as exact text.

use std::str::FromStr;
use std::time::Duration;

use crate::balance::{AccountBalance, BalanceProjection};
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgRow};
use sqlx::{PgConnection, PgPool, Postgres, QueryBuilder, Row, Transaction};

use super::transaction::{head_moved, Fence, GroupTransaction, GroupWrite};
use super::{
    decode_balance, decode_entry, decode_fence, decode_head, AccountRange, BalanceRow, EntryFilter,
};
use crate::amount::canonical;
use crate::chain::{Head, GENESIS_HASH};
use crate::entry::UsageColumns;
use crate::entry::{format_recorded_at, StoredEntry};
use crate::intent::EntryKind;
use crate::keys::StoredApiKey;
use crate::state::StateKey;
use crate::LedgerError;

pub(super) const ENTRY_COLUMNS: &str =
    "tenant_id, seq, id, kind, upstream_id, status, rejection_code, \
    rejection_message, account, debit_account, credit_account, amount::text AS amount, unit, \
    params, fingerprint, recorded_at, balance_after::text AS balance_after, prev_hash, hash";

#[derive(Clone)]
pub struct PostgresStore {
    pub(crate) pool: PgPool,
}

pub(super) fn entry(row: &PgRow) -> Result<StoredEntry, LedgerError> {
    let recorded_at: DateTime<Utc> = row.try_get("recorded_at")?;
    decode_entry(row, recorded_at)
}

const BALANCE_COLUMNS: &str =
    "account, unit, debits::text AS debits, credits::text AS credits, held::text AS held";

/// One index-ordered walk of the log for `GET /v1/entries`.
fn branch<'a>(
    q: &mut QueryBuilder<'a, Postgres>,
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
    if let Some(from) = f.from {
        q.push(" AND recorded_at >= ").push_bind(from);
    }
    if let Some(to) = f.to {
        q.push(" AND recorded_at < ").push_bind(to);
    }
    q.push(" ORDER BY seq LIMIT ").push_bind(f.limit);
}

/// One index-ordered walk of an account's entries for
/// [`PostgresStore::account_entries`]; `column` is the side it walks.
fn range_branch<'a>(
    q: &mut QueryBuilder<'a, Postgres>,
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
    if let Some(from) = r.from {
        q.push(" AND recorded_at >= ").push_bind(from);
    }
    if let Some(to) = r.to {
        q.push(" AND recorded_at < ").push_bind(to);
    }
    q.push(" ORDER BY seq LIMIT ").push_bind(r.limit);
}

/// The connection options of `url`, with PostgreSQL's JIT compiler off
/// unless the URL's `options` say otherwise. No statement of the request
/// path costs enough to be compiled; the log-wide aggregates of `tally
/// projections rebuild` and `tally verify` do, and there every process of a
/// parallel plan compiled its expressions for ~100 ms of a ~1 s scan, more
/// than the compiled code saved (docs/performance-history.md).
fn connect_options(url: &str) -> Result<PgConnectOptions, LedgerError> {
    let options = PgConnectOptions::from_str(url)?;
    if options.get_options().is_some_and(|o| o.contains("jit")) {
        return Ok(options);
    }
    Ok(options.options([("jit", "off")]))
}

impl PostgresStore {
    pub async fn connect(url: &str, pool_size: u32) -> Result<Self, LedgerError> {
        let pool = super::pool_options::<Postgres>(pool_size)
            // A database that does not answer turns into a prompt 503, not a hang.
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(connect_options(url)?)
            .await?;
        super::migration_checksums::accept_reworded_postgres(&pool).await?;
        // sqlx takes an advisory lock, so processes starting together migrate once.
        sqlx::migrate!("../migrations/postgres").run(&pool).await?;
        Ok(Self { pool })
    }

    pub(super) async fn begin_group(&self) -> Result<PgGroup, LedgerError> {
        Ok(PgGroup {
            tx: self.pool.begin().await?,
        })
    }

    /// Writes a group decided from the writer's memory, on its own: one
    /// statement in its own transaction (see [`group_write`]), instead of
    /// `BEGIN`, the head's lock, the write and `COMMIT`, four round trips
    /// on the tenant's critical path. Fails, having written nothing, if the
    /// head is no longer where the group was decided.
    pub(super) async fn write_alone(&self, write: &GroupWrite) -> Result<(), LedgerError> {
        let started = std::time::Instant::now();
        let mut connection = self.pool.acquire().await?;
        if group_write(write, &mut *connection).await? != 1 {
            return Err(head_moved());
        }
        tracing::debug!(
            entries = write.entries.len(),
            write_ms = started.elapsed().as_secs_f64() * 1e3,
            "group written alone"
        );
        Ok(())
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
            "INSERT INTO api_keys (tenant_id, key_hash, scopes, created_at) VALUES ($1, $2, $3, now())",
        )
        .bind(tenant)
        .bind(key_hash)
        .bind(scopes)
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
             WHERE $1::text IS NULL OR tenant_id = $1 ORDER BY tenant_id, created_at, key_hash",
        )
        .bind(tenant)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let created_at: DateTime<Utc> = r.try_get("created_at")?;
                Ok(StoredApiKey {
                    tenant_id: r.try_get("tenant_id")?,
                    key_hash: r.try_get("key_hash")?,
                    scopes: r.try_get("scopes")?,
                    created_at: format_recorded_at(&created_at),
                })
            })
            .collect()
    }

    pub async fn delete_api_key(&self, tenant: &str, key_hash: &str) -> Result<bool, LedgerError> {
        let done = sqlx::query("DELETE FROM api_keys WHERE tenant_id = $1 AND key_hash = $2")
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
        let row = sqlx::query("SELECT tenant_id, scopes FROM api_keys WHERE key_hash = $1")
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
        let sql = format!("SELECT {ENTRY_COLUMNS} FROM entries WHERE tenant_id = $1 AND id = $2");
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
            "SELECT {ENTRY_COLUMNS} FROM entries WHERE tenant_id = $1 AND kind = $2 AND upstream_id = $3"
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
        let mut q = QueryBuilder::<Postgres>::new("");
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
        let rows = q.build().fetch_all(&self.pool).await?;
        rows.iter().map(entry).collect()
    }

    pub async fn balance_rows(
        &self,
        tenant: &str,
        account: &str,
    ) -> Result<(Vec<BalanceRow>, i64), LedgerError> {
        // One statement, one snapshot: the balances and the seq they belong to.
        let rows = sqlx::query(
            "SELECT b.unit, b.debits::text AS debits, b.credits::text AS credits, \
                    b.held::text AS held, h.seq AS head_seq \
             FROM ledger_heads h LEFT JOIN balances b \
               ON b.tenant_id = h.tenant_id AND b.account = $2 \
             WHERE h.tenant_id = $1 ORDER BY b.unit",
        )
        .bind(tenant)
        .bind(account)
        .fetch_all(&self.pool)
        .await?;
        let mut seq = 0;
        let mut out = Vec::new();
        for r in &rows {
            seq = r.try_get("head_seq")?;
            if let Some(unit) = r.try_get::<Option<String>, _>("unit")? {
                out.push(BalanceRow {
                    unit,
                    balance: decode_balance(r)?,
                });
            }
        }
        Ok((out, seq))
    }

    pub async fn postings_until(
        &self,
        tenant: &str,
        account: &str,
        as_of_seq: i64,
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        let sql = format!(
            "SELECT {ENTRY_COLUMNS} FROM entries WHERE tenant_id = $1 AND seq <= $2 \
             AND status = 'posted' AND (debit_account = $3 OR credit_account = $3) ORDER BY seq"
        );
        let rows = sqlx::query(&sql)
            .bind(tenant)
            .bind(as_of_seq)
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
        let mut q = QueryBuilder::<Postgres>::new("SELECT * FROM (SELECT * FROM (");
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
        let row = sqlx::query("SELECT seq, hash FROM ledger_heads WHERE tenant_id = $1")
            .bind(tenant)
            .fetch_optional(&self.pool)
            .await?;
        decode_head(row.as_ref())
    }

    pub async fn stored_balances(&self, tenant: &str) -> Result<BalanceProjection, LedgerError> {
        let sql = format!("SELECT {BALANCE_COLUMNS} FROM balances WHERE tenant_id = $1");
        let rows = sqlx::query(&sql).bind(tenant).fetch_all(&self.pool).await?;
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
            "SELECT key, value FROM rule_state WHERE tenant_id = $1 AND kind = $2 ORDER BY key",
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
            "SELECT value FROM rule_state WHERE tenant_id = $1 AND kind = $2 AND key = $3",
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
               FROM rule_state WHERE expires_at IS NOT NULL AND expires_at <= $1) AS e \
             WHERE n <= $2 ORDER BY expires_at",
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
        super::rules::stored_pg(&mut conn, tenant).await
    }

    pub async fn rebuild_rule_state(
        &self,
        tenant: &str,
    ) -> Result<super::rules::RulesRebuilt, LedgerError> {
        let mut group = self.begin_group().await?;
        group.lock_head(tenant).await?;
        // Writers must not trust records they remember across this rewrite.
        sqlx::query("UPDATE ledger_heads SET generation = generation + 1 WHERE tenant_id = $1")
            .bind(tenant)
            .execute(&mut *group.tx)
            .await?;
        let rebuilt = super::rules::rebuild_pg(&mut group.tx, tenant).await?;
        group.commit().await?;
        Ok(rebuilt)
    }
}

/// Entries holding one of `keys`.
async fn keyed_entries(
    conn: &mut PgConnection,
    tenant: &str,
    keys: &[(EntryKind, &str)],
) -> Result<Vec<StoredEntry>, LedgerError> {
    // One probe of the UNIQUE (tenant_id, kind, upstream_id) index per
    // key, written as a LATERAL join so that the prepared statement's
    // generic plan cannot turn it into a scan of the tenant's entries:
    // cost grows with the group, not with the log. Measured under load
    // (docs/performance-history.md): `(kind, upstream_id) IN (SELECT * FROM
    // UNNEST(..))` took 4.7 ms for ~30 keys; `kind = ANY AND upstream_id =
    // ANY` planned a scan; `kind = $2 AND upstream_id = ANY($3)` took
    // 460 ms for 1,000 keys. `OFFSET 0` keeps the subquery from being
    // flattened into a plain join (which may be hashed against a scan).
    let kinds: Vec<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
    let ids: Vec<&str> = keys.iter().map(|(_, id)| *id).collect();
    let sql = format!(
        "SELECT e.* FROM UNNEST($2::text[], $3::text[]) AS k(kind, upstream_id) \
         CROSS JOIN LATERAL (SELECT {ENTRY_COLUMNS} FROM entries \
           WHERE tenant_id = $1 AND kind = k.kind AND upstream_id = k.upstream_id OFFSET 0) e"
    );
    let rows = sqlx::query(&sql)
        .bind(tenant)
        .bind(&kinds)
        .bind(&ids)
        .fetch_all(&mut *conn)
        .await?;
    rows.iter().map(entry).collect()
}

/// Everything one group writes, as one statement and one round trip: the
/// entries, the balances and rule-state records they changed (absolute
/// values, decided on the head `write.start`), and the head, moved only if
/// it is still at `write.start`. Every insert draws its rows through the
/// head's update, so a head that moved writes nothing, and the statement
/// answers 0 instead of 1. Inside a transaction holding the head's lock the
/// check always holds; alone (autocommit), it is the lock.
///
/// The head is compared as `locked` returns it, not in the update's own
/// `WHERE`: a `WHERE` is first evaluated on the statement's snapshot, taken
/// before the group still committing ahead of this one, so `seq = start`
/// would be false there and the row skipped without waiting. `FOR UPDATE`
/// waits for that commit and then returns the row as it left it (READ
/// COMMITTED). The upserts of balances and records are safe on the older
/// snapshot for the same reason: `ON CONFLICT DO UPDATE` locks and updates
/// the latest version of a row, and the values are absolute.
/// Columns travel as arrays, so the statement is the same whatever the
/// group size and stays prepared.
async fn group_write<'c>(
    write: &GroupWrite,
    on: impl sqlx::PgExecutor<'c>,
) -> Result<i64, LedgerError> {
    let GroupWrite {
        tenant,
        entries,
        balances,
        records,
        start,
        head,
    } = write;
    // Columns borrow from the entries: a group of 1,000 would otherwise
    // copy ~12,000 strings only to bind them.
    let col = |f: fn(&StoredEntry) -> &str| entries.iter().map(f).collect::<Vec<&str>>();
    let opt =
        |f: fn(&StoredEntry) -> Option<&str>| entries.iter().map(f).collect::<Vec<Option<&str>>>();
    let texts = |f: fn(&StoredEntry) -> String| entries.iter().map(f).collect::<Vec<String>>();
    let seqs: Vec<i64> = entries.iter().map(|e| e.seq).collect();
    let recorded: Vec<DateTime<Utc>> = entries.iter().map(|e| e.recorded_at).collect();
    let usage: Vec<Option<UsageColumns>> = entries.iter().map(UsageColumns::of).collect();
    let amounts = |f: fn(&AccountBalance) -> rust_decimal::Decimal| {
        balances
            .iter()
            .map(|r| canonical(f(&r.2)))
            .collect::<Vec<String>>()
    };
    let accounts: Vec<&str> = balances.iter().map(|r| r.0.as_str()).collect();
    let units: Vec<&str> = balances.iter().map(|r| r.1.as_str()).collect();
    Ok(sqlx::query_scalar(
        "WITH locked AS ( \
           SELECT seq, hash, generation FROM ledger_heads WHERE tenant_id = $1 FOR UPDATE), \
         head AS ( \
           UPDATE ledger_heads SET seq = $29, hash = $30 WHERE tenant_id = $1 AND EXISTS ( \
             SELECT 1 FROM locked WHERE seq = $34 AND hash = $35 AND generation = $36) \
           RETURNING tenant_id), \
         new_entries AS ( \
           INSERT INTO entries (tenant_id, seq, id, kind, upstream_id, status, rejection_code, \
             rejection_message, account, debit_account, credit_account, amount, unit, params, \
             fingerprint, recorded_at, balance_after, prev_hash, hash, \
             usage_meter, usage_day, usage_quantity) \
           SELECT head.tenant_id, e.* FROM head, UNNEST($2::int8[], $3::text[], $4::text[], \
             $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], \
             $11::text[], $12::text[]::numeric[], $13::text[], $14::text[], $15::text[], \
             $16::timestamptz[], $17::text[]::numeric[], $18::text[], $19::text[], \
             $31::text[], $32::text[], $33::text[]::numeric[]) AS e), \
         new_balances AS ( \
           INSERT INTO balances (tenant_id, account, unit, debits, credits, held) \
           SELECT head.tenant_id, b.* FROM head, UNNEST($20::text[], $21::text[], \
             $22::text[]::numeric[], $23::text[]::numeric[], $24::text[]::numeric[]) AS b \
           ON CONFLICT (tenant_id, account, unit) DO UPDATE SET \
             debits = EXCLUDED.debits, credits = EXCLUDED.credits, held = EXCLUDED.held), \
         new_records AS ( \
           INSERT INTO rule_state (tenant_id, kind, key, value, expires_at) \
           SELECT head.tenant_id, r.* FROM head, \
             UNNEST($25::text[], $26::text[], $27::text[], $28::text[]) AS r \
           ON CONFLICT (tenant_id, kind, key) DO UPDATE SET \
             value = EXCLUDED.value, expires_at = EXCLUDED.expires_at) \
         SELECT count(*) FROM head",
    )
    .bind(tenant)
    .bind(seqs)
    .bind(col(|e| &e.id))
    .bind(col(|e| e.kind.as_str()))
    .bind(col(|e| &e.upstream_id))
    .bind(col(|e| e.status.as_str()))
    .bind(opt(|e| e.rejection_code.as_deref()))
    .bind(opt(|e| e.rejection_message.as_deref()))
    .bind(col(|e| &e.account))
    .bind(col(|e| &e.debit_account))
    .bind(col(|e| &e.credit_account))
    .bind(texts(|e| canonical(e.amount)))
    .bind(col(|e| &e.unit))
    .bind(col(|e| &e.params))
    .bind(col(|e| &e.fingerprint))
    .bind(recorded)
    .bind(texts(|e| canonical(e.balance_after)))
    .bind(col(|e| &e.prev_hash))
    .bind(col(|e| &e.hash))
    .bind(accounts)
    .bind(units)
    .bind(amounts(|b| b.debits))
    .bind(amounts(|b| b.credits))
    .bind(amounts(|b| b.held))
    .bind(records.iter().map(|r| r.kind).collect::<Vec<&str>>())
    .bind(
        records
            .iter()
            .map(|r| r.key.as_str())
            .collect::<Vec<&str>>(),
    )
    .bind(
        records
            .iter()
            .map(|r| r.value.as_str())
            .collect::<Vec<&str>>(),
    )
    .bind(
        records
            .iter()
            .map(|r| r.expires_at.as_deref())
            .collect::<Vec<Option<&str>>>(),
    )
    .bind(head.seq)
    .bind(hex::encode(head.hash))
    .bind(
        usage
            .iter()
            .map(|u| u.as_ref().map(|u| u.meter.as_str()))
            .collect::<Vec<_>>(),
    )
    .bind(
        usage
            .iter()
            .map(|u| u.as_ref().map(|u| u.day.as_str()))
            .collect::<Vec<_>>(),
    )
    .bind(
        usage
            .iter()
            .map(|u| u.as_ref().map(|u| canonical(u.quantity)))
            .collect::<Vec<_>>(),
    )
    .bind(start.head.seq)
    .bind(hex::encode(start.head.hash))
    .bind(start.generation)
    .fetch_one(on)
    .await?)
}

pub(super) struct PgGroup {
    pub(super) tx: Transaction<'static, Postgres>,
}

impl GroupTransaction for PgGroup {
    async fn lock_head(&mut self, tenant: &str) -> Result<Fence, LedgerError> {
        let select =
            "SELECT seq, hash, generation FROM ledger_heads WHERE tenant_id = $1 FOR UPDATE";
        let mut row = sqlx::query(select)
            .bind(tenant)
            .fetch_optional(&mut *self.tx)
            .await?;
        if row.is_none() {
            sqlx::query(
                "INSERT INTO ledger_heads (tenant_id, seq, hash) VALUES ($1, 0, $2) \
                 ON CONFLICT (tenant_id) DO NOTHING",
            )
            .bind(tenant)
            .bind(hex::encode(GENESIS_HASH))
            .execute(&mut *self.tx)
            .await?;
            row = sqlx::query(select)
                .bind(tenant)
                .fetch_optional(&mut *self.tx)
                .await?;
        }
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
        // A probe per account, as for the keys: `account = ANY($2)` with a
        // thousand accounts was measured at ~290 ms per group under load.
        // `OFFSET 0` keeps the probe a probe: flattened, the join was hashed
        // against a scan of every balance of the tenant (3 ms for one debit).
        let sql = format!(
            "SELECT b.* FROM UNNEST($2::text[]) AS k(account) \
             CROSS JOIN LATERAL (SELECT {BALANCE_COLUMNS} FROM balances \
               WHERE tenant_id = $1 AND account = k.account OFFSET 0) b"
        );
        let rows = sqlx::query(&sql)
            .bind(tenant)
            .bind(accounts)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("account")?,
                    r.try_get("unit")?,
                    decode_balance(r)?,
                ))
            })
            .collect()
    }

    async fn entries_by_ids(
        &mut self,
        tenant: &str,
        ids: &[&str],
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        let sql = format!(
            "SELECT e.* FROM UNNEST($2::text[]) AS k(id) \
             CROSS JOIN LATERAL (SELECT {ENTRY_COLUMNS} FROM entries \
               WHERE tenant_id = $1 AND id = k.id OFFSET 0) e"
        );
        let rows = sqlx::query(&sql)
            .bind(tenant)
            .bind(ids)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(entry).collect()
    }

    async fn records_of(
        &mut self,
        tenant: &str,
        keys: &[StateKey],
    ) -> Result<Vec<(String, String, String)>, LedgerError> {
        // One primary-key probe per record, for the reasons given at
        // `entries_with_keys`: the cost follows the group, not the tenant.
        let kinds: Vec<&str> = keys.iter().map(StateKey::kind).collect();
        let ids: Vec<&str> = keys.iter().map(StateKey::key).collect();
        let rows = sqlx::query(
            "SELECT r.kind, r.key, r.value FROM UNNEST($2::text[], $3::text[]) AS k(kind, key) \
             CROSS JOIN LATERAL (SELECT kind, key, value FROM rule_state \
               WHERE tenant_id = $1 AND kind = k.kind AND key = k.key OFFSET 0) r",
        )
        .bind(tenant)
        .bind(&kinds)
        .bind(&ids)
        .fetch_all(&mut *self.tx)
        .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get("kind")?,
                    row.try_get("key")?,
                    row.try_get("value")?,
                ))
            })
            .collect()
    }

    async fn write_balances(
        &mut self,
        tenant: &str,
        rows: &[(&str, &str, AccountBalance)],
    ) -> Result<(), LedgerError> {
        let accounts: Vec<&str> = rows.iter().map(|r| r.0).collect();
        let units: Vec<&str> = rows.iter().map(|r| r.1).collect();
        let amounts = |f: fn(&AccountBalance) -> rust_decimal::Decimal| {
            rows.iter()
                .map(|r| canonical(f(&r.2)))
                .collect::<Vec<String>>()
        };
        sqlx::query(
            "INSERT INTO balances (tenant_id, account, unit, debits, credits, held) \
             SELECT $1, * FROM UNNEST($2::text[], $3::text[], $4::text[]::numeric[], \
               $5::text[]::numeric[], $6::text[]::numeric[]) \
             ON CONFLICT (tenant_id, account, unit) DO UPDATE SET \
               debits = EXCLUDED.debits, credits = EXCLUDED.credits, held = EXCLUDED.held",
        )
        .bind(tenant)
        .bind(&accounts)
        .bind(&units)
        .bind(amounts(|b| b.debits))
        .bind(amounts(|b| b.credits))
        .bind(amounts(|b| b.held))
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    async fn write_group(&mut self, write: &GroupWrite) -> Result<(), LedgerError> {
        let moved: i64 = group_write(write, &mut *self.tx).await?;
        if moved != 1 {
            return Err(head_moved());
        }
        Ok(())
    }

    async fn commit(self) -> Result<(), LedgerError> {
        self.tx.commit().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::store::Storage;
    use crate::test_databases::TestDb;

    #[test]
    fn jit_is_off_unless_the_url_chooses() {
        let plain = connect_options("postgres://u@localhost/db").unwrap();
        assert_eq!(plain.get_options(), Some("-c jit=off"));
        let other =
            connect_options("postgres://u@localhost/db?options=-c%20work_mem%3D8MB").unwrap();
        assert_eq!(other.get_options(), Some("-c work_mem=8MB -c jit=off"));
        for url in [
            "postgres://u@localhost/db?options=-c%20jit%3Don",
            "postgres://u@localhost/db?options[jit]=on",
        ] {
            let chosen = connect_options(url).unwrap();
            assert_eq!(chosen.get_options(), Some("-c jit=on"), "{url}");
        }
    }

    #[tokio::test]
    async fn tally_sessions_run_without_jit() {
        let Some(db) = TestDb::postgres(2).await else {
            return;
        };
        let Storage::Postgres(store) = &db.storage else {
            unreachable!("TestDb::postgres gives a PostgreSQL store");
        };
        let jit: String = sqlx::query_scalar("SHOW jit")
            .fetch_one(&store.pool)
            .await
            .unwrap();
        assert_eq!(jit, "off");
        db.remove().await;
    }

    #[tokio::test]
    async fn look_ups_in_flight_take_at_most_a_quarter_of_the_pool() {
        for (pool, in_flight) in [(2, 1), (8, 2), (16, 4), (64, 4)] {
            let Some(db) = TestDb::postgres(pool).await else {
                return;
            };
            assert_eq!(db.storage.look_ups_in_flight(), in_flight, "pool {pool}");
            db.remove().await;
        }
        let db = TestDb::sqlite(16).await;
        assert_eq!(db.storage.look_ups_in_flight(), 1);
        db.remove().await;
    }

    /// Migration 0007: whatever locale the database was created with, no
    /// index of tally's compares text through strcoll(); a later migration
    /// that adds an index on a column of the default collation fails here.
    #[tokio::test]
    async fn every_indexed_text_column_compares_bytes() {
        let Some(db) = TestDb::postgres(2).await else {
            return;
        };
        let Storage::Postgres(store) = &db.storage else {
            unreachable!("TestDb::postgres gives a PostgreSQL store");
        };
        let linguistic: Vec<String> = sqlx::query_scalar(
            "SELECT c.relname || '.' || a.attname \
             FROM pg_index i \
             JOIN pg_class c ON c.oid = i.indrelid \
             JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema() \
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) \
             WHERE a.atttypid = 'text'::regtype AND c.relname <> '_sqlx_migrations' \
               AND a.attcollation <> (SELECT oid FROM pg_collation WHERE collname = 'C') \
             ORDER BY 1",
        )
        .fetch_all(&store.pool)
        .await
        .unwrap();
        assert!(linguistic.is_empty(), "not byte-ordered: {linguistic:?}");
        db.remove().await;
    }
}
