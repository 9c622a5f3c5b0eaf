//! The raw limit: the same work tally does per entry (insert the entry row,
//! move the two balances) issued straight to the same database by the
//! simplest correct SQL, with no HTTP and no tally. Rows are as wide as
//! tally's (parameters, fingerprint, hashes), so only tally's own work differs.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, QueryBuilder, Row, SqlitePool};

use crate::stats::{self, Stats};
use crate::workload::{Rng, ACCOUNTS, COUNTERS};

#[derive(Clone)]
pub enum RawDb {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

struct RawRow {
    id: String,
    upstream_id: String,
    account: String,
    counter: String,
    amount: Decimal,
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

impl RawDb {
    pub async fn open(url: &str, connections: u32) -> anyhow::Result<Self> {
        if url.starts_with("postgres") {
            let pool = PgPoolOptions::new()
                .max_connections(connections)
                .connect(url)
                .await?;
            sqlx::raw_sql(
                "CREATE TABLE IF NOT EXISTS raw_entries (
                    tenant_id TEXT NOT NULL, id TEXT NOT NULL, upstream_id TEXT NOT NULL,
                    account TEXT NOT NULL, debit_account TEXT NOT NULL, credit_account TEXT NOT NULL,
                    amount NUMERIC NOT NULL, unit TEXT NOT NULL, params TEXT NOT NULL,
                    fingerprint TEXT NOT NULL, recorded_at TIMESTAMPTZ NOT NULL,
                    prev_hash TEXT NOT NULL, hash TEXT NOT NULL,
                    PRIMARY KEY (tenant_id, id), UNIQUE (tenant_id, upstream_id));
                 CREATE TABLE IF NOT EXISTS raw_balances (
                    tenant_id TEXT NOT NULL, account TEXT NOT NULL, unit TEXT NOT NULL,
                    debits NUMERIC NOT NULL, credits NUMERIC NOT NULL,
                    PRIMARY KEY (tenant_id, account, unit));",
            )
            .execute(&pool)
            .await?;
            Ok(RawDb::Postgres(pool))
        } else {
            let options = SqliteConnectOptions::from_str(url)?
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Full)
                .busy_timeout(Duration::from_secs(60));
            let pool = SqlitePoolOptions::new()
                .max_connections(connections)
                .connect_with(options)
                .await?;
            sqlx::raw_sql(
                "CREATE TABLE IF NOT EXISTS raw_entries (
                    tenant_id TEXT NOT NULL, id TEXT NOT NULL, upstream_id TEXT NOT NULL,
                    account TEXT NOT NULL, debit_account TEXT NOT NULL, credit_account TEXT NOT NULL,
                    amount TEXT NOT NULL, unit TEXT NOT NULL, params TEXT NOT NULL,
                    fingerprint TEXT NOT NULL, recorded_at TEXT NOT NULL,
                    prev_hash TEXT NOT NULL, hash TEXT NOT NULL,
                    PRIMARY KEY (tenant_id, id), UNIQUE (tenant_id, upstream_id)) STRICT;
                 CREATE TABLE IF NOT EXISTS raw_balances (
                    tenant_id TEXT NOT NULL, account TEXT NOT NULL, unit TEXT NOT NULL,
                    debits TEXT NOT NULL, credits TEXT NOT NULL,
                    PRIMARY KEY (tenant_id, account, unit)) STRICT;",
            )
            .execute(&pool)
            .await?;
            Ok(RawDb::Sqlite(pool))
        }
    }

    async fn write(&self, rows: &[RawRow]) -> anyhow::Result<()> {
        match self {
            RawDb::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                if rows.len() == 1 {
                    let r = &rows[0];
                    sqlx::query(
                        "INSERT INTO raw_entries VALUES ('raw', $1, $2, $3, $3, $4, $5::numeric, 'USD', $6, $7, $8::timestamptz, $9, $10)",
                    )
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
                    let col =
                        |f: fn(&RawRow) -> String| rows.iter().map(f).collect::<Vec<String>>();
                    sqlx::query(
                        "INSERT INTO raw_entries SELECT 'raw', i, u, a, a, c, m::numeric, 'USD', p, f, t::timestamptz, ph, h
                         FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[])
                           AS x(i, u, a, c, m, p, f, t, ph, h)",
                    )
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
                    "INSERT INTO raw_balances SELECT 'raw', a, 'USD', d::numeric, c::numeric
                     FROM UNNEST($1::text[], $2::text[], $3::text[]) AS x(a, d, c)
                     ON CONFLICT (tenant_id, account, unit) DO UPDATE SET
                       debits = raw_balances.debits + EXCLUDED.debits,
                       credits = raw_balances.credits + EXCLUDED.credits",
                )
                .bind(&accounts)
                .bind(&debits)
                .bind(&credits)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
            }
            RawDb::Sqlite(pool) => {
                // SQLite has no exact decimal arithmetic in SQL: read, add in
                // Rust, write back — inside BEGIN IMMEDIATE, as tally does.
                let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
                for chunk in rows.chunks(1_000) {
                    let mut q = QueryBuilder::new("INSERT INTO raw_entries ");
                    q.push_values(chunk, |mut b, r| {
                        b.push_bind("raw")
                            .push_bind(&r.id)
                            .push_bind(&r.upstream_id)
                            .push_bind(&r.account)
                            .push_bind(&r.account)
                            .push_bind(&r.counter)
                            .push_bind(r.amount.to_string())
                            .push_bind("USD")
                            .push_bind(&r.params)
                            .push_bind(&r.fingerprint)
                            .push_bind(&r.recorded_at)
                            .push_bind(&r.prev_hash)
                            .push_bind(&r.hash);
                    });
                    q.build().execute(&mut *tx).await?;
                }
                let d = deltas(rows);
                let mut q = QueryBuilder::new(
                    "SELECT account, debits, credits FROM raw_balances WHERE tenant_id = 'raw' AND account IN (",
                );
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
                    "INSERT INTO raw_balances (tenant_id, account, unit, debits, credits) ",
                );
                q.push_values(d.iter(), |mut b, (a, (dd, dc))| {
                    let (cd, cc) = current.get(*a).copied().unwrap_or_default();
                    b.push_bind("raw")
                        .push_bind(*a)
                        .push_bind("USD")
                        .push_bind((cd + dd).normalize().to_string())
                        .push_bind((cc + dc).normalize().to_string());
                });
                q.push(" ON CONFLICT (tenant_id, account, unit) DO UPDATE SET debits = excluded.debits, credits = excluded.credits");
                q.build().execute(&mut *tx).await?;
                tx.commit().await?;
            }
        }
        Ok(())
    }
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
