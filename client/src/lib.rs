//! `tally-client`: typed calls to a tally server that are safe to retry.
//!
//! Every mutating call takes the upstream system's stable ID as a required
//! argument and sends it unchanged on every attempt, so a retry after a
//! timeout is recognised by the server as the same request and answered with
//! the recorded result. Only failures that may be transient are retried
//! (connection errors, timeouts, 429, 5xx), with capped exponential backoff,
//! full jitter and `Retry-After`, within an attempt limit and a time budget;
//! 4xx answers (409 conflict, 422 validation or stored rejection) are final
//! and come back as typed [`ClientError`]s, one variant per problem code.
//!
//! `https://` servers are reached through rustls (no OpenSSL), trusting the
//! Mozilla roots and any certificate added with
//! [`ClientBuilder::add_root_certificate`].

mod error;
mod intents;
mod model;
mod ops;
mod problem;
mod query;
mod retry;

use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, RETRY_AFTER};

pub use error::ClientError;
pub use intents::{
    Claim, ClaimIntent, Intent, IntentChange, IntentCompletion, IntentError, IntentLease,
    IntentPage, IntentQuery, LeaseInfo, OnceError, OnceOptions, OnceOutcome, StepError, StepOutput,
};
pub use model::{
    Account, AccountPage, AccountSettings, AccountSummary, Adjustment, Alerts, AuditHead,
    AuditVerification, Balance, BalanceFigures, BatchResult, Capture, Direction, Entry, EntryKind,
    EntryPage, EntryStatus, Granularity, HeadSummary, Health, Hold, HoldInfo, HoldStatus, Metadata,
    Movements, Operation, Overdraft, Payment, Posted, Refund, Rejection, Release, Reversal,
    Signature, Statement, StripeEvent, StripeEventPage, StripeEventStatus, StripeIntegration,
    StripeIntegrationRequest, Usage, UsageDebit, UsagePeriod, VerificationProblem,
    VerificationStatus, WebhookAttempt, WebhookDelivery, WebhookDeliveryPage,
    WebhookDeliveryStatus, WebhookEndpoint, WebhookEndpointChange, WebhookEndpointRequest,
    WebhookEndpointWithSecret, WebhookEventType, WebhookReplay,
};
pub use ops::VERIFY_TIMEOUT;
pub use problem::{FieldError, Problem};
pub use query::{
    AccountQuery, BalanceQuery, EntryQuery, ExportFormat, ExportQuery, StatementQuery,
    StripeEventQuery, UsageQuery, WebhookDeliveryQuery,
};
pub use retry::{Classification, RetryPolicy};

/// A tally client for one API key.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    key: String,
    policy: RetryPolicy,
}

/// Builds a [`Client`]: `Client::builder(base, key)`.
pub struct ClientBuilder {
    base: String,
    key: String,
    policy: RetryPolicy,
    roots: Vec<reqwest::Certificate>,
    built_in_roots: bool,
    error: Option<ClientError>,
}

impl ClientBuilder {
    pub fn policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Trusts the PEM certificate(s) in `pem` (one or a bundle) as roots for
    /// `https://`, besides the built-in Mozilla roots. A PEM that does not
    /// parse fails [`ClientBuilder::build`].
    pub fn add_root_certificate(mut self, pem: &[u8]) -> Self {
        match reqwest::Certificate::from_pem_bundle(pem) {
            Ok(certs) if !certs.is_empty() => self.roots.extend(certs),
            Ok(_) => {
                self.error
                    .get_or_insert(ClientError::Config("no certificate in the PEM".into()));
            }
            Err(e) => {
                self.error
                    .get_or_insert(ClientError::Config(format!("root certificate: {e}")));
            }
        }
        self
    }

    /// Whether the built-in Mozilla roots are trusted (default true); with
    /// false only the added certificates are.
    pub fn built_in_roots(mut self, on: bool) -> Self {
        self.built_in_roots = on;
        self
    }

    pub fn build(self) -> Result<Client, ClientError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let mut http = reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(self.built_in_roots)
            .timeout(self.policy.request_timeout);
        for cert in self.roots {
            http = http.add_root_certificate(cert);
        }
        let http = http
            .build()
            .map_err(|e| ClientError::Config(e.to_string()))?;
        Ok(Client {
            http,
            base: self.base.trim_end_matches('/').to_owned(),
            key: self.key,
            policy: self.policy,
        })
    }
}

/// The methods the API uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

/// One HTTP answer.
struct Answer {
    status: u16,
    headers: HeaderMap,
    body: Vec<u8>,
    attempts: u32,
}

impl Client {
    /// `base` is the server's root, e.g. `http://127.0.0.1:8080` or
    /// `https://tally.example.com`.
    pub fn new(
        base: impl Into<String>,
        key: impl Into<String>,
        policy: RetryPolicy,
    ) -> Result<Self, ClientError> {
        Self::builder(base, key).policy(policy).build()
    }

    /// A builder with the default [`RetryPolicy`].
    pub fn builder(base: impl Into<String>, key: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            base: base.into(),
            key: key.into(),
            policy: RetryPolicy::default(),
            roots: Vec::new(),
            built_in_roots: true,
            error: None,
        }
    }

    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// Sends with retries; the same bytes (and so the same upstream ID) on
    /// every attempt.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Answer, ClientError> {
        self.send_waiting(method, path, body, Duration::ZERO).await
    }

    /// `send` for a call the server may hold up to `wait` on purpose (a long
    /// poll): each attempt's timeout is the policy's plus `wait`.
    async fn send_waiting(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        wait: Duration,
    ) -> Result<Answer, ClientError> {
        let started = Instant::now();
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let error = match self.send_once(method, path, body.clone(), wait).await {
                Ok(mut answer) if answer.status < 400 => {
                    answer.attempts = attempt;
                    return Ok(answer);
                }
                Ok(answer) => ClientError::from_answer(
                    answer.status,
                    retry_after(&answer.headers),
                    &answer.body,
                ),
                Err(e) => e,
            };
            if !error.is_retryable() {
                return Err(error);
            }
            let exhausted = |last: ClientError| ClientError::Exhausted {
                attempts: attempt,
                elapsed: started.elapsed(),
                last: Box::new(last),
            };
            if attempt >= self.policy.max_attempts {
                return Err(exhausted(error));
            }
            let delay = self
                .policy
                .delay(attempt, retry::jitter(), error.retry_after());
            if started.elapsed() + delay > self.policy.total_budget {
                return Err(exhausted(error));
            }
            tokio::time::sleep(delay).await;
        }
    }

    async fn send_once(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        wait: Duration,
    ) -> Result<Answer, ClientError> {
        let url = format!("{}{}", self.base, path);
        let request = match method {
            Method::Get => self.http.get(url),
            Method::Post => self.http.post(url),
            Method::Put => self.http.put(url),
            Method::Patch => self.http.patch(url),
            Method::Delete => self.http.delete(url),
        };
        let request = match body {
            Some(body) => request
                .header("content-type", "application/json")
                .body(body),
            None => request,
        }
        .bearer_auth(&self.key);
        let request = if wait.is_zero() {
            request
        } else {
            request.timeout(self.policy.request_timeout.saturating_add(wait))
        };
        let response = request.send().await.map_err(ClientError::from_reqwest)?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response
            .bytes()
            .await
            .map_err(ClientError::from_reqwest)?
            .to_vec();
        Ok(Answer {
            status,
            headers,
            body,
            attempts: 1,
        })
    }
}

/// `Retry-After` in seconds (tally sends no HTTP dates).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// The README's examples compile (`cargo test --doc -p tally-client`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
