//! The outermost middleware: a request ID for every request, a tracing span
//! carrying it around everything the request logs, and the HTTP metrics.
//!
//! The ID is the client's `X-Request-Id` when that is 1–128 visible ASCII
//! characters, else a new UUIDv7; it is put back on the request (handlers
//! and inner layers see the one in use) and sent in the `X-Request-Id`
//! header of every answer, errors and shed requests included. tower-http's
//! `SetRequestId` and `PropagateRequestId` do the setting and the echoing
//! ([`request_id_layers`]); tally's rule for which client IDs are kept runs
//! before them, since `SetRequestId` keeps any ID a request carries. Nothing
//! here logs headers: the `Authorization` header never reaches a log line.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use tower::layer::util::{Identity, Stack};
use tower::util::MapRequestLayer;
use tower::ServiceBuilder;
use tower_http::request_id::{
    MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use tracing::Instrument;

use crate::metrics::{self, method_label, UNMATCHED_ROUTE};

/// The request ID header, in requests and answers.
pub static REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// The longest client-chosen request ID kept.
pub const MAX_REQUEST_ID_LEN: usize = 128;

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

/// Makes the IDs of requests that came without a usable one.
#[derive(Debug, Clone, Copy, Default)]
pub struct NewRequestId;

impl MakeRequestId for NewRequestId {
    fn make_request_id<B>(&mut self, _request: &axum::http::Request<B>) -> Option<RequestId> {
        // A UUID is visible ASCII: always a valid header value.
        HeaderValue::from_str(&new_request_id())
            .ok()
            .map(RequestId::new)
    }
}

/// Drops a client's `X-Request-Id` that [`valid_request_id`] refuses, so
/// that `SetRequestId` replaces it with a new one.
fn drop_invalid_request_id(mut request: Request) -> Request {
    let invalid = request
        .headers()
        .get(&REQUEST_ID_HEADER)
        .is_some_and(|v| valid_request_id(v).is_none());
    if invalid {
        request.headers_mut().remove(&REQUEST_ID_HEADER);
    }
    request
}

/// The layers of [`request_id_layers`], outermost first.
pub type RequestIdLayers = ServiceBuilder<
    Stack<
        PropagateRequestIdLayer,
        Stack<
            SetRequestIdLayer<NewRequestId>,
            Stack<MapRequestLayer<fn(Request) -> Request>, Identity>,
        >,
    >,
>;

/// Outside [`observe`]: a client ID tally refuses is dropped, a request
/// without one gets a new one (on the request and in its extensions), and
/// every answer carries the request's.
pub fn request_id_layers() -> RequestIdLayers {
    ServiceBuilder::new()
        .layer(MapRequestLayer::new(
            drop_invalid_request_id as fn(Request) -> Request,
        ))
        .layer(SetRequestIdLayer::new(
            REQUEST_ID_HEADER.clone(),
            NewRequestId,
        ))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID_HEADER.clone()))
}

pub async fn observe(request: Request, next: Next) -> Response {
    let started = Instant::now();
    // Set by `request_id_layers`, which run first: visible ASCII.
    let id = request
        .headers()
        .get(&REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let method = method_label(request.method());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| UNMATCHED_ROUTE.to_owned());

    // At ERROR level so the span is enabled whenever anything at all is
    // logged: a warning inside the request must carry the ID even when the
    // filter is `warn`. The level only filters; it is not printed.
    let span = tracing::error_span!("request", request_id = %id, method, route = %route);
    let response = async move {
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
