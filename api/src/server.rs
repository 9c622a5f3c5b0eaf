//! The router and the server loop.

use std::future::Future;
use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use tally_ledger::audit::sign::Signer;
use tally_ledger::store::Storage;
use tally_ledger::writer::{WriterConfig, Writers};
use tokio::net::TcpListener;

use crate::auth::KeyCache;
use crate::body::{MAX_BATCH_BODY_BYTES, MAX_BODY_BYTES};
use crate::problem::ApiError;
use crate::routes::{
    accounts, audit, balances, batch, entries, health, holds, intents, rules, usage,
};

#[derive(Clone)]
pub struct AppState {
    pub writers: Writers,
    pub keys: KeyCache,
    /// Signs audit checkpoints (`GET /v1/audit/head`, export trailers);
    /// `None` when signing is off.
    pub signer: Option<Arc<Signer>>,
}

impl AppState {
    pub fn new(storage: Storage, writer: WriterConfig) -> Self {
        Self {
            writers: Writers::new(storage, writer),
            keys: KeyCache::default(),
            signer: None,
        }
    }

    /// The same state, signing audit checkpoints with `signer`.
    pub fn with_signer(mut self, signer: Option<Signer>) -> Self {
        self.signer = signer.map(Arc::new);
        self
    }
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/usage-debits", post(intents::post_usage_debit))
        .route("/v1/payments", post(intents::post_payment))
        .route(
            "/v1/batch",
            post(batch::post_batch).layer(DefaultBodyLimit::max(MAX_BATCH_BODY_BYTES)),
        )
        .route("/v1/holds", post(holds::post_hold))
        .route("/v1/holds/{hold_id}", get(holds::get_hold))
        .route("/v1/holds/{hold_id}/capture", post(holds::post_capture))
        .route("/v1/holds/{hold_id}/release", post(holds::post_release))
        .route("/v1/refunds", post(rules::post_refund))
        .route("/v1/reversals", post(rules::post_reversal))
        .route("/v1/adjustments", post(rules::post_adjustment))
        .route(
            "/v1/accounts/{account}",
            get(accounts::get_account).put(accounts::put_account),
        )
        .route("/v1/entries", get(entries::list_entries))
        .route("/v1/entries/{id}", get(entries::get_entry))
        .route("/v1/accounts/{account}/balance", get(balances::get_balance))
        .route("/v1/accounts/{account}/usage", get(usage::get_usage))
        .route(
            "/v1/accounts/{account}/statement",
            get(crate::routes::statements::get_statement),
        )
        .route("/v1/audit/export", get(audit::get_export))
        .route("/v1/audit/head", get(audit::get_head))
        .route("/healthz", get(health::healthz))
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

/// Serves until `shutdown` resolves, then finishes in-flight requests.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ApiError> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}
