//! The end of the file: the verdict.

use super::super::export::ExportFormat;
use super::{problem, ExportChecker, Problem, Report};
use crate::chain::GENESIS_HASH;

impl ExportChecker {
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
