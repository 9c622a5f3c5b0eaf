//! The audit commands of the `tally` binary: `tally export`, `tally verify
//! --export` and `tally signing-key` (docs/audit.md).

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use tally_ledger::audit::check::{
    detect_format, CheckOptions, ExportChecker, Problem, Report, SignatureStatus,
};
use tally_ledger::audit::export::{export_stream, ExportFormat, ExportRange, EXPORT_PAGE};
use tally_ledger::audit::sign::Signer;
use tally_ledger::store::Storage;
use tally_ledger::LedgerError;

use crate::cli::ExportArgs;
use crate::problem::ApiError;

/// The environment variable holding the signing seed itself.
pub const SIGNING_KEY_ENV: &str = "TALLY_SIGNING_KEY";

/// The signing key from `TALLY_SIGNING_KEY` (`env_seed`) or
/// `--signing-key-file`; `None` when neither is set. The error names the
/// setting at fault and never repeats the seed.
pub fn load_signer(
    env_seed: Option<String>,
    file: Option<&Path>,
) -> Result<Option<Signer>, String> {
    let env_seed = env_seed.filter(|s| !s.trim().is_empty());
    match (env_seed, file) {
        (Some(_), Some(_)) => Err(format!(
            "both {SIGNING_KEY_ENV} and --signing-key-file are set; set only one"
        )),
        (Some(seed), None) => Signer::from_seed_hex(&seed)
            .map(Some)
            .map_err(|m| format!("{SIGNING_KEY_ENV} {m}")),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                format!("--signing-key-file {}: cannot read it: {e}", path.display())
            })?;
            Signer::from_seed_hex(&text)
                .map(Some)
                .map_err(|m| format!("--signing-key-file {}: the key {m}", path.display()))
        }
        (None, None) => Ok(None),
    }
}

/// `tally signing-key generate`: a new key. With `seed_file` the seed goes
/// to that new file (readable by its owner only) and only the public key
/// is printed.
pub fn generate_signing_key(seed_file: Option<&Path>) -> Result<(), ApiError> {
    let signer = Signer::generate()?;
    let mut out = std::io::stdout().lock();
    match seed_file {
        Some(path) => {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.mode(0o600);
            }
            let mut file = options.open(path).map_err(|e| with_path(e, path))?;
            writeln!(file, "{}", signer.seed_hex()).map_err(|e| with_path(e, path))?;
            file.sync_all().map_err(|e| with_path(e, path))?;
            writeln!(out, "seed_file: {}", path.display())?;
        }
        None => writeln!(out, "seed: {}", signer.seed_hex())?,
    }
    writeln!(out, "public_key: {}", signer.public_key_hex())?;
    Ok(())
}

fn with_path(e: std::io::Error, path: &Path) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// `tally export`: the bytes of `GET /v1/audit/export`, to a file or
/// standard output. A database failure mid-way returns the error after
/// what was written so far, which then has no trailer.
pub async fn export(
    storage: Storage,
    args: &ExportArgs,
    signer: Option<Signer>,
) -> Result<(), ApiError> {
    let format = ExportFormat::parse(&args.format).unwrap_or(ExportFormat::Jsonl);
    let head = storage.head(&args.tenant).await?;
    let range =
        ExportRange::resolve(head.seq, args.from_seq, args.to_seq).map_err(ApiError::Invalid)?;
    let started = Instant::now();
    let mut sink: BufWriter<Box<dyn Write>> = BufWriter::with_capacity(
        1 << 20,
        match &args.output {
            Some(path) => Box::new(File::create(path).map_err(|e| with_path(e, path))?),
            None => Box::new(std::io::stdout()),
        },
    );
    let mut stream = Box::pin(export_stream(
        storage,
        args.tenant.clone(),
        format,
        range,
        signer.map(Arc::new),
        EXPORT_PAGE,
    ));
    let mut bytes = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                sink.flush()?;
                return Err(ApiError::Ledger(LedgerError::Unavailable(format!(
                    "export failed after {bytes} bytes ({e}); the output ends without a trailer"
                ))));
            }
        };
        bytes += chunk.len();
        sink.write_all(&chunk)?;
    }
    sink.flush()?;
    if let Some(path) = &args.output {
        eprintln!(
            "exported seq {} to {} of tenant {} to {} ({} bytes, {:.2} s)",
            range.from_seq,
            range.to_seq,
            args.tenant,
            path.display(),
            bytes,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// `tally verify --export FILE`: 0 verified, 1 verification failed; I/O
/// errors are the caller's exit 2.
pub fn verify_export(path: &Path, options: CheckOptions) -> Result<ExitCode, ApiError> {
    let file = File::open(path).map_err(|e| with_path(e, path))?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let first = reader.fill_buf().map_err(|e| with_path(e, path))?.to_vec();
    // Drawn only on a terminal (indicatif hides itself otherwise), and only
    // for files that take a while.
    let bar = if len >= 8 << 20 {
        ProgressBar::new(len)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_prefix("verifying");
    let started = Instant::now();
    let result = match detect_format(&first) {
        None if first.is_empty() => Err(Problem {
            line: None,
            seq: None,
            reason: "the file is empty".into(),
        }),
        None => Err(Problem {
            line: Some(1),
            seq: None,
            reason: "not a tally export: neither a JSONL header nor the CSV header row".into(),
        }),
        Some(ExportFormat::Jsonl) => check_jsonl(reader, options, &bar, path)?,
        Some(ExportFormat::Csv) => check_csv(reader, options, &bar, path)?,
    };
    bar.finish_and_clear();
    match result {
        Ok(report) => {
            print_report(path, &report, started.elapsed().as_secs_f64());
            Ok(ExitCode::SUCCESS)
        }
        Err(problem) => {
            println!("FAILED {}: {problem}", path.display());
            eprintln!("tally verify: FAILED: {problem}");
            Ok(ExitCode::from(1))
        }
    }
}

fn check_jsonl(
    mut reader: impl BufRead,
    options: CheckOptions,
    bar: &ProgressBar,
    path: &Path,
) -> Result<Result<Report, Problem>, ApiError> {
    let mut checker = ExportChecker::new(ExportFormat::Jsonl, options);
    let mut buf = Vec::with_capacity(4096);
    let mut line = 0u64;
    let mut read = 0u64;
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| with_path(e, path))?;
        if n == 0 {
            break;
        }
        line += 1;
        read += n as u64;
        if line & 0xfff == 0 {
            bar.set_position(read);
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        let Ok(text) = std::str::from_utf8(&buf) else {
            return Ok(Err(Problem {
                line: Some(line),
                seq: None,
                reason: "not UTF-8 text: the file is damaged here".into(),
            }));
        };
        if let Err(p) = checker.json_line(line, text) {
            return Ok(Err(p));
        }
    }
    Ok(checker.finish())
}

fn check_csv(
    reader: impl BufRead,
    options: CheckOptions,
    bar: &ProgressBar,
    path: &Path,
) -> Result<Result<Report, Problem>, ApiError> {
    let mut checker = ExportChecker::new(ExportFormat::Csv, options);
    let mut csv = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(reader);
    let mut record = csv::StringRecord::new();
    let mut rows = 0u64;
    loop {
        let line = csv.position().line();
        match csv.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                return match e.into_kind() {
                    csv::ErrorKind::Io(e) => Err(with_path(e, path).into()),
                    csv::ErrorKind::Utf8 { .. } => Ok(Err(Problem {
                        line: Some(line),
                        seq: None,
                        reason: "not UTF-8 text: the file is damaged here".into(),
                    })),
                    other => Ok(Err(Problem {
                        line: Some(line),
                        seq: None,
                        reason: format!("not valid CSV: {other:?}"),
                    })),
                };
            }
        }
        let fields: Vec<&str> = record.iter().collect();
        let checked = if rows == 0 {
            checker.csv_header(line, &fields)
        } else {
            checker.csv_row(line, &fields)
        };
        if let Err(p) = checked {
            return Ok(Err(p));
        }
        rows += 1;
        if rows & 0xfff == 0 {
            bar.set_position(csv.position().byte());
        }
    }
    Ok(checker.finish())
}

fn print_report(path: &Path, r: &Report, secs: f64) {
    let format = match r.format {
        ExportFormat::Jsonl => "JSONL, tally-export/1",
        ExportFormat::Csv => "CSV",
    };
    println!("export verified: {} ({format})", path.display());
    println!("  tenant:     {}", r.tenant);
    if let Some(at) = &r.exported_at {
        println!("  exported:   {at}");
    }
    if r.entries == 0 {
        println!("  entries:    none (an empty range after seq {})", r.to_seq);
    } else {
        println!(
            "  entries:    {}, seq {} to {}: none missing, none repeated, all in order",
            r.entries, r.from_seq, r.to_seq
        );
    }
    if r.from_seq == 1 {
        println!("  chain:      starts at the genesis; every link, fingerprint and entry hash recomputed");
    } else {
        println!(
            "  chain:      starts at prev_hash {} (the hash of seq {}, not in this file); every link, fingerprint and entry hash recomputed",
            r.anchor_hash,
            r.from_seq - 1
        );
    }
    println!("  head:       seq {}, hash {}", r.to_seq, r.last_hash);
    match (r.balances, r.open_holds) {
        (Some(balances), Some(holds)) => println!(
            "  balances:   every balance_after equals the sum of the entries before it; {balances} balances (account, unit) folded, {holds} holds open"
        ),
        _ => println!(
            "  balances:   skipped: the file does not start at seq 1, so the balances before it are unknown"
        ),
    }
    match &r.signature {
        SignatureStatus::NoTrailer => println!(
            "  signature:  none: CSV carries no trailer and no signature, so a file cut after a whole row looks complete; \
             compare the last seq and hash with GET /v1/audit/head (--head), or verify the JSONL export"
        ),
        SignatureStatus::Unsigned => {
            println!("  trailer:    present: entry count, last seq and last hash match");
            println!(
                "  signature:  none: the exporter had signing off; the file is only as trustworthy as a head you noted (--head)"
            )
        }
        SignatureStatus::Valid {
            public_key,
            signed_at,
            matches_given,
        } => {
            println!("  trailer:    present: entry count, last seq and last hash match");
            if *matches_given {
                println!(
                    "  signature:  valid ed25519 checkpoint of seq {}, signed at {signed_at} by public key {public_key}, the key you gave",
                    r.to_seq
                );
            } else {
                println!(
                    "  signature:  valid ed25519 checkpoint of seq {}, signed at {signed_at} by public key {public_key} (named in the file itself: \
                     pass --public-key with the server's published key to know who signed)",
                    r.to_seq
                );
            }
        }
    }
    if let Some(head) = &r.noted_head {
        println!(
            "  noted head: seq {} hash {}: found in the file, matches",
            head.seq,
            hex::encode(head.hash)
        );
    }
    println!("verify OK ({secs:.2} s)");
}
