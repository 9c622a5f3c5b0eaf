//! `GET /v1/accounts/{account}/balance[?as_of_seq=N][&unit=U]`.

use axum::extract::{Path, RawQuery, State};
use axum::Json;
use tally_ledger::balance::{read_balance, BalanceView};
use tally_ledger::keys::Scope;

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
    let mut q = QueryParams::parse(raw.as_deref(), &["as_of_seq", "unit"])?;
    let as_of_seq = q.int("as_of_seq", 0, i64::MAX);
    let unit = q.text("unit");
    q.finish()?;
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
