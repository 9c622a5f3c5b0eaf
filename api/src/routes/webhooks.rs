//! Webhook endpoints (scope `admin`): made, read, changed, deleted, their
//! secret rotated. Deliveries are in [`super::webhook_deliveries`];
//! docs/events.md has the semantics.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use tally_ledger::keys::Scope;
use tally_ledger::names::check_upstream_id;
use tally_webhooks::signature::new_secret;
use tally_webhooks::store::EndpointRow;

use super::path::PathText;
use super::text;
use crate::auth::Caller;
use crate::body::JsonObject;
use crate::problem::ApiError;
use crate::requests::{self, WebhookEndpointChangeRequest, WebhookEndpointRequest};
use crate::state::AppState;
use crate::views::{Problem, WebhookEndpoint, WebhookEndpointList, WebhookEndpointWithSecret};

/// The endpoint id of a path, under the rule of IDs.
pub(super) fn endpoint_id(id: PathText) -> Result<String, ApiError> {
    id.checked("id", check_upstream_id)
}

fn secret() -> Result<String, ApiError> {
    new_secret().map_err(|e| ApiError::Internal(format!("no random bytes for a secret: {e}")))
}

#[utoipa::path(
    post,
    path = "/v1/webhook-endpoints",
    tag = "webhooks",
    operation_id = "postWebhookEndpoint",
    summary = "Create a webhook endpoint",
    description = "Events of the tenant's entries committed after now are signed and sent to \
        `url` (docs/events.md). The answer holds the signing `secret`, shown only here. A \
        tenant has at most 16 endpoints.",
    request_body = WebhookEndpointRequest,
    security(("bearer" = ["admin"])),
    responses(
        (status = 201, description = "The endpoint, with its secret.", body = WebhookEndpointWithSecret),
        (status = 422, description = "`invalid_request`: a URL that is not `https://` or names a \
            loopback, private, link-local or metadata address (unless the server allows \
            insecure endpoints), an unknown event type, the limit of endpoints reached.",
            body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn post_webhook_endpoint(
    State(app): State<AppState>,
    caller: Caller,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    caller.require(Scope::Admin)?;
    let new =
        requests::new_endpoint(body, app.webhooks.allow_insecure).map_err(ApiError::Invalid)?;
    let row = EndpointRow::create(
        app.writers.storage(),
        caller.tenant(),
        &new.url,
        &new.event_types,
        new.description.as_deref(),
        &secret()?,
    )
    .await?;
    tracing::info!(tenant = caller.tenant(), endpoint = %row.id, "webhook endpoint created");
    Ok((
        StatusCode::CREATED,
        Json(WebhookEndpointWithSecret::from(&row)),
    )
        .into_response())
}

#[utoipa::path(
    get,
    path = "/v1/webhook-endpoints",
    tag = "webhooks",
    operation_id = "listWebhookEndpoints",
    summary = "List webhook endpoints",
    description = "Every endpoint of the tenant, oldest first; no secrets.",
    security(("bearer" = ["admin"])),
    responses((status = 200, description = "The endpoints.", body = WebhookEndpointList)),
)]
pub async fn list_webhook_endpoints(
    State(app): State<AppState>,
    caller: Caller,
) -> Result<Json<WebhookEndpointList>, ApiError> {
    caller.require(Scope::Admin)?;
    let rows = EndpointRow::list(app.writers.storage(), caller.tenant()).await?;
    Ok(Json(WebhookEndpointList {
        endpoints: rows.iter().map(WebhookEndpoint::from).collect(),
    }))
}

#[utoipa::path(
    get,
    path = "/v1/webhook-endpoints/{id}",
    tag = "webhooks",
    operation_id = "getWebhookEndpoint",
    summary = "Read a webhook endpoint",
    description = "The endpoint without its secret.",
    params(("id" = String, Path, description = "The endpoint's `id`.", example = "we_0193a8d2c4f07b3e9a51c2d4e6f80a1b")),
    security(("bearer" = ["admin"])),
    responses(
        (status = 200, description = "The endpoint.", body = WebhookEndpoint),
        (status = 404, description = text::NOT_FOUND, body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn get_webhook_endpoint(
    State(app): State<AppState>,
    caller: Caller,
    id: PathText,
) -> Result<Json<WebhookEndpoint>, ApiError> {
    caller.require(Scope::Admin)?;
    let id = endpoint_id(id)?;
    let row = EndpointRow::get(app.writers.storage(), caller.tenant(), &id).await?;
    Ok(Json(WebhookEndpoint::from(&row)))
}

#[utoipa::path(
    patch,
    path = "/v1/webhook-endpoints/{id}",
    tag = "webhooks",
    operation_id = "patchWebhookEndpoint",
    summary = "Change a webhook endpoint",
    description = "Changes what the body gives: `url`, `event_types`, `description`, `enabled`. \
        A disabled endpoint's deliveries wait; enabling it sends them again (and clears \
        `disabled_reason`, also after a 410).",
    params(("id" = String, Path, description = "The endpoint's `id`.", example = "we_0193a8d2c4f07b3e9a51c2d4e6f80a1b")),
    request_body = WebhookEndpointChangeRequest,
    security(("bearer" = ["admin"])),
    responses(
        (status = 200, description = "The endpoint as changed.", body = WebhookEndpoint),
        (status = 404, description = text::NOT_FOUND, body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn patch_webhook_endpoint(
    State(app): State<AppState>,
    caller: Caller,
    id: PathText,
    JsonObject(body): JsonObject,
) -> Result<Json<WebhookEndpoint>, ApiError> {
    caller.require(Scope::Admin)?;
    let id = endpoint_id(id)?;
    let change =
        requests::endpoint_change(body, app.webhooks.allow_insecure).map_err(ApiError::Invalid)?;
    let row = EndpointRow::update(app.writers.storage(), caller.tenant(), &id, &change).await?;
    Ok(Json(WebhookEndpoint::from(&row)))
}

#[utoipa::path(
    delete,
    path = "/v1/webhook-endpoints/{id}",
    tag = "webhooks",
    operation_id = "deleteWebhookEndpoint",
    summary = "Delete a webhook endpoint",
    description = "The endpoint and its deliveries, pending ones included, are gone.",
    params(("id" = String, Path, description = "The endpoint's `id`.", example = "we_0193a8d2c4f07b3e9a51c2d4e6f80a1b")),
    security(("bearer" = ["admin"])),
    responses(
        (status = 204, description = "Deleted."),
        (status = 404, description = text::NOT_FOUND, body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn delete_webhook_endpoint(
    State(app): State<AppState>,
    caller: Caller,
    id: PathText,
) -> Result<StatusCode, ApiError> {
    caller.require(Scope::Admin)?;
    let id = endpoint_id(id)?;
    EndpointRow::delete(app.writers.storage(), caller.tenant(), &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    post,
    path = "/v1/webhook-endpoints/{id}/rotate-secret",
    tag = "webhooks",
    operation_id = "rotateWebhookSecret",
    summary = "Rotate a webhook endpoint's secret",
    description = "A new secret, shown only here. The previous one keeps signing beside it \
        (two `v1,` signatures per delivery) until `previous_secret_expires_at` \
        (`--webhook-secret-grace-s`, 24 hours by default), so receivers can switch without \
        refusing a delivery.",
    params(("id" = String, Path, description = "The endpoint's `id`.", example = "we_0193a8d2c4f07b3e9a51c2d4e6f80a1b")),
    security(("bearer" = ["admin"])),
    responses(
        (status = 200, description = "The endpoint with its new secret.", body = WebhookEndpointWithSecret),
        (status = 404, description = text::NOT_FOUND, body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn rotate_webhook_secret(
    State(app): State<AppState>,
    caller: Caller,
    id: PathText,
) -> Result<Json<WebhookEndpointWithSecret>, ApiError> {
    caller.require(Scope::Admin)?;
    let id = endpoint_id(id)?;
    let grace = app.webhooks.secret_grace.as_micros() as i64;
    let row = EndpointRow::rotate(
        app.writers.storage(),
        caller.tenant(),
        &id,
        &secret()?,
        grace,
    )
    .await?;
    tracing::info!(tenant = caller.tenant(), endpoint = %row.id, "webhook secret rotated");
    Ok(Json(WebhookEndpointWithSecret::from(&row)))
}
