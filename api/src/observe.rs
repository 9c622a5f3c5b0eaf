//! The outermost middleware: a request ID for every request, a tracing span
//! carrying it around everything the request logs, and the HTTP metrics.
//!
//! The ID is the client's `X-Request-Id` when that is 1–128 visible ASCII
//! characters, else a new UUIDv7; it is put back on the request (handlers
//! and inner layers see the one in use) and sent in the `X-Request-Id`
//! header of every answer, errors and shed requests included. Nothing here
//! logs headers: the `Authorization` header never reaches a log line.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use crate::metrics::{self, method_label, UNMATCHED_ROUTE};

/// The request ID header, in requests and answers.
pub static REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// The longest client-chosen request ID kept.
pub const MAX_REQUEST_ID_LEN: usize = 128;

/// The request ID in use, in the request's extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(pub String);

/// The client's ID if it is 1–128 visible ASCII characters (`!` to `~`;
/// no spaces, no control or non-ASCII bytes), which log lines and headers
/// carry unescaped.
pub fn valid_request_id(value: &HeaderValue) -> Option<&str> {
    let bytes = value.as_bytes();
    let ok = (1..=MAX_REQUEST_ID_LEN).contains(&bytes.len())
        && bytes.iter().all(|b| (0x21..=0x7e).contains(b));
    if ok {
        value.to_str().ok()
    } else {
        None
    }
}

/// A fresh request ID: a UUIDv7, so IDs sort by time.
pub fn new_request_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

pub async fn observe(mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let id = match request.headers().get(&REQUEST_ID_HEADER) {
        Some(v) => valid_request_id(v).map(str::to_owned),
        None => None,
    }
    .unwrap_or_else(new_request_id);
    // Visible ASCII by construction (checked above, or a UUID), which is
    // always a valid header value.
    let header = HeaderValue::from_str(&id).ok();
    match &header {
        Some(h) => request.headers_mut().insert(&REQUEST_ID_HEADER, h.clone()),
        None => request.headers_mut().remove(&REQUEST_ID_HEADER),
    };
    let method = method_label(request.method());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| UNMATCHED_ROUTE.to_owned());
    request.extensions_mut().insert(RequestId(id.clone()));

    // At ERROR level so the span is enabled whenever anything at all is
    // logged: a warning inside the request must carry the ID even when the
    // filter is `warn`. The level only filters; it is not printed.
    let span = tracing::error_span!("request", request_id = %id, method, route = %route);
    let mut response = async move {
        tracing::debug!(path = request.uri().path(), "request started");
        let response = next.run(request).await;
        tracing::debug!(
            status = response.status().as_u16(),
            latency_ms = started.elapsed().as_secs_f64() * 1e3,
            "request finished"
        );
        response
    }
    .instrument(span)
    .await;

    if let Some(h) = header {
        response.headers_mut().insert(&REQUEST_ID_HEADER, h);
    }
    metrics::global().observe_http(method, &route, response.status(), started.elapsed());
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn request_ids_are_checked() {
        let ok = |s: &str| valid_request_id(&HeaderValue::from_str(s).unwrap()).is_some();
        assert!(ok("a"));
        assert!(ok("req-123_ABC.~!"));
        assert!(ok(&"x".repeat(128)));
        assert!(!ok(&"x".repeat(129)));
        assert!(!ok(""));
        assert!(!ok("has space"));
        assert!(!ok("tab\there"));
        let obs = HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap();
        assert!(valid_request_id(&obs).is_none());
        let id = new_request_id();
        assert!(ok(&id), "{id}");
    }
}
