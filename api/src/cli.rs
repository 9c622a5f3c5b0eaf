//! The command line of the `tally` binary.

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "tally",
    version,
    about = "Retry-safe, event-sourced usage ledger",
    long_about = "tally records usage debits and payments keyed by the upstream system's own IDs, \
so retried, duplicated and concurrent deliveries of one intent collapse into one entry."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply migrations, then serve the HTTP API.
    Serve(ServeArgs),
    /// Manage API keys.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Recompute every tenant's hash chain and compare stored balances with a
    /// fresh fold of the log. Exit 0 only if everything holds.
    Verify(DatabaseArgs),
    /// Maintain projections.
    #[command(subcommand)]
    Projections(ProjectionsCommand),
}

#[derive(Debug, Args)]
pub struct DatabaseArgs {
    /// sqlite://PATH (created if absent) or postgres://…
    #[arg(long, env = "TALLY_DATABASE_URL", default_value = "sqlite://tally.db")]
    pub database_url: String,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Address to listen on; port 0 picks a free port (printed on stdout).
    #[arg(long, env = "TALLY_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Most intents one tenant's writer decides in one transaction.
    #[arg(long, env = "TALLY_MAX_GROUP", default_value_t = 1_000,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_group: u32,
    /// Most intents waiting per tenant before requests get 429.
    #[arg(long, env = "TALLY_QUEUE_CAPACITY", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub queue_capacity: u32,
    /// Milliseconds a writer waits for more intents before committing a
    /// smaller group; 0 commits at once (groups still form under load).
    #[arg(long, env = "TALLY_LINGER_MS", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=1_000))]
    pub linger_ms: u64,
    /// Database connections per process.
    #[arg(long, env = "TALLY_POOL_SIZE", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub pool_size: u32,
    /// Milliseconds between sweeps that release expired holds.
    #[arg(long, env = "TALLY_HOLD_SWEEP_MS", default_value_t = 1_000,
          value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub hold_sweep_ms: u64,
    /// Milliseconds between rounds of the usage-summaries projector, which
    /// folds new entries of every tenant into `GET …/usage`.
    #[arg(long, env = "TALLY_USAGE_INTERVAL_MS", default_value_t = 200,
          value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub usage_interval_ms: u64,
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create an API key; prints the key alone on stdout. Only its sha256 is stored.
    Create {
        #[command(flatten)]
        database: DatabaseArgs,
        #[arg(long)]
        tenant: String,
        /// Comma-separated: post, read, audit, admin.
        #[arg(long)]
        scopes: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ProjectionsCommand {
    /// Replace every tenant's balances with a fresh fold of its log.
    Rebuild(DatabaseArgs),
}
