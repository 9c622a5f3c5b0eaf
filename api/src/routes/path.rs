//! A path parameter read under the name rules of request bodies.
//!
//! axum's own `Path` answers a percent-encoding that is not UTF-8 (`%FF`)
//! with a plain-text 400; here it is a 422 `invalid_request` naming the
//! parameter, like any other invalid name. Each handler then checks the
//! text with the rule of its kind ([`tally_ledger::names`]) before any
//! database call: a NUL, another control character or an over-long name
//! never reaches the database.

use axum::extract::path::ErrorKind;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use tally_ledger::fields::ValidationErrors;

use crate::problem::ApiError;

/// The one path parameter of a route, percent-decoded, as text.
pub struct PathText(String);

impl<S: Send + Sync> FromRequestParts<S> for PathText {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(text)) => Ok(PathText(text)),
            Err(PathRejection::FailedToDeserializePathParams(e)) => match e.into_kind() {
                ErrorKind::InvalidUtf8InPathParam { key } => {
                    Err(ApiError::Invalid(ValidationErrors::single(key, NOT_UTF8)))
                }
                other => Err(ApiError::Internal(format!("path parameter: {other}"))),
            },
            Err(other) => Err(ApiError::Internal(format!("path parameter: {other}"))),
        }
    }
}

/// The message for text whose percent-encoding is not UTF-8.
pub const NOT_UTF8: &str = "must be UTF-8 once percent-decoded";

impl PathText {
    /// The text, once `check` accepts it; else a 422 naming `name`.
    pub fn checked(
        self,
        name: &str,
        check: impl Fn(&str) -> Result<(), String>,
    ) -> Result<String, ApiError> {
        match check(&self.0) {
            Ok(()) => Ok(self.0),
            Err(message) => Err(ApiError::Invalid(ValidationErrors::single(name, message))),
        }
    }

    /// The text as given, for a handler whose own parser checks it (and
    /// reports it with every other problem of the request).
    pub fn into_inner(self) -> String {
        self.0
    }
}
