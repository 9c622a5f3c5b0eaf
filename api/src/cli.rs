//! The command line of the `tally` binary.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use tally_ledger::audit::check::NotedHead;
use tally_ledger::audit::sign::parse_public_key;

#[derive(Debug, Parser)]
#[command(
    name = "tally",
    version,
    about = "Retry-safe, event-sourced usage ledger",
    long_about = "tally records usage debits and payments keyed by the upstream system's own IDs, \
so retried, duplicated and concurrent deliveries of one request collapse into one entry."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// The command line is parsed once per process: the size of `serve`'s
// settings beside the other commands costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply migrations, then serve the HTTP API.
    Serve(ServeArgs),
    /// Manage API keys.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Recompute every tenant's hash chain and compare stored balances with a
    /// fresh fold of the log. Exit 0 only if everything holds. With
    /// `--export FILE`: verify an export file alone, without a database
    /// (exit 0 verified, 1 verification failed, 2 usage or I/O error).
    Verify(VerifyArgs),
    /// Write one tenant's log as an export file (the bytes of
    /// `GET /v1/audit/export`), signed with the configured key if any.
    Export(ExportArgs),
    /// The Ed25519 key that signs audit checkpoints.
    #[command(subcommand)]
    SigningKey(SigningKeyCommand),
    /// Maintain projections.
    #[command(subcommand)]
    Projections(ProjectionsCommand),
    /// The database itself: distribution on a Citus cluster.
    #[command(subcommand)]
    Db(DbCommand),
    /// Print the OpenAPI 3.1 document the server serves at /openapi.json
    /// (committed as api/openapi.json) and exit; needs no database.
    Openapi,
    /// Backfill a file of `/v1/batch` operations (JSONL, or CSV with a header
    /// of the same field names) into one tenant through the batch path.
    /// Re-running it after an interruption writes nothing twice. Exit 0
    /// when every row was created, replayed or rejected by the ledger's
    /// rules; 1 when a row was invalid or conflicting; 2 on a usage,
    /// file or database error (docs/ingest.md).
    Import(ImportArgs),
    /// Consume a source of entries where duplicates are born.
    #[command(subcommand)]
    Ingest(IngestCommand),
}

#[derive(Debug, Subcommand)]
pub enum IngestCommand {
    /// A NATS JetStream consumer of usage debits: each message body is a
    /// `POST /v1/usage-debits` or `POST /v1/batch` body; acknowledged only
    /// once committed or replayed; refused ones to a dead-letter subject
    /// (docs/ingest.md). Runs until SIGTERM or Ctrl-C.
    Nats(NatsArgs),
}

#[derive(Debug, Args)]
pub struct NatsArgs {
    #[command(flatten)]
    pub nats: NatsSourceArgs,
    /// The TOML settings file of `tally serve`: its `database_url`,
    /// `pool_size` and `ingest_nats_*` settings apply here unless a flag or
    /// variable sets them.
    #[arg(long, env = "TALLY_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Database connections.
    #[arg(long, env = "TALLY_POOL_SIZE", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub pool_size: u32,
}

/// Where a NATS consumer reads: the same settings for `tally ingest nats`
/// and for `tally serve --ingest-nats` (and its configuration file).
#[derive(Debug, Clone, Args)]
pub struct NatsSourceArgs {
    #[arg(
        long = "nats-url",
        id = "ingest_nats_url",
        env = "TALLY_INGEST_NATS_URL",
        default_value = "nats://127.0.0.1:4222"
    )]
    pub url: String,
    /// The JetStream stream (it must exist).
    #[arg(
        long = "stream",
        id = "ingest_nats_stream",
        env = "TALLY_INGEST_NATS_STREAM"
    )]
    pub stream: Option<String>,
    /// The subject (filter) to consume.
    #[arg(
        long = "subject",
        id = "ingest_nats_subject",
        env = "TALLY_INGEST_NATS_SUBJECT"
    )]
    pub subject: Option<String>,
    /// The durable consumer's name: a restart resumes where it stopped.
    #[arg(
        long = "durable",
        id = "ingest_nats_durable",
        env = "TALLY_INGEST_NATS_DURABLE"
    )]
    pub durable: Option<String>,
    /// The tenant the entries belong to.
    #[arg(
        long = "tenant",
        id = "ingest_nats_tenant",
        env = "TALLY_INGEST_NATS_TENANT"
    )]
    pub tenant: Option<String>,
    /// Where refused messages go; default `tally.dead-letter.<durable>`.
    #[arg(
        long = "dead-letter-subject",
        id = "ingest_nats_dead_letter_subject",
        env = "TALLY_INGEST_NATS_DEAD_LETTER_SUBJECT"
    )]
    pub dead_letter_subject: Option<String>,
    /// Messages pulled and decided together.
    #[arg(long = "batch", id = "ingest_nats_batch", env = "TALLY_INGEST_NATS_BATCH",
          default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub batch: u32,
}

impl NatsSourceArgs {
    /// The settings, once every required one is given.
    pub fn settings(&self) -> Result<crate::ingest::nats::NatsSettings, String> {
        let need = |v: &Option<String>, flag: &str| {
            v.clone()
                .filter(|s| !s.is_empty())
                .ok_or_else(|| format!("--{flag} is required"))
        };
        Ok(crate::ingest::nats::NatsSettings {
            url: self.url.clone(),
            stream: need(&self.stream, "stream")?,
            subject: need(&self.subject, "subject")?,
            durable: need(&self.durable, "durable")?,
            tenant: need(&self.tenant, "tenant")?,
            dead_letter_subject: self.dead_letter_subject.clone(),
            batch: self.batch as usize,
        })
    }
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The file: one operation per line (JSONL) or per CSV record.
    pub file: PathBuf,
    #[arg(long)]
    pub tenant: String,
    /// Default: csv for a `.csv` file, jsonl otherwise.
    #[arg(long, value_enum)]
    pub format: Option<crate::ingest::import::Format>,
    /// Write each refused row (invalid, conflicting, rejected) as a JSON
    /// line: its line number, outcome and problem.
    #[arg(long, value_name = "FILE")]
    pub rejects: Option<PathBuf>,
    /// The TOML settings file of `tally serve`: its `database_url` (and
    /// `pool_size`) apply here unless a flag or variable sets them.
    #[arg(long, env = "TALLY_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Database connections.
    #[arg(long, env = "TALLY_POOL_SIZE", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub pool_size: u32,
}

#[derive(Debug, Args)]
pub struct DatabaseArgs {
    /// sqlite://PATH (created if absent) or postgres://…
    #[arg(
        long,
        env = "TALLY_DATABASE_URL",
        default_value = "sqlite://tally.db",
        hide_env_values = true
    )]
    pub database_url: String,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// TOML file of settings: keys are the long flag names with `_` or `-`
    /// (docs/tally.example.toml). Flags and environment variables win over
    /// it; it wins over the defaults.
    #[arg(long, env = "TALLY_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Print the effective configuration with the source of each value
    /// (flag, env, file, default) and exit without connecting or binding.
    #[arg(long)]
    pub check_config: bool,
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub signing: SigningArgs,
    /// Address to listen on; port 0 picks a free port (printed on stdout).
    #[arg(long, env = "TALLY_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Most entry requests one tenant's writer decides in one transaction.
    #[arg(long, env = "TALLY_MAX_GROUP", default_value_t = 1_000,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_group: u32,
    /// Most entry requests waiting per tenant before requests get 429.
    #[arg(long, env = "TALLY_QUEUE_CAPACITY", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub queue_capacity: u32,
    /// Milliseconds a writer waits for more entry requests before committing a
    /// smaller group; 0 commits at once (groups still form under load).
    #[arg(long, env = "TALLY_LINGER_MS", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=1_000))]
    pub linger_ms: u64,
    /// Milliseconds a tenant's writer waits for work before it stops (and
    /// forgets the balances it remembered); the next request starts another.
    #[arg(long, env = "TALLY_WRITER_IDLE_MS", default_value_t = 60_000,
          value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    pub writer_idle_ms: u64,
    /// Keys found free in a row after which a tenant's keys are no longer
    /// looked up before its writer: the UNIQUE constraint on the key decides,
    /// and a replay then costs its group a second decision. 0 always looks up.
    #[arg(long, env = "TALLY_SKIP_LOOK_UPS_AFTER", default_value_t = 1_000,
          value_parser = clap::value_parser!(u32).range(0..=100_000_000))]
    pub skip_look_ups_after: u32,
    /// MiB of recently committed entries held to answer retries without the
    /// writer or the database (shared by every tenant, oldest out first);
    /// 0 holds none.
    #[arg(long, env = "TALLY_RECENT_ENTRIES_MIB", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(0..=65_536))]
    pub recent_entries_mib: u32,
    /// Tasks that commit the groups of different tenants together, one
    /// transaction (and one fsync) a round, 1 to 64: every group commits in
    /// a round. Default: 1 on SQLite (which uses one whatever the number),
    /// 4 on PostgreSQL.
    #[arg(long, env = "TALLY_COMMITTERS", value_parser = parse_committers)]
    pub committers: Option<u32>,
    /// Milliseconds an API key found in the database is trusted before it
    /// is looked up again: the longest a revoked (deleted) key keeps working.
    #[arg(long, env = "TALLY_KEY_RECHECK_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub key_recheck_ms: u64,
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
    /// Log lines on standard error as human text or as one JSON object per
    /// line (with the request's `request_id`); `TALLY_LOG` filters them.
    #[arg(long, env = "TALLY_LOG_FORMAT", value_enum, default_value_t = crate::logging::LogFormat::Text)]
    pub log_format: crate::logging::LogFormat,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub ingest_nats: ServeNatsArgs,
    #[command(flatten)]
    pub webhooks: WebhookArgs,
    /// Where each setting came from; filled by `config::parse_cli`.
    #[arg(skip)]
    pub effective: Vec<crate::setting::Setting>,
}

/// Protection of the process (docs/api-decisions.md, limits).
#[derive(Debug, Args)]
#[command(next_help_heading = "Limits")]
pub struct LimitArgs {
    /// Requests per second each API key may send (a token bucket per key;
    /// fractions allowed: 0.5 is one every 2 s); beyond it 429 with
    /// Retry-After. 0 turns rate limiting off.
    #[arg(long, env = "TALLY_RATE_LIMIT_PER_SECOND", default_value_t = 0.0,
          value_parser = parse_rate)]
    pub rate_limit_per_second: f64,
    /// Requests an API key may send at once before the per-second rate
    /// applies (the bucket's size).
    #[arg(long, env = "TALLY_RATE_LIMIT_BURST", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub rate_limit_burst: u32,
    /// Milliseconds a request may take before it answers 503 (a mutation
    /// may still commit: retry with the same upstream ID).
    #[arg(long, env = "TALLY_REQUEST_TIMEOUT_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub request_timeout_ms: u64,
    /// Requests handled at once; more are shed at once with 503 (health,
    /// readiness and metrics probes are never shed). 0: no cap.
    #[arg(long, env = "TALLY_MAX_IN_FLIGHT", default_value_t = 1_024,
          value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub max_in_flight: u32,
    /// Milliseconds a client has to send a whole request head, from its
    /// connection (or the first byte of its next request); a client that
    /// sends half its headers, or nothing, is disconnected then.
    #[arg(long, env = "TALLY_HEADER_READ_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub header_read_timeout_ms: u64,
    /// Milliseconds a kept-alive connection may wait for its next request,
    /// or a client may take no byte of its answer, before it is closed.
    #[arg(long, env = "TALLY_IDLE_TIMEOUT_MS", default_value_t = 60_000,
          value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    pub idle_timeout_ms: u64,
    /// Connections served at once; more wait in the kernel's accept queue,
    /// unread, until one closes. 0: no cap.
    #[arg(long, env = "TALLY_MAX_CONNECTIONS", default_value_t = 1_024,
          value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub max_connections: u32,
    /// MiB of request bodies in flight (received bytes and what parsing
    /// them takes, see docs/operations.md); a request past it gets 503
    /// with Retry-After, nothing done. 0: no bound.
    #[arg(long, env = "TALLY_MAX_BODY_MIB_IN_FLIGHT", default_value_t = 256,
          value_parser = clap::value_parser!(u32).range(0..=1_048_576))]
    pub max_body_mib_in_flight: u32,
    /// Milliseconds between SIGTERM and closing the listener, during which
    /// /readyz answers 503 while other requests are still served.
    #[arg(long, env = "TALLY_DRAIN_MS", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub drain_ms: u64,
}

/// A rate in requests per second: 0 (off) or a finite number up to 1,000,000.
fn parse_rate(s: &str) -> Result<f64, String> {
    let rate: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    if rate.is_finite() && (0.0..=1_000_000.0).contains(&rate) {
        Ok(rate)
    } else {
        Err(format!("{s} is not in 0..=1000000"))
    }
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
    /// List API keys, one per line, tab-separated: tenant, the first 16 hex
    /// digits of the key's sha256, scopes, created_at (UTC). Never a key.
    List {
        #[command(flatten)]
        database: DatabaseArgs,
        /// Only this tenant's keys.
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Revoke an API key: delete it, so that every running server refuses
    /// it within --key-recheck-ms (10 s by default). Prints the revoked
    /// key's line as `keys list` shows it. Exit 0 revoked, 1 no key of the
    /// tenant matched (nothing changed), 2 usage or database error.
    Revoke {
        #[command(flatten)]
        database: DatabaseArgs,
        #[arg(long)]
        tenant: String,
        /// 8 to 64 hex digits of the key's sha256, as `tally keys list`
        /// prints them; they must name one key of the tenant.
        #[arg(
            long,
            value_name = "HEX",
            required_unless_present = "key_stdin",
            conflicts_with = "key_stdin"
        )]
        sha256: Option<String>,
        /// Read the key itself from standard input (one line) instead, so
        /// that it appears in no command line or shell history.
        #[arg(long)]
        key_stdin: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Distribute an existing ledger on the Citus cluster of its database
    /// (docs/scaling.md): every table of tenant data by tenant_id,
    /// colocated; api_keys as a reference table. Prints what it will do;
    /// does it with --yes. `tally serve` does the same by itself when it
    /// migrates a database that has the citus extension.
    Distribute {
        #[command(flatten)]
        database: DatabaseArgs,
        /// Distribute now (tables are locked while their rows are copied
        /// into the shards: run it with no tally process serving).
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ProjectionsCommand {
    /// Replace every tenant's balances with a fresh fold of its log.
    Rebuild(DatabaseArgs),
}

/// Where the checkpoint signing key comes from. The key may also be given
/// as `TALLY_SIGNING_KEY` (the 64 hex digits of the seed itself); setting
/// both is refused.
#[derive(Debug, Args)]
pub struct SigningArgs {
    /// File holding the 32-byte Ed25519 seed as 64 hex digits (see `tally
    /// signing-key generate`). Without it or TALLY_SIGNING_KEY, signing is off.
    #[arg(long, env = "TALLY_SIGNING_KEY_FILE", value_name = "PATH")]
    pub signing_key_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Verify this export file (JSONL or CSV) offline instead of the database.
    #[arg(long, value_name = "FILE")]
    pub export: Option<PathBuf>,
    /// A head noted earlier (from GET /v1/audit/head): the file must hold
    /// this seq with this hash.
    #[arg(long, value_name = "SEQ:HASH", requires = "export", value_parser = NotedHead::parse)]
    pub head: Option<NotedHead>,
    /// The server's published public key (64 hex digits): the trailer's
    /// signature must be by this key.
    #[arg(long, value_name = "HEX", requires = "export", value_parser = parse_public_key)]
    pub public_key: Option<[u8; 32]>,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub signing: SigningArgs,
    #[arg(long)]
    pub tenant: String,
    /// jsonl (with header, trailer and signature) or csv.
    #[arg(long, default_value = "jsonl", value_parser = ["jsonl", "csv"])]
    pub format: String,
    /// First seq to export (default 1).
    #[arg(long)]
    pub from_seq: Option<i64>,
    /// Last seq to export (default the head when the export starts).
    #[arg(long)]
    pub to_seq: Option<i64>,
    /// Write to this file instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum SigningKeyCommand {
    /// Make a new random key: prints `seed:` (secret) and `public_key:`
    /// lines, or with --seed-file writes the seed to a new file (mode 0600)
    /// and prints the public key only.
    Generate {
        #[arg(long, value_name = "PATH")]
        seed_file: Option<PathBuf>,
    },
    /// Print the public key of the configured key, to publish it.
    Public(SigningArgs),
}

/// Outbound webhook deliveries (docs/events.md).
#[derive(Debug, Args)]
pub struct WebhookArgs {
    /// Allow webhook endpoints on http:// and on loopback, private and
    /// link-local addresses (tests, on-premises receivers). Off: https://
    /// to public addresses only (SSRF guard).
    #[arg(long, env = "TALLY_WEBHOOK_ALLOW_INSECURE", num_args = 0..=1,
          default_value_t = false, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub webhook_allow_insecure: bool,
    /// Milliseconds one delivery attempt may take before it counts as a
    /// timeout (and is retried).
    #[arg(long, env = "TALLY_WEBHOOK_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(10..=300_000))]
    pub webhook_timeout_ms: u64,
    /// Milliseconds: the cap of the first retry's wait, doubled per
    /// failed attempt (full jitter below the cap).
    #[arg(long, env = "TALLY_WEBHOOK_RETRY_BASE_MS", default_value_t = 5_000,
          value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    pub webhook_retry_base_ms: u64,
    /// Milliseconds: the longest wait between two attempts.
    #[arg(long, env = "TALLY_WEBHOOK_RETRY_MAX_MS", default_value_t = 3_600_000,
          value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    pub webhook_retry_max_ms: u64,
    /// Seconds a delivery is retried before it is given up (failed).
    #[arg(long, env = "TALLY_WEBHOOK_MAX_AGE_S", default_value_t = 259_200,
          value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    pub webhook_max_age_s: u64,
    /// Seconds a rotated secret keeps signing beside the new one.
    #[arg(long, env = "TALLY_WEBHOOK_SECRET_GRACE_S", default_value_t = 86_400,
          value_parser = clap::value_parser!(u64).range(0..=2_592_000))]
    pub webhook_secret_grace_s: u64,
    /// Milliseconds between looks at the log and the due deliveries when
    /// no commit of this process wakes the delivery loop sooner.
    #[arg(long, env = "TALLY_WEBHOOK_POLL_MS", default_value_t = 250,
          value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub webhook_poll_ms: u64,
}

impl WebhookArgs {
    /// The delivery loop's settings.
    pub fn config(&self) -> tally_webhooks::schedule::WebhookConfig {
        use std::time::Duration;
        tally_webhooks::schedule::WebhookConfig {
            timeout: Duration::from_millis(self.webhook_timeout_ms),
            retry_base: Duration::from_millis(self.webhook_retry_base_ms),
            retry_max: Duration::from_millis(self.webhook_retry_max_ms),
            max_age: Duration::from_secs(self.webhook_max_age_s),
            allow_insecure: self.webhook_allow_insecure,
            poll: Duration::from_millis(self.webhook_poll_ms),
            ..Default::default()
        }
    }

    /// What the API reads.
    pub fn settings(&self) -> crate::state::WebhookSettings {
        crate::state::WebhookSettings {
            allow_insecure: self.webhook_allow_insecure,
            secret_grace: std::time::Duration::from_secs(self.webhook_secret_grace_s),
        }
    }
}

/// `--committers`: 1 to 64. Zero, which once committed every group in a
/// transaction of its own, is refused by name: that path is gone.
fn parse_committers(value: &str) -> Result<u32, String> {
    let n: u32 = value
        .parse()
        .map_err(|_| format!("'{value}' is not a number of committers (1 to 64)"))?;
    match n {
        0 => Err(
            "0 is no longer accepted: every group commits in a commit round, \
                  so at least one committer is needed (1 to 64; the default is 1 on \
                  SQLite, 4 on PostgreSQL)"
                .to_owned(),
        ),
        1..=64 => Ok(n),
        _ => Err(format!("{n} committers is more than 64")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod committers_tests {
    use super::parse_committers;

    /// Zero, once "every group alone", is refused and says why; 1 to 64 pass.
    #[test]
    fn zero_committers_are_refused_by_name() {
        let refused = parse_committers("0").unwrap_err();
        assert!(refused.contains("commit round"), "{refused}");
        assert_eq!(parse_committers("1"), Ok(1));
        assert_eq!(parse_committers("64"), Ok(64));
        assert!(parse_committers("65").is_err());
        assert!(parse_committers("x").is_err());
    }
}

/// `tally serve --ingest-nats`: the consumer of `tally ingest nats` inside
/// the server, with the same settings (the same file keys) under flags of
/// their own.
#[derive(Debug, Clone, Args)]
pub struct ServeNatsArgs {
    /// Run the NATS JetStream consumer inside the server (docs/ingest.md).
    #[arg(long, env = "TALLY_INGEST_NATS")]
    pub ingest_nats: bool,
    #[arg(
        long,
        id = "ingest_nats_url",
        env = "TALLY_INGEST_NATS_URL",
        default_value = "nats://127.0.0.1:4222"
    )]
    pub ingest_nats_url: String,
    #[arg(long, id = "ingest_nats_stream", env = "TALLY_INGEST_NATS_STREAM")]
    pub ingest_nats_stream: Option<String>,
    #[arg(long, id = "ingest_nats_subject", env = "TALLY_INGEST_NATS_SUBJECT")]
    pub ingest_nats_subject: Option<String>,
    #[arg(long, id = "ingest_nats_durable", env = "TALLY_INGEST_NATS_DURABLE")]
    pub ingest_nats_durable: Option<String>,
    #[arg(long, id = "ingest_nats_tenant", env = "TALLY_INGEST_NATS_TENANT")]
    pub ingest_nats_tenant: Option<String>,
    #[arg(
        long,
        id = "ingest_nats_dead_letter_subject",
        env = "TALLY_INGEST_NATS_DEAD_LETTER_SUBJECT"
    )]
    pub ingest_nats_dead_letter_subject: Option<String>,
    #[arg(long, id = "ingest_nats_batch", env = "TALLY_INGEST_NATS_BATCH",
          default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub ingest_nats_batch: u32,
}

impl ServeNatsArgs {
    /// The consumer's source, when `--ingest-nats` is on.
    pub fn source(&self) -> Option<NatsSourceArgs> {
        self.ingest_nats.then(|| NatsSourceArgs {
            url: self.ingest_nats_url.clone(),
            stream: self.ingest_nats_stream.clone(),
            subject: self.ingest_nats_subject.clone(),
            durable: self.ingest_nats_durable.clone(),
            tenant: self.ingest_nats_tenant.clone(),
            dead_letter_subject: self.ingest_nats_dead_letter_subject.clone(),
            batch: self.ingest_nats_batch,
        })
    }
}
