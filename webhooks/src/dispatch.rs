//! The delivery loop of a `tally serve` process: fan out what the log
//! gained, claim the deliveries that are due under a lease, send each on a
//! task of its own, store what came of it.
//!
//! Fairness: each endpoint has at most `max_in_flight_per_endpoint`
//! attempts in flight in a process, and a claim takes no more than that,
//! so a slow or dead endpoint holds its own slots only; every other
//! endpoint, of this tenant or another, is claimed and sent beside it.
//! Several processes share the work through the lease (a claim skips rows
//! another process holds), so no event is sent by two at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tally_ledger::store::Storage;
use tally_ledger::writer::CommittedHeads;
use tokio::sync::{Notify, Semaphore};

use crate::fanout::FanOut;
use crate::schedule::{jitter_unit, WebhookConfig};
use crate::send::{attempt, client};
use crate::stats::DeliveryStats;
use crate::store::{
    deliveries, new_id, now_micros, DeliveryRow, DeliveryStatus, EndpointRow, Outcome,
};

/// Endpoints with due deliveries looked at per round.
const DUE_ENDPOINTS_PER_ROUND: i64 = 1_000;
/// Rounds are at least this far apart, however many commits wake them.
const MIN_ROUND_GAP: Duration = Duration::from_millis(50);

type EndpointKey = (String, String);

struct Shared {
    storage: Storage,
    config: WebhookConfig,
    client: reqwest::Client,
    owner: String,
    stats: Arc<DeliveryStats>,
    in_flight: Arc<Semaphore>,
    per_endpoint: Mutex<HashMap<EndpointKey, usize>>,
    /// Woken when an attempt ends (its endpoint has a free slot again).
    done: Notify,
}

/// Runs for the life of the process.
pub async fn run_webhooks(
    storage: Storage,
    heads: CommittedHeads,
    config: WebhookConfig,
    stats: Arc<DeliveryStats>,
) {
    let http = match client(config.allow_insecure, config.timeout) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "webhook deliveries are off: no HTTP client");
            return;
        }
    };
    let shared = Arc::new(Shared {
        storage,
        config,
        client: http,
        owner: new_id("proc"),
        stats,
        in_flight: Arc::new(Semaphore::new(config.max_in_flight.max(1))),
        per_endpoint: Mutex::default(),
        done: Notify::new(),
    });
    let mut fan_out = FanOut::default();
    loop {
        let started = Instant::now();
        if let Err(e) = fan_out.round(&shared.storage).await {
            shared
                .stats
                .failures
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(error = %e, "webhook fan-out failed; will retry");
        }
        if let Err(e) = claim_and_send(&shared).await {
            shared
                .stats
                .failures
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(error = %e, "claiming webhook deliveries failed; will retry");
        }
        tokio::select! {
            _ = heads.any_commit() => {}
            _ = shared.done.notified() => {}
            _ = tokio::time::sleep(config.poll) => {}
        }
        let gap = started.elapsed();
        if gap < MIN_ROUND_GAP {
            tokio::time::sleep(MIN_ROUND_GAP - gap).await;
        }
    }
}

async fn claim_and_send(shared: &Arc<Shared>) -> Result<(), crate::WebhookError> {
    let now = now_micros();
    let due = deliveries::due_endpoints(&shared.storage, now, DUE_ENDPOINTS_PER_ROUND).await?;
    for (tenant, endpoint_id) in due {
        let key = (tenant.clone(), endpoint_id.clone());
        let busy = shared
            .per_endpoint
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .copied()
            .unwrap_or(0);
        let free = shared
            .config
            .max_in_flight_per_endpoint
            .saturating_sub(busy)
            .min(shared.in_flight.available_permits());
        if free == 0 {
            continue;
        }
        let lease_until = now.saturating_add(shared.config.lease().as_micros() as i64);
        let claimed = deliveries::claim(
            &shared.storage,
            &tenant,
            &endpoint_id,
            &shared.owner,
            now,
            lease_until,
            free as i64,
        )
        .await?;
        if claimed.is_empty() {
            continue;
        }
        let endpoint = Arc::new(EndpointRow::get(&shared.storage, &tenant, &endpoint_id).await?);
        for d in claimed {
            let Ok(permit) = shared.in_flight.clone().acquire_owned().await else {
                return Ok(());
            };
            *shared
                .per_endpoint
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(key.clone())
                .or_insert(0) += 1;
            let (shared, endpoint, key) = (shared.clone(), endpoint.clone(), key.clone());
            tokio::spawn(async move {
                deliver(&shared, &endpoint, &d, lease_until).await;
                let mut busy = shared
                    .per_endpoint
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if let Some(n) = busy.get_mut(&key) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        busy.remove(&key);
                    }
                }
                drop(busy);
                drop(permit);
                shared.done.notify_one();
            });
        }
    }
    Ok(())
}

/// One attempt of `d` and its record.
async fn deliver(shared: &Shared, endpoint: &EndpointRow, d: &DeliveryRow, lease_until: i64) {
    let started = now_micros();
    // A lease that ran out while waiting for a slot is another process's now.
    if started >= lease_until {
        return;
    }
    let clock = Instant::now();
    let sent = attempt(
        &shared.client,
        endpoint,
        d,
        started,
        shared.config.allow_insecure,
    )
    .await;
    let duration_ms = clock.elapsed().as_millis() as i64;
    let now = now_micros();
    let config = &shared.config;
    let (status, next) = match &sent.outcome {
        Outcome::Delivered { .. } => (DeliveryStatus::Delivered, now),
        Outcome::Gone => (DeliveryStatus::Failed, now),
        _ if now.saturating_sub(d.scheduled_at) >= config.max_age.as_micros() as i64 => {
            (DeliveryStatus::Failed, now)
        }
        _ => {
            let wait = config.backoff((d.attempts + 1) as u32, sent.retry_after, jitter_unit());
            (
                DeliveryStatus::Pending,
                now.saturating_add(wait.as_micros() as i64),
            )
        }
    };
    shared.stats.count(sent.outcome.label());
    if status == DeliveryStatus::Failed && sent.outcome != Outcome::Gone {
        shared
            .stats
            .given_up
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::warn!(tenant = %d.tenant_id, endpoint = %d.endpoint_id, delivery = %d.id,
            "webhook delivery given up after the maximum age");
    }
    let storage = &shared.storage;
    if let Err(e) = deliveries::record_attempt(
        storage,
        d,
        &shared.owner,
        started,
        duration_ms,
        &sent.outcome,
        status,
        next,
    )
    .await
    {
        // The lease runs out and the delivery is sent again: at least once.
        tracing::warn!(delivery = %d.id, error = %e, "recording a webhook attempt failed");
    }
    if sent.outcome == Outcome::Gone {
        tracing::warn!(tenant = %d.tenant_id, endpoint = %d.endpoint_id,
            "the receiver answered 410 Gone: endpoint disabled");
        if let Err(e) = EndpointRow::disable_gone(storage, &d.tenant_id, &d.endpoint_id).await {
            tracing::warn!(endpoint = %d.endpoint_id, error = %e, "disabling an endpoint failed");
        }
    }
}
