//! `GET /v1/accounts/{account}/balance[?as_of_seq=N | ?as_of=<RFC 3339>][&unit=U]`.

use axum::extract::{RawQuery, State};
use axum::Json;
use tally_ledger::keys::Scope;
use tally_ledger::names::{check_any_account, check_unit};
use tally_projections::balances::read_balance;
use tally_projections::statement::read_balance_at;

use super::path::PathText;
use super::query::QueryParams;
use crate::auth::Caller;
use crate::problem::ApiError;
use crate::requests::BalanceQuery;
use crate::state::AppState;
use crate::views::{Balance, Problem};

#[utoipa::path(
    get,
    path = "/v1/accounts/{account}/balance",
    tag = "accounts",
    operation_id = "getBalance",
    summary = "Read a balance, now or as of a seq or a time",
    description = "Now, as of a log position (`as_of_seq`), or as of a time on `recorded_at` \
        (`as_of`). A system account holding several units needs `unit`.",
    params(("account" = String, Path, description = "Any account, system accounts included.", example = "cust_42"), BalanceQuery),
    security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "The balance.", body = Balance),
        (status = 404, description = "`not_found`: the account has no entries (in that unit), or \
            is another tenant's.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_request`: an unknown, repeated or invalid \
            parameter; `as_of_seq` beyond the head; `as_of` in the future or with `as_of_seq`; \
            `unit` missing for a multi-unit system account.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn get_balance(
    State(app): State<AppState>,
    caller: Caller,
    account: PathText,
    RawQuery(raw): RawQuery,
) -> Result<Json<Balance>, ApiError> {
    caller.require(Scope::Read)?;
    let mut q = QueryParams::documented::<BalanceQuery>(raw.as_deref())?;
    let account = q.path(account, "account", check_any_account);
    let as_of_seq = q.int("as_of_seq", 0, i64::MAX);
    let as_of = q.timestamp("as_of");
    if as_of.is_some() && as_of_seq.is_some() {
        q.error(
            "as_of",
            "cannot be combined with as_of_seq: give one or the other",
        );
    }
    let unit = q.name("unit", check_unit);
    q.finish()?;
    if let Some(as_of) = as_of {
        let view = read_balance_at(
            app.writers.storage(),
            caller.tenant(),
            &account,
            unit.as_deref(),
            as_of,
        )
        .await?;
        return Ok(Json(view.into()));
    }
    let view = read_balance(
        app.writers.storage(),
        caller.tenant(),
        &account,
        unit.as_deref(),
        as_of_seq,
    )
    .await?;
    Ok(Json(view.into()))
}
