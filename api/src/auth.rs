//! Bearer keys: only their sha256 is stored. A key found is cached for
//! `--key-recheck-ms` (10 s), then asked for again, so a key deleted from
//! `api_keys` (revoked) stops working on every instance within that time,
//! without a restart; a miss always asks the database, so a key created a
//! moment ago works at once.

use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;
use tally_ledger::keys::{hash_secret, ApiKey, Scope};

pub use crate::key_cache::KeyCache;
use crate::limits::retry_after_seconds;
use crate::problem::ApiError;
use crate::state::AppState;

/// The token of `Authorization: Bearer <token>`. The scheme is
/// case-insensitive (RFC 9110 §11.1): `bearer` and `BEARER` are Bearer too.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// The authenticated caller.
pub struct Caller(pub ApiKey);

impl Caller {
    pub fn tenant(&self) -> &str {
        &self.0.tenant_id
    }

    pub fn require(&self, scope: Scope) -> Result<(), ApiError> {
        if self.0.allows(scope) {
            Ok(())
        } else {
            Err(ApiError::Forbidden(scope))
        }
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let secret = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token)
            .filter(|s| !s.is_empty())
            .ok_or(ApiError::Unauthenticated)?;
        let hash = hash_secret(secret);
        let key = state
            .keys
            .lookup(state.writers.storage(), &hash)
            .await?
            .ok_or(ApiError::Unauthenticated)?;
        // Rate limited per key, after authentication: unknown keys never
        // get a bucket, so they cannot grow the limiter's map.
        if let Some(limiter) = &state.limits.rate {
            limiter
                .check(&hash)
                .map_err(|wait| ApiError::KeyRateLimited(retry_after_seconds(wait)))?;
        }
        Ok(Caller(key))
    }
}
