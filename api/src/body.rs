//! The request body of a mutation: a JSON object, at most [`MAX_BODY_BYTES`].

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, StatusCode};
use serde_json::{Map, Value};
use tally_ledger::fields::ValidationErrors;

use crate::problem::ApiError;

/// Default request body limit (SPEC §3): 1 MiB.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// `POST /v1/batch` carries up to 1,000 operations, so it may be larger.
pub const MAX_BATCH_BODY_BYTES: usize = 8 * 1024 * 1024;

/// A parsed JSON object body.
pub struct JsonObject(pub Map<String, Value>);

fn is_json(content_type: &str) -> bool {
    let mime = content_type.split(';').next().unwrap_or("").trim();
    mime.eq_ignore_ascii_case("application/json")
        || (mime.len() > 5 && mime.to_ascii_lowercase().ends_with("+json"))
}

impl<S: Send + Sync> FromRequest<S> for JsonObject {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !is_json(content_type) {
            return Err(ApiError::MalformedJson(
                "Content-Type must be application/json".into(),
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge
            } else {
                ApiError::MalformedJson(e.body_text())
            }
        })?;
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(map)) => match crate::duplicate_keys::find_duplicate_key(&bytes) {
                None => Ok(JsonObject(map)),
                Some(key) => Err(ApiError::Invalid(ValidationErrors::single(
                    key,
                    "is given more than once",
                ))),
            },
            Ok(_) => Err(ApiError::Invalid(ValidationErrors::single(
                "body",
                "must be a JSON object",
            ))),
            Err(e) => Err(ApiError::MalformedJson(e.to_string())),
        }
    }
}
