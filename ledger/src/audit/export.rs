//! The export stream: a tenant's log in seq order, read in pages by keyset
//! (`seq > last`), written as JSONL or CSV one page at a time. Memory stays
//! that of one page however long the log is. `GET /v1/audit/export` and
//! `tally export` send this very stream, so their bytes are the same (but for
//! the export and signing times).
//!
//! If the database fails mid-way the stream yields the error and ends
//! without a trailer: a JSONL file cut there fails `tally verify --export`
//! with "trailer missing".

use std::sync::Arc;

use chrono::Utc;
use futures_util::Stream;

use super::format::{
    csv_header_row, csv_writer, write_json_record, EntryRecord, HeaderRecord, TrailerRecord,
};
use super::sign::Signer;
use super::FORMAT;
use crate::chain::GENESIS_HASH;
use crate::entry::format_recorded_at;
use crate::fields::ValidationErrors;
use crate::store::{EntryFilter, Storage};
use crate::LedgerError;

/// Entries read (and written) per database round trip.
pub const EXPORT_PAGE: i64 = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Jsonl,
    Csv,
}

impl ExportFormat {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "jsonl" => Some(ExportFormat::Jsonl),
            "csv" => Some(ExportFormat::Csv),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ExportFormat::Jsonl => "jsonl",
            ExportFormat::Csv => "csv",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            ExportFormat::Jsonl => "application/x-ndjson; charset=utf-8",
            ExportFormat::Csv => "text/csv; charset=utf-8; header=present",
        }
    }

    /// `tally-export-{tenant}-{from}-{to}.{jsonl|csv}`; tenant names are
    /// `A–Z a–z 0–9 _ - .`, so the name needs no quoting.
    pub fn file_name(self, tenant: &str, range: ExportRange) -> String {
        format!(
            "tally-export-{tenant}-{}-{}.{}",
            range.from_seq,
            range.to_seq,
            self.as_str()
        )
    }
}

/// The seqs an export covers, both ends included; `from_seq = to_seq + 1`
/// is an empty export (nothing new since `to_seq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportRange {
    pub from_seq: i64,
    pub to_seq: i64,
}

impl ExportRange {
    /// `from_seq` defaults to 1 and `to_seq` to the head; errors name the
    /// parameter at fault.
    pub fn resolve(
        head_seq: i64,
        from_seq: Option<i64>,
        to_seq: Option<i64>,
    ) -> Result<ExportRange, ValidationErrors> {
        let mut errors = ValidationErrors::default();
        let from = from_seq.unwrap_or(1);
        let to = to_seq.unwrap_or(head_seq);
        if from < 1 {
            errors.push("from_seq", "must be at least 1");
        }
        if to < 0 {
            errors.push("to_seq", "must be at least 0");
        } else if to > head_seq {
            errors.push(
                "to_seq",
                format!("is beyond the head of the log (seq {head_seq})"),
            );
        }
        if errors.is_empty() && from > to + 1 {
            errors.push(
                "from_seq",
                format!(
                    "must be at most to_seq + 1 ({}); the log ends at seq {head_seq}",
                    to + 1
                ),
            );
        }
        if errors.is_empty() {
            Ok(ExportRange {
                from_seq: from,
                to_seq: to,
            })
        } else {
            Err(errors)
        }
    }
}

enum Stage {
    Header,
    Entries,
    Trailer,
    Done,
}

struct Exporter {
    storage: Storage,
    tenant: String,
    format: ExportFormat,
    range: ExportRange,
    signer: Option<Arc<Signer>>,
    page: i64,
    stage: Stage,
    /// The last seq written (`from_seq - 1` before the first entry).
    after: i64,
    last_hash: Option<String>,
    count: i64,
}

/// The export of `tenant`'s entries in `range` as a stream of byte chunks
/// (the header, then one chunk per page of entries, then the trailer).
/// `signer` signs the trailer's checkpoint. Reads `page` entries at a time.
pub fn export_stream(
    storage: Storage,
    tenant: String,
    format: ExportFormat,
    range: ExportRange,
    signer: Option<Arc<Signer>>,
    page: i64,
) -> impl Stream<Item = Result<Vec<u8>, LedgerError>> + Send + 'static {
    let exporter = Exporter {
        storage,
        tenant,
        format,
        range,
        signer,
        page: page.max(1),
        stage: Stage::Header,
        after: range.from_seq - 1,
        last_hash: None,
        count: 0,
    };
    futures_util::stream::unfold(exporter, |mut e| async move {
        let item = match e.step().await {
            Ok(Some(chunk)) => Ok(chunk),
            Ok(None) => return None,
            Err(err) => {
                tracing::warn!(tenant = %e.tenant, after_seq = e.after, error = %err,
                    "export failed mid-stream; the output ends without a trailer");
                e.stage = Stage::Done;
                Err(err)
            }
        };
        Some((item, e))
    })
}

/// A CSV row that did not write into memory: not expected (see
/// `csv_writer`), but refused loudly rather than dropped from an export.
fn csv_failed(e: &dyn std::fmt::Display) -> LedgerError {
    LedgerError::Corrupt(format!("an export row did not write as CSV: {e}"))
}

impl Exporter {
    async fn step(&mut self) -> Result<Option<Vec<u8>>, LedgerError> {
        loop {
            match self.stage {
                Stage::Header => {
                    self.stage = Stage::Entries;
                    return Ok(Some(self.header()));
                }
                Stage::Entries if self.after < self.range.to_seq => {
                    return self.entries().await.map(Some);
                }
                Stage::Entries => self.stage = Stage::Trailer,
                Stage::Trailer => {
                    self.stage = Stage::Done;
                    return match self.format {
                        ExportFormat::Jsonl => self.trailer().await.map(Some),
                        ExportFormat::Csv => Ok(None),
                    };
                }
                Stage::Done => return Ok(None),
            }
        }
    }

    fn header(&self) -> Vec<u8> {
        match self.format {
            ExportFormat::Csv => csv_header_row(),
            ExportFormat::Jsonl => {
                let mut out = Vec::new();
                write_json_record(
                    &mut out,
                    &HeaderRecord {
                        record: "header".into(),
                        format: FORMAT.into(),
                        tenant: self.tenant.clone(),
                        from_seq: self.range.from_seq,
                        to_seq: self.range.to_seq,
                        exported_at: format_recorded_at(&Utc::now()),
                    },
                );
                out
            }
        }
    }

    async fn entries(&mut self) -> Result<Vec<u8>, LedgerError> {
        let page = self
            .storage
            .list_entries(
                &self.tenant,
                &EntryFilter::log_page(self.after, self.page.min(self.range.to_seq - self.after)),
            )
            .await?;
        let Some(last) = page.last() else {
            return Err(LedgerError::Corrupt(format!(
                "the log of {} ends at seq {} but the export was to reach seq {}",
                self.tenant, self.after, self.range.to_seq
            )));
        };
        let mut out = Vec::with_capacity(page.len() * 900);
        match self.format {
            ExportFormat::Jsonl => {
                for e in &page {
                    EntryRecord::of(e).write_json_line(&mut out);
                }
            }
            ExportFormat::Csv => {
                let mut writer = csv_writer(&mut out);
                for e in &page {
                    EntryRecord::of(e)
                        .write_csv_row(&mut writer)
                        .map_err(|e| csv_failed(&e))?;
                }
                writer.flush().map_err(|e| csv_failed(&e))?;
            }
        }
        self.after = last.seq;
        self.last_hash = Some(last.hash.clone());
        self.count += page.len() as i64;
        Ok(out)
    }

    async fn trailer(&mut self) -> Result<Vec<u8>, LedgerError> {
        let last_hash = match self.last_hash.take() {
            Some(hash) => hash,
            // An empty range: the chain stands at the hash of `to_seq`.
            None if self.after == 0 => hex::encode(GENESIS_HASH),
            None => self
                .storage
                .list_entries(
                    &self.tenant,
                    &EntryFilter {
                        after_seq: self.after - 1,
                        limit: 1,
                        ..EntryFilter::default()
                    },
                )
                .await?
                .into_iter()
                .find(|e| e.seq == self.after)
                .map(|e| e.hash)
                .ok_or_else(|| {
                    LedgerError::Corrupt(format!(
                        "seq {} of {} is missing from the log",
                        self.after, self.tenant
                    ))
                })?,
        };
        let signature = self
            .signer
            .as_ref()
            .map(|s| s.sign(&self.tenant, self.after, &last_hash, Utc::now()));
        let mut out = Vec::new();
        write_json_record(
            &mut out,
            &TrailerRecord {
                record: "trailer".into(),
                entries: self.count,
                last_seq: self.after,
                last_hash,
                signature,
            },
        );
        Ok(out)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ranges_default_to_the_whole_log_and_name_the_parameter_at_fault() {
        let r = |f, t| ExportRange::resolve(10, f, t);
        assert_eq!(
            r(None, None).unwrap(),
            ExportRange {
                from_seq: 1,
                to_seq: 10
            }
        );
        assert_eq!(r(Some(11), None).unwrap().from_seq, 11);
        assert_eq!(ExportRange::resolve(0, None, None).unwrap().to_seq, 0);
        let field = |e: ValidationErrors| e.errors[0].field.clone();
        assert_eq!(field(r(Some(0), None).unwrap_err()), "from_seq");
        assert_eq!(field(r(None, Some(11)).unwrap_err()), "to_seq");
        assert_eq!(field(r(Some(6), Some(4)).unwrap_err()), "from_seq");
        assert_eq!(field(r(Some(12), None).unwrap_err()), "from_seq");
    }
}
