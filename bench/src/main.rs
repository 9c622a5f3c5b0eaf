//! `tally-bench`: measures tally against the raw limit of its own database,
//! in the same run, on the same machine. See docs/performance.md.
//!
//! Build everything first so the `tally` binary sits next to this one:
//! `cargo build --release --workspace && target/release/tally-bench`.

mod cpu;
mod engine;
mod http_load;
mod import;
mod intents;
mod nodes;
mod perf_record;
mod pg_wal;
mod preload;
mod raw;
mod raw_minimal;
mod raw_sweep;
mod report;
mod scenarios;
mod server;
mod stats;
mod tenants;
mod workload;
mod writer_metrics;

use std::path::PathBuf;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(about = "Benchmark tally against the raw database limit, in one run")]
pub struct Args {
    /// Engines to measure, comma-separated: sqlite, postgres, citus.
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
    /// Citus coordinator on which a fresh database is created for the
    /// `citus` engine (`scripts/citus-cluster.sh start` prints it).
    #[arg(
        long,
        env = "TALLY_BENCH_CITUS_URL",
        default_value = "postgres://postgres@127.0.0.1:9700/postgres"
    )]
    citus_url: String,
    /// Directory for the SQLite database file.
    #[arg(long, default_value = "/tmp")]
    sqlite_dir: PathBuf,
    /// Keep the benchmark databases afterwards.
    #[arg(long)]
    keep: bool,
    /// Measure only these scenarios (comma-separated keys: single1, single16,
    /// single64, batch100, batch1000, hot, replay50, retry50, intents64, replay100,
    /// tenants300, tenants10k, import); all by default.
    #[arg(long, default_value = "")]
    only: String,
    /// Write the server's log at this filter (e.g. tally_ledger=debug) to
    /// tally-bench-server.log in the current directory.
    #[arg(long)]
    server_log: Option<String>,
    /// Record each measured scenario with `perf record -a` into this
    /// directory ({engine}-{scenario}.data); needs Linux `perf`.
    #[arg(long)]
    perf_dir: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let tally = server::tally_binary()?;
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
        engine::bench_engine(&args, engine, &tally).await?;
    }
    Ok(())
}
