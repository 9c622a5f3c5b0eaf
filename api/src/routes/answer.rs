//! Decisions answered and counted: every handler answers a decided entry request
//! through here, so `GET /metrics` counts each answer once (batch items
//! included) while `crate::problem` only maps.

use tally_ledger::decide::Decision;

use crate::metrics::{self, Outcome};
use crate::problem::{decision_answer, Answer};

/// The answer to a decided entry request (`crate::problem::decision_answer`),
/// counted for `GET /metrics`: replays, conflicts, rejections and refusals
/// by code.
pub fn answer(decision: Decision) -> Answer {
    let outcome = Outcome::of(&decision);
    let answer = decision_answer(decision);
    metrics::global().observe_answer(outcome, &answer);
    answer
}

/// Counts an answer embedded in a larger response (a batch item) if it is
/// an internal error; a response of its own is counted by the server's
/// layer (`crate::server`) from its `InternalError` extension.
pub fn count_embedded(answer: &Answer) {
    if let Some(cause) = answer.internal_cause() {
        metrics::global().observe_internal_error(cause);
    }
}
