//! RFC 9457 problems as tally sends them.

use serde::{Deserialize, Serialize};

use crate::model::Entry;

/// One problem with one field (or query parameter) of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    /// The field's name; a dotted path inside an object (`metadata.model`).
    pub field: String,
    pub message: String,
}

/// An `application/problem+json` body: `type`, `title`, `status`, `detail`,
/// the stable `code`, and the members its code names.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    /// `/problems/<code>`.
    #[serde(rename = "type", default)]
    pub problem_type: String,
    #[serde(default)]
    pub title: String,
    /// The HTTP status (the answer's, when the body was not a problem).
    #[serde(default)]
    pub status: u16,
    #[serde(default)]
    pub detail: String,
    /// Empty when the body was not a problem (e.g. a proxy's 502 page).
    #[serde(default)]
    pub code: String,
    /// `invalid_request`, `unit_mismatch`: every problem at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
    /// `idempotency_conflict`: the entry the upstream ID already names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry_id: Option<String>,
    /// `idempotency_conflict`: the request fields that differ.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differing_fields: Vec<String>,
    /// Stored rejections: the rejected entry, identical on every replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<Box<Entry>>,
    /// `not_found` of a referenced object: the request field naming it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// `unit_mismatch`: the account and the unit it already has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// An intent's problems: the intent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent_id: Option<String>,
    /// `intent_in_progress`: seconds until the live lease runs out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u64>,
    /// `intent_in_progress`: the live claim's fence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<i64>,
}

impl Problem {
    /// Parses an error body; anything that is not a problem becomes an
    /// empty one. `status` is always the answer's.
    pub(crate) fn parse(status: u16, body: &[u8]) -> Problem {
        let mut problem: Problem = serde_json::from_slice(body).unwrap_or_default();
        problem.status = status;
        if problem.detail.is_empty() && problem.code.is_empty() {
            let text = String::from_utf8_lossy(body);
            problem.detail = text.chars().take(200).collect();
        }
        problem
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let code = if self.code.is_empty() {
            "(no problem code)"
        } else {
            &self.code
        };
        write!(f, "tally answered {} {code}: {}", self.status, self.detail)
    }
}
