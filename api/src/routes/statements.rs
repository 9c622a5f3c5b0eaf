//! `GET /v1/accounts/{account}/statement?from=&to=[&unit=]`: opening
//! balance, the period's entries and movements, closing balance
//! (docs/audit.md, "Statements and balances at a time").

use axum::extract::{RawQuery, State};
use axum::Json;
use tally_ledger::keys::Scope;
use tally_ledger::names::{check_any_account, check_unit};
use tally_projections::statement::read_statement;

use super::path::PathText;
use super::query::QueryParams;
use crate::auth::Caller;
use crate::problem::ApiError;
use crate::requests::StatementQuery;
use crate::state::AppState;
use crate::views::{Problem, Statement};

#[utoipa::path(
    get,
    path = "/v1/accounts/{account}/statement",
    tag = "accounts",
    operation_id = "getStatement",
    summary = "A statement of a period",
    description = "Opening balance (`recorded_at < from`), the period's movements and entries \
        (rejected ones included), closing balance (`recorded_at < to`), checked to add up. At \
        most 100,000 entries (docs/audit.md).",
    params(("account" = String, Path, description = "Any account.", example = "cust_42"), StatementQuery),
    security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "The statement.", body = Statement),
        (status = 404, description = "`not_found`: the account has no entries (in that unit), or \
            is another tenant's.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_request`: `from`/`to` missing or invalid, \
            `from >= to`, `to` in the future, more than 100,000 entries (on `to`), or an \
            unknown or repeated parameter.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn get_statement(
    State(app): State<AppState>,
    caller: Caller,
    account: PathText,
    RawQuery(raw): RawQuery,
) -> Result<Json<Statement>, ApiError> {
    caller.require(Scope::Read)?;
    let mut q = QueryParams::documented::<StatementQuery>(raw.as_deref())?;
    let account = q.path(account, "account", check_any_account);
    let from = q.timestamp("from");
    let to = q.timestamp("to");
    for (name, value) in [("from", from.is_none()), ("to", to.is_none())] {
        if value && !q.has_error(name) {
            q.error(name, "is required (an RFC 3339 timestamp)");
        }
    }
    let unit = q.name("unit", check_unit);
    q.finish()?;
    let (Some(from), Some(to)) = (from, to) else {
        return Err(ApiError::Internal(
            "from and to were checked just above".into(),
        ));
    };
    let view = read_statement(
        app.writers.storage(),
        caller.tenant(),
        &account,
        unit.as_deref(),
        from,
        to,
    )
    .await?;
    Ok(Json(view.into()))
}
