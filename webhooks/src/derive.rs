//! The events of a stretch of the log, in `seq` order: `entry.posted` or
//! `entry.rejected` of every ledger entry, `hold.expired` of the server's
//! releases of expired holds, `intent.succeeded` and `intent.failed` of
//! intents' outcomes, and the `balance.low` crossings ([`crate::alerts`]).

use tally_ledger::entry::{EntryStatus, StoredEntry};
use tally_ledger::names::SERVER_KEY_PREFIX;
use tally_ledger::request::EntryKind;
use tally_ledger::store::Storage;
use tally_ledger::LedgerError;

use crate::alerts::TenantAlerts;
use crate::event::{entry_event, hold_expired_event, intent_event, Event};

/// The events of `entries`; `balance.low` too with `alerts` (whose
/// position is the entry before the first of `entries`).
pub async fn derive_events(
    storage: &Storage,
    tenant: &str,
    entries: &[StoredEntry],
    mut alerts: Option<&mut TenantAlerts>,
) -> Result<Vec<Event>, LedgerError> {
    let mut events = Vec::with_capacity(entries.len());
    for e in entries {
        if e.kind.is_intent() {
            // An intent's entries move no money: its outcome is an event
            // of its own, its claims and releases none.
            events.extend(intent_event(tenant, e));
            continue;
        }
        events.push(entry_event(tenant, e));
        if let Some(hold_id) = expired_hold(e) {
            events.push(hold_expired_event(tenant, e, hold_id));
        }
        if let Some(alerts) = alerts.as_deref_mut() {
            events.extend(alerts.follow(storage, tenant, e).await?);
        }
    }
    Ok(events)
}

/// The hold `e` released at its expiry, if it is such a release: the
/// server's own request, keyed `<server prefix>expired:<hold_id>`.
fn expired_hold(e: &StoredEntry) -> Option<&str> {
    if e.kind != EntryKind::HoldRelease || e.status != EntryStatus::Posted {
        return None;
    }
    e.upstream_id
        .strip_prefix(SERVER_KEY_PREFIX)?
        .strip_prefix("expired:")
}
