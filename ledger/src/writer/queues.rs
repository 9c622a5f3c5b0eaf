//! The queues of the tenants with a writer in this process, and how a
//! tenant's look-up task takes its next job or retires its writer when idle.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::mpsc;

use super::stats::WriterStats;
use super::{Job, WriterConfig};

pub(super) struct TenantQueue {
    pub(super) sender: mpsc::UnboundedSender<Job>,
    /// Requests queued or being decided; bounded by `queue_capacity`.
    pub(super) pending: Arc<AtomicUsize>,
}

/// The tenants with a writer in this process. Jobs are sent to a tenant's
/// queue with this lock held, and a writer retires only with it held and its
/// queue empty: no job can be sent to a writer that has gone.
pub(super) type Queues = Mutex<HashMap<String, TenantQueue>>;

/// The next job of a tenant's look-up task; `None` once its channel closed
/// or the tenant's writer retired after `idle_after` without work.
pub(super) async fn next_job(
    rx: &mut mpsc::UnboundedReceiver<Job>,
    tenant: &str,
    pending: &Arc<AtomicUsize>,
    stats: &WriterStats,
    config: WriterConfig,
    queues: &Weak<Queues>,
) -> Option<Job> {
    loop {
        let Ok(job) = tokio::time::timeout(config.idle_after, rx.recv()).await else {
            let Some(queues) = queues.upgrade() else {
                continue;
            };
            let mut queues = queues.lock().unwrap_or_else(|p| p.into_inner());
            // Jobs are sent with this lock held: whatever was sent before it
            // was taken is in the channel now, and nothing more can be.
            match rx.try_recv() {
                Ok(job) => return Some(job),
                Err(mpsc::error::TryRecvError::Disconnected) => return None,
                Err(mpsc::error::TryRecvError::Empty) => {}
            }
            if pending.load(Ordering::Acquire) > 0 {
                // The writer is still deciding what it was handed.
                continue;
            }
            if queues
                .get(tenant)
                .is_some_and(|q| Arc::ptr_eq(&q.pending, pending))
            {
                queues.remove(tenant);
            }
            stats.idle_writers_stopped.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(tenant, "idle writer stopped");
            return None;
        };
        return job;
    }
}
