//! The offline verifier of an export (`tally verify --export FILE`): no
//! database, no server, only the file and, optionally, a head the reader
//! noted earlier and the public key they trust.
//!
//! The caller reads the file and hands over one line (JSONL) or one parsed
//! row (CSV) at a time; the checker keeps one entry of look-ahead (to tell
//! swapped lines from a missing one) and the balance fold, so memory does
//! not grow with the file. The first problem found ends the check; it names
//! the line, the seq and what it means in plain words.
//!
//! - this file: what a check takes and reports, and the checker's state;
//! - `lines.rs`: reading the lines (JSONL) or rows (CSV) of the file;
//! - `order.rs`: each entry in seq order (swapped, missing, duplicated);
//! - `chain.rs`: one entry in its place (tenant, link, fingerprint, hash,
//!   balance, noted head);
//! - `trailer.rs`: the trailer and its signature;
//! - `finish.rs`: the verdict at the end of the file.

mod chain;
mod finish;
mod lines;
mod order;
#[cfg(test)]
mod tests;
mod trailer;

use super::export::ExportFormat;
use super::format::HeaderRecord;
use super::COLUMNS;
use crate::chain::decode_hash;
use crate::entry::StoredEntry;
use crate::fold::LogFold;

/// A chain head noted outside the ledger (from `GET /v1/audit/head`, a
/// report, a publication): `SEQ:HASH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotedHead {
    pub seq: i64,
    pub hash: [u8; 32],
}

impl NotedHead {
    pub fn parse(text: &str) -> Result<NotedHead, String> {
        let bad = || "must be SEQ:HASH, e.g. 1042:3f5a… (64 hex digits)".to_owned();
        let (seq, hash) = text.trim().split_once(':').ok_or_else(bad)?;
        let seq: i64 = seq.parse().map_err(|_| bad())?;
        if seq < 0 {
            return Err(bad());
        }
        let hash = decode_hash(&hash.to_ascii_lowercase()).ok_or_else(bad)?;
        Ok(NotedHead { seq, hash })
    }
}

/// What the reader brings besides the file.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// The file must hold this seq with this hash (or start right after it).
    pub head: Option<NotedHead>,
    /// The trailer's signature must be by this key.
    pub public_key: Option<[u8; 32]>,
}

/// The first thing found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub line: Option<u64>,
    pub seq: Option<i64>,
    pub reason: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.line, self.seq) {
            (Some(line), Some(seq)) => write!(f, "line {line} (seq {seq}): {}", self.reason),
            (Some(line), None) => write!(f, "line {line}: {}", self.reason),
            _ => f.write_str(&self.reason),
        }
    }
}

fn problem<T>(
    line: Option<u64>,
    seq: Option<i64>,
    reason: impl Into<String>,
) -> Result<T, Problem> {
    Err(Problem {
        line,
        seq,
        reason: reason.into(),
    })
}

/// What the trailer's signature turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureStatus {
    /// CSV exports have no trailer and so no signature.
    NoTrailer,
    /// The trailer says `"signature": null`: the exporter had no key.
    Unsigned,
    /// Valid for its own public key; `matches_given` tells whether that key
    /// was checked against `--public-key` (a mismatch is a failure).
    Valid {
        public_key: String,
        signed_at: String,
        matches_given: bool,
    },
}

/// What a verified export holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub format: ExportFormat,
    pub tenant: String,
    pub exported_at: Option<String>,
    pub entries: i64,
    /// The first and last seq of the file (`to_seq < from_seq` when empty).
    pub from_seq: i64,
    pub to_seq: i64,
    /// The hash the chain of the file starts from (the genesis for seq 1).
    pub anchor_hash: String,
    /// The hash of the last entry: the head this file proves.
    pub last_hash: String,
    /// Balances (account, unit) folded, when the file starts at seq 1 and
    /// every `balance_after` could be checked; `None` when skipped.
    pub balances: Option<usize>,
    pub open_holds: Option<usize>,
    pub signature: SignatureStatus,
    /// The noted head, found in the file.
    pub noted_head: Option<NotedHead>,
}

/// Which format a file is in, from its first bytes.
pub fn detect_format(first: &[u8]) -> Option<ExportFormat> {
    if first.starts_with(b"{") {
        Some(ExportFormat::Jsonl)
    } else if first.starts_with(COLUMNS[0].as_bytes()) {
        Some(ExportFormat::Csv)
    } else {
        None
    }
}

struct Entry {
    line: u64,
    e: StoredEntry,
}

/// The checker of one export file.
pub struct ExportChecker {
    options: CheckOptions,
    format: ExportFormat,
    header: Option<HeaderRecord>,
    trailer_line: Option<u64>,
    signature: SignatureStatus,
    tenant: Option<String>,
    from_seq: Option<i64>,
    /// The line before the next entry (the header at first).
    prev_line: u64,
    /// The seq and hash the next entry must follow.
    prev: Option<(i64, [u8; 32])>,
    anchor: Option<[u8; 32]>,
    /// An entry whose seq jumped ahead, held until the next line tells
    /// whether lines were swapped or an entry is missing.
    pending: Option<Entry>,
    fold: Option<LogFold>,
    count: i64,
    head_seen: bool,
    last_line: u64,
}

impl ExportChecker {
    pub fn new(format: ExportFormat, options: CheckOptions) -> Self {
        Self {
            options,
            format,
            header: None,
            trailer_line: None,
            signature: SignatureStatus::NoTrailer,
            tenant: None,
            from_seq: None,
            prev_line: 1,
            prev: None,
            anchor: None,
            pending: None,
            fold: None,
            count: 0,
            head_seen: false,
            last_line: 0,
        }
    }
}

/// Checks a whole JSONL export held in memory (tests and small files).
pub fn check_jsonl(text: &str, options: CheckOptions) -> Result<Report, Problem> {
    let mut checker = ExportChecker::new(ExportFormat::Jsonl, options);
    for (i, line) in text.lines().enumerate() {
        checker.json_line(i as u64 + 1, line)?;
    }
    checker.finish()
}
