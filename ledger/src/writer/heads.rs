//! Committed heads, told as they move: what waits for a tenant's next entry
//! (`GET /v1/entries?wait_ms=`, the webhook fan-out) is woken by the
//! commit itself instead of polling the database once per waiter.
//!
//! Only this process's commits are told here; a process that must also see
//! other processes' commits (several `tally serve` on one PostgreSQL) reads
//! the heads of the tenants it has waiters for, one query for all of them
//! ([`CommittedHeads::watched_tenants`]), and tells them here too.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{watch, Notify};

/// A tenant's highest committed `seq` as this process knows it, and a
/// signal on every commit of any tenant.
#[derive(Default, Clone)]
pub struct CommittedHeads(Arc<Inner>);

#[derive(Default)]
struct Inner {
    /// Only tenants someone waits for: a sender without receivers is
    /// dropped at the next subscription.
    watched: Mutex<HashMap<String, watch::Sender<i64>>>,
    /// Woken (one stored permit) on every commit of any tenant.
    any: Notify,
}

impl CommittedHeads {
    /// The tenant's head reached `seq` (committed).
    pub fn advanced(&self, tenant: &str, seq: i64) {
        {
            let watched = self
                .0
                .watched
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(sender) = watched.get(tenant) {
                sender.send_if_modified(|known| {
                    let moved = seq > *known;
                    if moved {
                        *known = seq;
                    }
                    moved
                });
            }
        }
        self.0.any.notify_one();
    }

    /// A receiver of the tenant's head; its value is what this process
    /// knows (0 until told), so a waiter compares against its own read.
    pub fn subscribe(&self, tenant: &str) -> watch::Receiver<i64> {
        let mut watched = self
            .0
            .watched
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        watched.retain(|_, sender| sender.receiver_count() > 0);
        watched
            .entry(tenant.to_owned())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    }

    /// Wakes what waits for any commit without one: work that does not
    /// come from the log (a delivery sent again by hand).
    pub fn nudge(&self) {
        self.0.any.notify_one();
    }

    /// Tenants someone waits for now.
    pub fn watched_tenants(&self) -> Vec<String> {
        let watched = self
            .0
            .watched
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        watched
            .iter()
            .filter(|(_, sender)| sender.receiver_count() > 0)
            .map(|(tenant, _)| tenant.clone())
            .collect()
    }

    /// Resolves after the next commit of any tenant (or at once if one
    /// happened since the last call).
    pub async fn any_commit(&self) {
        self.0.any.notified().await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_waiter_sees_its_tenants_head_move_and_only_forward() {
        let heads = CommittedHeads::default();
        let mut rx = heads.subscribe("t1");
        heads.advanced("t2", 9);
        assert!(!rx.has_changed().unwrap());
        heads.advanced("t1", 3);
        rx.changed().await.unwrap();
        assert_eq!(*rx.borrow_and_update(), 3);
        heads.advanced("t1", 2);
        assert!(!rx.has_changed().unwrap(), "a head never moves back");
        assert_eq!(heads.watched_tenants(), vec!["t1".to_owned()]);
        drop(rx);
        let _other = heads.subscribe("t3");
        assert_eq!(heads.watched_tenants(), vec!["t3".to_owned()]);
        // Every commit left a permit for the fan-out.
        tokio::time::timeout(std::time::Duration::from_secs(1), heads.any_commit())
            .await
            .unwrap();
    }
}
