//! The `tally` binary.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use tally_api::audit_cli;
use tally_api::cli::{
    Cli, Command, DbCommand, ImportArgs, IngestCommand, KeysCommand, NatsArgs, ProjectionsCommand,
    ServeArgs, SigningArgs, SigningKeyCommand,
};
use tally_api::connections::ConnectionLimits;
use tally_api::keys_cli::{self, KeysFailure, RevokeTarget};
use tally_api::limits::{Lifecycle, Limits, RateLimiter};
use tally_api::server::{serve, AppState};
use tally_ledger::audit::check::CheckOptions;
use tally_ledger::audit::sign::Signer;
use tally_ledger::expiry::run_hold_expiry;
use tally_ledger::names::check_tenant;
use tally_ledger::store::Storage;
use tally_ledger::writer::WriterConfig;
use tally_projections::usage::{run_usage_projector, ProjectorStats};

// The write path allocates many small strings per entry; mimalloc measured
// faster than glibc malloc for it under the benchmark's load (bench/).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    // Like Cli::parse(), plus the configuration file of `tally serve`: a bad
    // flag, variable or file exits 2 here, before anything is opened.
    let cli = tally_api::config::parse_cli();
    // Logging starts once the command line (and `--log-format`) is known.
    tally_api::logging::init(match &cli.command {
        Command::Serve(args) => args.log_format,
        _ => tally_api::logging::LogFormat::Text,
    });
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tally: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve(args) => serve_command(args).await,
        Command::Keys(command) => keys_command(command).await,
        Command::Verify(args) => match &args.export {
            None => verify_command(&args.database.database_url).await,
            // Printed once: the I/O error already names the file.
            Some(file) => audit_cli::verify_export(
                file,
                CheckOptions {
                    head: args.head,
                    public_key: args.public_key,
                },
            )
            .map_err(|e| anyhow::anyhow!("{e}")),
        },
        Command::Export(args) => {
            if let Err(m) = check_tenant(&args.tenant) {
                bail!("--tenant {m}");
            }
            let signer = load_signer(&args.signing)?;
            let storage = connect(&args.database.database_url).await?;
            audit_cli::export(storage, &args, signer)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::SigningKey(SigningKeyCommand::Generate { seed_file }) => {
            audit_cli::generate_signing_key(seed_file.as_deref())
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::SigningKey(SigningKeyCommand::Public(signing)) => match load_signer(&signing)? {
            Some(signer) => {
                println!("public_key: {}", signer.public_key_hex());
                Ok(ExitCode::SUCCESS)
            }
            None => bail!(
                "no signing key configured: set {} or --signing-key-file",
                audit_cli::SIGNING_KEY_ENV
            ),
        },
        Command::Openapi => {
            print!("{}", tally_api::server::openapi_text()?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Db(DbCommand::Distribute { database, yes }) => {
            db_distribute(&database.database_url, yes).await
        }
        Command::Import(args) => import_command(args).await,
        Command::Ingest(IngestCommand::Nats(args)) => nats_command(args).await,
        Command::Projections(ProjectionsCommand::Rebuild(database)) => {
            let storage = connect(&database.database_url).await?;
            let tenants = storage.tenants().await?;
            Ok(tally_api::maintain_cli::rebuild(&storage, &tenants).await)
        }
    }
}

/// `tally db distribute`: the plan, then (with `--yes`) the distribution
/// and the tables as Citus then lists them. A server without Citus is
/// refused with what to do (exit 1), having changed nothing.
async fn db_distribute(url: &str, yes: bool) -> anyhow::Result<ExitCode> {
    use tally_ledger::store::citus::CitusDatabase;
    let database = match CitusDatabase::open(url).await {
        Ok(database) => database,
        Err(e) => {
            eprintln!("tally: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    let plan = database.plan().await?;
    if plan.is_empty() {
        println!("Every table is distributed already; nothing to do.");
        return Ok(ExitCode::SUCCESS);
    }
    println!("tally db distribute will make:");
    for step in &plan {
        println!("  {step}");
    }
    if !yes {
        println!("Nothing was changed: run again with --yes to distribute.");
        return Ok(ExitCode::SUCCESS);
    }
    let done = database.distribute().await?;
    println!("Distributed {} tables:", done.len());
    for (table, kind, colocation) in database.placements().await? {
        println!("  {table}: {kind} (colocation group {colocation})");
    }
    Ok(ExitCode::SUCCESS)
}

async fn keys_command(command: KeysCommand) -> anyhow::Result<ExitCode> {
    match keys_outcome(command).await {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(KeysFailure::NoSuchKey(m)) => {
            eprintln!("tally: {m}");
            Ok(ExitCode::from(1))
        }
        Err(KeysFailure::Usage(m)) => bail!("{m}"),
    }
}

/// Every argument is checked before the database is opened (an SQLite
/// file would be created): a bad one exits 2 having changed nothing.
async fn keys_outcome(command: KeysCommand) -> Result<(), KeysFailure> {
    let open = |url: String| async move {
        connect(&url)
            .await
            .map_err(|e| KeysFailure::Usage(format!("{e:#}")))
    };
    match command {
        KeysCommand::Create {
            database,
            tenant,
            scopes,
        } => {
            keys_cli::tenant_arg(&tenant)?;
            let scopes = keys_cli::scopes_arg(&scopes)?;
            let storage = open(database.database_url).await?;
            println!("{}", keys_cli::create(&storage, &tenant, &scopes).await?);
        }
        KeysCommand::List { database, tenant } => {
            if let Some(t) = &tenant {
                keys_cli::tenant_arg(t)?;
            }
            let storage = open(database.database_url).await?;
            for line in keys_cli::list(&storage, tenant.as_deref()).await? {
                println!("{line}");
            }
        }
        KeysCommand::Revoke {
            database,
            tenant,
            sha256,
            key_stdin,
        } => {
            keys_cli::tenant_arg(&tenant)?;
            let target = match sha256 {
                Some(digits) if !key_stdin => RevokeTarget::digits(&digits)?,
                _ => {
                    let mut line = String::new();
                    std::io::stdin().read_line(&mut line).map_err(|e| {
                        KeysFailure::Usage(format!("reading the key from standard input: {e}"))
                    })?;
                    RevokeTarget::Secret(line)
                }
            };
            let storage = open(database.database_url).await?;
            let key = keys_cli::revoke(&storage, &tenant, &target).await?;
            println!("{}", keys_cli::listed(&key));
            eprintln!("revoked: running servers refuse the key within --key-recheck-ms");
        }
    }
    Ok(())
}

/// The checkpoint signing key, if configured; a bad one stops the command.
fn load_signer(args: &SigningArgs) -> anyhow::Result<Option<Signer>> {
    audit_cli::load_signer(
        std::env::var(audit_cli::SIGNING_KEY_ENV).ok(),
        args.signing_key_file.as_deref(),
    )
    .map_err(|m| anyhow::anyhow!("{m}"))
}

async fn connect(url: &str) -> anyhow::Result<Storage> {
    Storage::connect(url)
        .await
        .with_context(|| format!("opening {}", redact(url)))
}

/// Database URLs may carry passwords; never print them.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => format!("{}://…{}", &url[..scheme], &url[at..]),
        _ => url.to_owned(),
    }
}

async fn serve_command(args: ServeArgs) -> anyhow::Result<ExitCode> {
    if args.check_config {
        print!("{}", tally_api::config::render(&args.effective));
        return Ok(ExitCode::SUCCESS);
    }
    let signer = load_signer(&args.signing)?;
    match &signer {
        Some(s) => tracing::info!(public_key = %s.public_key_hex(), "signing audit checkpoints"),
        None => tracing::info!("audit checkpoint signing is off"),
    }
    let storage = Storage::connect_with(&args.database.database_url, args.pool_size)
        .await
        .with_context(|| format!("opening {}", redact(&args.database.database_url)))?;
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(engine = storage.engine_name(), database = %redact(&args.database.database_url), %addr, "tally serving");
    // Scripts and tests read the bound address (port 0 picks one) from stdout.
    println!("tally listening on http://{addr}");
    std::io::stdout().flush()?;
    let projector = std::sync::Arc::new(ProjectorStats::default());
    tokio::spawn(run_usage_projector(
        storage.clone(),
        std::time::Duration::from_millis(args.usage_interval_ms),
        projector.clone(),
    ));
    let state = AppState::new(
        storage,
        WriterConfig {
            max_group: args.max_group as usize,
            queue_capacity: args.queue_capacity as usize,
            linger: std::time::Duration::from_millis(args.linger_ms),
            idle_after: std::time::Duration::from_millis(args.writer_idle_ms),
            skip_look_ups_after: args.skip_look_ups_after as usize,
            recent_entries_bytes: args.recent_entries_mib as usize * 1024 * 1024,
            committers: args.committers.map(|c| c as usize),
        },
    )
    .with_signer(signer)
    .with_key_recheck(Duration::from_millis(args.key_recheck_ms))
    .with_projector(projector)
    .with_limits(
        Limits::new(
            RateLimiter::new(
                args.limits.rate_limit_per_second,
                args.limits.rate_limit_burst,
            ),
            Duration::from_millis(args.limits.request_timeout_ms),
            args.limits.max_in_flight as usize,
        )
        .with_body_budget(args.limits.max_body_mib_in_flight as usize * 1024 * 1024),
        Lifecycle::new(Duration::from_millis(args.limits.drain_ms)),
    );
    tokio::spawn(tally_api::feed::watch_other_processes(
        state.writers.clone(),
    ));
    let deliveries = std::sync::Arc::new(tally_webhooks::stats::DeliveryStats::default());
    tokio::spawn(tally_webhooks::dispatch::run_webhooks(
        state.writers.storage().clone(),
        state.writers.heads().clone(),
        args.webhooks.config(),
        deliveries.clone(),
    ));
    let state = state.with_webhooks(args.webhooks.settings(), deliveries);
    if let Some(source) = args.ingest_nats.source() {
        let settings = source
            .settings()
            .map_err(|m| anyhow::anyhow!("--ingest-nats: {m}"))?;
        if let Err(m) = check_tenant(&settings.tenant) {
            bail!("--ingest-nats-tenant {m}");
        }
        let writers = state.writers.clone();
        let stats = state.nats.clone();
        // A consumer that fails (NATS down) starts again after a pause:
        // what it had not acknowledged is redelivered.
        tokio::spawn(async move {
            loop {
                let stop = std::future::pending::<()>();
                if let Err(e) = tally_api::ingest::nats::run(
                    writers.clone(),
                    settings.clone(),
                    stats.clone(),
                    stop,
                )
                .await
                {
                    tracing::warn!(error = %e, "the NATS consumer stopped; starting it again in 5 s");
                }
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        });
    }
    tokio::spawn(run_hold_expiry(
        state.writers.clone(),
        std::time::Duration::from_millis(args.hold_sweep_ms),
    ));
    let connections = ConnectionLimits {
        header_read_timeout: Duration::from_millis(args.limits.header_read_timeout_ms),
        idle_timeout: Duration::from_millis(args.limits.idle_timeout_ms),
        max_connections: args.limits.max_connections as usize,
    };
    serve(listener, state, connections, shutdown_signal()).await?;
    tracing::info!("tally stopped");
    Ok(ExitCode::SUCCESS)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down: finishing in-flight requests");
}

/// `tally import`: every argument is checked before the database is
/// opened; the summary goes to stdout, the progress bar to a terminal.
async fn import_command(args: ImportArgs) -> anyhow::Result<ExitCode> {
    use tally_api::ingest::import::{self, Format, ImportOptions};
    if let Err(m) = check_tenant(&args.tenant) {
        bail!("--tenant {m}");
    }
    if !args.file.is_file() {
        bail!("{}: no such file", args.file.display());
    }
    let options = ImportOptions {
        format: args.format.unwrap_or_else(|| Format::of_path(&args.file)),
        path: args.file,
        tenant: args.tenant,
        rejects: args.rejects,
    };
    let storage = Storage::connect_with(&args.database.database_url, args.pool_size)
        .await
        .with_context(|| format!("opening {}", redact(&args.database.database_url)))?;
    let writers = tally_ledger::writer::Writers::new(storage, WriterConfig::default());
    let started = std::time::Instant::now();
    let summary = import::run(&writers, &options).await?;
    let seconds = started.elapsed().as_secs_f64();
    print!(
        "imported {} into tenant {} in {seconds:.1} s ({:.0} rows/s): {}",
        options.path.display(),
        options.tenant,
        summary.counts.total() as f64 / seconds.max(1e-9),
        summary.render()
    );
    Ok(if summary.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `tally ingest nats`: the consumer until SIGTERM or Ctrl-C, then a line
/// of what it did.
async fn nats_command(args: NatsArgs) -> anyhow::Result<ExitCode> {
    use std::sync::atomic::Ordering;
    use tally_api::ingest::nats;
    let settings = args.nats.settings().map_err(|m| anyhow::anyhow!(m))?;
    if let Err(m) = check_tenant(&settings.tenant) {
        bail!("--tenant {m}");
    }
    let storage = Storage::connect_with(&args.database.database_url, args.pool_size)
        .await
        .with_context(|| format!("opening {}", redact(&args.database.database_url)))?;
    let writers = tally_ledger::writer::Writers::new(storage, WriterConfig::default());
    let stats = std::sync::Arc::new(nats::NatsStats::default());
    nats::run(writers, settings, stats.clone(), shutdown_signal())
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    println!(
        "consumed {} messages: {} entries committed, {} replayed, {} dead-lettered, {} redelivered",
        stats.consumed.load(Ordering::Relaxed),
        stats.committed.load(Ordering::Relaxed),
        stats.replayed.load(Ordering::Relaxed),
        stats.dead_lettered.load(Ordering::Relaxed),
        stats.redelivered.load(Ordering::Relaxed),
    );
    Ok(ExitCode::SUCCESS)
}

async fn verify_command(url: &str) -> anyhow::Result<ExitCode> {
    let storage = connect(url).await?;
    let tenants = storage.tenants().await?;
    println!(
        "verifying {} tenant(s) in {} ({})",
        tenants.len(),
        redact(url),
        storage.engine_name()
    );
    Ok(tally_api::maintain_cli::verify(&storage, &tenants).await)
}
