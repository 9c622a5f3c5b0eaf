//! What one ingested operation came to, as every source counts it: the
//! import's summary, the NATS consumer's acknowledgements and metrics.

use serde_json::{Map, Value};

use crate::problem::Answer;

/// One operation's outcome, from the answer the batch path gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A new entry (201).
    Created,
    /// The key already held this same request: the recorded answer again,
    /// including a stored rejection replayed.
    Replayed,
    /// The key already held other parameters (409 `idempotency_conflict`).
    Conflicting,
    /// Decided and refused by the ledger's rules (a stored rejection such as
    /// `insufficient_funds`, or a refusal such as `payment_not_found`).
    Rejected,
    /// Not an operation the batch takes (422 `invalid_request`): nothing
    /// was decided.
    Invalid,
    /// The database failed (5xx): nothing is known; the same operation may
    /// be sent again.
    Unavailable,
}

impl Outcome {
    pub fn of(answer: &Answer) -> Self {
        let status = answer.status().as_u16();
        match answer {
            _ if status >= 500 => Outcome::Unavailable,
            _ if answer.replayed() => Outcome::Replayed,
            Answer::Entry { .. } => Outcome::Created,
            Answer::Problem { body, .. } => match problem_code(body) {
                Some("idempotency_conflict") => Outcome::Conflicting,
                Some("invalid_request") => Outcome::Invalid,
                _ => Outcome::Rejected,
            },
        }
    }

    /// Refused for good: sending the same operation again gets the same
    /// refusal (a dead letter, a reject line).
    pub fn is_refused(self) -> bool {
        matches!(
            self,
            Outcome::Conflicting | Outcome::Rejected | Outcome::Invalid
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Outcome::Created => "created",
            Outcome::Replayed => "replayed",
            Outcome::Conflicting => "conflicting",
            Outcome::Rejected => "rejected",
            Outcome::Invalid => "invalid",
            Outcome::Unavailable => "unavailable",
        }
    }
}

fn problem_code(body: &Map<String, Value>) -> Option<&str> {
    body.get("code").and_then(Value::as_str)
}

/// Operations counted by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub created: u64,
    pub replayed: u64,
    pub conflicting: u64,
    pub rejected: u64,
    pub invalid: u64,
}

impl Counts {
    pub fn add(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Created => self.created += 1,
            Outcome::Replayed => self.replayed += 1,
            Outcome::Conflicting => self.conflicting += 1,
            Outcome::Rejected => self.rejected += 1,
            Outcome::Invalid => self.invalid += 1,
            // Never counted as done: the operation is sent again.
            Outcome::Unavailable => {}
        }
    }

    pub fn total(&self) -> u64 {
        self.created + self.replayed + self.conflicting + self.rejected + self.invalid
    }
}
