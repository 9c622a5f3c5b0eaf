//! `GET /v1/accounts/{account}/statement?from=&to=[&unit=]`: opening
//! balance, the period's entries and movements, closing balance
//! (docs/audit.md, "Statements and balances at a time").

use axum::extract::{Path, RawQuery, State};
use axum::Json;
use tally_ledger::keys::Scope;
use tally_ledger::names::check_any_account;
use tally_ledger::statement::{read_statement, StatementView};

use super::query::QueryParams;
use crate::auth::Caller;
use crate::problem::ApiError;
use crate::server::AppState;

pub async fn get_statement(
    State(app): State<AppState>,
    caller: Caller,
    Path(account): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<StatementView>, ApiError> {
    caller.require(Scope::Read)?;
    let mut q = QueryParams::parse(raw.as_deref(), &["from", "to", "unit"])?;
    if let Err(m) = check_any_account(&account) {
        q.error("account", m);
    }
    let from = q.timestamp("from");
    let to = q.timestamp("to");
    for (name, value) in [("from", from.is_none()), ("to", to.is_none())] {
        if value && !q.has_error(name) {
            q.error(name, "is required (an RFC 3339 timestamp)");
        }
    }
    let unit = q.text("unit");
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
    Ok(Json(view))
}
