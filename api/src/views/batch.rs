//! `POST /v1/batch`.

use serde::Serialize;
use serde_json::{Map, Value};
use tally_ledger::entry::EntryView;
use utoipa::ToSchema;

use super::{Entry, Problem};
use crate::problem::Answer;

/// The answer to one operation, exactly as its single endpoint would give
/// it: `entry` for a 201 or a replayed 200, `problem` otherwise.
#[derive(Serialize, ToSchema)]
pub struct BatchItem {
    /// The HTTP status the single endpoint would answer.
    #[schema(example = 201)]
    pub status: u16,
    /// Whether it is a replay (the single endpoint's `Idempotent-Replayed`).
    pub replayed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Entry, nullable = false)]
    pub entry: Option<Box<EntryView>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Problem, nullable = false)]
    pub problem: Option<Map<String, Value>>,
}

impl From<Answer> for BatchItem {
    fn from(a: Answer) -> Self {
        match a {
            Answer::Entry {
                status,
                replayed,
                entry,
            } => BatchItem {
                status: status.as_u16(),
                replayed,
                entry: Some(entry),
                problem: None,
            },
            Answer::Problem {
                status,
                replayed,
                body,
                ..
            } => BatchItem {
                status: status.as_u16(),
                replayed,
                entry: None,
                problem: Some(body),
            },
        }
    }
}

/// One result per operation, in request order.
#[derive(Serialize, ToSchema)]
pub struct BatchResults {
    pub results: Vec<BatchItem>,
}
