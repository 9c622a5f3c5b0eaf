//! The trailer of a JSONL export: counts, last seq and hash, signature.

use super::super::format::TrailerRecord;
use super::super::sign::{verify_checkpoint, Signature};
use super::{problem, ExportChecker, Problem, SignatureStatus};
use crate::chain::decode_hash;

impl ExportChecker {
    pub(super) fn trailer(&mut self, line: u64, trailer: TrailerRecord) -> Result<(), Problem> {
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

    pub(super) fn check_signature(
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
}
