//! The request body of a mutation: a JSON object, at most [`MAX_BODY_BYTES`].

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, StatusCode};
use serde_json::{Map, Value};
use tally_ledger::fields::ValidationErrors;

use crate::json_body::Parsed;
use crate::problem::ApiError;

/// Default request body limit (SPEC §3): 1 MiB.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// `POST /v1/batch` carries up to 1,000 operations, so it may be larger.
pub const MAX_BATCH_BODY_BYTES: usize = 8 * 1024 * 1024;

/// A parsed JSON object body: `application/json` (or `…+json`) in UTF-8.
pub struct JsonObject(pub Map<String, Value>);

fn is_json(content_type: &str) -> bool {
    let mime = content_type.split(';').next().unwrap_or("").trim();
    mime.eq_ignore_ascii_case("application/json")
        || (mime.len() > 5 && mime.to_ascii_lowercase().ends_with("+json"))
}

/// The `charset` parameter of a content type other than UTF-8, if any.
/// JSON is UTF-8 (RFC 8259 §8.1): a body declared in another charset would
/// be read as something else than its sender meant. Names and values of
/// parameters are case-insensitive; the value may be quoted (RFC 9110 §8.3.1).
fn foreign_charset(content_type: &str) -> Option<&str> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("charset") {
            return None;
        }
        let value = value.trim();
        let unquoted = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        (!unquoted.eq_ignore_ascii_case("utf-8")).then_some(unquoted)
    })
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
        if let Some(charset) = foreign_charset(content_type) {
            return Err(ApiError::UnsupportedMediaType(format!(
                "the body is declared as charset {charset:?}; send JSON in UTF-8 \
                 (charset=utf-8, or no charset)"
            )));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge
            } else {
                ApiError::MalformedJson(e.body_text())
            }
        })?;
        match crate::json_body::parse(&bytes) {
            Ok(Parsed {
                value: Value::Object(map),
                repeated,
            }) => match repeated {
                Some(key) => Err(ApiError::Invalid(ValidationErrors::single(
                    key,
                    "is given more than once",
                ))),
                None => Ok(JsonObject(map)),
            },
            Ok(_) => Err(ApiError::Invalid(ValidationErrors::single(
                "body",
                "must be a JSON object",
            ))),
            Err(e) => Err(ApiError::MalformedJson(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_utf8_charsets_pass() {
        for ok in [
            "application/json",
            "application/json; charset=utf-8",
            "application/json;charset=UTF-8",
            "application/json; Charset=\"Utf-8\"",
            "application/json; foo=bar",
        ] {
            assert_eq!(foreign_charset(ok), None, "{ok}");
        }
        assert_eq!(
            foreign_charset("application/json; charset=latin1"),
            Some("latin1")
        );
        assert_eq!(
            foreign_charset("application/json;CHARSET=\"utf-16\""),
            Some("utf-16")
        );
        assert_eq!(foreign_charset("application/json; charset="), Some(""));
    }
}
