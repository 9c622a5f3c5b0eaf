//! What every handler and middleware shares: the application state.

use std::sync::Arc;
use std::time::Duration;

use tally_ledger::audit::sign::Signer;
use tally_ledger::store::Storage;
use tally_ledger::writer::{WriterConfig, Writers};
use tally_projections::usage::ProjectorStats;
use tally_webhooks::stats::DeliveryStats;

use crate::key_cache::KeyCache;
use crate::limits::{Lifecycle, Limits};

/// How long an API key found in the database is trusted before it is
/// looked up again (`--key-recheck-ms`).
pub const DEFAULT_KEY_RECHECK: Duration = Duration::from_secs(10);

/// What every handler and middleware reads. Axum clones the state into
/// each of them for every request: one shared allocation makes that clone
/// one reference count instead of one per field (cloning and dropping the
/// fields was ~3 % of the server's CPU under 100 % replays).
#[derive(Clone)]
pub struct AppState(Arc<AppParts>);

#[derive(Clone)]
pub struct AppParts {
    pub writers: Writers,
    pub keys: KeyCache,
    /// Signs audit checkpoints (`GET /v1/audit/head`, export trailers);
    /// `None` when signing is off.
    pub signer: Option<Arc<Signer>>,
    /// Rate limit, request timeout, requests in flight.
    pub limits: Arc<Limits>,
    /// Shutdown state, for `GET /readyz`.
    pub lifecycle: Lifecycle,
    /// The usage projector's observations, for `GET /metrics`.
    pub projector: Arc<ProjectorStats>,
    /// What endpoints may be and how secrets rotate.
    pub webhooks: WebhookSettings,
    /// This process's webhook deliveries, for `GET /metrics`.
    pub deliveries: Arc<DeliveryStats>,
    /// The NATS consumer of `--ingest-nats`, for `GET /metrics`.
    pub nats: Arc<crate::ingest::nats_stats::NatsStats>,
}

/// The webhook settings the API itself reads.
#[derive(Debug, Clone, Copy)]
pub struct WebhookSettings {
    /// `--webhook-allow-insecure`: `http://` and private addresses.
    pub allow_insecure: bool,
    /// `--webhook-secret-grace-s`: how long a rotated secret still signs.
    pub secret_grace: Duration,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            allow_insecure: false,
            secret_grace: Duration::from_secs(24 * 3600),
        }
    }
}

impl std::ops::Deref for AppState {
    type Target = AppParts;

    fn deref(&self) -> &AppParts {
        &self.0
    }
}

impl AppState {
    pub fn new(storage: Storage, writer: WriterConfig) -> Self {
        Self(Arc::new(AppParts {
            writers: Writers::new(storage, writer),
            keys: KeyCache::new(DEFAULT_KEY_RECHECK),
            signer: None,
            limits: Arc::default(),
            lifecycle: Lifecycle::default(),
            projector: Arc::default(),
            webhooks: WebhookSettings::default(),
            deliveries: Arc::default(),
            nats: Arc::default(),
        }))
    }

    /// The same state with `change` made (the builders run before serving,
    /// when nothing else holds the state).
    fn with(self, change: impl FnOnce(&mut AppParts)) -> Self {
        let mut parts = Arc::unwrap_or_clone(self.0);
        change(&mut parts);
        Self(Arc::new(parts))
    }

    /// The same state, reporting this usage projector's observations.
    pub fn with_projector(self, projector: Arc<ProjectorStats>) -> Self {
        self.with(|p| p.projector = projector)
    }

    /// The same state with these limits and this shutdown drain.
    pub fn with_limits(self, limits: Limits, lifecycle: Lifecycle) -> Self {
        self.with(|p| {
            p.limits = Arc::new(limits);
            p.lifecycle = lifecycle;
        })
    }

    /// The same state, asking the database again about a cached API key
    /// after `recheck_after`.
    pub fn with_key_recheck(self, recheck_after: Duration) -> Self {
        self.with(|p| p.keys = KeyCache::new(recheck_after))
    }

    /// The same state with these webhook settings, counting deliveries in
    /// `deliveries`.
    pub fn with_webhooks(self, settings: WebhookSettings, deliveries: Arc<DeliveryStats>) -> Self {
        self.with(|p| {
            p.webhooks = settings;
            p.deliveries = deliveries;
        })
    }

    /// The same state, signing audit checkpoints with `signer`.
    pub fn with_signer(self, signer: Option<Signer>) -> Self {
        self.with(|p| p.signer = signer.map(Arc::new))
    }
}
