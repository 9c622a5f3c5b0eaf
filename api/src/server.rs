//! The router and the server loop: the top layer, which assembles the
//! routes, the OpenAPI document and the middleware.

use std::future::Future;

use axum::extract::DefaultBodyLimit;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use tokio::net::TcpListener;
use utoipa::OpenApi as _;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

use crate::body_size::{MAX_BATCH_BODY_BYTES, MAX_BODY_BYTES};
use crate::connections::ConnectionLimits;
use crate::problem::{ApiError, InternalError};
use crate::routes::{
    accounts, audit, balances, batch, entries, health, holds, ingest, integrations, intents, rules,
    transfers, usage, webhook_deliveries, webhooks,
};
pub use crate::state::{AppState, DEFAULT_KEY_RECHECK};

/// Every route the server answers, each registered with its OpenAPI
/// operation by `routes!` (the method and path come from the handler's
/// `#[utoipa::path]`), so the router and `GET /openapi.json` list the same
/// operations (tests/openapi.rs checks both ways). Add routes here, with
/// `routes!`, never with `.route()`.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(crate::openapi::ApiDoc::openapi())
        .routes(routes!(transfers::post_usage_debit))
        .routes(routes!(transfers::post_payment))
        .routes(routes!(batch::post_batch).layer(DefaultBodyLimit::max(MAX_BATCH_BODY_BYTES)))
        .routes(routes!(intents::claim_intent))
        .routes(routes!(intents::list_intents))
        .routes(routes!(intents::get_intent))
        .routes(
            routes!(intents::complete_intent).layer(DefaultBodyLimit::max(MAX_BATCH_BODY_BYTES)),
        )
        .routes(routes!(intents::fail_intent))
        .routes(routes!(intents::heartbeat_intent))
        .routes(routes!(
            integrations::put_stripe_integration,
            integrations::get_stripe_integration,
            integrations::delete_stripe_integration
        ))
        .routes(routes!(integrations::list_stripe_events))
        .routes(routes!(integrations::reapply_stripe_event))
        .routes(routes!(ingest::receive_stripe_event))
        .routes(routes!(holds::post_hold))
        .routes(routes!(holds::get_hold))
        .routes(routes!(holds::post_capture))
        .routes(routes!(holds::post_release))
        .routes(routes!(rules::post_refund))
        .routes(routes!(rules::post_reversal))
        .routes(routes!(rules::post_adjustment))
        .routes(routes!(accounts::list_accounts))
        .routes(routes!(accounts::get_account, accounts::put_account))
        .routes(routes!(entries::list_entries))
        .routes(routes!(entries::get_entry))
        .routes(routes!(balances::get_balance))
        .routes(routes!(usage::get_usage))
        .routes(routes!(crate::routes::statements::get_statement))
        .routes(routes!(
            webhooks::post_webhook_endpoint,
            webhooks::list_webhook_endpoints
        ))
        .routes(routes!(
            webhooks::get_webhook_endpoint,
            webhooks::patch_webhook_endpoint,
            webhooks::delete_webhook_endpoint
        ))
        .routes(routes!(webhooks::rotate_webhook_secret))
        .routes(routes!(webhook_deliveries::list_webhook_deliveries))
        .routes(routes!(webhook_deliveries::retry_webhook_delivery))
        .routes(routes!(webhook_deliveries::replay_webhook_events))
        .routes(routes!(audit::get_export))
        .routes(routes!(audit::get_head))
        .routes(routes!(crate::routes::audit_verify::post_audit_verify))
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(crate::metrics::get_metrics))
        .routes(routes!(crate::openapi::get_openapi))
        .routes(routes!(crate::openapi::get_docs))
        .routes(routes!(crate::openapi::get_docs_asset))
        .routes(routes!(crate::routes::console::get_console))
        .routes(routes!(crate::routes::console::get_console_path))
}

/// The document the server serves at `/openapi.json`, as `tally openapi`
/// prints it (and `api/openapi.json` holds it): pretty JSON, one newline.
pub fn openapi_text() -> Result<String, serde_json::Error> {
    let doc = crate::openapi::document(|| routes().split_for_parts().1);
    Ok(serde_json::to_string_pretty(doc)? + "\n")
}

pub fn router(state: AppState) -> Router {
    let (router, doc) = routes().split_for_parts();
    crate::openapi::document(|| doc);
    router
        .fallback(|| async { ApiError::NoRoute })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            state.limits.clone(),
            crate::limits::guard,
        ))
        .layer(axum::middleware::from_fn(count_internal_errors))
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

/// Counts each 500 answered (`tally_internal_errors_total`) by its cause,
/// which `crate::problem` leaves on the response; the problem mapping
/// itself counts nothing.
async fn count_internal_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if let Some(InternalError(cause)) = response.extensions().get::<InternalError>() {
        crate::metrics::global().observe_internal_error(cause);
    }
    response
}
