//! A webhook endpoint's deliveries (scope `admin`): listed with their
//! attempts, one sent again, the events from a `seq` replayed.

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::Json;
use tally_ledger::keys::Scope;
use tally_ledger::names::check_upstream_id;
use tally_webhooks::fanout::replay;
use tally_webhooks::store::{DeliveryFilter, DeliveryRow, DeliveryStatus, EndpointRow};

use super::path::PathText;
use super::query::QueryParams;
use super::text;
use super::webhooks::endpoint_id;
use crate::auth::Caller;
use crate::body::JsonObject;
use crate::problem::ApiError;
use crate::requests::{self, WebhookDeliveriesQuery, WebhookReplayRequest};
use crate::state::AppState;
use crate::views::{Problem, WebhookDelivery, WebhookDeliveryPage, WebhookReplay};

/// Largest page of deliveries.
const MAX_PAGE: i64 = 100;
const DEFAULT_PAGE: i64 = 20;

#[utoipa::path(
    get,
    path = "/v1/webhook-endpoints/{id}/deliveries",
    tag = "webhooks",
    operation_id = "listWebhookDeliveries",
    summary = "List an endpoint's deliveries",
    description = "Newest first, each with every attempt and its outcome (`delivered`, \
        `http_status`, `timeout`, `connection`, `gone`).",
    params(
        ("id" = String, Path, description = "The endpoint's `id`.", example = "we_0193a8d2c4f07b3e9a51c2d4e6f80a1b"),
        WebhookDeliveriesQuery,
    ),
    security(("bearer" = ["admin"])),
    responses(
        (status = 200, description = "A page.", body = WebhookDeliveryPage),
        (status = 404, description = text::NOT_FOUND, body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn list_webhook_deliveries(
    State(app): State<AppState>,
    caller: Caller,
    id: PathText,
    RawQuery(raw): RawQuery,
) -> Result<Json<WebhookDeliveryPage>, ApiError> {
    caller.require(Scope::Admin)?;
    let id = endpoint_id(id)?;
    let mut q = QueryParams::documented::<WebhookDeliveriesQuery>(raw.as_deref())?;
    let status = match q.text("status") {
        None => None,
        Some(s) => {
            let parsed = DeliveryStatus::parse(&s);
            if parsed.is_none() {
                q.error("status", "must be one of pending, delivered, failed");
            }
            parsed
        }
    };
    let after = q.name("after", check_upstream_id);
    let limit = q.int("limit", 1, MAX_PAGE).unwrap_or(DEFAULT_PAGE);
    q.finish()?;
    let storage = app.writers.storage();
    // 404 for an endpoint that is not the caller's, even with no deliveries.
    EndpointRow::get(storage, caller.tenant(), &id).await?;
    let filter = DeliveryFilter {
        status,
        after,
        limit,
    };
    let rows = DeliveryRow::list(storage, caller.tenant(), &id, &filter).await?;
    let next_after = (rows.len() as i64 == limit)
        .then(|| rows.last().map(|(d, _)| d.id.clone()))
        .flatten();
    Ok(Json(WebhookDeliveryPage {
        deliveries: rows
            .iter()
            .map(|(d, attempts)| WebhookDelivery::new(d, attempts))
            .collect(),
        next_after,
    }))
}

#[utoipa::path(
    post,
    path = "/v1/webhook-deliveries/{id}/retry",
    tag = "webhooks",
    operation_id = "retryWebhookDelivery",
    summary = "Send a delivery again",
    description = "The delivery is pending again, due now, whatever its status (a failed one \
        gets the maximum age again). The event keeps its id.",
    params(("id" = String, Path, description = "The delivery's `id`.", example = "wd_0193a8d2c4f07b3e9a51c2d4e6f80a1b")),
    security(("bearer" = ["admin"])),
    responses(
        (status = 202, description = "Scheduled.", body = WebhookDelivery),
        (status = 404, description = text::NOT_FOUND, body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn retry_webhook_delivery(
    State(app): State<AppState>,
    caller: Caller,
    id: PathText,
) -> Result<(StatusCode, Json<WebhookDelivery>), ApiError> {
    caller.require(Scope::Admin)?;
    let id = id.checked("id", check_upstream_id)?;
    let row = DeliveryRow::retry(app.writers.storage(), caller.tenant(), &id).await?;
    app.writers.heads().nudge();
    Ok((StatusCode::ACCEPTED, Json(WebhookDelivery::new(&row, &[]))))
}

#[utoipa::path(
    post,
    path = "/v1/webhook-endpoints/{id}/replay",
    tag = "webhooks",
    operation_id = "replayWebhookEvents",
    summary = "Send an endpoint's events again from a seq",
    description = "The events of the endpoint's types, of the entries from `from_seq` on \
        (at most 10,000 entries per request: `next_from_seq` says where to go on), are sent \
        again with their original ids: delivered and failed ones are pending again, missing \
        ones are made.",
    params(("id" = String, Path, description = "The endpoint's `id`.", example = "we_0193a8d2c4f07b3e9a51c2d4e6f80a1b")),
    request_body = WebhookReplayRequest,
    security(("bearer" = ["admin"])),
    responses(
        (status = 202, description = "Scheduled.", body = WebhookReplay),
        (status = 404, description = text::NOT_FOUND, body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn replay_webhook_events(
    State(app): State<AppState>,
    caller: Caller,
    id: PathText,
    JsonObject(body): JsonObject,
) -> Result<(StatusCode, Json<WebhookReplay>), ApiError> {
    caller.require(Scope::Admin)?;
    let id = endpoint_id(id)?;
    let from_seq = requests::replay_from(body).map_err(ApiError::Invalid)?;
    let storage = app.writers.storage();
    let endpoint = EndpointRow::get(storage, caller.tenant(), &id).await?;
    let done = replay(storage, caller.tenant(), &endpoint, from_seq).await?;
    app.writers.heads().nudge();
    Ok((
        StatusCode::ACCEPTED,
        Json(WebhookReplay {
            scheduled: done.scheduled,
            from_seq,
            to_seq: done.to_seq,
            next_from_seq: done.next_from_seq,
        }),
    ))
}
