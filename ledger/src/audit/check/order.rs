//! Entries in seq order: a line swapped, missing or duplicated.

use super::super::format::EntryRecord;
use super::{problem, Entry, ExportChecker, Problem};

impl ExportChecker {
    pub(super) fn missing(&self, next: &Entry) -> Problem {
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

    pub(super) fn expected_seq(&self) -> i64 {
        match self.prev {
            Some((seq, _)) => seq + 1,
            None => self.from_seq.unwrap_or(1),
        }
    }

    pub(super) fn entry(&mut self, line: u64, record: &EntryRecord) -> Result<(), Problem> {
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
}
