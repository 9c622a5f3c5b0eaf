//! Descriptions shared by the operations of many routes.

pub const CREATED: &str = "Posted: the new entry.";
pub const REPLAYED: &str = "A replay of a posted entry: the body of the first answer, \
    byte for byte, with `Idempotent-Replayed: true`.";
pub const CONFLICT: &str = "`idempotency_conflict`: the upstream ID already names an entry \
    with other parameters (`entry_id`, `differing_fields`). Nothing was written.";
pub const NOT_FOUND: &str = "`not_found`: no such object in the caller's tenant (another \
    tenant's objects are invisible).";
pub const INVALID_QUERY: &str = "`invalid_request`: a query parameter is unknown, repeated \
    or invalid (`errors` names each).";
pub const INVALID: &str =
    "`invalid_request`: every problem of the body at once (`errors`); nothing written.";
