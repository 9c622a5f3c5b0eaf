//! The raw limit: the same work tally does per entry (insert the entry row,
//! move the two balances) issued straight to the same database by the
//! simplest correct SQL, with no HTTP and no tally.
//!
//! "The same work" is taken literally: the raw rows go into a copy of
//! tally's own `entries` table (same columns, same constraints and indexes)
//! holding a copy of tally's preloaded ledger, and the balances into a copy
//! of `balances`, so the raw insert maintains the same five indexes of the
//! same size as tally's. Only tally's own work differs: HTTP, JSON,
//! fingerprints, hashes, key and balance look-ups, the decision.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, QueryBuilder, Row, SqlitePool};

use crate::stats::{self, Stats};
use crate::workload::{Rng, ACCOUNTS, COUNTERS};

#[derive(Clone)]
pub struct RawDb {
    pool: RawPool,
    /// The next seq: rows go into the copied ledger after its last entry.
    next_seq: Arc<AtomicI64>,
    /// The minimal work ([`crate::raw_minimal`]) instead of tally's tables.
    minimal: bool,
}

#[derive(Clone)]
pub(crate) enum RawPool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// The tenant whose ledger tally-bench preloads, and whose copy the raw
/// rows extend.
pub(crate) const TENANT: &str = "bench";

pub(crate) struct RawRow {
    id: String,
    pub(crate) upstream_id: String,
    pub(crate) account: String,
    counter: String,
    pub(crate) amount: Decimal,
    params: String,
    fingerprint: String,
    prev_hash: String,
    hash: String,
    recorded_at: String,
}

fn row(rng: &mut Rng) -> RawRow {
    let n = rng.next();
    let account = format!("cust_{}", n % ACCOUNTS);
    let counter = format!("@revenue-{}", (n >> 20) % COUNTERS);
    let amount = format!("0.{:04}", n % 9_999 + 1);
    let params = format!(
        r#"{{"account":"{account}","amount":"{amount}","counter_account":"{counter}","meter":"llm-tokens","quantity":"{}","unit":"USD"}}"#,
        n % 5_000 + 1
    );
    RawRow {
        id: format!("ent_{:016x}{:016x}", rng.next(), rng.next()),
        upstream_id: format!("raw-{n:016x}-{:08x}", rng.next() as u32),
        account,
        counter,
        amount: Decimal::from_str(&amount).unwrap_or(Decimal::ONE),
        params,
        fingerprint: format!("sha256:{:064x}", u128::from(rng.next() as u32)),
        prev_hash: format!("{:064x}", rng.next()),
        hash: format!("{:064x}", rng.next()),
        recorded_at: "2026-11-29T10:00:00.000000Z".to_owned(),
    }
}

/// Net change per account of a set of rows, in account order (a fixed lock
/// order, so concurrent transactions never deadlock).
fn deltas(rows: &[RawRow]) -> BTreeMap<&str, (Decimal, Decimal)> {
    let mut d: BTreeMap<&str, (Decimal, Decimal)> = BTreeMap::new();
    for r in rows {
        d.entry(&r.account).or_default().0 += r.amount;
        d.entry(&r.counter).or_default().1 += r.amount;
    }
    d
}

/// Connects `connections` connections to `url` as the raw client does:
/// for SQLite WAL and `synchronous=FULL`, as tally runs it.
async fn connect(url: &str, connections: u32) -> anyhow::Result<RawPool> {
    Ok(if url.starts_with("postgres") {
        RawPool::Postgres(
            PgPoolOptions::new()
                .max_connections(connections)
                .connect(url)
                .await?,
        )
    } else {
        let options = SqliteConnectOptions::from_str(url)?
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(60));
        RawPool::Sqlite(
            SqlitePoolOptions::new()
                .max_connections(connections)
                .connect_with(options)
                .await?,
        )
    })
}

impl RawDb {
    /// Copies tally's `entries` and `balances` (schema, indexes, rows) into
    /// `raw_entries` and `raw_balances` on the database at `url`, and
    /// creates the two tables of the minimal work ([`crate::raw_minimal`]).
    pub async fn open(url: &str, connections: u32) -> anyhow::Result<Self> {
        let pool = connect(url, connections).await?;
        let last_seq = match &pool {
            RawPool::Postgres(pool) => {
                sqlx::raw_sql(
                    "CREATE TABLE raw_entries (LIKE entries INCLUDING ALL);
                     INSERT INTO raw_entries SELECT * FROM entries;
                     CREATE TABLE raw_balances (LIKE balances INCLUDING ALL);
                     INSERT INTO raw_balances SELECT * FROM balances;",
                )
                .execute(pool)
                .await?;
                // As tally's tables are after autovacuum (VACUUM cannot run
                // in the implicit transaction of a multi-statement string).
                for table in ["raw_entries", "raw_balances"] {
                    sqlx::query(&format!("VACUUM ANALYZE {table}"))
                        .execute(pool)
                        .await?;
                }
                let last: Option<i64> = sqlx::query_scalar("SELECT max(seq) FROM raw_entries")
                    .fetch_one(pool)
                    .await?;
                last
            }
            RawPool::Sqlite(pool) => {
                // SQLite has no CREATE TABLE … LIKE: replay tally's own DDL
                // of the two tables and their indexes under the new names.
                let ddl: Vec<String> = sqlx::query_scalar(
                    "SELECT sql FROM sqlite_master WHERE tbl_name IN ('entries', 'balances') \
                     AND type IN ('table', 'index') AND sql IS NOT NULL ORDER BY type DESC",
                )
                .fetch_all(pool)
                .await?;
                let mut tx = pool.begin().await?;
                for statement in &ddl {
                    sqlx::raw_sql(&rename_tables(statement))
                        .execute(&mut *tx)
                        .await?;
                }
                sqlx::raw_sql(
                    "INSERT INTO raw_entries SELECT * FROM entries;
                     INSERT INTO raw_balances SELECT * FROM balances;",
                )
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                let last: Option<i64> = sqlx::query_scalar("SELECT max(seq) FROM raw_entries")
                    .fetch_one(pool)
                    .await?;
                last
            }
        };
        let db = RawDb {
            pool,
            next_seq: Arc::new(AtomicI64::new(last_seq.unwrap_or(0) + 1)),
            minimal: false,
        };
        crate::raw_minimal::create(&db).await?;
        Ok(db)
    }

    /// The same tables through a pool of `connections`; with `minimal`,
    /// the minimal work instead of tally's tables.
    pub async fn with(&self, url: &str, connections: u32, minimal: bool) -> anyhow::Result<Self> {
        Ok(RawDb {
            pool: connect(url, connections).await?,
            next_seq: self.next_seq.clone(),
            minimal,
        })
    }

    /// Closes its connections (PostgreSQL allows 100 by default: the
    /// sweep's pools must not add up).
    pub async fn close(&self) {
        match &self.pool {
            RawPool::Postgres(pool) => pool.close().await,
            RawPool::Sqlite(pool) => pool.close().await,
        }
    }

    pub(crate) fn pool(&self) -> &RawPool {
        &self.pool
    }

    async fn write(&self, rows: &[RawRow]) -> anyhow::Result<()> {
        if self.minimal {
            return crate::raw_minimal::write(&self.pool, rows).await;
        }
        let first = self
            .next_seq
            .fetch_add(rows.len() as i64, Ordering::Relaxed);
        let seqs: Vec<i64> = (first..first + rows.len() as i64).collect();
        let col = |f: fn(&RawRow) -> String| rows.iter().map(f).collect::<Vec<String>>();
        match &self.pool {
            RawPool::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                let insert =
                    "INSERT INTO raw_entries (tenant_id, seq, id, kind, upstream_id, status, \
                      account, debit_account, credit_account, amount, unit, params, fingerprint, \
                      recorded_at, balance_after, prev_hash, hash)";
                if rows.len() == 1 {
                    let r = &rows[0];
                    sqlx::query(&format!(
                        "{insert} VALUES ($1, $2, $3, 'usage_debit', $4, 'posted', $5, $5, $6, \
                         $7::numeric, 'USD', $8, $9, $10::timestamptz, -$7::numeric, $11, $12)"
                    ))
                    .bind(TENANT)
                    .bind(seqs[0])
                    .bind(&r.id)
                    .bind(&r.upstream_id)
                    .bind(&r.account)
                    .bind(&r.counter)
                    .bind(r.amount.to_string())
                    .bind(&r.params)
                    .bind(&r.fingerprint)
                    .bind(&r.recorded_at)
                    .bind(&r.prev_hash)
                    .bind(&r.hash)
                    .execute(&mut *tx)
                    .await?;
                } else {
                    sqlx::query(&format!(
                        "{insert} SELECT $1, s, i, 'usage_debit', u, 'posted', a, a, c, m::numeric, \
                           'USD', p, f, t::timestamptz, -(m::numeric), ph, h
                         FROM UNNEST($2::int8[], $3::text[], $4::text[], $5::text[], $6::text[], \
                           $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[])
                           AS x(s, i, u, a, c, m, p, f, t, ph, h)"
                    ))
                    .bind(TENANT)
                    .bind(&seqs)
                    .bind(col(|r| r.id.clone()))
                    .bind(col(|r| r.upstream_id.clone()))
                    .bind(col(|r| r.account.clone()))
                    .bind(col(|r| r.counter.clone()))
                    .bind(col(|r| r.amount.to_string()))
                    .bind(col(|r| r.params.clone()))
                    .bind(col(|r| r.fingerprint.clone()))
                    .bind(col(|r| r.recorded_at.clone()))
                    .bind(col(|r| r.prev_hash.clone()))
                    .bind(col(|r| r.hash.clone()))
                    .execute(&mut *tx)
                    .await?;
                }
                let d = deltas(rows);
                let accounts: Vec<&str> = d.keys().copied().collect();
                let debits: Vec<String> = d.values().map(|v| v.0.to_string()).collect();
                let credits: Vec<String> = d.values().map(|v| v.1.to_string()).collect();
                sqlx::query(
                    "INSERT INTO raw_balances SELECT $1, a, 'USD', d::numeric, c::numeric, 0
                     FROM UNNEST($2::text[], $3::text[], $4::text[]) AS x(a, d, c)
                     ON CONFLICT (tenant_id, account, unit) DO UPDATE SET
                       debits = raw_balances.debits + EXCLUDED.debits,
                       credits = raw_balances.credits + EXCLUDED.credits",
                )
                .bind(TENANT)
                .bind(&accounts)
                .bind(&debits)
                .bind(&credits)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
            }
            RawPool::Sqlite(pool) => {
                // SQLite has no exact decimal arithmetic in SQL: read, add in
                // Rust, write back — inside BEGIN IMMEDIATE, as tally does.
                let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
                for (chunk, seqs) in rows.chunks(500).zip(seqs.chunks(500)) {
                    let mut q = QueryBuilder::new(
                        "INSERT INTO raw_entries (tenant_id, seq, id, kind, upstream_id, status, \
                         account, debit_account, credit_account, amount, unit, params, fingerprint, \
                         recorded_at, balance_after, prev_hash, hash) ",
                    );
                    q.push_values(chunk.iter().zip(seqs), |mut b, (r, seq)| {
                        b.push_bind(TENANT)
                            .push_bind(*seq)
                            .push_bind(&r.id)
                            .push_bind("usage_debit")
                            .push_bind(&r.upstream_id)
                            .push_bind("posted")
                            .push_bind(&r.account)
                            .push_bind(&r.account)
                            .push_bind(&r.counter)
                            .push_bind(r.amount.to_string())
                            .push_bind("USD")
                            .push_bind(&r.params)
                            .push_bind(&r.fingerprint)
                            .push_bind(&r.recorded_at)
                            .push_bind((-r.amount).to_string())
                            .push_bind(&r.prev_hash)
                            .push_bind(&r.hash);
                    });
                    q.build().execute(&mut *tx).await?;
                }
                let d = deltas(rows);
                let mut q = QueryBuilder::new(
                    "SELECT account, debits, credits FROM raw_balances WHERE tenant_id = ",
                );
                q.push_bind(TENANT)
                    .push(" AND unit = 'USD' AND account IN (");
                let mut sep = q.separated(", ");
                for a in d.keys() {
                    sep.push_bind(*a);
                }
                q.push(")");
                let mut current: BTreeMap<String, (Decimal, Decimal)> = BTreeMap::new();
                for r in q.build().fetch_all(&mut *tx).await? {
                    let debits: String = r.try_get("debits")?;
                    let credits: String = r.try_get("credits")?;
                    current.insert(
                        r.try_get("account")?,
                        (Decimal::from_str(&debits)?, Decimal::from_str(&credits)?),
                    );
                }
                let mut q = QueryBuilder::new(
                    "INSERT INTO raw_balances (tenant_id, account, unit, debits, credits, held) ",
                );
                q.push_values(d.iter(), |mut b, (a, (dd, dc))| {
                    let (cd, cc) = current.get(*a).copied().unwrap_or_default();
                    b.push_bind(TENANT)
                        .push_bind(*a)
                        .push_bind("USD")
                        .push_bind((cd + dd).normalize().to_string())
                        .push_bind((cc + dc).normalize().to_string())
                        .push_bind("0");
                });
                q.push(" ON CONFLICT (tenant_id, account, unit) DO UPDATE SET debits = excluded.debits, credits = excluded.credits");
                q.build().execute(&mut *tx).await?;
                tx.commit().await?;
            }
        }
        Ok(())
    }
}

/// `sql` (tally's DDL of `entries` or `balances`, or of one of their
/// indexes) naming `raw_entries` / `raw_balances` instead.
fn rename_tables(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let w = word.as_str();
        let ours = ["entries", "balances"]
            .iter()
            .any(|t| w == *t || w.strip_prefix(t).is_some_and(|rest| rest.starts_with('_')));
        if ours {
            out.push_str("raw_");
        }
        out.push_str(w);
        word.clear();
    };
    for c in sql.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// `clients` connections, each committing transactions of `batch` rows for
/// `duration`.
pub async fn run(db: &RawDb, clients: usize, batch: usize, duration: Duration) -> Stats {
    stats::drive(clients, duration, |mut rng, deadline| {
        let db = db.clone();
        async move {
            let mut stats = Stats::default();
            while Instant::now() < deadline {
                let rows: Vec<RawRow> = (0..batch).map(|_| row(&mut rng)).collect();
                let t0 = Instant::now();
                match db.write(&rows).await {
                    Ok(()) => stats.rows += rows.len() as u64,
                    Err(e) => {
                        if stats.errors == 0 {
                            eprintln!("raw write failed: {e}");
                        }
                        stats.errors += 1
                    }
                }
                stats.requests += 1;
                stats.latencies_us.push(t0.elapsed().as_micros() as u64);
            }
            stats
        }
    })
    .await
}
