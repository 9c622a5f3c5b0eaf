//! The Stripe integration: its settings (scope `admin`), its events (scope
//! `read`) and a reapply (scope `post`); deliveries from Stripe are
//! [`super::ingest`]. docs/ingest.md has the semantics.

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use tally_ledger::keys::Scope;
use tally_ledger::names::check_upstream_id;

use super::path::PathText;
use super::query::QueryParams;
use super::text;
use crate::auth::Caller;
use crate::body::JsonObject;
use crate::ingest::stripe::{self, store};
use crate::problem::ApiError;
use crate::requests::{stripe_settings, StripeEventsQuery, StripeIntegrationRequest};
use crate::state::AppState;
use crate::views::{Problem, StripeEvent, StripeEventPage, StripeIntegration};

/// Most events on one page.
const MAX_EVENTS_PAGE: i64 = 1_000;

/// A new endpoint id: 160 random bits, so that the path cannot be guessed.
fn new_endpoint_id() -> Result<String, ApiError> {
    let mut bytes = [0u8; 20];
    getrandom::fill(&mut bytes)
        .map_err(|e| ApiError::Internal(format!("no random bytes for an endpoint id: {e}")))?;
    Ok(format!("sie_{}", hex::encode(bytes)))
}

#[utoipa::path(
    put,
    path = "/v1/integrations/stripe",
    tag = "integrations",
    operation_id = "putStripeIntegration",
    summary = "Configure the Stripe integration",
    description = "Creates or replaces the tenant's Stripe settings. The answer's \
        `endpoint_path` is the path to give Stripe (it stays the same when the settings are \
        replaced). The signing secrets are write-only: never shown again, never logged.",
    request_body = StripeIntegrationRequest,
    security(("bearer" = ["admin"])),
    responses(
        (status = 200, description = "The integration, without its secrets.", body = StripeIntegration),
        (status = 422, description = "`invalid_request`: no secret, more than 5, one that is \
            not `whsec_…`, a metadata key that is empty or over 40 bytes.",
            body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn put_stripe_integration(
    State(app): State<AppState>,
    caller: Caller,
    JsonObject(body): JsonObject,
) -> Result<Json<StripeIntegration>, ApiError> {
    caller.require(Scope::Admin)?;
    let settings = stripe_settings(body).map_err(ApiError::Invalid)?;
    let secrets = serde_json::Value::from(settings.signing_secrets).to_string();
    let row = store::put_integration(
        app.writers.storage(),
        caller.tenant(),
        &new_endpoint_id()?,
        &secrets,
        &settings.account_metadata_key,
        chrono::Utc::now().timestamp_micros(),
    )
    .await?;
    tracing::info!(tenant = caller.tenant(), "stripe integration configured");
    Ok(Json(StripeIntegration::from(&row)))
}

#[utoipa::path(
    get,
    path = "/v1/integrations/stripe",
    tag = "integrations",
    operation_id = "getStripeIntegration",
    summary = "Read the Stripe integration",
    description = "The tenant's Stripe settings and endpoint path, never the secrets.",
    security(("bearer" = ["admin"])),
    responses(
        (status = 200, description = "The integration.", body = StripeIntegration),
        (status = 404, description = "Not configured.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn get_stripe_integration(
    State(app): State<AppState>,
    caller: Caller,
) -> Result<Json<StripeIntegration>, ApiError> {
    caller.require(Scope::Admin)?;
    match store::integration(app.writers.storage(), caller.tenant()).await? {
        Some(row) => Ok(Json(StripeIntegration::from(&row))),
        None => Err(ApiError::NotFound),
    }
}

#[utoipa::path(
    delete,
    path = "/v1/integrations/stripe",
    tag = "integrations",
    operation_id = "deleteStripeIntegration",
    summary = "Remove the Stripe integration",
    description = "Deliveries to its path are refused (404) from now on. The events \
        received stay listed, and the entries they made stay in the ledger.",
    security(("bearer" = ["admin"])),
    responses(
        (status = 204, description = "Removed."),
        (status = 404, description = "Not configured.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn delete_stripe_integration(
    State(app): State<AppState>,
    caller: Caller,
) -> Result<Response, ApiError> {
    caller.require(Scope::Admin)?;
    if !store::delete_integration(app.writers.storage(), caller.tenant()).await? {
        return Err(ApiError::NotFound);
    }
    tracing::info!(tenant = caller.tenant(), "stripe integration removed");
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[utoipa::path(
    get,
    path = "/v1/integrations/stripe/events",
    tag = "integrations",
    operation_id = "listStripeEvents",
    summary = "List Stripe events",
    description = "The events received, in `event_id` order (bytes), filtered by `status`. \
        Pass `next_after` as `after` until it is null.",
    params(StripeEventsQuery),
    security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "A page.", body = StripeEventPage),
        (status = 422, description = text::INVALID_QUERY, body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn list_stripe_events(
    State(app): State<AppState>,
    caller: Caller,
    RawQuery(raw): RawQuery,
) -> Result<Json<StripeEventPage>, ApiError> {
    caller.require(Scope::Read)?;
    let mut q = QueryParams::documented::<StripeEventsQuery>(raw.as_deref())?;
    let status = q.text("status");
    if let Some(s) = &status {
        if !["applied", "ignored", "unmapped"].contains(&s.as_str()) {
            q.error("status", "must be one of applied, ignored, unmapped");
        }
    }
    let after = q.text("after");
    let limit = q.int("limit", 1, MAX_EVENTS_PAGE).unwrap_or(100);
    q.finish()?;
    let rows = store::events_page(
        app.writers.storage(),
        caller.tenant(),
        status.as_deref(),
        after.as_deref(),
        limit,
    )
    .await?;
    let next_after = (rows.len() as i64 == limit)
        .then(|| rows.last().map(|r| r.event_id.clone()))
        .flatten();
    Ok(Json(StripeEventPage {
        events: rows.iter().map(StripeEvent::from).collect(),
        next_after,
    }))
}

#[utoipa::path(
    post,
    path = "/v1/integrations/stripe/events/{event_id}/reapply",
    tag = "integrations",
    operation_id = "reapplyStripeEvent",
    summary = "Apply a Stripe event again",
    description = "Maps the recorded event again with the current settings and decides its \
        operations, for an event left `unmapped` once its mapping is fixed. Idempotent: the \
        entries are keyed by Stripe's ids, so what was applied before replays. The answer to \
        a redelivery from Stripe stays the first one.",
    params(("event_id" = String, Path, description = "Stripe's event id (`evt_…`).", example = "evt_1NG8Du2eZvKYlo2CUI79vXWy")),
    security(("bearer" = ["post"])),
    responses(
        (status = 200, description = "The event as recorded now.", body = StripeEvent),
        (status = 404, description = "No such event.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_request`: the tenant has no Stripe integration.",
            body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The ledger could not decide; retry.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn reapply_stripe_event(
    State(app): State<AppState>,
    caller: Caller,
    event_id: PathText,
) -> Result<Json<StripeEvent>, ApiError> {
    caller.require(Scope::Post)?;
    let event_id = event_id.checked("event_id", check_upstream_id)?;
    let row = stripe::reapply(&app.writers, caller.tenant(), &event_id).await?;
    Ok(Json(StripeEvent::from(&row)))
}
