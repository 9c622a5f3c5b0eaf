//! The four operations on an intent, parsed from their request bodies
//! (parse, don't validate: what the writer receives is already typed).

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::record::IntentError;
use crate::fields::{Fields, ValidationErrors};
use crate::fingerprint::{canonical_params, Fingerprint};
use crate::hex_text::lower_hex;
use crate::names;

pub const MAX_INTENT_ID_BYTES: usize = 255;

/// The fields each request body may carry; any other is refused with "is
/// not a known field" (tests/openapi.rs holds the request schemas to these).
pub mod fields {
    /// `POST /v1/intents`.
    pub const CLAIM: &[&str] = &[
        "intent_id",
        "action",
        "params",
        "lease_seconds",
        "max_attempts",
    ];
    /// `POST /v1/intents/{intent_id}/complete`.
    pub const COMPLETE: &[&str] = &["token", "result", "entries"];
    /// `POST /v1/intents/{intent_id}/fail`.
    pub const FAIL: &[&str] = &["token", "error", "retryable"];
    /// `POST /v1/intents/{intent_id}/heartbeat`.
    pub const HEARTBEAT: &[&str] = &["token", "lease_seconds"];
}
const MAX_ACTION_BYTES: usize = 128;
/// `params` of a claim and `result` of a completion, as compact JSON.
const MAX_JSON_BYTES: usize = 64 * 1024;
const MAX_ERROR_CODE_BYTES: usize = 128;
const MAX_ERROR_MESSAGE_BYTES: usize = 4 * 1024;
pub const DEFAULT_LEASE_SECONDS: i64 = 60;
pub const MAX_LEASE_SECONDS: i64 = 3_600;
pub const DEFAULT_MAX_ATTEMPTS: i64 = 5;
pub const MAX_ATTEMPTS: i64 = 100;

/// The secret naming one claim. Only its SHA-256 is stored; the secret
/// goes to the claimer alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseToken {
    pub secret: String,
    pub sha256: String,
}

impl LeaseToken {
    /// A new token: 32 bytes from the operating system's generator.
    pub fn generate() -> Result<Self, getrandom::Error> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)?;
        let secret = format!("lease_{}", lower_hex(&bytes));
        Ok(Self {
            sha256: Self::digest(&secret),
            secret,
        })
    }

    /// The stored form of a token a worker sends back.
    pub fn digest(secret: &str) -> String {
        lower_hex(&Sha256::digest(secret.as_bytes()))
    }
}

#[derive(Debug, Clone)]
pub struct ClaimOp {
    pub intent_id: String,
    pub action: String,
    pub params: Map<String, Value>,
    /// `params` as canonical JSON text.
    pub params_text: String,
    pub lease_seconds: i64,
    pub max_attempts: i64,
    pub token: LeaseToken,
}

#[derive(Debug, Clone)]
pub struct CompleteOp {
    pub intent_id: String,
    pub token_sha256: String,
    pub result: Value,
    /// How many ledger entries follow this operation in its job: decided
    /// after the outcome, and only if the outcome is stored (or replayed).
    pub entries: usize,
    /// The fingerprint of the whole call, so the same call replayed is
    /// answered as before and any other is refused.
    pub call: String,
}

#[derive(Debug, Clone)]
pub struct FailOp {
    pub intent_id: String,
    pub token_sha256: String,
    pub error: IntentError,
    pub retryable: bool,
    pub call: String,
}

#[derive(Debug, Clone)]
pub struct HeartbeatOp {
    pub intent_id: String,
    pub token_sha256: String,
    pub lease_seconds: i64,
}

/// An operation on an intent, as the tenant's writer decides it.
#[derive(Debug, Clone)]
pub enum IntentOp {
    Claim(ClaimOp),
    Complete(CompleteOp),
    Fail(FailOp),
    Heartbeat(HeartbeatOp),
}

impl IntentOp {
    pub fn intent_id(&self) -> &str {
        match self {
            IntentOp::Claim(c) => &c.intent_id,
            IntentOp::Complete(c) => &c.intent_id,
            IntentOp::Fail(f) => &f.intent_id,
            IntentOp::Heartbeat(h) => &h.intent_id,
        }
    }

    /// The ledger entries that follow this operation in its job.
    pub fn gated_entries(&self) -> usize {
        match self {
            IntentOp::Complete(c) => c.entries,
            _ => 0,
        }
    }
}

pub fn check_intent_id(value: &str) -> Result<(), String> {
    if value.len() > MAX_INTENT_ID_BYTES {
        return Err(format!("must be at most {MAX_INTENT_ID_BYTES} bytes"));
    }
    names::check_upstream_id(value)
}

fn check_action(value: &str) -> Result<(), String> {
    if value.len() > MAX_ACTION_BYTES {
        return Err(format!("must be at most {MAX_ACTION_BYTES} bytes"));
    }
    names::check_upstream_id(value)
}

fn json_size(v: &Value) -> usize {
    serde_json::to_string(v).map_or(usize::MAX, |s| s.len())
}

fn token(f: &mut Fields) -> Option<String> {
    f.required_str("token", |t| {
        if t.is_empty() || t.len() > 256 {
            Err("must be the token of a claim".to_owned())
        } else {
            Ok(())
        }
    })
    .map(|t| LeaseToken::digest(&t))
}

fn lease_seconds(f: &mut Fields) -> Option<i64> {
    f.optional_int("lease_seconds", 1, MAX_LEASE_SECONDS)
        .map(|s| s.unwrap_or(DEFAULT_LEASE_SECONDS))
}

fn call_of(body: &Map<String, Value>) -> String {
    Fingerprint::of_canonical(&canonical_params(body)).text()
}

impl ClaimOp {
    /// `POST /v1/intents`.
    pub fn parse(body: Map<String, Value>, token: LeaseToken) -> Result<Self, ValidationErrors> {
        let mut f = Fields::new(body, fields::CLAIM);
        let intent_id = f.required_str("intent_id", check_intent_id);
        let action = f.required_str("action", check_action);
        let params = match f.optional_value("params") {
            None => Some(Map::new()),
            Some(Value::Object(m)) if json_size(&Value::Object(m.clone())) <= MAX_JSON_BYTES => {
                Some(m)
            }
            Some(Value::Object(_)) => {
                f.error(
                    "params",
                    format!("must be at most {MAX_JSON_BYTES} bytes of JSON"),
                );
                None
            }
            Some(_) => {
                f.error("params", "must be an object");
                None
            }
        };
        let lease_seconds = lease_seconds(&mut f);
        let max_attempts = f
            .optional_int("max_attempts", 1, MAX_ATTEMPTS)
            .map(|m| m.unwrap_or(DEFAULT_MAX_ATTEMPTS));
        f.finish()?;
        let (Some(intent_id), Some(action), Some(params), Some(lease_seconds), Some(max_attempts)) =
            (intent_id, action, params, lease_seconds, max_attempts)
        else {
            return Err(ValidationErrors::single("body", "is invalid"));
        };
        Ok(ClaimOp {
            params_text: canonical_params(&params),
            intent_id,
            action,
            params,
            lease_seconds,
            max_attempts,
            token,
        })
    }
}

impl CompleteOp {
    /// `POST /v1/intents/{id}/complete`; `entries` are parsed by the caller
    /// (they are `/v1/batch` operations), counted here.
    pub fn parse(
        intent_id: &str,
        body: Map<String, Value>,
        entries: usize,
    ) -> Result<Self, ValidationErrors> {
        let call = call_of(&body);
        let mut f = Fields::new(body, fields::COMPLETE);
        let _ = f.optional_value("entries");
        let token = token(&mut f);
        let result = match f.optional_value("result") {
            None => Some(Value::Null),
            Some(v) if json_size(&v) <= MAX_JSON_BYTES => Some(v),
            Some(_) => {
                f.error(
                    "result",
                    format!("must be at most {MAX_JSON_BYTES} bytes of JSON"),
                );
                None
            }
        };
        f.finish()?;
        let (Some(token_sha256), Some(result)) = (token, result) else {
            return Err(ValidationErrors::single("body", "is invalid"));
        };
        Ok(CompleteOp {
            intent_id: intent_id.to_owned(),
            token_sha256,
            result,
            entries,
            call,
        })
    }
}

impl FailOp {
    /// `POST /v1/intents/{id}/fail`.
    pub fn parse(intent_id: &str, body: Map<String, Value>) -> Result<Self, ValidationErrors> {
        let call = call_of(&body);
        let mut f = Fields::new(body, fields::FAIL);
        let token = token(&mut f);
        let error = match f.optional_value("error") {
            Some(Value::Object(m)) => {
                let code = m
                    .get("code")
                    .and_then(Value::as_str)
                    .filter(|c| !c.is_empty() && c.len() <= MAX_ERROR_CODE_BYTES);
                let message = m
                    .get("message")
                    .and_then(Value::as_str)
                    .filter(|t| t.len() <= MAX_ERROR_MESSAGE_BYTES);
                match (code, message, m.len()) {
                    (Some(code), Some(message), 2) => Some(IntentError {
                        code: code.to_owned(),
                        message: message.to_owned(),
                    }),
                    _ => {
                        f.error(
                            "error",
                            format!(
                                "must be {{\"code\": <1-{MAX_ERROR_CODE_BYTES} bytes>, \
                                 \"message\": <at most {MAX_ERROR_MESSAGE_BYTES} bytes>}}"
                            ),
                        );
                        None
                    }
                }
            }
            Some(_) => {
                f.error("error", "must be an object with code and message");
                None
            }
            None => {
                f.error("error", "is required");
                None
            }
        };
        let retryable = match f.optional_value("retryable") {
            None => Some(false),
            Some(Value::Bool(b)) => Some(b),
            Some(_) => {
                f.error("retryable", "must be true or false");
                None
            }
        };
        f.finish()?;
        let (Some(token_sha256), Some(error), Some(retryable)) = (token, error, retryable) else {
            return Err(ValidationErrors::single("body", "is invalid"));
        };
        Ok(FailOp {
            intent_id: intent_id.to_owned(),
            token_sha256,
            error,
            retryable,
            call,
        })
    }
}

impl HeartbeatOp {
    /// `POST /v1/intents/{id}/heartbeat`.
    pub fn parse(intent_id: &str, body: Map<String, Value>) -> Result<Self, ValidationErrors> {
        let mut f = Fields::new(body, fields::HEARTBEAT);
        let token = token(&mut f);
        let lease_seconds = lease_seconds(&mut f);
        f.finish()?;
        let (Some(token_sha256), Some(lease_seconds)) = (token, lease_seconds) else {
            return Err(ValidationErrors::single("body", "is invalid"));
        };
        Ok(HeartbeatOp {
            intent_id: intent_id.to_owned(),
            token_sha256,
            lease_seconds,
        })
    }
}
