//! The per-tenant writer (SPEC §6): every intent of a tenant goes through one
//! task that takes whatever is waiting and decides it in one transaction.
//!
//! Under load, requests that arrive while a group commits form the next
//! group, so the number of transactions grows far slower than the number of
//! requests. The queue is bounded: when full, callers get
//! [`LedgerError::Overloaded`] at once instead of memory growing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::decide::Decision;
use crate::intent::Intent;
use crate::store::Storage;
use crate::LedgerError;

#[derive(Debug, Clone, Copy)]
pub struct WriterConfig {
    /// Most intents decided in one transaction.
    pub max_group: usize,
    /// Most intents waiting per tenant before callers are turned away.
    pub queue_capacity: usize,
}

impl Default for WriterConfig {
    fn default() -> Self {
        Self {
            max_group: 1_000,
            queue_capacity: 10_000,
        }
    }
}

struct Job {
    intent: Intent,
    reply: oneshot::Sender<Result<Decision, LedgerError>>,
}

/// Hands intents to their tenant's writer.
#[derive(Clone)]
pub struct Writers {
    storage: Storage,
    config: WriterConfig,
    queues: Arc<Mutex<HashMap<String, mpsc::Sender<Job>>>>,
}

impl Writers {
    pub fn new(storage: Storage, config: WriterConfig) -> Self {
        Self {
            storage,
            config,
            queues: Arc::default(),
        }
    }

    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// Queues `intent` and waits for its committed decision. Dropping the
    /// returned future does not withdraw the intent: once queued it is
    /// decided, exactly as if the client had timed out after sending it.
    pub async fn decide(&self, tenant: &str, intent: Intent) -> Result<Decision, LedgerError> {
        let (reply, answer) = oneshot::channel();
        self.queue(tenant)
            .try_send(Job { intent, reply })
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => LedgerError::Overloaded,
                mpsc::error::TrySendError::Closed(_) => {
                    LedgerError::Unavailable("the tenant's writer stopped".to_owned())
                }
            })?;
        answer
            .await
            .map_err(|_| LedgerError::Unavailable("the tenant's writer stopped".to_owned()))?
    }

    fn queue(&self, tenant: &str) -> mpsc::Sender<Job> {
        // A poisoned lock only means another thread panicked while holding
        // it; the map itself is still consistent (insert is the only write).
        let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(q) = queues.get(tenant) {
            if !q.is_closed() {
                return q.clone();
            }
        }
        let (tx, rx) = mpsc::channel(self.config.queue_capacity);
        tokio::spawn(run(
            self.storage.clone(),
            tenant.to_owned(),
            rx,
            self.config.max_group,
        ));
        queues.insert(tenant.to_owned(), tx.clone());
        tx
    }
}

async fn run(storage: Storage, tenant: String, mut rx: mpsc::Receiver<Job>, max_group: usize) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        while jobs.len() < max_group {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let intents: Vec<&Intent> = jobs.iter().map(|j| &j.intent).collect();
        let started = std::time::Instant::now();
        let result = commit_with_retry(&storage, &tenant, &intents).await;
        tracing::debug!(
            tenant = %tenant,
            group = jobs.len(),
            elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
            ok = result.is_ok(),
            "group decided"
        );
        match result {
            Ok(decisions) => {
                for (job, decision) in jobs.into_iter().zip(decisions) {
                    // The caller may have gone away; its intent is committed anyway.
                    let _ = job.reply.send(Ok(decision));
                }
            }
            Err(e) => {
                tracing::warn!(tenant = %tenant, group = jobs.len(), error = %e, "group failed, nothing committed");
                let message = e.to_string();
                for job in jobs {
                    let _ = job
                        .reply
                        .send(Err(LedgerError::Unavailable(message.clone())));
                }
            }
        }
    }
}

/// A failed group committed nothing, and deciding is idempotent by key, so
/// running it again is safe; one quick retry hides a transient failure
/// (a dropped connection, a serialisation error) from every caller of the group.
async fn commit_with_retry(
    storage: &Storage,
    tenant: &str,
    intents: &[&Intent],
) -> Result<Vec<Decision>, LedgerError> {
    match storage.commit_group(tenant, intents).await {
        Err(LedgerError::Database(e)) if !matches!(e, sqlx::Error::PoolTimedOut) => {
            tracing::info!(tenant = %tenant, error = %e, "retrying group once");
            tokio::time::sleep(Duration::from_millis(20)).await;
            storage.commit_group(tenant, intents).await
        }
        other => other,
    }
}
