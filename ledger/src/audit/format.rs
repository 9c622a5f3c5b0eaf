//! The records of an export: one header line, one line per entry, one
//! trailer line (JSONL), or a header row and one row per entry (CSV). The
//! writer and the offline verifier share these types, so what is written is
//! exactly what is read back.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::sign::Signature;
use super::COLUMNS;
use crate::amount::{canonical, parse_exact};
use crate::entry::{format_recorded_at, EntryStatus, StoredEntry};
use crate::request::EntryKind;

/// The first line of a JSONL export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderRecord {
    /// Always `"header"`.
    pub record: String,
    /// [`super::FORMAT`].
    pub format: String,
    pub tenant: String,
    pub from_seq: i64,
    pub to_seq: i64,
    pub exported_at: String,
}

/// The last line of a JSONL export: what a complete file holds, and the
/// signed checkpoint of its last entry when the server signs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrailerRecord {
    /// Always `"trailer"`.
    pub record: String,
    /// How many entry lines the file holds.
    pub entries: i64,
    /// The seq of the last entry (for an empty range: `from_seq - 1`).
    pub last_seq: i64,
    /// The hash of that entry (hex; 64 zeros before seq 1).
    pub last_hash: String,
    /// The checkpoint over (tenant, last_seq, last_hash, signed_at); `null`
    /// when the exporting server or command has no signing key.
    pub signature: Option<Signature>,
}

/// One entry as exported: every stored column, amounts as exact decimal
/// text, `params` as the canonical text exactly as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntryRecord<'a> {
    /// Always `"entry"`.
    #[serde(borrow)]
    pub record: Cow<'a, str>,
    #[serde(borrow)]
    pub tenant_id: Cow<'a, str>,
    pub seq: i64,
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    #[serde(borrow)]
    pub kind: Cow<'a, str>,
    #[serde(borrow)]
    pub upstream_id: Cow<'a, str>,
    #[serde(borrow)]
    pub status: Cow<'a, str>,
    pub rejection_code: Option<Cow<'a, str>>,
    pub rejection_message: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub account: Cow<'a, str>,
    #[serde(borrow)]
    pub debit_account: Cow<'a, str>,
    #[serde(borrow)]
    pub credit_account: Cow<'a, str>,
    #[serde(borrow)]
    pub amount: Cow<'a, str>,
    #[serde(borrow)]
    pub unit: Cow<'a, str>,
    #[serde(borrow)]
    pub params: Cow<'a, str>,
    #[serde(borrow)]
    pub fingerprint: Cow<'a, str>,
    #[serde(borrow)]
    pub recorded_at: Cow<'a, str>,
    #[serde(borrow)]
    pub balance_after: Cow<'a, str>,
    #[serde(borrow)]
    pub prev_hash: Cow<'a, str>,
    #[serde(borrow)]
    pub hash: Cow<'a, str>,
}

impl<'a> EntryRecord<'a> {
    /// The exported form of a stored entry.
    pub fn of(e: &'a StoredEntry) -> Self {
        EntryRecord {
            record: Cow::Borrowed("entry"),
            tenant_id: Cow::Borrowed(&e.tenant_id),
            seq: e.seq,
            id: Cow::Borrowed(&e.id),
            kind: Cow::Borrowed(e.kind.as_str()),
            upstream_id: Cow::Borrowed(&e.upstream_id),
            status: Cow::Borrowed(e.status.as_str()),
            rejection_code: e.rejection_code.as_deref().map(Cow::Borrowed),
            rejection_message: e.rejection_message.as_deref().map(Cow::Borrowed),
            account: Cow::Borrowed(&e.account),
            debit_account: Cow::Borrowed(&e.debit_account),
            credit_account: Cow::Borrowed(&e.credit_account),
            amount: Cow::Owned(canonical(e.amount)),
            unit: Cow::Borrowed(&e.unit),
            params: Cow::Borrowed(&e.params),
            fingerprint: Cow::Borrowed(&e.fingerprint),
            recorded_at: Cow::Owned(format_recorded_at(&e.recorded_at)),
            balance_after: Cow::Owned(e.balance_after.to_string()),
            prev_hash: Cow::Borrowed(&e.prev_hash),
            hash: Cow::Borrowed(&e.hash),
        }
    }

    /// The entry a verifier rebuilds from the exported text, to recompute its
    /// fingerprint and hash. `Err` says which field cannot be read.
    pub fn to_stored(&self) -> Result<StoredEntry, String> {
        let kind = EntryKind::parse(&self.kind)
            .ok_or_else(|| format!("kind {:?} is not a kind of entry", self.kind))?;
        let status = EntryStatus::parse(&self.status)
            .ok_or_else(|| format!("status {:?} is neither posted nor rejected", self.status))?;
        let decimal = |name: &str, text: &str| {
            parse_exact(text, false).map_err(|m| format!("{name} {text:?} {m}"))
        };
        let recorded_at = DateTime::parse_from_rfc3339(&self.recorded_at)
            .map_err(|_| format!("recorded_at {:?} is not a timestamp", self.recorded_at))?
            .with_timezone(&Utc);
        Ok(StoredEntry {
            tenant_id: self.tenant_id.clone().into_owned(),
            seq: self.seq,
            id: self.id.clone().into_owned(),
            kind,
            upstream_id: self.upstream_id.clone().into_owned(),
            status,
            rejection_code: self.rejection_code.clone().map(Cow::into_owned),
            rejection_message: self.rejection_message.clone().map(Cow::into_owned),
            account: self.account.clone().into_owned(),
            debit_account: self.debit_account.clone().into_owned(),
            credit_account: self.credit_account.clone().into_owned(),
            amount: decimal("amount", &self.amount)?,
            unit: self.unit.clone().into_owned(),
            params: self.params.clone().into_owned(),
            fingerprint: self.fingerprint.clone().into_owned(),
            recorded_at,
            // A total: plain decimal text of any size.
            balance_after: crate::balance::WideDecimal::parse(&self.balance_after).ok_or_else(
                || {
                    format!(
                    "balance_after {:?} is not a plain decimal with at most 18 fractional digits",
                    self.balance_after
                )
                },
            )?,
            prev_hash: self.prev_hash.clone().into_owned(),
            hash: self.hash.clone().into_owned(),
        })
    }

    /// Appends this entry as one JSON line (ending in `\n`).
    pub fn write_json_line(&self, out: &mut Vec<u8>) {
        // Strings and integers always serialise.
        let _ = serde_json::to_writer(&mut *out, self);
        out.push(b'\n');
    }

    /// The fields in [`COLUMNS`] order; `None` for a null rejection.
    fn fields(&self) -> [Option<&str>; 19] {
        [
            Some(self.tenant_id.as_ref()),
            None, // seq: written by the caller as a number
            Some(self.id.as_ref()),
            Some(self.kind.as_ref()),
            Some(self.upstream_id.as_ref()),
            Some(self.status.as_ref()),
            self.rejection_code.as_deref(),
            self.rejection_message.as_deref(),
            Some(self.account.as_ref()),
            Some(self.debit_account.as_ref()),
            Some(self.credit_account.as_ref()),
            Some(self.amount.as_ref()),
            Some(self.unit.as_ref()),
            Some(self.params.as_ref()),
            Some(self.fingerprint.as_ref()),
            Some(self.recorded_at.as_ref()),
            Some(self.balance_after.as_ref()),
            Some(self.prev_hash.as_ref()),
            Some(self.hash.as_ref()),
        ]
    }

    /// Writes this entry as one CSV row of [`csv_writer`]. A null rejection
    /// is an empty field.
    pub fn write_csv_row<W: std::io::Write>(&self, out: &mut csv::Writer<W>) -> csv::Result<()> {
        let seq = self.seq.to_string();
        let fields = self.fields();
        out.write_record(fields.iter().enumerate().map(|(i, field)| {
            if i == 1 {
                seq.as_str()
            } else {
                field.unwrap_or("")
            }
        }))
    }

    /// An entry read from one CSV row of [`COLUMNS`]; an empty rejection
    /// field is null.
    pub fn from_csv_row(fields: &[&'a str]) -> Result<Self, String> {
        if fields.len() != COLUMNS.len() {
            return Err(format!(
                "has {} fields; an entry row has {}",
                fields.len(),
                COLUMNS.len()
            ));
        }
        let f = |i: usize| Cow::Borrowed(fields[i]);
        let optional = |i: usize| (!fields[i].is_empty()).then(|| Cow::Borrowed(fields[i]));
        Ok(EntryRecord {
            record: Cow::Borrowed("entry"),
            tenant_id: f(0),
            seq: fields[1]
                .parse()
                .map_err(|_| format!("seq {:?} is not a number", fields[1]))?,
            id: f(2),
            kind: f(3),
            upstream_id: f(4),
            status: f(5),
            rejection_code: optional(6),
            rejection_message: optional(7),
            account: f(8),
            debit_account: f(9),
            credit_account: f(10),
            amount: f(11),
            unit: f(12),
            params: f(13),
            fingerprint: f(14),
            recorded_at: f(15),
            balance_after: f(16),
            prev_hash: f(17),
            hash: f(18),
        })
    }
}

/// The writer of every CSV row of an export: RFC 4180, each row ending in
/// CRLF, a field quoted only when it holds a comma, a quote, CR or LF, with
/// its quotes doubled (`QuoteStyle::Necessary`), which is the format
/// docs/audit.md documents and the exports have always had. Flexible: rows
/// are checked against [`COLUMNS`] by the code that builds them, so writing
/// into memory is the writer's only failure, and memory does not fail.
pub fn csv_writer<W: std::io::Write>(out: W) -> csv::Writer<W> {
    csv::WriterBuilder::new()
        .has_headers(false)
        .flexible(true)
        .quote_style(csv::QuoteStyle::Necessary)
        .terminator(csv::Terminator::CRLF)
        .from_writer(out)
}

/// The CSV header row: [`COLUMNS`], CRLF.
pub fn csv_header_row() -> Vec<u8> {
    let mut out = Vec::new();
    let mut writer = csv_writer(&mut out);
    // Into memory, flexible: cannot fail (see `csv_writer`).
    let _ = writer.write_record(COLUMNS);
    let _ = writer.flush();
    drop(writer);
    out
}

/// Appends a header or trailer as one JSON line.
pub fn write_json_record(out: &mut Vec<u8>, record: &impl Serialize) {
    // Strings, integers and options always serialise.
    let _ = serde_json::to_writer(&mut *out, record);
    out.push(b'\n');
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::str::FromStr;

    use rust_decimal::Decimal;

    use super::*;

    fn entry() -> StoredEntry {
        StoredEntry {
            tenant_id: "acme".into(),
            seq: 7,
            id: "ent_1".into(),
            kind: EntryKind::UsageDebit,
            upstream_id: "ur,\"1\"".into(),
            status: EntryStatus::Rejected,
            rejection_code: Some("insufficient_funds".into()),
            rejection_message: Some("available 0, \"needs\" 1.5".into()),
            account: "cust".into(),
            debit_account: "cust".into(),
            credit_account: "@revenue".into(),
            amount: Decimal::from_str("1.50").unwrap(),
            unit: "USD".into(),
            params: r#"{"account":"cust","metadata":{"n":"a,\"b\"\nc"}}"#.into(),
            fingerprint: "sha256:00".into(),
            recorded_at: DateTime::from_timestamp_micros(1_764_410_400_123_456).unwrap(),
            balance_after: crate::balance::WideDecimal::parse("-3.25").unwrap(),
            prev_hash: "00".into(),
            hash: "11".into(),
        }
    }

    #[test]
    fn a_json_line_reads_back_as_the_same_entry() {
        let e = entry();
        let mut out = Vec::new();
        EntryRecord::of(&e).write_json_line(&mut out);
        assert_eq!(out.last(), Some(&b'\n'));
        let text = std::str::from_utf8(&out).unwrap().trim_end();
        assert!(text.starts_with(r#"{"record":"entry","tenant_id":"acme","seq":7,"#));
        let back: EntryRecord = serde_json::from_str(text).unwrap();
        assert_eq!(back.amount, "1.5");
        assert_eq!(back.balance_after, "-3.25");
        assert_eq!(back.to_stored().unwrap(), e);
    }

    #[test]
    fn csv_fields_are_quoted_only_when_needed_and_quotes_doubled() {
        let mut writer = csv_writer(Vec::new());
        writer
            .write_record(["plain", "a,b", "say \"hi\"", "two\r\nlines", "\""])
            .unwrap();
        assert_eq!(
            String::from_utf8(writer.into_inner().unwrap()).unwrap(),
            "plain,\"a,b\",\"say \"\"hi\"\"\",\"two\r\nlines\",\"\"\"\"\r\n"
        );
    }

    #[test]
    fn a_csv_row_reads_back_as_the_same_entry() {
        let e = entry();
        let mut writer = csv_writer(Vec::new());
        EntryRecord::of(&e).write_csv_row(&mut writer).unwrap();
        let text = String::from_utf8(writer.into_inner().unwrap()).unwrap();
        assert!(text.ends_with("\r\n"));
        assert!(text.starts_with("acme,7,ent_1,usage_debit,\"ur,\"\"1\"\"\",rejected,"));
        // A minimal RFC 4180 reader for the test.
        let mut fields = vec![String::new()];
        let mut quoted = false;
        let mut chars = text.trim_end_matches("\r\n").chars().peekable();
        while let Some(c) = chars.next() {
            match (c, quoted) {
                ('"', false) => quoted = true,
                ('"', true) if chars.peek() == Some(&'"') => {
                    chars.next();
                    fields.last_mut().unwrap().push('"');
                }
                ('"', true) => quoted = false,
                (',', false) => fields.push(String::new()),
                (c, _) => fields.last_mut().unwrap().push(c),
            }
        }
        let refs: Vec<&str> = fields.iter().map(String::as_str).collect();
        let back = EntryRecord::from_csv_row(&refs).unwrap();
        assert_eq!(back.to_stored().unwrap(), e);
        assert_eq!(
            String::from_utf8(csv_header_row()).unwrap(),
            format!("{}\r\n", COLUMNS.join(","))
        );
    }
}
