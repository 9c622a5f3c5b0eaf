//! The members of a 422's `errors`.

use serde::Serialize;
use utoipa::ToSchema;

/// One problem with one field (or query parameter) of a request.
// Describes `tally_ledger::fields::FieldError`, which `crate::problem`
// serializes into the body.
#[derive(Serialize, ToSchema)]
pub struct FieldError {
    /// The field's name; a dotted path inside an object (`metadata.model`).
    pub field: String,
    pub message: String,
}
