use std::time::Duration;

use crate::model::{Entry, EntryStatus};
use crate::problem::{FieldError, Problem};
use crate::retry::{classify, Classification};

/// Every failure of a call, by the problem `code` the server answered.
///
/// Retryable ones (`RateLimited`, `Unavailable`, `Internal`, `Transport`)
/// are retried by the client within its [`RetryPolicy`](crate::RetryPolicy)
/// and come back wrapped in [`ClientError::Exhausted`] when it gives up;
/// the others are final answers, returned at once.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// 409 `idempotency_conflict`: the upstream ID already names `entry_id`
    /// with other parameters. Nothing was written; a new request needs a new ID.
    #[error("{problem}")]
    IdempotencyConflict {
        entry_id: String,
        differing_fields: Vec<String>,
        problem: Box<Problem>,
    },
    /// 422 `invalid_request`: every problem with the request, by field.
    #[error("{problem}")]
    InvalidRequest {
        errors: Vec<FieldError>,
        problem: Box<Problem>,
    },
    /// 422 `unit_mismatch`: `account` already has `unit`.
    #[error("{problem}")]
    UnitMismatch {
        account: String,
        unit: String,
        problem: Box<Problem>,
    },
    /// 422 `insufficient_funds`, a stored rejection: below the overdraft floor.
    #[error("{problem}")]
    InsufficientFunds {
        entry: Box<Entry>,
        problem: Box<Problem>,
    },
    /// 422 `hold_not_open`, a stored rejection.
    #[error("{problem}")]
    HoldNotOpen {
        entry: Box<Entry>,
        problem: Box<Problem>,
    },
    /// 422 `hold_expired`, a stored rejection: capture after `expires_at`.
    #[error("{problem}")]
    HoldExpired {
        entry: Box<Entry>,
        problem: Box<Problem>,
    },
    /// 422 `refund_exceeds_payment`, a stored rejection.
    #[error("{problem}")]
    RefundExceedsPayment {
        entry: Box<Entry>,
        problem: Box<Problem>,
    },
    /// 422 `already_reversed`, a stored rejection.
    #[error("{problem}")]
    AlreadyReversed {
        entry: Box<Entry>,
        problem: Box<Problem>,
    },
    /// 422 `total_out_of_range`, a stored rejection: only the replay of an
    /// entry an earlier server version rejected (totals no longer have a
    /// digit limit).
    #[error("{problem}")]
    TotalOutOfRange {
        entry: Box<Entry>,
        problem: Box<Problem>,
    },
    /// 404 `not_found`: unknown (or another tenant's) object; `field` names
    /// the request field of a referenced hold, payment or entry.
    #[error("{problem}")]
    NotFound {
        field: Option<String>,
        problem: Box<Problem>,
    },
    /// 409 `intent_in_progress`: another claim of the intent holds a live
    /// lease (its `fence`) for `retry_after` more.
    #[error("{problem}")]
    IntentInProgress {
        retry_after: Duration,
        fence: i64,
        problem: Box<Problem>,
    },
    /// 409 `lease_lost`: the token is not the intent's current claim's (or
    /// its outcome is another call's). Nothing changed.
    #[error("{problem}")]
    LeaseLost { problem: Box<Problem> },
    /// 401 `unauthenticated`: no or unknown key.
    #[error("{problem}")]
    Unauthenticated { problem: Box<Problem> },
    /// 403 `forbidden`: the key lacks the scope.
    #[error("{problem}")]
    Forbidden { problem: Box<Problem> },
    /// 400 `malformed_json`.
    #[error("{problem}")]
    MalformedJson { problem: Box<Problem> },
    /// 413 `payload_too_large`.
    #[error("{problem}")]
    PayloadTooLarge { problem: Box<Problem> },
    /// 429 `rate_limited` (a key over its rate, or a full writer queue).
    #[error("{problem}{}", fmt_retry_after(*.retry_after))]
    RateLimited {
        retry_after: Option<Duration>,
        problem: Box<Problem>,
    },
    /// 503 `unavailable`, or any 5xx other than 500 (a proxy's 502 too).
    #[error("{problem}{}", fmt_retry_after(*.retry_after))]
    Unavailable {
        status: u16,
        retry_after: Option<Duration>,
        problem: Box<Problem>,
    },
    /// 500 `internal`: a bug on the server (retried like every 5xx).
    #[error("{problem}")]
    Internal { problem: Box<Problem> },
    /// Any other final answer (`method_not_allowed`,
    /// `unsupported_media_type`, a code newer than this client).
    #[error("{problem}")]
    Api { status: u16, problem: Box<Problem> },
    /// No answer: connection refused or reset, TLS failed, or the request
    /// timed out. The server may or may not have committed; a retry with the
    /// same ID is safe.
    #[error("no answer from tally ({}): {message}", if *.timeout { "timed out" } else { "connection failed" })]
    Transport { message: String, timeout: bool },
    /// The retry policy gave up.
    #[error("gave up after {attempts} attempt(s) in {:.1} s; last error: {last}", .elapsed.as_secs_f64())]
    Exhausted {
        attempts: u32,
        elapsed: Duration,
        last: Box<ClientError>,
    },
    /// A 2xx body this client could not read.
    #[error("unexpected response body: {0}")]
    Decode(String),
    /// The client could not be built (e.g. a root certificate is not PEM).
    #[error("client configuration: {0}")]
    Config(String),
}

fn fmt_retry_after(d: Option<Duration>) -> String {
    d.map(|d| format!(" (Retry-After {} s)", d.as_secs()))
        .unwrap_or_default()
}

impl ClientError {
    pub(crate) fn from_answer(status: u16, retry_after: Option<Duration>, body: &[u8]) -> Self {
        ClientError::from_problem(status, retry_after, Problem::parse(status, body))
    }

    /// The typed error of a problem answered with `status`.
    pub(crate) fn from_problem(
        status: u16,
        retry_after: Option<Duration>,
        mut problem: Problem,
    ) -> Self {
        problem.status = status;
        if classify(status) == Classification::Retry {
            let problem = Box::new(problem);
            return match status {
                429 => ClientError::RateLimited {
                    retry_after,
                    problem,
                },
                500 => ClientError::Internal { problem },
                _ => ClientError::Unavailable {
                    status,
                    retry_after,
                    problem,
                },
            };
        }
        let rejected = problem
            .entry
            .clone()
            .filter(|e| e.status == EntryStatus::Rejected);
        let code = problem.code.clone();
        let p = Box::new(problem);
        match (code.as_str(), rejected) {
            ("idempotency_conflict", _) => ClientError::IdempotencyConflict {
                entry_id: p.entry_id.clone().unwrap_or_default(),
                differing_fields: p.differing_fields.clone(),
                problem: p,
            },
            ("invalid_request", _) => ClientError::InvalidRequest {
                errors: p.errors.clone(),
                problem: p,
            },
            ("unit_mismatch", _) => ClientError::UnitMismatch {
                account: p.account.clone().unwrap_or_default(),
                unit: p.unit.clone().unwrap_or_default(),
                problem: p,
            },
            ("not_found", _) => ClientError::NotFound {
                field: p.field.clone(),
                problem: p,
            },
            ("intent_in_progress", _) => ClientError::IntentInProgress {
                retry_after: retry_after.unwrap_or_else(|| {
                    Duration::from_secs(p.retry_after_seconds.unwrap_or(1).max(1))
                }),
                fence: p.fence.unwrap_or_default(),
                problem: p,
            },
            ("lease_lost", _) => ClientError::LeaseLost { problem: p },
            ("unauthenticated", _) => ClientError::Unauthenticated { problem: p },
            ("forbidden", _) => ClientError::Forbidden { problem: p },
            ("malformed_json", _) => ClientError::MalformedJson { problem: p },
            ("payload_too_large", _) => ClientError::PayloadTooLarge { problem: p },
            (code, Some(entry)) => stored_rejection(code, entry, p),
            _ => ClientError::Api { status, problem: p },
        }
    }

    pub(crate) fn from_reqwest(e: reqwest::Error) -> Self {
        // The source chain says why (refused, reset, certificate unknown).
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        ClientError::Transport {
            message,
            timeout: e.is_timeout(),
        }
    }

    /// Whether a retry of the same request may succeed: connection errors,
    /// timeouts, 429 and 5xx.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ClientError::RateLimited { .. }
                | ClientError::Unavailable { .. }
                | ClientError::Internal { .. }
                | ClientError::Transport { .. }
        )
    }

    pub(crate) fn retry_after(&self) -> Option<Duration> {
        match self {
            ClientError::RateLimited { retry_after, .. }
            | ClientError::Unavailable { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The problem body of an answer (of the last attempt, once exhausted).
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            ClientError::IdempotencyConflict { problem, .. }
            | ClientError::InvalidRequest { problem, .. }
            | ClientError::UnitMismatch { problem, .. }
            | ClientError::InsufficientFunds { problem, .. }
            | ClientError::HoldNotOpen { problem, .. }
            | ClientError::HoldExpired { problem, .. }
            | ClientError::RefundExceedsPayment { problem, .. }
            | ClientError::AlreadyReversed { problem, .. }
            | ClientError::TotalOutOfRange { problem, .. }
            | ClientError::NotFound { problem, .. }
            | ClientError::IntentInProgress { problem, .. }
            | ClientError::LeaseLost { problem }
            | ClientError::Unauthenticated { problem }
            | ClientError::Forbidden { problem }
            | ClientError::MalformedJson { problem }
            | ClientError::PayloadTooLarge { problem }
            | ClientError::RateLimited { problem, .. }
            | ClientError::Unavailable { problem, .. }
            | ClientError::Internal { problem }
            | ClientError::Api { problem, .. } => Some(problem),
            ClientError::Exhausted { last, .. } => last.problem(),
            ClientError::Transport { .. } | ClientError::Decode(_) | ClientError::Config(_) => None,
        }
    }

    /// The problem `code` (e.g. `idempotency_conflict`); `None` without an
    /// answer, or when the body was not a problem.
    pub fn code(&self) -> Option<&str> {
        self.problem()
            .map(|p| p.code.as_str())
            .filter(|c| !c.is_empty())
    }

    /// The HTTP status of the answer.
    pub fn status(&self) -> Option<u16> {
        self.problem().map(|p| p.status)
    }

    /// The rejected entry of a stored rejection (the same on every replay).
    pub fn rejected_entry(&self) -> Option<&Entry> {
        match self {
            ClientError::InsufficientFunds { entry, .. }
            | ClientError::HoldNotOpen { entry, .. }
            | ClientError::HoldExpired { entry, .. }
            | ClientError::RefundExceedsPayment { entry, .. }
            | ClientError::AlreadyReversed { entry, .. }
            | ClientError::TotalOutOfRange { entry, .. } => Some(entry),
            ClientError::Exhausted { last, .. } => last.rejected_entry(),
            _ => None,
        }
    }
}

fn stored_rejection(code: &str, entry: Box<Entry>, problem: Box<Problem>) -> ClientError {
    match code {
        "insufficient_funds" => ClientError::InsufficientFunds { entry, problem },
        "hold_not_open" => ClientError::HoldNotOpen { entry, problem },
        "hold_expired" => ClientError::HoldExpired { entry, problem },
        "refund_exceeds_payment" => ClientError::RefundExceedsPayment { entry, problem },
        "already_reversed" => ClientError::AlreadyReversed { entry, problem },
        "total_out_of_range" => ClientError::TotalOutOfRange { entry, problem },
        // A rejection code newer than this client: the entry is in the
        // problem.
        _ => ClientError::Api {
            status: problem.status,
            problem,
        },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn problems_become_their_variants() {
        let body = br#"{"type":"/problems/idempotency_conflict","title":"Idempotency conflict","status":409,"detail":"d","code":"idempotency_conflict","entry_id":"ent_1","differing_fields":["amount","unit"]}"#;
        match ClientError::from_answer(409, None, body) {
            ClientError::IdempotencyConflict {
                entry_id,
                differing_fields,
                ..
            } => {
                assert_eq!(entry_id, "ent_1");
                assert_eq!(differing_fields, ["amount", "unit"]);
            }
            other => panic!("{other:?}"),
        }
        let body = br#"{"status":422,"code":"invalid_request","detail":"d","errors":[{"field":"amount","message":"m"}]}"#;
        let e = ClientError::from_answer(422, None, body);
        assert!(
            matches!(&e, ClientError::InvalidRequest { errors, .. } if errors[0].field == "amount")
        );
        assert_eq!((e.status(), e.code()), (Some(422), Some("invalid_request")));
        assert!(!e.is_retryable());
    }

    #[test]
    fn transient_answers_are_retryable_even_without_a_problem_body() {
        let e = ClientError::from_answer(
            502,
            Some(Duration::from_secs(2)),
            b"<html>bad gateway</html>",
        );
        assert!(
            matches!(e, ClientError::Unavailable { status: 502, .. }),
            "{e}"
        );
        assert!(e.is_retryable());
        assert_eq!(
            (e.code(), e.retry_after()),
            (None, Some(Duration::from_secs(2)))
        );
        let e = ClientError::from_answer(
            429,
            Some(Duration::from_secs(1)),
            br#"{"code":"rate_limited","status":429}"#,
        );
        assert!(matches!(e, ClientError::RateLimited { .. }) && e.is_retryable());
        let e =
            ClientError::from_answer(405, None, br#"{"code":"method_not_allowed","status":405}"#);
        assert!(matches!(e, ClientError::Api { status: 405, .. }) && !e.is_retryable());
    }
}
