//! `tally import FILE --tenant T`: a backfill through the batch path.
//!
//! Rows are read on a blocking thread in chunks of [`CHUNK`] (the batch's
//! own limit) and [`IN_FLIGHT`] chunks are decided at once, each as one
//! `decide_all` of the tenant's writer, exactly as `POST /v1/batch` decides
//! its operations: the same parse, the same rules, the same answers. Every
//! row is keyed by its upstream ID, so a re-run after an interruption
//! writes nothing twice: rows already committed come back as replays, and
//! the summary says how many. The import opens the database as a server
//! does, and is safe beside running servers for the same reason two
//! servers are: the UNIQUE key and the head decide, not a process's memory.

mod rows;

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::stream::{FuturesOrdered, StreamExt};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use tally_ledger::fields::ValidationErrors;
use tally_ledger::request::EntryRequest;
use tally_ledger::writer::Writers;
use tokio::sync::mpsc;

pub use rows::Format;
use rows::Row;

use super::{Counts, Outcome};
use crate::problem::{Answer, ApiError};
use crate::routes::answer;
use crate::routes::batch::parse_operation;

/// Rows decided together: the batch endpoint's limit.
pub const CHUNK: usize = crate::routes::batch::MAX_OPERATIONS;
/// Chunks being decided at once. One chunk is one group; with several
/// queued the writer decides the next while the previous one commits.
pub const IN_FLIGHT: usize = 4;
/// Tries of one chunk whose group failed for a transient reason before the
/// import stops (a re-run then resumes it).
const TRIES: u32 = 6;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Format(String),
    /// The database kept failing; rows before the failed chunk may be
    /// committed, and a re-run replays them.
    #[error("the database failed ({0}); run the import again to resume it")]
    Unavailable(String),
}

impl ImportError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        ImportError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ImportOptions {
    pub path: PathBuf,
    pub tenant: String,
    pub format: Format,
    /// Where each refused row's line number and problem is written (JSONL).
    pub rejects: Option<PathBuf>,
}

/// What an import did, row by row.
#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    pub counts: Counts,
}

impl Summary {
    /// Exit 1 when a row was invalid or conflicting: the file needs a look.
    /// Rejections are the ledger's rules at work and recorded as entries.
    pub fn is_clean(&self) -> bool {
        self.counts.invalid == 0 && self.counts.conflicting == 0
    }

    /// The summary printed at the end, one count a line.
    pub fn render(&self) -> String {
        let c = &self.counts;
        let mut out = format!("{} rows\n", c.total());
        for (name, n) in [
            ("created", c.created),
            ("replayed", c.replayed),
            ("conflicting", c.conflicting),
            ("rejected", c.rejected),
            ("invalid", c.invalid),
        ] {
            out.push_str(&format!("  {name:<12} {n:>10}\n"));
        }
        out
    }
}

/// Imports `options.path` into `options.tenant` through `writers`.
pub async fn run(writers: &Writers, options: &ImportOptions) -> Result<Summary, ImportError> {
    let mut rejects = match &options.rejects {
        Some(path) => Some(BufWriter::new(
            File::create(path).map_err(|e| ImportError::io(path, e))?,
        )),
        None => None,
    };
    let bar = progress_bar(options)?;
    let (tx, mut rx) = mpsc::channel::<Vec<Row>>(IN_FLIGHT);
    let (path, format) = (options.path.clone(), options.format);
    let reader = tokio::task::spawn_blocking(move || rows::read_chunks(&path, format, CHUNK, tx));

    let mut summary = Summary::default();
    let mut pending = FuturesOrdered::new();
    let mut more = true;
    loop {
        while more && pending.len() < IN_FLIGHT {
            match rx.recv().await {
                // Queued here, in the file's order; awaited on a task of
                // its own so that its answers are handled as they come.
                Some(chunk) => {
                    pending.push_back(tokio::spawn(queue_chunk(writers, &options.tenant, chunk)))
                }
                None => more = false,
            }
        }
        let Some(done) = pending.next().await else {
            break;
        };
        let answers =
            done.map_err(|e| ImportError::Unavailable(format!("a task failed: {e}")))??;
        for (line, answer) in answers {
            let outcome = Outcome::of(&answer);
            summary.counts.add(outcome);
            if let (Some(out), true) = (rejects.as_mut(), outcome.is_refused()) {
                write_reject(out, line, outcome, answer).map_err(|e| {
                    ImportError::io(options.rejects.as_deref().unwrap_or(Path::new("")), e)
                })?;
            }
        }
        bar.set_position(summary.counts.total());
    }
    reader
        .await
        .map_err(|e| ImportError::Unavailable(format!("the reader failed: {e}")))??;
    if let Some(mut out) = rejects {
        out.flush()
            .map_err(|e| ImportError::io(options.rejects.as_deref().unwrap_or(Path::new("")), e))?;
    }
    bar.finish_and_clear();
    Ok(summary)
}

/// A bar on a terminal only (its length costs a pass over the file).
fn progress_bar(options: &ImportOptions) -> Result<ProgressBar, ImportError> {
    if !std::io::stderr().is_terminal() {
        return Ok(ProgressBar::hidden());
    }
    let bar = ProgressBar::new(rows::count_rows(&options.path, options.format)?);
    if let Ok(style) = ProgressStyle::with_template(
        "{elapsed_precise} [{bar:40}] {human_pos}/{human_len} rows  {per_sec}  ETA {eta}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    Ok(bar)
}

/// A chunk's rows parsed: the requests to decide, and each row's line with
/// the answer it already has (refused by the parse) or `None` (decided).
struct Parsed {
    requests: Vec<EntryRequest>,
    rows: Vec<(u64, Option<Answer>)>,
}

fn parse_chunk(chunk: Vec<Row>) -> Parsed {
    let mut rows = Vec::with_capacity(chunk.len());
    let mut requests = Vec::with_capacity(chunk.len());
    for row in chunk {
        let parsed = match row.operation {
            Ok(op) => parse_operation(op),
            Err(message) => {
                Err(ApiError::Invalid(ValidationErrors::single("operation", message)).answer())
            }
        };
        match parsed {
            Ok(request) => {
                requests.push(request);
                rows.push((row.line, None));
            }
            Err(refused) => rows.push((row.line, Some(refused))),
        }
    }
    Parsed { requests, rows }
}

/// Queues one chunk's requests now, so that chunks are decided in the
/// file's order (a later row with an earlier row's key is the replay or
/// the conflict), and returns what answers its rows, in order. A group
/// that failed for a transient reason is queued again: every row is keyed,
/// so one that did commit before its answer was lost replays.
fn queue_chunk(
    writers: &Writers,
    tenant: &str,
    chunk: Vec<Row>,
) -> impl std::future::Future<Output = Result<Vec<(u64, Answer)>, ImportError>> + Send + 'static {
    let Parsed { requests, rows } = parse_chunk(chunk);
    let first = writers.queue_all(tenant, requests.clone());
    let (writers, tenant) = (writers.clone(), tenant.to_owned());
    async move {
        let mut queued = first;
        let mut tries = 1;
        let decisions = loop {
            let error = match queued {
                Ok(q) => match q.decisions().await {
                    Ok(decisions) => break decisions,
                    Err(e) => e,
                },
                Err(e) => e,
            };
            if !error.is_retryable() || tries >= TRIES {
                return Err(ImportError::Unavailable(error.to_string()));
            }
            tokio::time::sleep(Duration::from_millis(50 << tries)).await;
            tries += 1;
            queued = writers.queue_all(&tenant, requests.clone());
        };
        assert_eq!(decisions.len(), requests.len(), "a decision per request");
        let mut decisions = decisions.into_iter();
        Ok(rows
            .into_iter()
            .map(|(line, refused)| {
                let answer = match refused {
                    Some(a) => a,
                    // One decision per request, in order (asserted above).
                    None => decisions.next().map(answer).unwrap_or_else(|| {
                        ApiError::Internal("a row got no decision".into()).answer()
                    }),
                };
                (line, answer)
            })
            .collect())
    }
}

fn write_reject(
    out: &mut impl Write,
    line: u64,
    outcome: Outcome,
    answer: Answer,
) -> std::io::Result<()> {
    let problem = match answer {
        Answer::Problem { body, .. } => serde_json::Value::Object(body),
        Answer::Entry { entry, .. } => json!({ "entry": entry }),
    };
    let record = json!({ "line": line, "outcome": outcome.name(), "problem": problem });
    writeln!(out, "{record}")
}
