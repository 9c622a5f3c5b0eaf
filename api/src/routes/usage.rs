//! `GET /v1/accounts/{account}/usage?meter=&from=&to=&granularity=day|month`:
//! the usage summaries as the asynchronous projector last left them
//! (docs/usage-summaries.md).

use axum::extract::{RawQuery, State};
use axum::Json;
use chrono::NaiveDate;
use tally_ledger::keys::Scope;
use tally_ledger::names::{check_any_account, check_label};
use tally_projections::usage::{read_usage, Granularity, UsageQuery, DAY_FORMAT};

use super::path::PathText;
use super::query::QueryParams;
use super::text;
use crate::auth::Caller;
use crate::problem::ApiError;
use crate::requests::UsageQuery as UsageParams;
use crate::state::AppState;
use crate::views::{Problem, Usage};

/// A day `YYYY-MM-DD`, or an RFC 3339 timestamp taken as its UTC date.
fn day(q: &mut QueryParams, name: &str) -> Option<NaiveDate> {
    let raw = q.text(name)?;
    if let Ok(d) = NaiveDate::parse_from_str(&raw, DAY_FORMAT) {
        if raw.len() == 10 {
            return Some(d);
        }
    }
    match chrono::DateTime::parse_from_rfc3339(&raw) {
        Ok(t) => Some(t.with_timezone(&chrono::Utc).date_naive()),
        Err(_) => {
            q.error(
                name,
                "must be a date such as 2026-11-29 or an RFC 3339 timestamp",
            );
            None
        }
    }
}

#[utoipa::path(
    get,
    path = "/v1/accounts/{account}/usage",
    tag = "accounts",
    operation_id = "getUsage",
    summary = "Usage per meter and day or month",
    description = "From the usage summaries, an asynchronous projection: `current_as_of_seq` \
        says up to which seq they are complete (equal to `head_seq` when nothing is pending). \
        An account without usage is an empty list (docs/usage-summaries.md).",
    params(("account" = String, Path, description = "A customer account.", example = "cust_42"), UsageParams),
    security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "The usage.", body = Usage),
        (status = 422, description = text::INVALID_QUERY, body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn get_usage(
    State(app): State<AppState>,
    caller: Caller,
    account: PathText,
    RawQuery(raw): RawQuery,
) -> Result<Json<Usage>, ApiError> {
    caller.require(Scope::Read)?;
    let mut q = QueryParams::documented::<UsageParams>(raw.as_deref())?;
    let account = q.path(account, "account", check_any_account);
    let meter = q.name("meter", check_label);
    let from = day(&mut q, "from");
    let to = day(&mut q, "to");
    if let (Some(f), Some(t)) = (from, to) {
        if t <= f {
            q.error("to", "must be a later day than from (to is exclusive)");
        }
    }
    let granularity = match q.text("granularity") {
        None => Granularity::Day,
        Some(g) => Granularity::parse(&g).unwrap_or_else(|| {
            q.error("granularity", "must be day or month");
            Granularity::Day
        }),
    };
    q.finish()?;
    let query = UsageQuery {
        account,
        meter,
        from,
        to,
    };
    let view = read_usage(app.writers.storage(), caller.tenant(), &query, granularity).await?;
    Ok(Json(view.into()))
}
