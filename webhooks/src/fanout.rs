//! The log is the outbox: the events of each tenant's entries after its
//! fan-out checkpoint become one delivery row per subscribed endpoint, and
//! the checkpoint moves past them in the same transaction. An entry that
//! committed is therefore fanned out exactly once, whatever crashes in
//! between; two processes fanning out the same entries write once (the
//! checkpoint moves only from where it was read; the delivery key is
//! unique).

use std::collections::HashMap;

use tally_ledger::store::{EntryFilter, Storage};

use crate::alerts::TenantAlerts;
use crate::derive::derive_events;
use crate::event::{Event, EventType};
use crate::store::{deliveries, on_pool, EndpointRow, NewDelivery};
use crate::WebhookError;

/// Entries fanned out per transaction.
pub const PAGE: i64 = 500;
/// Entries one replay request reads at most.
pub const MAX_REPLAY_ENTRIES: i64 = 10_000;

/// The fan-out of one process: the alert trackers it keeps between rounds.
#[derive(Default)]
pub struct FanOut {
    alerts: HashMap<String, TenantAlerts>,
}

async fn checkpoint(storage: &Storage, tenant: &str) -> Result<i64, WebhookError> {
    const SQL: &str = "SELECT seq FROM projector_checkpoints \
         WHERE tenant_id = $1 AND projector = 'webhooks'";
    let seq: Option<i64> = on_pool!(storage, pool => {
        sqlx::query_scalar(SQL).bind(tenant).fetch_optional(pool).await?
    });
    Ok(seq.unwrap_or(0))
}

/// `events` for each enabled endpoint that subscribed to their type and
/// was made before them.
fn addressed<'a>(events: &'a [Event], endpoints: &'a [EndpointRow]) -> Vec<NewDelivery<'a>> {
    let mut out = Vec::new();
    for event in events {
        for ep in endpoints {
            if ep.enabled && ep.after_seq < event.seq && ep.wants(event.event_type) {
                out.push(NewDelivery {
                    endpoint_id: &ep.id,
                    event,
                });
            }
        }
    }
    out
}

impl FanOut {
    /// Fans out the tenant's entries up to its head; how many entries.
    pub async fn tenant(&mut self, storage: &Storage, tenant: &str) -> Result<i64, WebhookError> {
        let mut done = 0;
        loop {
            let from = checkpoint(storage, tenant).await?;
            let page = storage
                .list_entries(tenant, &EntryFilter::log_page(from, PAGE))
                .await?;
            let Some(to) = page.last().map(|e| e.seq) else {
                return Ok(done);
            };
            let endpoints = EndpointRow::list(storage, tenant).await?;
            let wants_alerts = endpoints
                .iter()
                .any(|e| e.enabled && e.wants(EventType::BalanceLow));
            let events = if wants_alerts {
                let alerts = self
                    .alerts
                    .entry(tenant.to_owned())
                    .or_insert_with(|| TenantAlerts::at(from));
                if alerts.at != from {
                    *alerts = TenantAlerts::at(from);
                }
                let derived = derive_events(storage, tenant, &page, Some(alerts)).await;
                derived.inspect_err(|_| {
                    self.alerts.remove(tenant);
                })?
            } else {
                // Nobody listens for alerts: nothing to follow (a tracker
                // starts again from the log when somebody does).
                self.alerts.remove(tenant);
                derive_events(storage, tenant, &page, None).await?
            };
            let deliveries = addressed(&events, &endpoints);
            if !deliveries::fan_out(storage, tenant, from, to, &deliveries).await? {
                // Another process got there first; follow from its checkpoint.
                self.alerts.remove(tenant);
                continue;
            }
            done += page.len() as i64;
        }
    }

    /// Fans out every tenant that is behind. A tenant that fails is logged
    /// and left for the next round; the others go on.
    pub async fn round(&mut self, storage: &Storage) -> Result<i64, WebhookError> {
        let mut done = 0;
        for tenant in EndpointRow::lagging_tenants(storage).await? {
            match self.tenant(storage, &tenant).await {
                Ok(n) => done += n,
                Err(e) => tracing::warn!(tenant, error = %e, "webhook fan-out failed; will retry"),
            }
        }
        Ok(done)
    }
}

/// What a replay scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replayed {
    pub scheduled: usize,
    /// The last seq read (`from_seq − 1` if none).
    pub to_seq: i64,
    /// Where the next replay request starts, when this one stopped at its
    /// limit before the head.
    pub next_from_seq: Option<i64>,
}

/// Sends the endpoint's events from `from_seq` again (those of its types),
/// at most [`MAX_REPLAY_ENTRIES`] entries: delivered and failed ones are
/// pending again, missing ones are made.
pub async fn replay(
    storage: &Storage,
    tenant: &str,
    endpoint: &EndpointRow,
    from_seq: i64,
) -> Result<Replayed, WebhookError> {
    let head = storage.head(tenant).await?.seq;
    let until = head.min(from_seq.saturating_add(MAX_REPLAY_ENTRIES - 1));
    let mut alerts = endpoint
        .wants(EventType::BalanceLow)
        .then(|| TenantAlerts::at(from_seq - 1));
    let mut after = from_seq - 1;
    let mut scheduled = 0;
    while after < until {
        let limit = PAGE.min(until - after);
        let page = storage
            .list_entries(tenant, &EntryFilter::log_page(after, limit))
            .await?;
        let Some(last) = page.last().map(|e| e.seq) else {
            break;
        };
        let events = derive_events(storage, tenant, &page, alerts.as_mut()).await?;
        let mine: Vec<NewDelivery<'_>> = events
            .iter()
            .filter(|e| endpoint.wants(e.event_type))
            .map(|event| NewDelivery {
                endpoint_id: &endpoint.id,
                event,
            })
            .collect();
        scheduled += deliveries::schedule_again(storage, tenant, &mine).await?;
        after = last;
    }
    Ok(Replayed {
        scheduled,
        to_seq: after,
        next_from_seq: (after < head).then_some(after + 1),
    })
}
