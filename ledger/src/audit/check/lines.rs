//! Reading an export: the lines of a JSONL file, the rows of a CSV one.

use serde_json::Value;

use super::super::format::{EntryRecord, HeaderRecord, TrailerRecord};
use super::super::{COLUMNS, FORMAT};
use super::{problem, ExportChecker, Problem};
use crate::chain::GENESIS_HASH;
use crate::fold::LogFold;

impl ExportChecker {
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

    pub(super) fn header_line(&mut self, line: u64, text: &str) -> Result<(), Problem> {
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
    pub(super) fn start(&mut self, line: u64, tenant: String, from_seq: i64) {
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
}
