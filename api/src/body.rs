//! The request body of a mutation: a JSON object, at most [`MAX_BODY_BYTES`].

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, StatusCode};
use serde_json::{Map, Value};
use tally_ledger::fields::ValidationErrors;

pub use crate::body_size::{body_limit, MAX_BATCH_BODY_BYTES, MAX_BODY_BYTES};
use crate::json_body::Parsed;
use crate::limits::BodyAllowance;
use crate::problem::ApiError;

/// Bytes of memory per JSON value (array element or object member) that
/// parsing into `serde_json::Value` takes at most, measured: 32 for the
/// `Value`, twice that for a `Vec` grown by doubling, and ~114 per member
/// of a `BTreeMap` (docs/operations.md, "Memory").
pub const PARSED_BYTES_PER_VALUE: usize = 128;
/// Bytes per JSON object beyond its members: a `BTreeMap` leaf node
/// (measured 697 bytes for `{"a":0}`).
pub const PARSED_BYTES_PER_OBJECT: usize = 704;

/// An upper bound of the memory `serde_json::from_slice::<Value>` takes for
/// `bytes` beyond the bytes themselves (strings are copied), found by
/// counting values and objects outside strings. A byte scan, because no
/// parser tells the count without building the values first.
pub fn parse_cost(bytes: &[u8]) -> usize {
    let (mut values, mut objects) = (1usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b',' => values += 1,
            b'{' => objects += 1,
            _ => {}
        }
    }
    bytes.len() + values * PARSED_BYTES_PER_VALUE + objects * PARSED_BYTES_PER_OBJECT
}

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
        let allowance = req.extensions().get::<BodyAllowance>().cloned();
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge
            } else {
                ApiError::MalformedJson(e.body_text())
            }
        })?;
        // Parsing may take many times the body's size (`parse_cost`): what
        // the allowance taken before the body was read does not cover is
        // taken from the body budget first, or the request is refused.
        if let Some(allowance) = &allowance {
            let covered = bytes.len() * crate::limits::UPFRONT_PARSE_FACTOR;
            let more = parse_cost(&bytes).saturating_sub(covered);
            if more > 0 {
                allowance.grow(more)?;
            }
        }
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
    fn parse_cost_counts_values_and_objects_outside_strings() {
        let base = |len: usize, values: usize, objects: usize| {
            len + values * PARSED_BYTES_PER_VALUE + objects * PARSED_BYTES_PER_OBJECT
        };
        assert_eq!(parse_cost(b"{}"), base(2, 1, 1));
        assert_eq!(parse_cost(br#"{"a":1,"b":[1,2]}"#), base(17, 3, 1));
        // Commas, braces and escaped quotes inside strings are text.
        let text = br#"{"a":"x,{y},\"z,{"}"#;
        assert_eq!(parse_cost(text), base(text.len(), 1, 1));
        // Many tiny objects cost far more than their bytes.
        let tiny = format!("[{}{{}}]", "{},".repeat(1000));
        assert!(parse_cost(tiny.as_bytes()) > 200 * tiny.len());
    }

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
