//! `PUT /v1/accounts/{account}` (scope `admin`) and `GET /v1/accounts/{account}`.
//!
//! A PUT is idempotent by its content: settings equal to the current ones
//! write nothing; different ones append an `account_settings` entry, so the
//! log alone explains every later decision.

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use tally_ledger::decide::Decision;
use tally_ledger::keys::Scope;
use tally_ledger::names::check_any_account;
use tally_ledger::request::EntryRequest;
use tally_ledger::rule_state::{AccountSettings, Overdraft, StateKey, StateValue};
use tally_ledger::store::AccountFilter;
use tally_ledger::LedgerError;
use tally_projections::balances::read_balance;

use super::answer;
use super::path::PathText;
use super::query::QueryParams;
use super::text;
use crate::auth::Caller;
use crate::body::JsonObject;
use crate::problem::ApiError;
use crate::requests::{AccountSettingsRequest, AccountsQuery};
use crate::state::AppState;
use crate::views::{AccountPage, AccountSummary, AccountView, Problem};

#[utoipa::path(
    put,
    path = "/v1/accounts/{account}",
    tag = "accounts",
    operation_id = "putAccount",
    summary = "Set an account's settings",
    description = "Sets the unit, overdraft floor, metadata and alerts, in full. Idempotent by content: \
        settings equal to the current ones write nothing; different ones append an \
        `account_settings` entry. An account's unit cannot change once it has one.",
    params(("account" = String, Path, description = "A customer account (1–128 bytes, not `@…`).", example = "cust_42")),
    request_body = AccountSettingsRequest,
    security(("bearer" = ["admin"])),
    responses(
        (status = 200, description = "The account with its settings.", body = AccountView),
        (status = 422, description = "`invalid_request`; `unit_mismatch` (the account already \
            has another unit).", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn put_account(
    State(app): State<AppState>,
    caller: Caller,
    account: PathText,
    JsonObject(body): JsonObject,
) -> Result<Response, ApiError> {
    caller.require(Scope::Admin)?;
    let account = account.into_inner();
    let request = EntryRequest::settings(&account, body).map_err(ApiError::Invalid)?;
    match app.writers.decide(caller.tenant(), request).await? {
        Decision::Created(_) | Decision::Unchanged(_) => {
            Ok(Json(account_view(&app, caller.tenant(), &account).await?).into_response())
        }
        other => Ok(answer(other).into_response()),
    }
}

#[utoipa::path(
    get,
    path = "/v1/accounts/{account}",
    tag = "accounts",
    operation_id = "getAccount",
    summary = "Read an account",
    params(("account" = String, Path, description = "A customer account.", example = "cust_42")),
    security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "The account; `settings_version` 0 if its settings were \
            never set.", body = AccountView),
        (status = 404, description = "`not_found`: the account has neither settings nor entries.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn get_account(
    State(app): State<AppState>,
    caller: Caller,
    account: PathText,
) -> Result<Json<AccountView>, ApiError> {
    caller.require(Scope::Read)?;
    let account = account.checked("account", check_any_account)?;
    Ok(Json(account_view(&app, caller.tenant(), &account).await?))
}

async fn account_view(
    app: &AppState,
    tenant: &str,
    account: &str,
) -> Result<AccountView, ApiError> {
    let storage = app.writers.storage();
    let settings = match storage
        .record(tenant, &StateKey::Account(account.to_owned()))
        .await?
    {
        Some(StateValue::Account(s)) => Some(s),
        _ => None,
    };
    let unit = settings.as_ref().map(|s| s.unit.as_str());
    let balance = match read_balance(storage, tenant, account, unit, None).await {
        Ok(b) => b,
        Err(LedgerError::NotFound) => return Err(ApiError::NotFound),
        Err(e) => return Err(e.into()),
    };
    let AccountSettings {
        overdraft,
        metadata,
        low_balance,
        version,
        entry_id,
        ..
    } = settings.unwrap_or(AccountSettings {
        unit: balance.unit.clone(),
        overdraft: Overdraft::Allow,
        metadata: None,
        low_balance: None,
        version: 0,
        entry_id: String::new(),
        seq: 0,
    });
    Ok(AccountView {
        account: account.to_owned(),
        unit: balance.unit.clone(),
        overdraft: overdraft.to_json(),
        metadata,
        alerts: low_balance.map_or_else(
            || serde_json::json!({}),
            tally_ledger::rule_state::low_balance_to_json,
        ),
        settings_version: version,
        settings_entry_id: (version > 0).then_some(entry_id),
        balance: balance.into(),
    })
}

/// Largest page of `GET /v1/accounts`.
const MAX_ACCOUNTS_PAGE: i64 = 1_000;

#[utoipa::path(
    get,
    path = "/v1/accounts",
    tag = "accounts",
    operation_id = "listAccounts",
    summary = "List accounts",
    description = "The tenant's customer accounts that have entries, in account order (bytes), \
        each with its balance now; `q` keeps those whose id contains it. Pass `next_after` as \
        `after` until it is null. System accounts (`@…`) are read one by one.",
    params(AccountsQuery),
    security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "A page.", body = AccountPage),
        (status = 422, description = text::INVALID_QUERY, body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn list_accounts(
    State(app): State<AppState>,
    caller: Caller,
    RawQuery(raw): RawQuery,
) -> Result<Json<AccountPage>, ApiError> {
    caller.require(Scope::Read)?;
    let mut q = QueryParams::documented::<AccountsQuery>(raw.as_deref())?;
    let contains = q.name("q", check_any_account);
    let after = q.name("after", check_any_account);
    let limit = q.int("limit", 1, MAX_ACCOUNTS_PAGE).unwrap_or(100);
    q.finish()?;
    let filter = AccountFilter {
        after,
        contains,
        limit,
    };
    let rows = app
        .writers
        .storage()
        .list_accounts(caller.tenant(), &filter)
        .await?;
    let next_after = (rows.len() as i64 == limit)
        .then(|| rows.last().map(|r| r.account.clone()))
        .flatten();
    Ok(Json(AccountPage {
        accounts: rows
            .iter()
            .map(|r| AccountSummary {
                account: r.account.clone(),
                unit: r.unit.clone(),
                debits: r.balance.debits.to_string(),
                credits: r.balance.credits.to_string(),
                posted: r.balance.posted().to_string(),
                held: r.balance.held.to_string(),
                available: r.balance.available().to_string(),
            })
            .collect(),
        next_after,
    }))
}
