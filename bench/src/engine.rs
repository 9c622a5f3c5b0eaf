//! One engine's run: a fresh database, a real server, the preload, every
//! scenario, the raw limit on the same database, then the offline rebuild
//! and verify.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use sqlx::{Connection, Row};
use tally_testdb::FreshDatabase;

use crate::http_load::{self, Target};
use crate::preload::{preload, settle, wait_for_usage_projection};
use crate::report::{self, Line, RawLine};
use crate::scenarios::{self, Pairing};
use crate::server::{start_server, tally_cmd};
use crate::writer_metrics::WriterCounters;
use crate::{cpu, raw, tenants, Args};

/// Measures `engine` ("sqlite", "postgres" or "citus": a fresh database on
/// the Citus coordinator of `--citus-url`, distributed by tally when it
/// starts) and prints its results.
pub async fn bench_engine(args: &Args, engine: &str, tally: &Path) -> anyhow::Result<()> {
    let database = match engine {
        "sqlite" => FreshDatabase::sqlite_in(&args.sqlite_dir, "tally-bench"),
        "postgres" => FreshDatabase::postgres(&args.postgres_url, "tally_bench").await?,
        "citus" => FreshDatabase::citus(&args.citus_url, "tally_bench").await?,
        other => bail!("unknown engine {other:?}"),
    };
    println!("\n== {engine} ==");
    // The database's settings that decide the figures, printed with them.
    match engine {
        "postgres" => println!("{}", postgres_settings(&args.postgres_url).await?),
        "citus" => println!(
            "{}; a coordinator and {} on this machine",
            postgres_settings(&args.citus_url).await?,
            citus_workers(&args.citus_url).await?
        ),
        _ => {}
    }
    measure(args, engine, tally, &database.url).await?;
    if args.keep {
        println!("kept {}", database.keep());
    } else {
        database.remove().await?;
    }
    Ok(())
}

async fn measure(args: &Args, engine: &str, tally: &Path, url: &str) -> anyhow::Result<()> {
    let secs = Duration::from_secs(args.seconds);
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
        url,
    )
    .await?
    .trim()
    .to_owned();
    let wanted = |key: &str| args.only.is_empty() || args.only.split(',').any(|k| k.trim() == key);
    let tenant_count = |key: &str, n: usize| if wanted(key) { n } else { 0 };
    let tenants = scenarios::Tenants {
        of300: tenants::create(url, "t300", tenant_count("tenants300", 300)).await?,
        of10k: tenants::create(url, "t10k", tenant_count("tenants10k", 10_000)).await?,
    };
    let server = start_server(tally, url, args.server_log.as_deref()).await?;
    let target = Target::new(server.base.clone(), key)?;

    let preload_rate = preload(&target, args.preload).await?;
    println!(
        "preloaded {} entries over HTTP in batches of 1,000 (4 clients): {:.0} rows/s",
        args.preload, preload_rate
    );
    // The usage-summaries projector folds the preloaded log in the
    // background; measure the steady state, after it has caught up, and
    // report how fast it did.
    let started = Instant::now();
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
    let ticks_per_second = cpu::ticks_per_second();
    // On Citus every node's processes are `postgres` on this machine: the
    // database's CPU is the whole cluster's.
    let on_postgres = engine != "sqlite";
    let watched = cpu::Watched {
        server: server.child.id(),
        postgres: on_postgres,
    };
    // With SQLite the database runs inside whoever opened it.
    let database = on_postgres.then_some(if engine == "citus" {
        "Citus (3 nodes)"
    } else {
        "postgres"
    });

    // On Citus, which node the database's CPU went to.
    let nodes = match engine {
        "citus" => crate::nodes::of_cluster(url).await?.unwrap_or_default(),
        _ => Vec::new(),
    };
    let mut lines: Vec<Line> = Vec::new();
    let mut raw_plan = Vec::new();
    for scenario in scenarios::all(args.preload, &tenants) {
        if !wanted(scenario.key) {
            continue;
        }
        let name = scenario.name;
        let mut alongside = None;
        if Pairing::of(scenario.key).is_some() {
            settle(&target, name).await?;
            alongside = Some(http_load::run(&target, 64, secs / 2, scenarios::all_new()).await);
        }
        settle(&target, name).await?;
        let cpu_before = cpu::CpuSample::take(watched);
        let nodes_before = crate::nodes::NodeTicks::take(&nodes);
        let writer_before = WriterCounters::read(&target).await;
        let rss_before = tenants::rss_kib(server.child.id());
        // The coordinator's WAL says nothing of the workers' on Citus.
        let wal_before = match engine {
            "postgres" => crate::pg_wal::wal_syncs(url).await,
            _ => None,
        };
        let recording = args
            .perf_dir
            .as_deref()
            .and_then(|dir| crate::perf_record::start(dir, engine, scenario.key, secs));
        let stats = http_load::run(&target, scenario.clients, secs, scenario.make).await;
        let cpu_after = cpu::CpuSample::take(watched);
        let nodes_after = crate::nodes::NodeTicks::take(&nodes);
        let writer_after = WriterCounters::read(&target).await;
        let rss_after = tenants::rss_kib(server.child.id());
        let wal_after = match wal_before {
            Some(_) => crate::pg_wal::wal_syncs(url).await,
            None => None,
        };
        let mut limits = Vec::new();
        if let Some(recording) = recording {
            limits.push(recording.finish().await);
        }
        let tenants_posting = match scenario.key {
            "tenants300" => tenants.of300.len(),
            "tenants10k" => tenants.of10k.len(),
            _ => 0,
        };
        if let (Some(a), Some(b), true) = (rss_before, rss_after, tenants_posting > 0) {
            // The recent-entries cache grows with the entries posted, not
            // with tenants: its growth is shown apart.
            let cache_kib = match (&writer_before, &writer_after) {
                (Some(x), Some(y)) => (y.recent_bytes - x.recent_bytes) / 1024.0,
                _ => 0.0,
            };
            let writers = writer_after.as_ref().map_or(0.0, |w| w.tenant_writers);
            let grown = b as f64 - a as f64;
            limits.push(format!(
                "server anonymous RSS {:.1} MiB before, {:.1} MiB after ({writers:.0} tenant writers): \
                 {:+.1} KiB per tenant; {:+.1} KiB per tenant without the recent-entries \
                 cache (shared, bounded; it grew {:+.1} MiB)",
                a as f64 / 1024.0,
                b as f64 / 1024.0,
                grown / tenants_posting as f64,
                (grown - cache_kib) / tenants_posting as f64,
                cache_kib / 1024.0,
            ));
        }
        if let (Some(a), Some(b)) = (cpu_before, cpu_after) {
            limits.push(
                a.per_row(&b, stats.rows, ticks_per_second)
                    .describe("tally", database),
            );
        }
        if !nodes.is_empty() {
            limits.push(nodes_before.describe(&nodes_after, &nodes, stats.rows, ticks_per_second));
        }
        if let (Some(a), Some(b)) = (writer_before, writer_after) {
            limits.push(a.describe(&b, stats.elapsed.as_secs_f64()));
        }
        if let (Some(a), Some(b)) = (wal_before, wal_after) {
            limits.push(crate::pg_wal::describe(
                a,
                b,
                stats.rows,
                stats.elapsed.as_secs_f64(),
            ));
        }
        if let Some(before) = alongside.as_mut() {
            settle(&target, name).await?;
            let after = http_load::run(&target, 64, secs / 2, scenarios::all_new()).await;
            before.elapsed += after.elapsed;
            before.merge(after);
        }
        eprintln!(
            "  {name}: {:.0} rows/s, {} errors",
            stats.rows_per_sec(),
            stats.errors
        );
        raw_plan.push(scenario.raw);
        lines.push(Line {
            key: scenario.key,
            name,
            tally: stats,
            baseline: None,
            limits,
            alongside,
        });
    }

    if wanted("import") {
        settle(&target, "import").await?;
        crate::import::measure(&target, tally, url, secs).await?;
    }

    if engine == "citus" {
        // The raw limits write copies of tally's tables, which would be
        // local tables of the coordinator: no measure of the cluster. The
        // Citus figures are read against the same scenarios on one server.
        println!("raw limits: not measured on Citus (compare with the postgres engine's run)");
        report::print(engine, &mut lines, &mut Vec::new(), &Default::default());
        drop(server.child);
        let started = Instant::now();
        let out = tally_cmd(tally, &["verify"], url).await?;
        report::print_verify(&out, started.elapsed().as_secs_f64());
        return Ok(());
    }
    // The raw limit, same database, same run, once the usage projector has
    // folded what the scenarios wrote: on SQLite its rounds would take the
    // write lock from the raw transactions.
    settle(&target, "the raw limits").await?;
    let raw_db = raw::RawDb::open(url, 64).await?;
    let mut raw_lines: Vec<RawLine> = Vec::new();
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
        raw_lines.push(RawLine {
            name,
            stats: s,
            limits,
        });
    }
    // Each raw limit at its best configuration, in the same run.
    raw_db.close().await;
    let each = Duration::from_secs((args.seconds / 3).max(2));
    let bests = crate::raw_sweep::sweep(&raw_db, url, each, watched, database).await?;
    report::print(engine, &mut lines, &mut raw_lines, &bests);

    drop(server.child);
    report::print_rebuild(&tally_cmd(tally, &["projections", "rebuild"], url).await?);
    let started = Instant::now();
    let out = tally_cmd(tally, &["verify"], url).await?;
    report::print_verify(&out, started.elapsed().as_secs_f64());
    Ok(())
}

/// The workers of a Citus coordinator, as "2 workers (127.0.0.1:9701, …)".
async fn citus_workers(admin_url: &str) -> anyhow::Result<String> {
    let mut admin = sqlx::PgConnection::connect(admin_url).await?;
    let workers: Vec<String> = sqlx::query_scalar(
        "SELECT nodename || ':' || nodeport FROM pg_dist_node \
         WHERE groupid <> 0 AND noderole = 'primary' ORDER BY nodeid",
    )
    .fetch_all(&mut admin)
    .await?;
    Ok(format!(
        "{} workers ({})",
        workers.len(),
        workers.join(", ")
    ))
}

/// The PostgreSQL server's version and the settings that move this
/// benchmark's figures most: its buffer cache (how many of the replayed
/// keys' pages it holds) and whether commits wait for the disk.
async fn postgres_settings(admin_url: &str) -> anyhow::Result<String> {
    let mut admin = sqlx::PgConnection::connect(admin_url).await?;
    let row = sqlx::query(
        "SELECT current_setting('server_version'), current_setting('shared_buffers'), \
         current_setting('synchronous_commit'), current_setting('fsync'), \
         current_setting('full_page_writes')",
    )
    .fetch_one(&mut admin)
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
