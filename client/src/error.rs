use std::time::Duration;

use serde_json::Value;

use crate::retry::{classify, Classification};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A final answer from the server (4xx other than 429): retrying the same
    /// request cannot change it. `problem` is the problem+json body (for a
    /// stored rejection it carries the rejected entry).
    #[error("tally answered {status} {code}: {detail}")]
    Api {
        status: u16,
        code: String,
        detail: String,
        problem: Value,
    },
    /// A transient answer (429, 5xx); retried until the policy gives up.
    #[error("tally answered {status} (retryable){}", .retry_after.map(|d| format!(", Retry-After {} s", d.as_secs())).unwrap_or_default())]
    Unavailable {
        status: u16,
        retry_after: Option<Duration>,
    },
    /// No answer: connection refused or reset, or the request timed out. The
    /// server may or may not have committed; a retry with the same ID is safe.
    #[error("no answer from tally ({}): {message}", if *.timeout { "timed out" } else { "connection failed" })]
    Transport { message: String, timeout: bool },
    /// The retry policy gave up.
    #[error("gave up after {attempts} attempt(s) in {:.1} s; last error: {last}", .elapsed.as_secs_f64())]
    Exhausted {
        attempts: u32,
        elapsed: Duration,
        last: Box<ClientError>,
    },
    #[error("unexpected response body: {0}")]
    Decode(String),
}

impl ClientError {
    pub(crate) fn from_answer(status: u16, retry_after: Option<Duration>, body: &[u8]) -> Self {
        match classify(status) {
            Classification::Retry => ClientError::Unavailable {
                status,
                retry_after,
            },
            Classification::Final => {
                let problem: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                let text = |k: &str| {
                    problem
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                };
                ClientError::Api {
                    status,
                    code: text("code"),
                    detail: text("detail"),
                    problem,
                }
            }
        }
    }

    pub(crate) fn from_reqwest(e: reqwest::Error) -> Self {
        ClientError::Transport {
            message: e.to_string(),
            timeout: e.is_timeout(),
        }
    }

    /// Whether a retry of the same request may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ClientError::Unavailable { .. } | ClientError::Transport { .. }
        )
    }

    pub(crate) fn retry_after(&self) -> Option<Duration> {
        match self {
            ClientError::Unavailable { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The problem `code` of a final API answer (e.g. `idempotency_conflict`).
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Api { code, .. } => Some(code),
            ClientError::Exhausted { last, .. } => last.code(),
            _ => None,
        }
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } | ClientError::Unavailable { status, .. } => {
                Some(*status)
            }
            ClientError::Exhausted { last, .. } => last.status(),
            _ => None,
        }
    }
}
