//! The router and the server loop.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::Router;
use tally_ledger::audit::sign::Signer;
use tally_ledger::store::{ProjectorStats, Storage};
use tally_ledger::writer::{WriterConfig, Writers};
use tokio::net::TcpListener;
use utoipa::OpenApi as _;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

use crate::auth::KeyCache;
use crate::body::{MAX_BATCH_BODY_BYTES, MAX_BODY_BYTES};
use crate::connections::ConnectionLimits;
use crate::limits::{Lifecycle, Limits};
use crate::problem::ApiError;
use crate::routes::{
    accounts, audit, balances, batch, entries, health, holds, intents, rules, usage,
};

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

    /// The same state, signing audit checkpoints with `signer`.
    pub fn with_signer(self, signer: Option<Signer>) -> Self {
        self.with(|p| p.signer = signer.map(Arc::new))
    }
}

/// Every route the server answers, each registered with its OpenAPI
/// operation by `routes!` (the method and path come from the handler's
/// `#[utoipa::path]`), so the router and `GET /openapi.json` list the same
/// operations (tests/openapi.rs checks both ways). Add routes here, with
/// `routes!`, never with `.route()`.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(crate::openapi::ApiDoc::openapi())
        .routes(routes!(intents::post_usage_debit))
        .routes(routes!(intents::post_payment))
        .routes(routes!(batch::post_batch).layer(DefaultBodyLimit::max(MAX_BATCH_BODY_BYTES)))
        .routes(routes!(holds::post_hold))
        .routes(routes!(holds::get_hold))
        .routes(routes!(holds::post_capture))
        .routes(routes!(holds::post_release))
        .routes(routes!(rules::post_refund))
        .routes(routes!(rules::post_reversal))
        .routes(routes!(rules::post_adjustment))
        .routes(routes!(accounts::get_account, accounts::put_account))
        .routes(routes!(entries::list_entries))
        .routes(routes!(entries::get_entry))
        .routes(routes!(balances::get_balance))
        .routes(routes!(usage::get_usage))
        .routes(routes!(crate::routes::statements::get_statement))
        .routes(routes!(audit::get_export))
        .routes(routes!(audit::get_head))
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(crate::metrics::get_metrics))
        .routes(routes!(crate::openapi::get_openapi))
        .routes(routes!(crate::openapi::get_docs))
        .routes(routes!(crate::openapi::get_docs_asset))
}

pub fn router(state: AppState) -> Router {
    let (router, _) = routes().split_for_parts();
    router
        .fallback(|| async { ApiError::NoRoute })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::limits::guard,
        ))
        // Outermost: the request ID, its span and the HTTP metrics wrap
        // everything, shed and timed-out requests included.
        .layer(axum::middleware::from_fn(crate::observe::observe))
        .layer(crate::observe::request_id_layers())
        .with_state(state)
}

/// Serves until `shutdown` resolves, then finishes in-flight requests.
/// `connections` caps and times out the connections themselves.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    connections: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ApiError> {
    // On the signal /readyz turns 503 first; the listener stays open for
    // `--drain-ms` so a load balancer sees it and stops sending, then
    // in-flight requests finish.
    let lifecycle = state.lifecycle.clone();
    let shutdown = async move {
        shutdown.await;
        lifecycle.begin_shutdown();
        if !lifecycle.drain.is_zero() {
            tracing::info!(
                drain_ms = lifecycle.drain.as_millis() as u64,
                "draining: /readyz answers 503"
            );
            tokio::time::sleep(lifecycle.drain).await;
        }
    };
    crate::connections::serve(listener, router(state), connections, shutdown).await;
    Ok(())
}
