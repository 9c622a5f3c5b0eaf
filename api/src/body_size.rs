//! How large a request body may be, by path: what the router's
//! `DefaultBodyLimit` layers enforce and the body budget of `crate::limits`
//! reserves.

/// Default request body limit (SPEC §3): 1 MiB.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// `POST /v1/batch` and an intent's `complete` carry up to 1,000
/// operations, so they may be larger.
pub const MAX_BATCH_BODY_BYTES: usize = 8 * 1024 * 1024;

/// The body limit of a path: what the router's `DefaultBodyLimit` layers
/// set, for the body budget of `crate::limits`.
pub fn body_limit(path: &str) -> usize {
    // A completion carries up to 1,000 batch operations too.
    if path == "/v1/batch" || (path.starts_with("/v1/intents/") && path.ends_with("/complete")) {
        MAX_BATCH_BODY_BYTES
    } else {
        MAX_BODY_BYTES
    }
}
