//! The offline verifier of an export (`tally verify --export FILE`): no
//! database, no server, only the file and, optionally, a head the reader
//! noted earlier and the public key they trust.
//!
//! The caller reads the file and hands over one line (JSONL) or one parsed
//! row (CSV) at a time; the checker keeps one entry of look-ahead (to tell
//! swapped lines from a missing one) and the balance fold, so memory does
//! not grow with the file. The first problem found ends the check; it names
//! the line, the seq and what it means in plain words.

use serde_json::{Map, Value};

use super::export::ExportFormat;
use super::record::{EntryRecord, HeaderRecord, TrailerRecord};
use super::sign::{verify_checkpoint, Signature};
use super::{COLUMNS, FORMAT};
use crate::amount::{canonical, parse_exact};
use crate::chain::{decode_hash, entry_hash, GENESIS_HASH};
use crate::entry::StoredEntry;
use crate::fingerprint::Fingerprint;
use crate::fold::LogFold;
use crate::LedgerError;

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

    /// One line of a JSONL export, without its `\n`.
    pub fn json_line(&mut self, line: u64, text: &str) -> Result<(), Problem> {
        self.last_line = line;
        if let Some(trailer) = self.trailer_line {
            if text.trim().is_empty() {
                return Ok(());
            }
            return problem(
                Some(line),
                None,
                format!("data after the trailer (line {trailer}): lines were appended to the file"),
            );
        }
        if self.header.is_none() {
            return self.header_line(line, text);
        }
        if let Ok(record) = serde_json::from_str::<EntryRecord>(text) {
            if record.record == "entry" {
                return self.entry(line, &record);
            }
        }
        let value: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(_) if text.trim().is_empty() => {
                return problem(Some(line), None, "empty line: tally writes none")
            }
            Err(_) => {
                return problem(
                    Some(line),
                    None,
                    "not a complete JSON record: the file is truncated or damaged here",
                )
            }
        };
        match value.get("record").and_then(Value::as_str) {
            Some("trailer") => match serde_json::from_value::<TrailerRecord>(value.clone()) {
                Ok(trailer) => self.trailer(line, trailer),
                Err(e) => problem(Some(line), None, format!("the trailer is malformed: {e}")),
            },
            Some("entry") => {
                let reason = serde_json::from_str::<EntryRecord>(text)
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                let seq = value.get("seq").and_then(Value::as_i64);
                problem(Some(line), seq, format!("the entry is malformed: {reason}"))
            }
            Some("header") => problem(
                Some(line),
                None,
                "a second header: two exports were joined into one file",
            ),
            other => problem(
                Some(line),
                None,
                format!("unknown record {other:?}: not a line of a tally export"),
            ),
        }
    }

    fn header_line(&mut self, line: u64, text: &str) -> Result<(), Problem> {
        let header = match serde_json::from_str::<HeaderRecord>(text) {
            Ok(h) if h.record == "header" => h,
            _ => {
                let record = serde_json::from_str::<Value>(text)
                    .ok()
                    .and_then(|v| v.get("record").and_then(Value::as_str).map(str::to_owned));
                return problem(
                    Some(line),
                    None,
                    match record {
                        Some(r) if r != "header" => format!(
                            "header missing: the file starts with a {r} record; lines were removed from the top"
                        ),
                        _ => "header missing or malformed: not a tally export".to_owned(),
                    },
                );
            }
        };
        if header.format != FORMAT {
            return problem(
                Some(line),
                None,
                format!(
                    "format {:?} is not {FORMAT}, the format this verifier reads",
                    header.format
                ),
            );
        }
        if header.from_seq < 1 || header.to_seq < header.from_seq - 1 {
            return problem(
                Some(line),
                None,
                format!(
                    "the header's range from_seq {} to_seq {} is impossible",
                    header.from_seq, header.to_seq
                ),
            );
        }
        self.start(line, header.tenant.clone(), header.from_seq);
        self.header = Some(header);
        Ok(())
    }

    /// Sets where the chain starts: at the genesis for seq 1 (and then the
    /// balances can be folded), else at the first entry's `prev_hash`.
    fn start(&mut self, line: u64, tenant: String, from_seq: i64) {
        self.tenant = Some(tenant);
        self.from_seq = Some(from_seq);
        self.prev_line = line;
        if from_seq == 1 {
            self.prev = Some((0, GENESIS_HASH));
            self.anchor = Some(GENESIS_HASH);
            self.fold = Some(LogFold::new());
        }
    }

    /// The header row of a CSV export.
    pub fn csv_header(&mut self, line: u64, fields: &[&str]) -> Result<(), Problem> {
        self.last_line = line;
        if fields != COLUMNS {
            return problem(
                Some(line),
                None,
                format!(
                    "the header row is not the tally export columns ({})",
                    COLUMNS.join(",")
                ),
            );
        }
        self.prev_line = line;
        Ok(())
    }

    /// One row of a CSV export (after its header row).
    pub fn csv_row(&mut self, line: u64, fields: &[&str]) -> Result<(), Problem> {
        self.last_line = line;
        let record = match EntryRecord::from_csv_row(fields) {
            Ok(r) => r,
            Err(m) => return problem(Some(line), None, format!("the row {m}")),
        };
        if self.tenant.is_none() {
            // CSV has no header record: the first row says where it starts.
            let header_line = self.prev_line;
            self.start(header_line, record.tenant_id.to_string(), record.seq);
        }
        self.entry(line, &record)
    }

    fn missing(&self, next: &Entry) -> Problem {
        let expected = self.expected_seq();
        let what = if next.e.seq == expected + 1 {
            format!("seq {expected} missing")
        } else {
            format!("seq {expected} to {} missing", next.e.seq - 1)
        };
        Problem {
            line: None,
            seq: Some(expected),
            reason: format!(
                "{what} between lines {} and {}: the entry was deleted from the file",
                self.prev_line, next.line
            ),
        }
    }

    fn expected_seq(&self) -> i64 {
        match self.prev {
            Some((seq, _)) => seq + 1,
            None => self.from_seq.unwrap_or(1),
        }
    }

    fn entry(&mut self, line: u64, record: &EntryRecord) -> Result<(), Problem> {
        let at = Some(line);
        let seq = Some(record.seq);
        let e = match record.to_stored() {
            Ok(e) => e,
            Err(m) => return problem(at, seq, format!("unreadable entry: {m}")),
        };
        let expected = self.expected_seq();
        if let Some(held) = self.pending.take() {
            if e.seq == expected {
                return problem(
                    at,
                    seq,
                    format!(
                        "lines {} and {line} swapped: seq {} follows seq {}",
                        held.line, e.seq, held.e.seq
                    ),
                );
            }
            return Err(self.missing(&held));
        }
        if e.seq > expected {
            self.pending = Some(Entry { line, e });
            return Ok(());
        }
        if e.seq < expected {
            let prev_seq = expected - 1;
            return problem(
                at,
                seq,
                if e.seq == prev_seq {
                    format!(
                        "seq {} appears twice (lines {} and {line}): a line was duplicated",
                        e.seq, self.prev_line
                    )
                } else {
                    format!(
                        "seq {} follows seq {prev_seq} (line {}): lines were moved",
                        e.seq, self.prev_line
                    )
                },
            );
        }
        self.check(line, e)
    }

    /// The checks of an entry in its place: tenant, link, fingerprint,
    /// hash, balance, noted head.
    fn check(&mut self, line: u64, e: StoredEntry) -> Result<(), Problem> {
        let at = Some(line);
        let seq = Some(e.seq);
        let tenant = self.tenant.as_deref().unwrap_or_default();
        if e.tenant_id != tenant {
            return problem(
                at,
                seq,
                format!(
                    "an entry of tenant {:?} in an export of tenant {tenant:?}",
                    e.tenant_id
                ),
            );
        }
        let Some(prev_hash) = decode_hash(&e.prev_hash) else {
            return problem(at, seq, "prev_hash is not 64 hex digits");
        };
        let prev = match self.prev {
            Some((_, hash)) => hash,
            None => {
                // A partial export: the chain starts at the first prev_hash.
                self.anchor = Some(prev_hash);
                if let Some(head) = self.options.head {
                    if head.seq == e.seq - 1 {
                        if head.hash != prev_hash {
                            return problem(
                                at,
                                seq,
                                format!(
                                    "prev_hash differs from the head you noted ({}:{}): the log before this export was rewritten after you noted it",
                                    head.seq,
                                    hex::encode(head.hash)
                                ),
                            );
                        }
                        self.head_seen = true;
                    }
                }
                prev_hash
            }
        };
        if prev_hash != prev {
            return problem(
                at,
                seq,
                if e.seq == 1 {
                    "prev_hash of seq 1 is not the genesis hash (64 zeros)".to_owned()
                } else {
                    format!(
                        "prev_hash does not match the hash of seq {} (line {}): an entry before it was changed and re-hashed, or removed",
                        e.seq - 1,
                        self.prev_line
                    )
                },
            );
        }
        if !Fingerprint::of_canonical(&e.params).is_text_of(&e.fingerprint) {
            return problem(
                at,
                seq,
                "params changed? the request parameters no longer match their fingerprint",
            );
        }
        let hash = entry_hash(&prev, &e);
        if !crate::hex_text::is_lower_hex_of(&e.hash, &hash) {
            return problem(at, seq, hash_mismatch(&e));
        }
        if let Some(fold) = &mut self.fold {
            match fold.apply(&e) {
                Ok(()) => {}
                Err(LedgerError::Corrupt(m)) => {
                    return problem(at, seq, format!("does not fold: {m}"))
                }
                Err(other) => return problem(at, seq, format!("does not fold: {other}")),
            }
            let posted = fold
                .balances
                .get(&e.account, &e.unit)
                .map(|b| b.posted())
                .unwrap_or_default();
            if posted != e.balance_after {
                return problem(
                    at,
                    seq,
                    format!(
                        "balance_after is {} but the entries before it add up to {} for {} ({})",
                        canonical(e.balance_after),
                        canonical(posted),
                        e.account,
                        e.unit
                    ),
                );
            }
        }
        if let Some(head) = self.options.head {
            if head.seq == e.seq {
                if head.hash != hash {
                    return problem(
                        at,
                        seq,
                        format!(
                            "the hash differs from the head you noted ({}:{}): the log was rewritten after you noted it",
                            head.seq,
                            hex::encode(head.hash)
                        ),
                    );
                }
                self.head_seen = true;
            }
        }
        self.prev = Some((e.seq, hash));
        self.prev_line = line;
        self.count += 1;
        Ok(())
    }

    fn trailer(&mut self, line: u64, trailer: TrailerRecord) -> Result<(), Problem> {
        if let Some(held) = self.pending.take() {
            return Err(self.missing(&held));
        }
        self.trailer_line = Some(line);
        let at = Some(line);
        let from_seq = self.from_seq.unwrap_or(1);
        let last_seq = self.prev.map(|(s, _)| s).unwrap_or(from_seq - 1);
        if trailer.entries != self.count {
            return problem(
                at,
                None,
                format!(
                    "the trailer says {} entries but the file holds {}: entry lines were added or removed",
                    trailer.entries, self.count
                ),
            );
        }
        if trailer.last_seq != last_seq {
            return problem(
                at,
                None,
                format!(
                    "the trailer says the last seq is {} but the file ends at seq {last_seq}",
                    trailer.last_seq
                ),
            );
        }
        let to_seq = self.header.as_ref().map(|h| h.to_seq).unwrap_or(last_seq);
        if to_seq != last_seq {
            return problem(
                at,
                None,
                format!(
                    "the header announces seq {from_seq} to {to_seq} but the file ends at seq {last_seq}: entries were removed from the end"
                ),
            );
        }
        match self.prev {
            Some((_, hash)) => {
                if trailer.last_hash != hex::encode(hash) {
                    return problem(
                        at,
                        None,
                        format!(
                            "the trailer's last_hash {} is not the hash of the last entry ({})",
                            trailer.last_hash,
                            hex::encode(hash)
                        ),
                    );
                }
            }
            // An empty export: nothing to recompute; the signature covers it.
            None => match decode_hash(&trailer.last_hash) {
                Some(h) => {
                    self.prev = Some((last_seq, h));
                    self.anchor = Some(h);
                    if let Some(head) = self.options.head {
                        if head.seq == last_seq {
                            if head.hash != h {
                                return problem(
                                    at,
                                    None,
                                    format!(
                                        "last_hash differs from the head you noted ({}:{})",
                                        head.seq,
                                        hex::encode(head.hash)
                                    ),
                                );
                            }
                            self.head_seen = true;
                        }
                    }
                }
                None => return problem(at, None, "last_hash is not 64 hex digits"),
            },
        }
        self.signature = self.check_signature(line, trailer.signature.as_ref(), last_seq)?;
        Ok(())
    }

    fn check_signature(
        &self,
        line: u64,
        signature: Option<&Signature>,
        last_seq: i64,
    ) -> Result<SignatureStatus, Problem> {
        let at = Some(line);
        let Some(sig) = signature else {
            if self.options.public_key.is_some() {
                return problem(
                    at,
                    None,
                    "the file is not signed (\"signature\": null) but a public key was given: \
                     the signature was removed, or the exporter had signing off",
                );
            }
            return Ok(SignatureStatus::Unsigned);
        };
        let tenant = self.tenant.as_deref().unwrap_or_default();
        let hash = self.prev.map(|(_, h)| hex::encode(h)).unwrap_or_default();
        if let Err(p) = verify_checkpoint(sig, tenant, last_seq, &hash) {
            return problem(at, None, p.to_string());
        }
        let matches_given = match self.options.public_key {
            None => false,
            Some(key) => {
                if sig.public_key.to_ascii_lowercase() != hex::encode(key) {
                    return problem(
                        at,
                        None,
                        format!(
                            "signed by another key: the signature is by public key {} but you gave {}; \
                             the file was re-signed by someone else",
                            sig.public_key,
                            hex::encode(key)
                        ),
                    );
                }
                true
            }
        };
        Ok(SignatureStatus::Valid {
            public_key: sig.public_key.clone(),
            signed_at: sig.signed_at.clone(),
            matches_given,
        })
    }

    /// The end of the file: the verdict.
    pub fn finish(mut self) -> Result<Report, Problem> {
        if let Some(held) = self.pending.take() {
            return Err(self.missing(&held));
        }
        let from_seq = self.from_seq.unwrap_or(1);
        let last = self.prev.map(|(s, _)| s).unwrap_or(from_seq - 1);
        match self.format {
            ExportFormat::Jsonl => {
                if self.header.is_none() {
                    return problem(None, None, "the file is empty: no header, no entries");
                }
                if self.trailer_line.is_none() {
                    return problem(
                        None,
                        None,
                        format!(
                            "trailer missing: the file is truncated after line {} (seq {last})",
                            self.last_line
                        ),
                    );
                }
            }
            ExportFormat::Csv => {
                if self.options.public_key.is_some() {
                    return problem(
                        None,
                        None,
                        "a public key was given but CSV exports carry no signature: verify the JSONL export",
                    );
                }
            }
        }
        if let Some(head) = self.options.head {
            if head.seq == 0 && from_seq == 1 {
                if head.hash != GENESIS_HASH {
                    return problem(
                        None,
                        None,
                        "the head you noted for seq 0 is not the genesis hash (64 zeros)",
                    );
                }
                self.head_seen = true;
            }
            if !self.head_seen {
                return problem(
                    None,
                    None,
                    format!(
                        "the head you noted (seq {}) is not in this export, which covers seq {from_seq} to {last}: it cannot be checked",
                        head.seq
                    ),
                );
            }
        }
        let hex_or_empty = |h: Option<[u8; 32]>| h.map(hex::encode).unwrap_or_default();
        Ok(Report {
            format: self.format,
            tenant: self.tenant.clone().unwrap_or_default(),
            exported_at: self.header.as_ref().map(|h| h.exported_at.clone()),
            entries: self.count,
            from_seq,
            to_seq: last,
            anchor_hash: hex_or_empty(self.anchor),
            last_hash: hex_or_empty(self.prev.map(|(_, h)| h)),
            balances: self.fold.as_ref().map(|f| f.balances.len()),
            open_holds: self.fold.as_ref().map(|f| f.open_holds.len()),
            signature: self.signature.clone(),
            noted_head: self.options.head,
        })
    }
}

/// Why an entry's hash does not match, with a guess at the field when its
/// own request parameters (which the fingerprint still vouches for)
/// disagree with it.
fn hash_mismatch(e: &StoredEntry) -> String {
    let params: Map<String, Value> = serde_json::from_str(&e.params).unwrap_or_default();
    let said = |k: &str| params.get(k).and_then(Value::as_str);
    let generic = "the entry hash does not match its contents";
    if let Some(amount) = said("amount") {
        if parse_exact(amount, false).ok() != Some(e.amount) {
            return format!(
                "amount changed? {generic} (the amount is {} but its request said {amount})",
                canonical(e.amount)
            );
        }
    }
    for field in ["account", "unit"] {
        let value = if field == "account" {
            &e.account
        } else {
            &e.unit
        };
        if let Some(v) = said(field) {
            if v != value {
                return format!(
                    "{field} changed? {generic} (the {field} is {value:?} but its request said {v:?})"
                );
            }
        }
    }
    format!("{generic}: one of its fields was changed after it was written")
}

/// Checks a whole JSONL export held in memory (tests and small files).
pub fn check_jsonl(text: &str, options: CheckOptions) -> Result<Report, Problem> {
    let mut checker = ExportChecker::new(ExportFormat::Jsonl, options);
    for (i, line) in text.lines().enumerate() {
        checker.json_line(i as u64 + 1, line)?;
    }
    checker.finish()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::str::FromStr;

    use chrono::{TimeZone, Utc};
    use rust_decimal::Decimal;

    use super::*;
    use crate::audit::record::{write_json_record, EntryRecord, HeaderRecord, TrailerRecord};
    use crate::audit::sign::Signer;
    use crate::entry::EntryStatus;
    use crate::intent::EntryKind;

    const SEED: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";

    /// Entries 1..=n of usage debits over three accounts, chained and folded
    /// as the writer would.
    fn chain(n: i64) -> Vec<StoredEntry> {
        let mut fold = LogFold::new();
        let mut prev = GENESIS_HASH;
        let mut out = Vec::new();
        for seq in 1..=n {
            let account = format!("cust_{}", seq % 3);
            let amount = format!("{seq}.5");
            let params = format!(r#"{{"account":"{account}","amount":"{amount}","unit":"USD"}}"#);
            let mut e = StoredEntry {
                tenant_id: "acme".into(),
                seq,
                id: format!("ent_{seq}"),
                kind: EntryKind::UsageDebit,
                upstream_id: format!("ur_{seq}"),
                status: EntryStatus::Posted,
                rejection_code: None,
                rejection_message: None,
                account: account.clone(),
                debit_account: account.clone(),
                credit_account: "@revenue".into(),
                amount: Decimal::from_str(&amount).unwrap(),
                unit: "USD".into(),
                fingerprint: Fingerprint::of_canonical(&params).to_string(),
                params,
                recorded_at: Utc.timestamp_opt(1_764_410_400 + seq, 0).unwrap(),
                balance_after: Decimal::ZERO,
                prev_hash: hex::encode(prev),
                hash: String::new(),
            };
            fold.apply(&e).unwrap();
            e.balance_after = fold.balances.get(&account, "USD").unwrap().posted();
            prev = entry_hash(&prev, &e);
            e.hash = hex::encode(prev);
            out.push(e);
        }
        out
    }

    fn export(entries: &[StoredEntry], from: i64, to: i64, signer: Option<&Signer>) -> Vec<String> {
        let mut out = Vec::new();
        write_json_record(
            &mut out,
            &HeaderRecord {
                record: "header".into(),
                format: FORMAT.into(),
                tenant: "acme".into(),
                from_seq: from,
                to_seq: to,
                exported_at: "2026-12-01T00:00:00.000000Z".into(),
            },
        );
        let part: Vec<&StoredEntry> = entries
            .iter()
            .filter(|e| e.seq >= from && e.seq <= to)
            .collect();
        for e in &part {
            EntryRecord::of(e).write_json_line(&mut out);
        }
        let last_hash = part.last().map(|e| e.hash.clone()).unwrap_or_default();
        write_json_record(
            &mut out,
            &TrailerRecord {
                record: "trailer".into(),
                entries: part.len() as i64,
                last_seq: to,
                signature: signer.map(|s| s.sign("acme", to, &last_hash, Utc::now())),
                last_hash,
            },
        );
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn check(lines: &[String], options: CheckOptions) -> Result<Report, String> {
        check_jsonl(&lines.join("\n"), options).map_err(|p| p.to_string())
    }

    #[test]
    fn an_untouched_export_verifies_and_folds() {
        let signer = Signer::from_seed_hex(SEED).unwrap();
        let lines = export(&chain(20), 1, 20, Some(&signer));
        let key = parse_public_key_for_test(&signer);
        let report = check(
            &lines,
            CheckOptions {
                head: Some(NotedHead::parse(&format!("7:{}", chain(20)[6].hash)).unwrap()),
                public_key: Some(key),
            },
        )
        .unwrap();
        assert_eq!(report.entries, 20);
        assert_eq!((report.from_seq, report.to_seq), (1, 20));
        assert_eq!(report.balances, Some(4));
        assert!(matches!(
            report.signature,
            SignatureStatus::Valid {
                matches_given: true,
                ..
            }
        ));
    }

    fn parse_public_key_for_test(signer: &Signer) -> [u8; 32] {
        crate::audit::sign::parse_public_key(&signer.public_key_hex()).unwrap()
    }

    #[test]
    fn a_partial_export_verifies_from_its_first_prev_hash() {
        let entries = chain(20);
        let lines = export(&entries, 8, 15, None);
        let report = check(&lines, CheckOptions::default()).unwrap();
        assert_eq!(report.entries, 8);
        assert_eq!(report.anchor_hash, entries[6].hash);
        assert_eq!(report.balances, None);
        let noted = NotedHead::parse(&format!("7:{}", entries[6].hash)).unwrap();
        check(
            &lines,
            CheckOptions {
                head: Some(noted),
                public_key: None,
            },
        )
        .unwrap();
        let empty = export(&entries, 21, 20, None);
        let mut empty = empty;
        empty[1] = empty[1].replace(
            "\"last_hash\":\"\"",
            &format!("\"last_hash\":\"{}\"", entries[19].hash),
        );
        assert_eq!(check(&empty, CheckOptions::default()).unwrap().entries, 0);
    }

    #[test]
    fn each_kind_of_tampering_is_named() {
        let lines = export(&chain(20), 1, 20, None);
        // Line n + 1 holds seq n.
        let mut changed = lines.clone();
        changed[17] = changed[17].replace("\"amount\":\"17.5\"", "\"amount\":\"1700.5\"");
        let e = check(&changed, CheckOptions::default()).unwrap_err();
        assert!(e.starts_with("line 18 (seq 17): amount changed?"), "{e}");

        let mut deleted = lines.clone();
        deleted.remove(5);
        let e = check(&deleted, CheckOptions::default()).unwrap_err();
        assert!(e.starts_with("seq 5 missing between lines 5 and 6"), "{e}");

        let mut swapped = lines.clone();
        swapped.swap(8, 9);
        let e = check(&swapped, CheckOptions::default()).unwrap_err();
        assert!(
            e.contains("lines 9 and 10 swapped: seq 8 follows seq 9"),
            "{e}"
        );

        let mut twice = lines.clone();
        twice.insert(4, lines[4].clone());
        let e = check(&twice, CheckOptions::default()).unwrap_err();
        assert!(e.contains("seq 4 appears twice"), "{e}");

        let truncated = &lines[..15];
        let e = check(truncated, CheckOptions::default()).unwrap_err();
        assert!(
            e.starts_with("trailer missing: the file is truncated"),
            "{e}"
        );

        let mut cut = lines.clone();
        cut[20].truncate(40);
        cut.truncate(21);
        let e = check(&cut, CheckOptions::default()).unwrap_err();
        assert!(e.contains("truncated or damaged"), "{e}");

        let mut params = lines.clone();
        params[3] = params[3].replace("\\\"amount\\\":\\\"3.5\\\"", "\\\"amount\\\":\\\"3.6\\\"");
        assert_ne!(params[3], lines[3]);
        let e = check(&params, CheckOptions::default()).unwrap_err();
        assert!(e.starts_with("line 4 (seq 3): params changed?"), "{e}");

        let e = check(&lines[1..], CheckOptions::default()).unwrap_err();
        assert!(e.starts_with("line 1: header missing"), "{e}");
    }

    #[test]
    fn a_rehashed_chain_passes_the_links_but_not_the_signature_or_the_noted_head() {
        let signer = Signer::from_seed_hex(SEED).unwrap();
        let original = chain(12);
        let lines = export(&original, 1, 12, Some(&signer));
        let noted = NotedHead::parse(&format!("12:{}", original[11].hash)).unwrap();
        // Rewrite seq 4's amount and re-chain everything after it.
        let mut forged = original.clone();
        let mut fold = LogFold::new();
        let mut prev = GENESIS_HASH;
        for e in &mut forged {
            if e.seq == 4 {
                e.amount = Decimal::from_str("0.01").unwrap();
                e.params = e.params.replace("\"4.5\"", "\"0.01\"");
                e.fingerprint = Fingerprint::of_canonical(&e.params).to_string();
            }
            fold.apply(e).unwrap();
            e.balance_after = fold.balances.get(&e.account, "USD").unwrap().posted();
            e.prev_hash = hex::encode(prev);
            prev = entry_hash(&prev, e);
            e.hash = hex::encode(prev);
        }
        let mut tampered = export(&forged, 1, 12, None);
        let trailer: TrailerRecord = serde_json::from_str(&lines[13]).unwrap();
        let mut forged_trailer: TrailerRecord = serde_json::from_str(&tampered[13]).unwrap();
        forged_trailer.signature = trailer.signature.clone();
        tampered[13] = serde_json::to_string(&forged_trailer).unwrap();

        let e = check(&tampered, CheckOptions::default()).unwrap_err();
        assert!(e.starts_with("line 14: signature does not match"), "{e}");
        assert!(e.contains("re-hashed"), "{e}");
        let e = check(
            &tampered,
            CheckOptions {
                head: Some(noted),
                public_key: None,
            },
        )
        .unwrap_err();
        assert!(
            e.starts_with("line 13 (seq 12): the hash differs from the head you noted"),
            "{e}"
        );

        // Re-signed with another key: valid on its own, refused against the given key.
        let other = Signer::generate().unwrap();
        forged_trailer.signature = Some(other.sign("acme", 12, &forged[11].hash, Utc::now()));
        tampered[13] = serde_json::to_string(&forged_trailer).unwrap();
        check(&tampered, CheckOptions::default()).unwrap();
        let e = check(
            &tampered,
            CheckOptions {
                head: None,
                public_key: Some(parse_public_key_for_test(&signer)),
            },
        )
        .unwrap_err();
        assert!(e.contains("signed by another key"), "{e}");
    }
}
