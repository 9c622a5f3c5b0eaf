//! Deliveries from Stripe: `POST /v1/ingest/stripe/{endpoint_id}`, with no
//! API key, authenticated by `Stripe-Signature` ([`crate::ingest::stripe`]).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::path::PathText;
use crate::ingest::stripe;
use crate::problem::ApiError;
use crate::requests::StripeEventRequest;
use crate::state::AppState;
use crate::views::{Problem, StripeDelivery};

#[utoipa::path(
    post,
    path = "/v1/ingest/stripe/{endpoint_id}",
    tag = "integrations",
    operation_id = "receiveStripeEvent",
    summary = "Receive a Stripe event (called by Stripe)",
    description = "The path is the integration's `endpoint_path`. No API key: the body must \
        be signed (`Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of \"<t>.<raw body>\">`) \
        with a configured secret, at most 300 s ago. `payment_intent.succeeded` becomes a \
        `payment`, `charge.refunded` a `refund` per refund; other types are acknowledged as \
        `ignored`; an event that can't be mapped is acknowledged as `unmapped`. A \
        redelivery of an event answers as the first delivery did and writes nothing.",
    params(
        ("endpoint_id" = String, Path, description = "The unguessable id of the integration's path.",
            example = "sie_5d0c8c1b2a3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d"),
        ("Stripe-Signature" = String, Header, description = "Stripe's signature of the body."),
    ),
    request_body = StripeEventRequest,
    responses(
        (status = 200, description = "Recorded (a redelivery: `Idempotent-Replayed: true`).", body = StripeDelivery),
        (status = 400, description = "`invalid_signature` (missing, malformed, stale or made \
            with no configured secret) or `malformed_json`; nothing written.",
            body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No integration has this path.", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The ledger could not decide; nothing recorded, Stripe retries.",
            body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn receive_stripe_event(
    State(app): State<AppState>,
    endpoint_id: PathText,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let endpoint_id = endpoint_id.checked("endpoint_id", |id| {
        if id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            Ok(())
        } else {
            Err("is not an endpoint id".into())
        }
    })?;
    let signature = headers
        .get("stripe-signature")
        .and_then(|v| v.to_str().ok());
    let delivered = stripe::receive(
        &app.writers,
        &endpoint_id,
        signature,
        &body,
        chrono::Utc::now().timestamp(),
    )
    .await?;
    let mut response = (StatusCode::OK, Json(delivered.body)).into_response();
    if delivered.replayed {
        response
            .headers_mut()
            .insert("Idempotent-Replayed", HeaderValue::from_static("true"));
    }
    Ok(response)
}
