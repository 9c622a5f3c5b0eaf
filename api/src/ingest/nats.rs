//! `tally ingest nats`: a JetStream pull consumer of usage debits
//! (docs/ingest.md). Each message body is exactly a `POST /v1/usage-debits`
//! or a `POST /v1/batch` body. A pulled batch of messages is decided as one
//! batch through the batch path; then each message is settled:
//! - every operation created or replayed: acknowledged;
//! - an operation refused for good (invalid, 409, 422, …), or a body that
//!   is not one of the two: published with its problems to the dead-letter
//!   subject, then terminated (never redelivered);
//! - the database failed: a negative acknowledgement with a delay, so the
//!   server redelivers it later (its keys make the retry a replay).
//!
//! A message is acknowledged only after its entries are committed (or
//! found committed): a consumer killed at any point loses nothing, and what
//! it had not acknowledged is redelivered to the next one and replays.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream, AckKind};
use futures_util::StreamExt;
use serde_json::{json, Value};
use tally_ledger::writer::Writers;

pub use super::nats_stats::NatsStats;
use super::Outcome;
use crate::problem::{Answer, ApiError};
use crate::routes::batch::decide_operations;
use crate::views::BatchItem;

/// Where the consumer reads and writes.
#[derive(Debug, Clone)]
pub struct NatsSettings {
    pub url: String,
    pub stream: String,
    pub subject: String,
    pub durable: String,
    pub tenant: String,
    /// Where refused messages go; default `tally.dead-letter.<durable>`.
    pub dead_letter_subject: Option<String>,
    /// Messages pulled (and decided) at once.
    pub batch: usize,
}

impl NatsSettings {
    pub fn dead_letter(&self) -> String {
        self.dead_letter_subject
            .clone()
            .unwrap_or_else(|| format!("tally.dead-letter.{}", self.durable))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NatsError {
    #[error("NATS: {0}")]
    Nats(String),
}

fn nats<E: std::fmt::Display>(e: E) -> NatsError {
    NatsError::Nats(e.to_string())
}

/// Redelivery delay after a transient failure.
const NAK_DELAY: Duration = Duration::from_secs(2);
/// How long the dead-letter stream this consumer makes remembers a
/// letter's message id; far longer than `ack_wait`, after which a message
/// left unsettled is redelivered.
const DEAD_LETTER_DUPLICATE_WINDOW: Duration = Duration::from_secs(3600);
/// How long one pull waits for a full batch.
const PULL_WAIT: Duration = Duration::from_millis(500);

/// Runs the consumer until the connection fails for good or `stop`
/// resolves. The stream must exist; the durable consumer is made if it
/// does not, and a stream for the dead-letter subject too.
pub async fn run(
    writers: Writers,
    settings: NatsSettings,
    stats: Arc<NatsStats>,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), NatsError> {
    let client = async_nats::connect(&settings.url).await.map_err(nats)?;
    let js = jetstream::new(client);
    let stream = js.get_stream(&settings.stream).await.map_err(nats)?;
    let dead_letter = settings.dead_letter();
    // A stream that keeps the dead letters, unless one already does.
    if let Err(e) = js
        .get_or_create_stream(stream::Config {
            name: format!("{}_DEAD_LETTER", settings.stream),
            subjects: vec![dead_letter.clone()],
            // A consumer killed between storing a dead letter and
            // terminating its message stores it again on redelivery (after
            // `ack_wait`); the letter's message id makes that a no-op
            // inside this window.
            duplicate_window: DEAD_LETTER_DUPLICATE_WINDOW,
            ..Default::default()
        })
        .await
    {
        tracing::warn!(error = %e, subject = %dead_letter, "no stream of its own for the dead-letter subject");
    }
    let consumer: consumer::PullConsumer = stream
        .get_or_create_consumer(
            &settings.durable,
            consumer::pull::Config {
                durable_name: Some(settings.durable.clone()),
                filter_subject: settings.subject.clone(),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: Duration::from_secs(30),
                ..Default::default()
            },
        )
        .await
        .map_err(nats)?;
    tracing::info!(stream = %settings.stream, subject = %settings.subject, durable = %settings.durable,
        tenant = %settings.tenant, "consuming from NATS JetStream");
    tokio::pin!(stop);
    let mut consumer = consumer;
    loop {
        let pulled = consumer
            .batch()
            .max_messages(settings.batch)
            .expires(PULL_WAIT)
            .messages();
        let mut batch = tokio::select! {
            _ = &mut stop => return Ok(()),
            b = pulled => b.map_err(nats)?,
        };
        let mut messages = Vec::with_capacity(settings.batch);
        while let Some(m) = batch.next().await {
            match m {
                Ok(m) => messages.push(m),
                Err(e) => tracing::warn!(error = %e, "a pulled message failed"),
            }
        }
        if let Ok(info) = consumer.info().await {
            stats.lag.store(info.num_pending, Ordering::Relaxed);
        }
        if messages.is_empty() {
            continue;
        }
        stats
            .consumed
            .fetch_add(messages.len() as u64, Ordering::Relaxed);
        settle(&writers, &js, &settings, &dead_letter, &stats, messages).await?;
    }
}

/// Decides a pulled batch as one batch and settles each message.
async fn settle(
    writers: &Writers,
    js: &jetstream::Context,
    settings: &NatsSettings,
    dead_letter: &str,
    stats: &NatsStats,
    messages: Vec<jetstream::Message>,
) -> Result<(), NatsError> {
    // Each message's operations, or why its body is none.
    let mut spans: Vec<Result<std::ops::Range<usize>, String>> = Vec::with_capacity(messages.len());
    let mut ops: Vec<Value> = Vec::new();
    for m in &messages {
        match operations(&m.payload) {
            Ok(mine) => {
                let start = ops.len();
                ops.extend(mine);
                spans.push(Ok(start..ops.len()));
            }
            Err(why) => spans.push(Err(why)),
        }
    }
    let answers = match decide_operations(writers, &settings.tenant, ops).await {
        Ok(answers) => Some(answers),
        Err(e) => {
            tracing::warn!(error = %e, "the batch was not decided; its messages are redelivered");
            None
        }
    };
    for (m, span) in messages.iter().zip(spans) {
        let verdict = match (&answers, span) {
            (_, Err(why)) => Verdict::Refused(json!({"problem": {
                "code": "invalid_request", "status": 422,
                "detail": format!("the message is not a POST /v1/usage-debits or POST /v1/batch body: {why}")
            }})),
            (None, Ok(_)) => Verdict::Transient,
            (Some(answers), Ok(range)) => verdict(&answers[range], stats),
        };
        match verdict {
            Verdict::Done => m.ack().await.map_err(nats)?,
            Verdict::Transient => {
                stats.redelivered.fetch_add(1, Ordering::Relaxed);
                m.ack_with(AckKind::Nak(Some(NAK_DELAY)))
                    .await
                    .map_err(nats)?
            }
            Verdict::Refused(mut letter) => {
                letter["subject"] = json!(m.subject.as_str());
                let mut publish = jetstream::message::PublishMessage::build();
                if let Ok(info) = m.info() {
                    letter["stream_sequence"] = json!(info.stream_sequence);
                    // One letter per (stream, consumer, message), however
                    // often the message is delivered: JetStream drops a
                    // repeated id within the stream's duplicate window.
                    publish = publish.message_id(format!(
                        "{}:{}:{}",
                        settings.stream, settings.durable, info.stream_sequence
                    ));
                }
                letter["body"] = json!(String::from_utf8_lossy(&m.payload));
                // The dead letter is stored before the message is let go.
                let publish = publish.payload(letter.to_string().into());
                let published = match js.send_publish(dead_letter.to_owned(), publish).await {
                    Ok(ack) => ack.await.map(|_| ()).map_err(nats),
                    Err(e) => Err(nats(e)),
                };
                match published {
                    Ok(()) => {
                        stats.dead_lettered.fetch_add(1, Ordering::Relaxed);
                        m.ack_with(AckKind::Term).await.map_err(nats)?
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, subject = dead_letter, "a dead letter was not stored; the message is redelivered");
                        stats.redelivered.fetch_add(1, Ordering::Relaxed);
                        m.ack_with(AckKind::Nak(Some(NAK_DELAY)))
                            .await
                            .map_err(nats)?
                    }
                }
            }
        }
    }
    Ok(())
}

enum Verdict {
    Done,
    Transient,
    /// The dead letter: the message's problems.
    Refused(Value),
}

fn verdict(answers: &[Answer], stats: &NatsStats) -> Verdict {
    let mut refused = false;
    for a in answers {
        match Outcome::of(a) {
            Outcome::Unavailable => return Verdict::Transient,
            o if o.is_refused() => refused = true,
            _ => {}
        }
    }
    for a in answers {
        match Outcome::of(a) {
            Outcome::Created => stats.committed.fetch_add(1, Ordering::Relaxed),
            Outcome::Replayed => stats.replayed.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
    }
    if !refused {
        return Verdict::Done;
    }
    let results: Vec<Value> = answers
        .iter()
        .map(|a| serde_json::to_value(BatchItem::from(a.clone())).unwrap_or(Value::Null))
        .collect();
    Verdict::Refused(json!({ "results": results }))
}

/// A message body as operations: a usage debit's body is one
/// `usage_debit`; a batch body is its `operations`.
fn operations(payload: &[u8]) -> Result<Vec<Value>, String> {
    let body: Value = serde_json::from_slice(payload).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(mut body) = body else {
        return Err("not a JSON object".into());
    };
    match body.remove("operations") {
        Some(Value::Array(ops)) if body.is_empty() => {
            if ops.is_empty() || ops.len() > crate::routes::batch::MAX_OPERATIONS {
                return Err("a batch holds 1 to 1,000 operations".into());
            }
            Ok(ops)
        }
        Some(_) => Err("`operations` must be an array, alone in the body".into()),
        None => {
            if body.contains_key("type") {
                return Err("a usage debit's body has no `type`".into());
            }
            body.insert("type".into(), json!("usage_debit"));
            Ok(vec![Value::Object(body)])
        }
    }
}

impl From<NatsError> for ApiError {
    fn from(e: NatsError) -> Self {
        ApiError::Unavailable(e.to_string())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_a_usage_debit_or_a_batch() {
        let one = operations(br#"{"usage_record_id":"u","account":"a","amount":"1","unit":"USD"}"#)
            .unwrap();
        assert_eq!(one[0]["type"], "usage_debit");
        let two =
            operations(br#"{"operations":[{"type":"payment"},{"type":"usage_debit"}]}"#).unwrap();
        assert_eq!(two.len(), 2);
        for bad in [
            &b"not json"[..],
            b"[]",
            br#"{"operations":[]}"#,
            br#"{"operations":{}}"#,
            br#"{"operations":[{}],"x":1}"#,
            br#"{"type":"payment"}"#,
        ] {
            assert!(operations(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
