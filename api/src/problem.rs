//! Every error and stored outcome of the API as RFC 9457 problem+json, with
//! the stable `code` of SPEC §3. Nothing else in the crate picks a status.
//!
//! A leaf: it maps, it does not count. An answer that is an internal error
//! says so ([`Answer::internal_cause`], and the [`InternalError`] extension
//! of its response), and the layers that record metrics read that.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use tally_ledger::decide::{Decision, IntentAnswer, Refusal};
use tally_ledger::entry::{EntryStatus, EntryView, StoredEntry};
use tally_ledger::fields::ValidationErrors;
use tally_ledger::keys::Scope;
use tally_ledger::LedgerError;

/// Seconds a client should wait before retrying a 429 or 503.
const RETRY_AFTER_SECONDS: &str = "1";

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("malformed JSON: {0}")]
    MalformedJson(String),
    #[error("missing or unknown API key")]
    Unauthenticated,
    /// A Stripe delivery whose `Stripe-Signature` does not hold.
    #[error("{0}")]
    InvalidSignature(String),
    #[error("the API key lacks scope {0:?}")]
    Forbidden(Scope),
    #[error("not found")]
    NotFound,
    /// The router's fallback: no route has this path. Also `not_found`,
    /// but its detail tells it from an unknown object.
    #[error("no such route")]
    NoRoute,
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("request body is larger than the limit (1 MiB; 8 MiB for /v1/batch)")]
    PayloadTooLarge,
    #[error("invalid request: {0}")]
    Invalid(ValidationErrors),
    /// A JSON body declared in a charset other than UTF-8.
    #[error("unsupported media type: {0}")]
    UnsupportedMediaType(String),
    #[error("too many requests")]
    RateLimited,
    /// The API key is over its rate limit (`--rate-limit-per-second`); a
    /// token is there again after this many seconds (`Retry-After`).
    #[error("this API key is over its rate limit")]
    KeyRateLimited(u64),
    /// More requests in flight than `--max-in-flight`; nothing was done.
    #[error("the server is at its limit of {0} requests in flight")]
    Busy(usize),
    /// The request bodies in flight would take more than
    /// `--max-body-mib-in-flight` (bytes); nothing was done.
    #[error("the server is at its limit of {} MiB of request bodies in flight", .0 / (1024 * 1024))]
    BodyBudget(usize),
    /// This one body would take more than the whole body budget: it can
    /// never be served by this server.
    #[error("receiving and parsing this body would take {} KiB, more than the server's limit of {} KiB of request bodies in flight", .bytes / 1024, .budget / 1024)]
    TooCostly { bytes: usize, budget: usize },
    /// The request ran longer than `--request-timeout-ms`.
    #[error("the request took longer than {} ms", .0.as_millis())]
    TimedOut(std::time::Duration),
    /// `GET /readyz`: not ready, and why.
    #[error("not ready: {0}")]
    NotReady(String),
    #[error("unavailable: {0}")]
    Unavailable(String),
    #[error("internal error: {0}")]
    Internal(String),
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Ledger(LedgerError),
}

impl From<LedgerError> for ApiError {
    fn from(e: LedgerError) -> Self {
        match e {
            LedgerError::Invalid(v) => ApiError::Invalid(v),
            LedgerError::NotFound => ApiError::NotFound,
            LedgerError::Overloaded => ApiError::RateLimited,
            LedgerError::Unavailable(m) => ApiError::Unavailable(m),
            // Only a failure that goes away by itself is 503 + Retry-After:
            // a correct client retries that for ever. Anything else is a
            // 500 whose cause is logged and counted (see `problem`).
            e if e.is_transient() => ApiError::Unavailable(e.to_string()),
            other => ApiError::Ledger(other),
        }
    }
}

impl From<tally_webhooks::WebhookError> for ApiError {
    fn from(e: tally_webhooks::WebhookError) -> Self {
        match e {
            tally_webhooks::WebhookError::Invalid(v) => ApiError::Invalid(v),
            tally_webhooks::WebhookError::NotFound => ApiError::NotFound,
            tally_webhooks::WebhookError::Ledger(l) => l.into(),
        }
    }
}

/// A problem+json body under construction.
struct Problem {
    status: StatusCode,
    code: String,
    title: &'static str,
    detail: String,
    extra: Map<String, Value>,
}

impl Problem {
    fn new(
        status: StatusCode,
        code: impl Into<String>,
        title: &'static str,
        detail: String,
    ) -> Self {
        Self {
            status,
            code: code.into(),
            title,
            detail,
            extra: Map::new(),
        }
    }

    fn with(mut self, key: &str, value: Value) -> Self {
        self.extra.insert(key.to_owned(), value);
        self
    }

    fn answer(self) -> Answer {
        let (status, body) = self.parts();
        Answer::Problem {
            status,
            replayed: false,
            body,
            internal: None,
        }
    }

    fn parts(self) -> (StatusCode, Map<String, Value>) {
        let mut body = Map::new();
        body.insert("type".into(), json!(format!("/problems/{}", self.code)));
        body.insert("title".into(), json!(self.title));
        body.insert("status".into(), json!(self.status.as_u16()));
        body.insert("detail".into(), json!(self.detail));
        body.insert("code".into(), json!(self.code));
        body.extend(self.extra);
        (self.status, body)
    }
}

fn invalid(errors: &ValidationErrors) -> Problem {
    Problem::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_request",
        "Invalid request",
        errors.to_string(),
    )
    .with("errors", json!(errors.errors))
}

impl ApiError {
    fn problem(self) -> Problem {
        use StatusCode as S;
        let detail = self.to_string();
        match self {
            ApiError::MalformedJson(_) => {
                Problem::new(S::BAD_REQUEST, "malformed_json", "Malformed JSON", detail)
            }
            ApiError::Unauthenticated => Problem::new(
                S::UNAUTHORIZED,
                "unauthenticated",
                "Unauthenticated",
                "send Authorization: Bearer <key> with a valid API key".into(),
            ),
            ApiError::InvalidSignature(_) => Problem::new(
                S::BAD_REQUEST,
                "invalid_signature",
                "Invalid signature",
                detail,
            ),
            ApiError::Forbidden(_) => Problem::new(S::FORBIDDEN, "forbidden", "Forbidden", detail),
            ApiError::NotFound | ApiError::NoRoute => {
                Problem::new(S::NOT_FOUND, "not_found", "Not found", detail)
            }
            ApiError::MethodNotAllowed => Problem::new(
                S::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "Method not allowed",
                detail,
            ),
            ApiError::PayloadTooLarge => Problem::new(
                S::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "Payload too large",
                detail,
            ),
            ApiError::Invalid(errors) => invalid(&errors),
            ApiError::UnsupportedMediaType(why) => Problem::new(
                S::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "Unsupported media type",
                why,
            ),
            ApiError::RateLimited => Problem::new(
                S::TOO_MANY_REQUESTS,
                "rate_limited",
                "Too many requests",
                "the ledger is busy; retry the same request after Retry-After seconds".into(),
            ),
            ApiError::KeyRateLimited(_) => Problem::new(
                S::TOO_MANY_REQUESTS,
                "rate_limited",
                "Too many requests",
                "this API key sent more requests than its rate limit allows; \
                 retry the same request after Retry-After seconds"
                    .into(),
            ),
            ApiError::Busy(_) => Problem::new(
                S::SERVICE_UNAVAILABLE,
                "unavailable",
                "Service unavailable",
                format!("{detail}; nothing was done, retry the same request"),
            ),
            ApiError::BodyBudget(_) => Problem::new(
                S::SERVICE_UNAVAILABLE,
                "unavailable",
                "Service unavailable",
                format!("{detail}; nothing was done, retry the same request"),
            ),
            ApiError::TooCostly { .. } => Problem::new(
                S::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "Payload too large",
                detail,
            ),
            ApiError::TimedOut(_) => Problem::new(
                S::SERVICE_UNAVAILABLE,
                "unavailable",
                "Service unavailable",
                format!(
                    "{detail}; a mutation may still be committed: retry it with the same \
                     upstream ID, and a committed one answers as a replay"
                ),
            ),
            ApiError::NotReady(_) => Problem::new(
                S::SERVICE_UNAVAILABLE,
                "unavailable",
                "Service unavailable",
                detail,
            ),
            ApiError::Ledger(e) if e.is_transient() => {
                ApiError::Unavailable(e.to_string()).problem()
            }
            ApiError::Unavailable(cause) => {
                tracing::warn!(%cause, "answering 503");
                Problem::new(
                    S::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "Service unavailable",
                    "the database is unavailable; nothing was committed, retry the same request"
                        .into(),
                )
            }
            ApiError::Internal(_) | ApiError::Io(_) | ApiError::Ledger(_) => {
                // Logged inside the request's span (its request ID); the
                // detail is the error alone, never a header or the body.
                let cause = self.cause_label();
                tracing::error!(cause, error = %detail, "internal error");
                Problem::new(
                    S::INTERNAL_SERVER_ERROR,
                    "internal",
                    "Internal error",
                    "an internal error occurred".into(),
                )
            }
        }
    }

    /// The cause class of a 500, for logs and `tally_internal_errors_total`.
    pub fn cause_label(&self) -> &'static str {
        match self {
            ApiError::Ledger(e) => e.cause().label(),
            ApiError::Io(_) => "io",
            _ => "internal",
        }
    }

    /// Whether this error answers 500, and its cause class if so.
    fn internal_cause(&self) -> Option<&'static str> {
        match self {
            ApiError::Internal(_) | ApiError::Io(_) => Some(self.cause_label()),
            ApiError::Ledger(e) if !e.is_transient() => Some(self.cause_label()),
            _ => None,
        }
    }

    /// The answer this error gives, for embedding in a batch result.
    pub fn answer(self) -> Answer {
        let internal = self.internal_cause();
        let (status, body) = self.problem().parts();
        Answer::Problem {
            status,
            replayed: false,
            body,
            internal,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let retry_after = match &self {
            ApiError::KeyRateLimited(seconds) => Some(*seconds),
            _ => None,
        };
        let mut response = self.answer().into_response();
        // A 429 of the rate limiter says when its bucket has a token again.
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// What one entry request (or one failed request) answers: an entry or a problem,
/// with its status and whether it is a replay. The single endpoints send it
/// as the HTTP response; the batch endpoint embeds it as one result.
#[derive(Debug, Clone)]
pub enum Answer {
    Entry {
        status: StatusCode,
        replayed: bool,
        entry: Box<EntryView>,
    },
    Problem {
        status: StatusCode,
        replayed: bool,
        body: Map<String, Value>,
        /// The cause class when this is a 500 (`internal`), for
        /// `tally_internal_errors_total`.
        internal: Option<&'static str>,
    },
}

/// The response extension of a 500: its cause class, which the metrics
/// layer counts (`crate::server` installs it).
#[derive(Debug, Clone, Copy)]
pub struct InternalError(pub &'static str);

impl Answer {
    pub fn status(&self) -> StatusCode {
        match self {
            Answer::Entry { status, .. } | Answer::Problem { status, .. } => *status,
        }
    }

    pub fn replayed(&self) -> bool {
        match self {
            Answer::Entry { replayed, .. } | Answer::Problem { replayed, .. } => *replayed,
        }
    }

    /// The cause class of an internal error (a 500), if this is one.
    pub fn internal_cause(&self) -> Option<&'static str> {
        match self {
            Answer::Problem { internal, .. } => *internal,
            Answer::Entry { .. } => None,
        }
    }
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let replayed = self.replayed();
        let status = self.status();
        let internal = self.internal_cause();
        // Serialising strings, numbers and maps cannot fail.
        let (content_type, bytes) = match &self {
            Answer::Entry { entry, .. } => (
                "application/json",
                serde_json::to_vec(entry).unwrap_or_default(),
            ),
            Answer::Problem { body, .. } => (
                "application/problem+json",
                serde_json::to_vec(body).unwrap_or_default(),
            ),
        };
        let mut response = (status, bytes).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        if matches!(
            status,
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
        ) {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(RETRY_AFTER_SECONDS),
            );
        }
        if replayed {
            headers.insert("Idempotent-Replayed", HeaderValue::from_static("true"));
        }
        if let Some(cause) = internal {
            response.extensions_mut().insert(InternalError(cause));
        }
        response
    }
}

/// The answer to a decided entry request: 201 for a new posted entry, 200 with
/// `Idempotent-Replayed: true` for a replay, 422 with the stored entry for a
/// stored rejection (on replay too), 409 for a conflict. Not counted here:
/// the handlers answer through `crate::routes::answer`, which counts.
pub fn decision_answer(decision: Decision) -> Answer {
    match decision {
        Decision::Created(entry) => entry_answer(&entry, false),
        Decision::Replayed(entry) => entry_answer(&entry, true),
        Decision::Conflict {
            entry_id,
            differing_fields,
        } => Problem::new(
            StatusCode::CONFLICT,
            "idempotency_conflict",
            "Idempotency conflict",
            format!(
                "this upstream ID already names entry {entry_id} with other parameters ({}); \
                 a new request needs a new ID",
                differing_fields.join(", ")
            ),
        )
        .with("entry_id", json!(entry_id))
        .with("differing_fields", json!(differing_fields))
        .answer(),
        Decision::Refused(Refusal::UnitMismatch {
            field,
            account,
            existing_unit,
        }) => {
            let message = format!("account {account:?} is in {existing_unit}");
            Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "unit_mismatch",
                "Unit mismatch",
                message.clone(),
            )
            .with("account", json!(account))
            .with("unit", json!(existing_unit))
            .with(
                "errors",
                json!([{"field": "unit", "message": message}, {"field": field, "message": "is in another unit"}]),
            )
            .answer()
        }
        Decision::Refused(Refusal::NotFound { field, id }) => Problem::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "Not found",
            format!("{field} {id:?} names nothing in this ledger"),
        )
        .with("field", json!(field))
        .answer(),
        Decision::Refused(Refusal::Invalid { field, message }) => {
            invalid(&ValidationErrors::single(field, message)).answer()
        }
        Decision::Refused(Refusal::HoldAlreadyClosed) => Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "hold_not_open",
            "Hold not open",
            "the hold was already captured or released".into(),
        )
        .answer(),
        Decision::Refused(Refusal::Withheld) => lease_lost_problem(None).answer(),
        Decision::Unchanged(_) => {
            ApiError::Internal("a settings decision reached a money endpoint".into()).answer()
        }
        Decision::Intent(_) => {
            ApiError::Internal("an intent's decision reached an entry endpoint".into()).answer()
        }
    }
}

fn lease_lost_problem(intent_id: Option<&str>) -> Problem {
    let problem = Problem::new(
        StatusCode::CONFLICT,
        "lease_lost",
        "Lease lost",
        "this token is not the intent's current claim (its lease ran out and another claim \
         took the intent, or the intent's outcome was stored by another call); nothing changed"
            .into(),
    );
    match intent_id {
        Some(id) => problem.with("intent_id", json!(id)),
        None => problem,
    }
}

/// The problem of an operation on an intent that changed nothing, or
/// `None` when the operation has an intent to answer with.
pub fn intent_problem(intent_id: &str, answer: &IntentAnswer) -> Option<Response> {
    let problem = match answer {
        IntentAnswer::Claimed { .. }
        | IntentAnswer::Replayed { .. }
        | IntentAnswer::Applied { .. } => return None,
        IntentAnswer::InProgress {
            retry_after_seconds,
            fence,
        } => {
            let mut response = Problem::new(
                StatusCode::CONFLICT,
                "intent_in_progress",
                "Intent in progress",
                format!(
                    "another claim (fence {fence}) holds a live lease on this intent; \
                     try again in {retry_after_seconds} s"
                ),
            )
            .with("intent_id", json!(intent_id))
            .with("retry_after_seconds", json!(retry_after_seconds))
            .with("fence", json!(fence))
            .answer()
            .into_response();
            if let Ok(v) = HeaderValue::from_str(&retry_after_seconds.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, v);
            }
            return Some(response);
        }
        IntentAnswer::LeaseLost => lease_lost_problem(Some(intent_id)),
        IntentAnswer::Conflict { differing_fields } => Problem::new(
            StatusCode::CONFLICT,
            "idempotency_conflict",
            "Idempotency conflict",
            format!(
                "intent {intent_id:?} was claimed with another action or other params ({}); \
                 a new intent needs a new ID",
                differing_fields.join(", ")
            ),
        )
        .with("intent_id", json!(intent_id))
        .with("differing_fields", json!(differing_fields)),
        IntentAnswer::NotFound => Problem::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "Not found",
            format!("no intent {intent_id:?} was ever claimed"),
        ),
    };
    Some(problem.answer().into_response())
}

fn entry_answer(entry: &StoredEntry, replayed: bool) -> Answer {
    let view = entry.view();
    match entry.status {
        EntryStatus::Posted => Answer::Entry {
            status: if replayed {
                StatusCode::OK
            } else {
                StatusCode::CREATED
            },
            replayed,
            entry: Box::new(view),
        },
        EntryStatus::Rejected => {
            // The stored rejection code is the problem's code (e.g. insufficient_funds).
            let code = entry
                .rejection_code
                .clone()
                .unwrap_or_else(|| "rejected".to_owned());
            let (status, body) = Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                code,
                "Rejected by a ledger rule",
                entry.rejection_message.clone().unwrap_or_default(),
            )
            .with("entry", json!(view))
            .parts();
            Answer::Problem {
                status,
                replayed,
                body,
                internal: None,
            }
        }
    }
}
