//! `tally-client`: typed calls to a tally server that are safe to retry.
//!
//! Every mutating call takes the upstream system's stable ID as a required
//! argument and sends it unchanged on every attempt, so a retry after a
//! timeout is recognised by the server as the same intent and answered with
//! the recorded result. Only failures that may be transient are retried
//! (connection errors, timeouts, 429, 5xx), with capped exponential backoff,
//! full jitter and `Retry-After`, within an attempt limit and a time budget;
//! 4xx answers (409 conflict, 422 validation or stored rejection) are final.

mod error;
mod model;
mod retry;

use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use error::ClientError;
pub use model::{
    Balance, BatchResult, Entry, EntryPage, Operation, Payment, Posted, Rejection, UsageDebit,
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

/// One HTTP answer.
struct Answer {
    status: u16,
    headers: HeaderMap,
    body: Vec<u8>,
    attempts: u32,
}

impl Client {
    /// `base` is the server's root, e.g. `http://127.0.0.1:8080`.
    pub fn new(
        base: impl Into<String>,
        key: impl Into<String>,
        policy: RetryPolicy,
    ) -> Result<Self, ClientError> {
        let http = reqwest::Client::builder()
            .timeout(policy.request_timeout)
            .build()
            .map_err(|e| ClientError::Transport {
                message: e.to_string(),
                timeout: false,
            })?;
        Ok(Self {
            http,
            base: base.into().trim_end_matches('/').to_owned(),
            key: key.into(),
            policy,
        })
    }

    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// `POST /v1/usage-debits`, retried safely under the debit's own ID.
    pub async fn post_usage_debit(&self, debit: &UsageDebit) -> Result<Posted, ClientError> {
        self.post_entry("/v1/usage-debits", &debit.to_json()).await
    }

    /// `POST /v1/payments`, retried safely under the payment's own ID.
    pub async fn post_payment(&self, payment: &Payment) -> Result<Posted, ClientError> {
        self.post_entry("/v1/payments", &payment.to_json()).await
    }

    /// `POST /v1/batch`: up to 1,000 operations, one result each, in order.
    /// The whole batch is retried on transient failures; its items keep
    /// their upstream IDs, so a retried batch replays what already committed.
    pub async fn post_batch(
        &self,
        operations: &[Operation],
    ) -> Result<Vec<BatchResult>, ClientError> {
        let ops: Vec<Value> = operations.iter().map(Operation::to_json).collect();
        let body = serde_json::json!({ "operations": ops })
            .to_string()
            .into_bytes();
        let answer = self.send("POST", "/v1/batch", Some(body)).await?;
        let parsed: model::BatchResults =
            serde_json::from_slice(&answer.body).map_err(|e| ClientError::Decode(e.to_string()))?;
        Ok(parsed.results)
    }

    /// `GET /healthz`.
    pub async fn healthz(&self) -> Result<(), ClientError> {
        self.send("GET", "/healthz", None).await.map(|_| ())
    }

    pub async fn get_entry(&self, id: &str) -> Result<Entry, ClientError> {
        self.get_json(&format!("/v1/entries/{}", encode(id))).await
    }

    /// One page of `GET /v1/entries` after `after_seq`.
    /// One page of `GET /v1/entries`; follow `next_after_seq` for the next.
    pub async fn list_entries(&self, query: &EntryQuery) -> Result<EntryPage, ClientError> {
        self.get_json(&format!("/v1/entries?{}", query.to_query()))
            .await
    }

    /// `GET /v1/accounts/{account}/balance`, now.
    pub async fn balance(&self, account: &str) -> Result<Balance, ClientError> {
        self.get_json(&format!("/v1/accounts/{}/balance", encode(account)))
            .await
    }

    /// The balance right after entry `seq`.
    pub async fn balance_as_of(&self, account: &str, seq: i64) -> Result<Balance, ClientError> {
        self.get_json(&format!(
            "/v1/accounts/{}/balance?as_of_seq={seq}",
            encode(account)
        ))
        .await
    }

    async fn post_entry(&self, path: &str, body: &Value) -> Result<Posted, ClientError> {
        let bytes = body.to_string().into_bytes();
        let answer = self.send("POST", path, Some(bytes)).await?;
        let entry: Entry =
            serde_json::from_slice(&answer.body).map_err(|e| ClientError::Decode(e.to_string()))?;
        Ok(Posted {
            created: answer.status == 201,
            replayed: answer
                .headers
                .get("idempotent-replayed")
                .map(|v| v == "true")
                .unwrap_or(false),
            entry,
            body: answer.body,
            attempts: answer.attempts,
        })
    }

    async fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let answer = self.send("GET", path, None).await?;
        serde_json::from_slice(&answer.body).map_err(|e| ClientError::Decode(e.to_string()))
    }

    /// Sends with retries; the same bytes (and so the same upstream ID) on
    /// every attempt.
    async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Answer, ClientError> {
        let started = Instant::now();
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let error = match self.send_once(method, path, body.clone()).await {
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
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Answer, ClientError> {
        let url = format!("{}{}", self.base, path);
        let request = match method {
            "POST" => self
                .http
                .post(url)
                .header("content-type", "application/json")
                .body(body.unwrap_or_default()),
            _ => self.http.get(url),
        }
        .bearer_auth(&self.key);
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

/// Filters of `GET /v1/entries`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EntryQuery {
    pub account: Option<String>,
    /// `usage_debit` or `payment`.
    pub kind: Option<String>,
    pub after_seq: i64,
    /// 1 to 1,000; the server's default (100) when `None`.
    pub limit: Option<u32>,
    pub from: Option<chrono::DateTime<chrono::Utc>>,
    pub to: Option<chrono::DateTime<chrono::Utc>>,
}

impl EntryQuery {
    fn to_query(&self) -> String {
        let mut parts = vec![format!("after_seq={}", self.after_seq)];
        if let Some(a) = &self.account {
            parts.push(format!("account={}", encode(a)));
        }
        if let Some(k) = &self.kind {
            parts.push(format!("kind={}", encode(k)));
        }
        if let Some(l) = self.limit {
            parts.push(format!("limit={l}"));
        }
        let time = |t: &chrono::DateTime<chrono::Utc>| {
            encode(&t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
        };
        if let Some(t) = &self.from {
            parts.push(format!("from={}", time(t)));
        }
        if let Some(t) = &self.to {
            parts.push(format!("to={}", time(t)));
        }
        parts.join("&")
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters, for a
/// path segment or a query value.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_percent_encoded() {
        assert_eq!(encode("@revenue"), "%40revenue");
        assert_eq!(encode("a b/c+é"), "a%20b%2Fc%2B%C3%A9");
        let q = EntryQuery {
            account: Some("cust 1".into()),
            limit: Some(10),
            ..EntryQuery::default()
        };
        assert_eq!(q.to_query(), "after_seq=0&account=cust%201&limit=10");
    }
}
