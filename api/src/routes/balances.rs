//! `GET /v1/accounts/{account}/balance[?as_of_seq=N | ?as_of=<RFC 3339>][&unit=U]`.

use axum::extract::{Path, RawQuery, State};
use axum::Json;
use tally_ledger::balance::{read_balance, BalanceView};
use tally_ledger::keys::Scope;
use tally_ledger::statement::read_balance_at;

use super::query::QueryParams;
use crate::auth::Caller;
use crate::problem::ApiError;
use crate::server::AppState;

pub async fn get_balance(
    State(app): State<AppState>,
    caller: Caller,
    Path(account): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<BalanceView>, ApiError> {
    caller.require(Scope::Read)?;
    let mut q = QueryParams::parse(raw.as_deref(), &["as_of_seq", "as_of", "unit"])?;
    let as_of_seq = q.int("as_of_seq", 0, i64::MAX);
    let as_of = q.timestamp("as_of");
    if as_of.is_some() && as_of_seq.is_some() {
        q.error(
            "as_of",
            "cannot be combined with as_of_seq: give one or the other",
        );
    }
    let unit = q.text("unit");
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
        return Ok(Json(view));
    }
    let view = read_balance(
        app.writers.storage(),
        caller.tenant(),
        &account,
        unit.as_deref(),
        as_of_seq,
    )
    .await?;
    Ok(Json(view))
}
