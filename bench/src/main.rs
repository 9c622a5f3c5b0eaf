//! `tally-bench`: measures tally against the raw limit of its own database,
//! in the same run, on the same machine. See docs/performance.md.
//!
//! Build everything first so the `tally` binary sits next to this one:
//! `cargo build --release --workspace && target/release/tally-bench`.

mod cpu;
mod http_load;
mod raw;
mod stats;
mod workload;
mod writer_metrics;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;
use serde_json::{json, Value};
use sqlx::{Connection, Row};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use http_load::{Request, Target};
use stats::Stats;
use workload::{new_debit, preload_debit, with_type};
use writer_metrics::WriterCounters;

#[derive(Debug, Parser)]
#[command(about = "Benchmark tally against the raw database limit, in one run")]
struct Args {
    /// Engines to measure, comma-separated.
    #[arg(long, default_value = "sqlite,postgres")]
    engines: String,
    /// Entries already in the ledger before measuring.
    #[arg(long, default_value_t = 1_000_000)]
    preload: u64,
    /// Seconds per measured scenario.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// PostgreSQL server on which a fresh database is created for the run.
    #[arg(
        long,
        env = "TALLY_BENCH_POSTGRES_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/test"
    )]
    postgres_url: String,
    /// Directory for the SQLite database file.
    #[arg(long, default_value = "/tmp")]
    sqlite_dir: PathBuf,
    /// Keep the benchmark databases afterwards.
    #[arg(long)]
    keep: bool,
    /// Measure only these scenarios (comma-separated keys: single1, single16,
    /// single64, batch100, batch1000, hot, replay50, retry50, replay100); all
    /// by default.
    #[arg(long, default_value = "")]
    only: String,
    /// Write the server's log at this filter (e.g. tally_ledger=debug) to
    /// tally-bench-server.log in the current directory.
    #[arg(long)]
    server_log: Option<String>,
}

fn tally_binary() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()?;
    let path = me.with_file_name("tally");
    if !path.exists() {
        bail!(
            "{} not found: build it first with `cargo build --release --workspace`",
            path.display()
        );
    }
    Ok(path)
}

struct Server {
    child: Child,
    base: String,
}

async fn start_server(tally: &PathBuf, url: &str, log: Option<&str>) -> anyhow::Result<Server> {
    let stderr = match log {
        Some(_) => Stdio::from(std::fs::File::create("tally-bench-server.log")?),
        None => Stdio::inherit(),
    };
    let mut child = Command::new(tally)
        .args(["serve", "--database-url", url, "--listen", "127.0.0.1:0"])
        .env("TALLY_LOG", log.unwrap_or("warn"))
        .stderr(stderr)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
        .await??
        .context("tally serve exited")?;
    let base = line
        .strip_prefix("tally listening on ")
        .context("unexpected output")?
        .to_owned();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(Server { child, base })
}

async fn tally_cmd(tally: &PathBuf, args: &[&str], url: &str) -> anyhow::Result<String> {
    let out = Command::new(tally)
        .args(args)
        .args(["--database-url", url])
        .env("TALLY_LOG", "warn")
        .output()
        .await?;
    if !out.status.success() {
        bail!(
            "tally {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn single(body: Value) -> Request {
    Request {
        path: http_load::SINGLE_PATH,
        body: body.to_string().into(),
        rows: 1,
    }
}

fn batch(bodies: impl Iterator<Item = Value>) -> Request {
    let ops: Vec<Value> = bodies.map(with_type).collect();
    let rows = ops.len() as u64;
    Request {
        path: "/v1/batch",
        body: json!({ "operations": ops }).to_string().into(),
        rows,
    }
}

struct Line {
    name: String,
    tally: Stats,
    baseline: Option<(String, f64)>,
    /// All-new single POSTs @64 measured around this scenario, half just
    /// before it and half just after, for the targets that compare it with
    /// all new (see [`Pairing`]).
    alongside: Option<Stats>,
    /// Where the scenario's CPU went, and what the writers did.
    limits: Vec<String>,
}

async fn preload(target: &Target, n: u64) -> anyhow::Result<f64> {
    let started = Instant::now();
    let clients = 4u64;
    let per_batch = 1_000u64;
    let batches = n.div_ceil(per_batch);
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let target = target.clone();
            tokio::spawn(async move {
                let mut conn = target.connect().await?;
                let mut b = c;
                while b < batches {
                    let from = b * per_batch;
                    let to = ((b + 1) * per_batch).min(n);
                    let req = batch((from..to).map(preload_debit));
                    let status = target.send(&mut conn, &req).await?;
                    if status != 200 {
                        bail!("preload batch answered {status}");
                    }
                    if b % 100 == 0 {
                        eprint!("\r  preloading: {} / {n} entries", to);
                    }
                    b += clients;
                }
                Ok(())
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    eprintln!();
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

/// The PostgreSQL server's version and the settings that move this
/// benchmark's figures most: its buffer cache (how many of the replayed
/// keys' pages it holds) and whether commits wait for the disk.
async fn postgres_settings(admin: &mut sqlx::PgConnection) -> anyhow::Result<String> {
    let row = sqlx::query(
        "SELECT current_setting('server_version'), current_setting('shared_buffers'), \
         current_setting('synchronous_commit'), current_setting('fsync'), \
         current_setting('full_page_writes')",
    )
    .fetch_one(admin)
    .await?;
    Ok(format!(
        "PostgreSQL {}: shared_buffers {}, synchronous_commit {}, fsync {}, full_page_writes {}",
        row.try_get::<String, _>(0)?,
        row.try_get::<String, _>(1)?,
        row.try_get::<String, _>(2)?,
        row.try_get::<String, _>(3)?,
        row.try_get::<String, _>(4)?,
    ))
}

async fn bench_engine(args: &Args, engine: &str, tally: &PathBuf) -> anyhow::Result<()> {
    let secs = Duration::from_secs(args.seconds);
    // The database's settings that decide the figures, printed with them.
    let (url, cleanup, settings): (String, Option<String>, Option<String>) = match engine {
        "sqlite" => {
            let path = args
                .sqlite_dir
                .join(format!("tally-bench-{}.db", uuid::Uuid::now_v7().simple()));
            (format!("sqlite://{}", path.display()), None, None)
        }
        "postgres" => {
            let name = format!("tally_bench_{}", uuid::Uuid::now_v7().simple());
            let mut admin = sqlx::PgConnection::connect(&args.postgres_url).await?;
            sqlx::query(&format!("CREATE DATABASE {name}"))
                .execute(&mut admin)
                .await?;
            let base = args
                .postgres_url
                .rsplit_once('/')
                .map(|(b, _)| b.to_owned())
                .unwrap_or_default();
            let settings = postgres_settings(&mut admin).await?;
            (format!("{base}/{name}"), Some(name), Some(settings))
        }
        other => bail!("unknown engine {other:?}"),
    };
    println!("\n== {engine} ==");
    if let Some(settings) = settings {
        println!("{settings}");
    }
    let key = tally_cmd(
        tally,
        &[
            "keys",
            "create",
            "--tenant",
            "bench",
            "--scopes",
            "post,read",
        ],
        &url,
    )
    .await?
    .trim()
    .to_owned();
    let server = start_server(tally, &url, args.server_log.as_deref()).await?;
    let target = Target::new(server.base.clone(), key)?;

    let preload_rate = preload(&target, args.preload).await?;
    println!(
        "preloaded {} entries over HTTP in batches of 1,000 (4 clients): {:.0} rows/s",
        args.preload, preload_rate
    );
    // The usage-summaries projector folds the preloaded log in the
    // background; measure the steady state, after it has caught up, and
    // report how fast it did.
    let started = std::time::Instant::now();
    let caught_up = wait_for_usage_projection(&target, Duration::from_secs(600)).await?;
    println!(
        "usage projector: lag 0 {:.1} s after the preload ended{}",
        started.elapsed().as_secs_f64(),
        if caught_up {
            ""
        } else {
            " — NOT caught up after 600 s, figures include its work"
        }
    );
    let n = args.preload.max(1);
    let ticks_per_second = cpu::ticks_per_second();
    let watched = cpu::Watched {
        server: server.child.id(),
        postgres: engine == "postgres",
    };
    // With SQLite the database runs inside whoever opened it.
    let database = (engine == "postgres").then_some("postgres");

    let wanted = |key: &str| args.only.is_empty() || args.only.split(',').any(|k| k.trim() == key);
    let mut lines: Vec<Line> = Vec::new();
    // (key, name, clients, raw baseline: (connections, rows per tx), request maker)
    type Make = Box<dyn Fn(&mut workload::Rng) -> Request + Send + Sync>;
    type Scenario = (&'static str, String, usize, Option<(usize, usize)>, Make);
    let all_new = || -> Make { Box::new(|rng| single(new_debit(rng, false))) };
    let recent_posts = Arc::new(workload::RecentPosts::default());
    let scenarios: Vec<Scenario> = vec![
        (
            "single1",
            "single POST, 1 client".into(),
            1,
            Some((1, 1)),
            Box::new(|rng| single(new_debit(rng, false))),
        ),
        (
            "single16",
            "single POST, 16 clients".into(),
            16,
            Some((16, 1)),
            Box::new(|rng| single(new_debit(rng, false))),
        ),
        (
            "single64",
            "single POST, 64 clients".into(),
            64,
            Some((64, 1)),
            Box::new(|rng| single(new_debit(rng, false))),
        ),
        (
            "batch100",
            "batch of 100, 4 clients".into(),
            4,
            Some((4, 100)),
            Box::new(|rng| batch((0..100).map(|_| new_debit(rng, false)))),
        ),
        (
            "batch1000",
            "batch of 1,000, 2 clients".into(),
            2,
            Some((2, 1000)),
            Box::new(|rng| batch((0..1000).map(|_| new_debit(rng, false)))),
        ),
        (
            "hot",
            "hot @revenue, single, 64 clients".into(),
            64,
            None,
            Box::new(|rng| single(new_debit(rng, true))),
        ),
        (
            "replay50",
            "50% replays, single, 64 clients".into(),
            64,
            None,
            Box::new(move |rng| {
                if rng.below(2) == 0 {
                    single(preload_debit(rng.below(n)))
                } else {
                    single(new_debit(rng, false))
                }
            }),
        ),
        (
            "retry50",
            "50% retries of recent posts, single, 64 clients".into(),
            64,
            None,
            Box::new(move |rng| {
                let retry = if rng.below(2) == 0 {
                    recent_posts.pick(rng)
                } else {
                    None
                };
                retry.unwrap_or_else(|| {
                    let request = single(new_debit(rng, false));
                    recent_posts.push(request.body.clone());
                    request
                })
            }),
        ),
        (
            "replay100",
            "100% replays, single, 64 clients".into(),
            64,
            None,
            Box::new(move |rng| single(preload_debit(rng.below(n)))),
        ),
    ];
    let mut keys = Vec::new();
    let mut raw_plan = Vec::new();
    for (key, name, clients, raw, make) in scenarios {
        if !wanted(key) {
            continue;
        }
        let paired = Pairing::of(key);
        let mut alongside = None;
        if paired.is_some() {
            settle(&target, &name).await?;
            alongside = Some(http_load::run(&target, 64, secs / 2, all_new()).await);
        }
        settle(&target, &name).await?;
        let cpu_before = cpu::CpuSample::take(watched);
        let writer_before = WriterCounters::read(&target).await;
        let stats = http_load::run(&target, clients, secs, make).await;
        let cpu_after = cpu::CpuSample::take(watched);
        let writer_after = WriterCounters::read(&target).await;
        let mut limits = Vec::new();
        if let (Some(a), Some(b)) = (cpu_before, cpu_after) {
            limits.push(
                a.per_row(&b, stats.rows, ticks_per_second)
                    .describe("tally", database),
            );
        }
        if let (Some(a), Some(b)) = (writer_before, writer_after) {
            limits.push(a.describe(&b, stats.elapsed.as_secs_f64()));
        }
        if let Some(before) = alongside.as_mut() {
            settle(&target, &name).await?;
            let after = http_load::run(&target, 64, secs / 2, all_new()).await;
            before.elapsed += after.elapsed;
            before.merge(after);
        }
        eprintln!(
            "  {name}: {:.0} rows/s, {} errors",
            stats.rows_per_sec(),
            stats.errors
        );
        keys.push(key);
        raw_plan.push(raw);
        lines.push(Line {
            name,
            tally: stats,
            baseline: None,
            limits,
            alongside,
        });
    }

    // The raw limit, same database, same run.
    let raw_db = raw::RawDb::open(&url, 64).await?;
    let mut raw_lines: Vec<(String, Stats, Option<String>)> = Vec::new();
    for (i, plan) in raw_plan.iter().enumerate() {
        let Some((clients, rows)) = *plan else {
            continue;
        };
        let cpu_before = cpu::CpuSample::take(watched);
        let s = raw::run(&raw_db, clients, rows, secs).await;
        // The raw client is the load generator here (with SQLite, the
        // database too); the idle server is still counted, as a check.
        let limits = cpu_before.zip(cpu::CpuSample::take(watched)).map(|(a, b)| {
            a.per_row(&b, s.rows, ticks_per_second)
                .describe("tally (idle)", database)
        });
        let name = format!("raw SQL, {rows} row(s)/tx, {clients} connections");
        eprintln!(
            "  {name}: {:.0} rows/s, {} errors",
            s.rows_per_sec(),
            s.errors
        );
        lines[i].baseline = Some((name.clone(), s.rows_per_sec()));
        raw_lines.push((name, s, limits));
    }

    println!(
        "{:<36} {:>10} {:>8} {:>8} {:>7}   vs raw",
        "scenario (tally over HTTP)", "rows/s", "p50 ms", "p99 ms", "errors"
    );
    for l in &mut lines {
        let rate = l.tally.rows_per_sec();
        let p50 = l.tally.percentile_ms(0.50);
        let p99 = l.tally.percentile_ms(0.99);
        let vs = match &l.baseline {
            Some((name, raw)) => format!("{:.2}x of {name} ({raw:.0} rows/s)", rate / raw),
            None => String::new(),
        };
        println!(
            "{:<36} {:>10.0} {:>8.2} {:>8.2} {:>7}   {}",
            l.name, rate, p50, p99, l.tally.errors, vs
        );
        // A mix's rate is its clients over the mean latency of its two
        // kinds of answer: show both sides.
        let t = &mut l.tally;
        if !t.posted_us.is_empty() && !t.replayed_us.is_empty() {
            for (what, v) in [
                ("posted (201)", &mut t.posted_us),
                ("replayed (200)", &mut t.replayed_us),
            ] {
                println!(
                    "  {:<34} {:>10} {:>8.2} {:>8.2}   mean {:.2} ms, {} requests",
                    what,
                    "",
                    stats::percentile_ms(v, 0.50),
                    stats::percentile_ms(v, 0.99),
                    stats::mean_ms(v),
                    v.len()
                );
            }
        }
        for limit in &l.limits {
            println!("  {limit}");
        }
        if let Some(a) = &l.alongside {
            println!(
                "  all new alongside it (single @64, half before, half after): {:.0} rows/s, mean {:.2} ms",
                a.rows_per_sec(),
                stats::mean_ms(&a.posted_us)
            );
        }
    }
    println!(
        "{:<36} {:>10} {:>8} {:>8} {:>7}",
        "raw limit (straight SQL)", "rows/s", "p50 ms", "p99 ms", "errors"
    );
    for (name, s, limits) in &mut raw_lines {
        let rate = s.rows_per_sec();
        println!(
            "{:<36} {:>10.0} {:>8.2} {:>8.2} {:>7}",
            name.trim_start_matches("raw SQL, "),
            rate,
            s.percentile_ms(0.5),
            s.percentile_ms(0.99),
            s.errors
        );
        if let Some(limits) = limits {
            println!("  {limits}");
        }
    }
    let idx = |key: &str| keys.iter().position(|k| *k == key);
    let rate = |key: &str| idx(key).map(|i| lines[i].tally.rows_per_sec());
    let base = |key: &str| idx(key).and_then(|i| lines[i].baseline.as_ref().map(|b| b.1));
    println!("targets:");
    let check = |what: &str, value: Option<f64>, goal: f64| {
        if let Some(value) = value {
            println!(
                "  {:<58} {:>6.2}  (target >= {goal}) {}",
                what,
                value,
                if value >= goal { "MET" } else { "MISSED" }
            );
        }
    };
    let ratio = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a / b);
    if engine == "postgres" {
        check(
            "single POST @64 / raw one-row-per-tx @64",
            ratio(rate("single64"), base("single64")),
            2.0,
        );
    }
    check(
        "batch of 1,000 / raw batched 1,000",
        ratio(rate("batch1000"), base("batch1000")),
        0.6,
    );
    // Against all new measured around the scenario, not the single @64
    // line: that one runs minutes earlier, on a ledger ~1,000,000 entries
    // smaller, and drift between the two moved these ratios by 12–17 % in
    // a full run (see docs/performance-history.md). The earlier line's
    // ratio is printed after each, for comparison.
    let alongside =
        |key: &str| idx(key).and_then(|i| lines[i].alongside.as_ref().map(Stats::rows_per_sec));
    for pairing in Pairing::ALL {
        check(
            pairing.target,
            ratio(rate(pairing.key), alongside(pairing.key)),
            pairing.goal,
        );
        if let Some(r) = ratio(rate(pairing.key), rate("single64")) {
            println!("    (against the single POST @64 line above: {r:.2})");
        }
    }
    // 64 clients post in a loop, so each rate is 64 over the mean latency:
    // the ratio is the all-new mean over the mix's (half each side).
    if let Some(mix) = idx("replay50") {
        if let Some(all) = &lines[mix].alongside {
            println!(
                "    mean latency, ms: all new {:.2}; the mix's posts {:.2}, replays {:.2}",
                stats::mean_ms(&all.posted_us),
                stats::mean_ms(&lines[mix].tally.posted_us),
                stats::mean_ms(&lines[mix].tally.replayed_us)
            );
        }
    }
    if let Some(i) = idx("single64") {
        let p99 = lines[i].tally.percentile_ms(0.99);
        println!(
            "  {:<58} {:>6.2}  (target < 25 ms) {}",
            "p99 ms of single POST @64",
            p99,
            if p99 < 25.0 { "MET" } else { "MISSED" }
        );
    }

    drop(server.child);
    let out = tally_cmd(tally, &["projections", "rebuild"], &url).await?;
    println!("projections rebuild: {}", out.trim());
    // Each projection's line ends "(N entries/s)".
    for (line, what) in out.lines().zip(["balances", "usage summaries"]) {
        let rate = line
            .rsplit_once('(')
            .and_then(|(_, r)| r.split(' ').next())
            .and_then(|r| r.parse::<f64>().ok())
            .unwrap_or(0.0);
        println!(
            "  {:<58} {:>9.0}  (target >= 1,000,000) {}",
            format!("rebuild of {what}, entries/s"),
            rate,
            if rate >= 1_000_000.0 { "MET" } else { "MISSED" }
        );
    }
    let started = Instant::now();
    let out = tally_cmd(tally, &["verify"], &url).await?;
    let verify_secs = started.elapsed().as_secs_f64();
    let entries = out
        .lines()
        .last()
        .and_then(|l| l.split(", ").nth(1))
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(0.0);
    println!(
        "tally verify: OK, {entries:.0} entries re-hashed and folded in {verify_secs:.1} s ({:.0} entries/s)",
        entries / verify_secs
    );

    if !args.keep {
        if let Some(name) = cleanup {
            let mut admin = sqlx::PgConnection::connect(&args.postgres_url).await?;
            sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .execute(&mut admin)
                .await?;
        } else if let Some(path) = url.strip_prefix("sqlite://") {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{path}{suffix}"));
            }
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let tally = tally_binary()?;
    println!(
        "tally-bench: preload {} entries, {} s per scenario, 10,000 accounts, random upstream IDs",
        args.preload, args.seconds
    );
    for engine in args
        .engines
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        bench_engine(&args, engine, &tally).await?;
    }
    Ok(())
}

/// A target comparing a scenario with all-new single POSTs @64.
struct Pairing {
    key: &'static str,
    target: &'static str,
    goal: f64,
}

impl Pairing {
    /// Each is measured between two halves of an all-new run (A-B-A): a
    /// drift of the machine or the ledger over the three windows, if
    /// steady, weighs the same on both sides of the ratio.
    const ALL: [Pairing; 3] = [
        Pairing {
            key: "hot",
            target: "hot @revenue / spread counter accounts (single @64)",
            goal: 0.9,
        },
        Pairing {
            key: "replay50",
            target: "50% replays / all new (single @64)",
            goal: 1.5,
        },
        Pairing {
            key: "retry50",
            target: "50% retries of recent posts / all new (single @64)",
            goal: 1.5,
        },
    ];

    fn of(key: &str) -> Option<&'static Pairing> {
        Self::ALL.iter().find(|p| p.key == key)
    }
}

/// Waits until the usage projector has folded what the previous window
/// wrote; otherwise its catch-up would run during the next one and be
/// counted against it.
async fn settle(target: &Target, name: &str) -> anyhow::Result<()> {
    let settling = std::time::Instant::now();
    if !wait_for_usage_projection(target, Duration::from_secs(120)).await? {
        eprintln!("  (usage projector still behind after 120 s: {name} includes its work)");
    } else if settling.elapsed() > Duration::from_secs(1) {
        eprintln!(
            "  (usage projector caught up in {:.1} s before {name})",
            settling.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// Polls `/metrics` until the usage projection lag is 0 (true) or `limit`
/// passes (false).
async fn wait_for_usage_projection(target: &Target, limit: Duration) -> anyhow::Result<bool> {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        let text = target.metrics().await?;
        let lag = writer_metrics::sample(&text, "tally_usage_projection_lag_entries");
        if lag == Some(0.0) {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(false)
}
