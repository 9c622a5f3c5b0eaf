//! Intents (docs/intents.md): the six operations, and [`Client::once`],
//! which runs a costly step at most once across retries, crashes and
//! concurrent workers.

use std::future::Future;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::model::{BatchResult, Operation};
use crate::query::encode;
use crate::{Client, ClientError, Method};

/// `POST /v1/intents`.
#[derive(Debug, Clone, Serialize)]
pub struct ClaimIntent {
    pub intent_id: String,
    pub action: String,
    pub params: serde_json::Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_seconds: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
}

impl ClaimIntent {
    /// `params` must be a JSON object (anything else is sent as `{}`).
    pub fn new(intent_id: impl Into<String>, action: impl Into<String>, params: Value) -> Self {
        ClaimIntent {
            intent_id: intent_id.into(),
            action: action.into(),
            params: match params {
                Value::Object(m) => m,
                _ => serde_json::Map::new(),
            },
            lease_seconds: None,
            max_attempts: None,
        }
    }
}

/// A claim's lease: its token is shown once, to the claimer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IntentLease {
    pub token: String,
    pub fence: i64,
    pub expires_at: String,
}

/// `error` of a failed or released intent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntentError {
    pub code: String,
    pub message: String,
}

/// One logged change of an intent.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IntentChange {
    #[serde(rename = "type")]
    pub change: String,
    pub fence: Option<i64>,
    pub attempt: Option<i64>,
    pub at: String,
    pub seq: i64,
    pub entry_id: String,
}

/// An intent as the server shows it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Intent {
    pub intent_id: String,
    pub action: String,
    pub params: Value,
    /// `claimed`, `released`, `succeeded` or `failed`.
    pub status: String,
    pub attempt: i64,
    pub max_attempts: i64,
    pub fence: i64,
    pub lease_expires_at: Option<String>,
    #[serde(default)]
    pub lease: Option<IntentLease>,
    #[serde(default)]
    pub result: Option<Value>,
    #[serde(default)]
    pub error: Option<IntentError>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default)]
    pub history: Option<Vec<IntentChange>>,
}

/// What a claim came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// A new lease: do the work, then complete or fail.
    Claimed { intent: Intent, lease: IntentLease },
    /// The outcome is stored: the answer for ever (`Idempotent-Replayed`).
    Finished(Intent),
}

/// `POST /v1/intents/{intent_id}/complete`'s answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct IntentCompletion {
    #[serde(flatten)]
    pub intent: Intent,
    /// One answer per entry sent, as a batch gives it.
    pub entries: Vec<BatchResult>,
}

/// `GET /v1/intents`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct IntentPage {
    pub intents: Vec<Intent>,
    pub next_after: Option<String>,
}

/// Filters of [`Client::list_intents`].
#[derive(Debug, Clone, Default)]
pub struct IntentQuery {
    pub status: Option<String>,
    pub action: Option<String>,
    pub after: Option<String>,
    pub limit: Option<u32>,
}

fn path(intent_id: &str, op: &str) -> String {
    format!("/v1/intents/{}/{op}", encode(intent_id))
}

fn decode<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ClientError> {
    serde_json::from_slice(body).map_err(|e| ClientError::Decode(e.to_string()))
}

fn body(v: &Value) -> Result<Vec<u8>, ClientError> {
    serde_json::to_vec(v).map_err(|e| ClientError::Decode(e.to_string()))
}

impl Client {
    /// `POST /v1/intents`: a new lease, or the stored outcome. Another
    /// claim's live lease is [`ClientError::IntentInProgress`] (not retried
    /// here: [`Client::once`] waits it out).
    pub async fn claim_intent(&self, claim: &ClaimIntent) -> Result<Claim, ClientError> {
        let bytes = serde_json::to_vec(claim).map_err(|e| ClientError::Decode(e.to_string()))?;
        let answer = self.send(Method::Post, "/v1/intents", Some(bytes)).await?;
        let intent: Intent = decode(&answer.body)?;
        match (answer.status, intent.lease.clone()) {
            (201, Some(lease)) => Ok(Claim::Claimed { intent, lease }),
            _ => Ok(Claim::Finished(intent)),
        }
    }

    /// `POST /v1/intents/{intent_id}/complete`: stores `result`, with
    /// `entries` committed in the same transaction. A lost answer is
    /// retried with the same body, which the server replays.
    pub async fn complete_intent(
        &self,
        intent_id: &str,
        token: &str,
        result: &Value,
        entries: &[Operation],
    ) -> Result<IntentCompletion, ClientError> {
        let mut v = json!({ "token": token, "result": result });
        if !entries.is_empty() {
            v["entries"] =
                serde_json::to_value(entries).map_err(|e| ClientError::Decode(e.to_string()))?;
        }
        let answer = self
            .send(Method::Post, &path(intent_id, "complete"), Some(body(&v)?))
            .await?;
        decode(&answer.body)
    }

    /// `POST /v1/intents/{intent_id}/fail`.
    pub async fn fail_intent(
        &self,
        intent_id: &str,
        token: &str,
        error: &IntentError,
        retryable: bool,
    ) -> Result<Intent, ClientError> {
        let v = json!({ "token": token, "error": error, "retryable": retryable });
        let answer = self
            .send(Method::Post, &path(intent_id, "fail"), Some(body(&v)?))
            .await?;
        decode(&answer.body)
    }

    /// `POST /v1/intents/{intent_id}/heartbeat`: the lease runs until now
    /// + `lease_seconds`.
    pub async fn heartbeat_intent(
        &self,
        intent_id: &str,
        token: &str,
        lease_seconds: u32,
    ) -> Result<Intent, ClientError> {
        let v = json!({ "token": token, "lease_seconds": lease_seconds });
        let answer = self
            .send(Method::Post, &path(intent_id, "heartbeat"), Some(body(&v)?))
            .await?;
        decode(&answer.body)
    }

    /// `GET /v1/intents/{intent_id}`, with its history.
    pub async fn get_intent(&self, intent_id: &str) -> Result<Intent, ClientError> {
        let answer = self
            .send(
                Method::Get,
                &format!("/v1/intents/{}", encode(intent_id)),
                None,
            )
            .await?;
        decode(&answer.body)
    }

    /// `GET /v1/intents`.
    pub async fn list_intents(&self, query: &IntentQuery) -> Result<IntentPage, ClientError> {
        let mut params = Vec::new();
        for (k, v) in [
            ("status", query.status.clone()),
            ("action", query.action.clone()),
            ("after", query.after.clone()),
            ("limit", query.limit.map(|l| l.to_string())),
        ] {
            if let Some(v) = v {
                params.push(format!("{k}={}", encode(&v)));
            }
        }
        let path = if params.is_empty() {
            "/v1/intents".to_owned()
        } else {
            format!("/v1/intents?{}", params.join("&"))
        };
        let answer = self.send(Method::Get, &path, None).await?;
        decode(&answer.body)
    }
}

/// What a step hands to [`Client::once`]: the result to store, and the
/// ledger entries to commit with it.
#[derive(Debug, Clone, Default)]
pub struct StepOutput {
    pub result: Value,
    pub entries: Vec<Operation>,
}

impl From<Value> for StepOutput {
    fn from(result: Value) -> Self {
        StepOutput {
            result,
            entries: Vec::new(),
        }
    }
}

/// A step's failure: `retryable` releases the lease for a later attempt;
/// otherwise the intent is stored `failed`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code}: {message}")]
pub struct StepError {
    pub code: String,
    pub message: String,
    pub retryable: bool,
}

impl StepError {
    pub fn retryable(code: impl Into<String>, message: impl Into<String>) -> Self {
        StepError {
            code: code.into(),
            message: message.into(),
            retryable: true,
        }
    }

    pub fn fatal(code: impl Into<String>, message: impl Into<String>) -> Self {
        StepError {
            retryable: false,
            ..StepError::retryable(code, message)
        }
    }
}

/// What a step is told of its claim: pass `intent_id` (or
/// `intent_id:fence`) downstream as the idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseInfo {
    pub intent_id: String,
    pub attempt: i64,
    pub fence: i64,
    pub token: String,
    pub expires_at: String,
}

/// Settings of [`Client::once`].
#[derive(Debug, Clone)]
pub struct OnceOptions {
    pub lease_seconds: u32,
    pub max_attempts: u32,
    /// How long to wait out other workers' live leases before giving up.
    pub wait_budget: Duration,
}

impl Default for OnceOptions {
    fn default() -> Self {
        OnceOptions {
            lease_seconds: 60,
            max_attempts: 5,
            wait_budget: Duration::from_secs(120),
        }
    }
}

/// What [`Client::once`] came to.
#[derive(Debug, Clone, PartialEq)]
pub struct OnceOutcome {
    /// The intent as stored (`succeeded` or `failed`), or `released` after
    /// a retryable failure of this call's step.
    pub intent: Intent,
    /// Whether the outcome was stored before this call (the step did not run).
    pub replayed: bool,
    /// The answers to the step's entries (empty on a replay).
    pub entries: Vec<BatchResult>,
}

/// Why [`Client::once`] did not come to an outcome.
#[derive(Debug, thiserror::Error)]
pub enum OnceError {
    /// The step failed; its failure is recorded (`released` or `failed`).
    #[error("the step failed: {error}")]
    Step {
        error: StepError,
        intent: Box<Intent>,
    },
    /// A call to tally failed (other workers' leases outlived the wait
    /// budget: [`ClientError::IntentInProgress`]).
    #[error(transparent)]
    Client(#[from] ClientError),
}

impl Client {
    /// Runs `step` at most once for `claim.intent_id`: claims the intent,
    /// returns a stored outcome without running anything, waits out another
    /// worker's live lease (within `options.wait_budget`), else runs the step
    /// with its lease (heartbeating every third of it while it runs), then
    /// completes with its output or fails with its error.
    pub async fn once<F, Fut>(
        &self,
        claim: &ClaimIntent,
        options: &OnceOptions,
        step: F,
    ) -> Result<OnceOutcome, OnceError>
    where
        F: FnOnce(LeaseInfo) -> Fut,
        Fut: Future<Output = Result<StepOutput, StepError>>,
    {
        let mut claim = claim.clone();
        claim.lease_seconds = Some(options.lease_seconds);
        claim.max_attempts = Some(options.max_attempts);
        let started = Instant::now();
        let (intent, lease) = loop {
            match self.claim_intent(&claim).await {
                Ok(Claim::Claimed { intent, lease }) => break (intent, lease),
                Ok(Claim::Finished(intent)) => {
                    return Ok(OnceOutcome {
                        intent,
                        replayed: true,
                        entries: Vec::new(),
                    })
                }
                Err(ClientError::IntentInProgress { retry_after, .. })
                    if started.elapsed() + retry_after <= options.wait_budget =>
                {
                    tokio::time::sleep(retry_after).await;
                }
                Err(e) => return Err(e.into()),
            }
        };
        let info = LeaseInfo {
            intent_id: intent.intent_id.clone(),
            attempt: intent.attempt,
            fence: lease.fence,
            token: lease.token.clone(),
            expires_at: lease.expires_at.clone(),
        };
        let beats =
            Heartbeats(self.heartbeats(&intent.intent_id, &lease.token, options.lease_seconds));
        let output = step(info).await;
        drop(beats);
        match output {
            Ok(out) => {
                let done = self
                    .complete_intent(&intent.intent_id, &lease.token, &out.result, &out.entries)
                    .await?;
                Ok(OnceOutcome {
                    intent: done.intent,
                    replayed: false,
                    entries: done.entries,
                })
            }
            Err(error) => {
                let recorded = IntentError {
                    code: error.code.clone(),
                    message: error.message.clone(),
                };
                let intent = self
                    .fail_intent(&intent.intent_id, &lease.token, &recorded, error.retryable)
                    .await?;
                Err(OnceError::Step {
                    error,
                    intent: Box::new(intent),
                })
            }
        }
    }

    /// Heartbeats every third of the lease until aborted (see [`Heartbeats`]).
    fn heartbeats(
        &self,
        intent_id: &str,
        token: &str,
        lease_seconds: u32,
    ) -> tokio::task::JoinHandle<()> {
        let (client, intent_id, token) = (self.clone(), intent_id.to_owned(), token.to_owned());
        let every = Duration::from_millis(u64::from(lease_seconds.max(1)) * 1000 / 3);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if let Err(e) = client
                    .heartbeat_intent(&intent_id, &token, lease_seconds)
                    .await
                {
                    // A lost lease ends the heartbeats; the step's finish
                    // will be told `lease_lost`.
                    if matches!(e, ClientError::LeaseLost { .. }) {
                        return;
                    }
                }
            }
        })
    }
}

/// The heartbeat task of a running step, stopped when dropped: when the
/// step ends, and also when the future of [`Client::once`] is dropped
/// mid-step (a cancelled or killed worker), so that its lease runs out and
/// another worker can take the intent over.
struct Heartbeats(tokio::task::JoinHandle<()>);

impl Drop for Heartbeats {
    fn drop(&mut self) {
        self.0.abort();
    }
}
