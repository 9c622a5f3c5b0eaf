//! `GET /v1/entries/{id}` and `GET /v1/entries`.

use std::time::Duration;

use axum::extract::{RawQuery, State};
use axum::Json;
use tally_ledger::entry::{EntryStatus, EntryView, StoredEntry};
use tally_ledger::keys::Scope;
use tally_ledger::names::{check_any_account, check_upstream_id};
use tally_ledger::request::EntryKind;
use tally_ledger::rule_state::{StateKey, StateValue};
use tally_ledger::store::EntryFilter;

use super::path::PathText;
use super::query::QueryParams;
use super::text;
use crate::auth::Caller;
use crate::problem::ApiError;
use crate::requests::EntriesQuery;
use crate::state::AppState;
use crate::views::{Entry, EntryPage, Problem};

/// Longest `wait_ms` of `GET /v1/entries`.
pub const MAX_WAIT_MS: i64 = 30_000;

/// Waits until an entry matching `filter` is committed, or `wait` passes.
/// The waiter reads the log only when its tenant's head moves (this
/// process's commits tell it at once; other processes' are read by one
/// watcher per process, [`crate::feed`]), never in a loop of its own.
async fn wait_for_entries(
    app: &AppState,
    tenant: &str,
    filter: &EntryFilter,
    wait: Duration,
) -> Result<Vec<StoredEntry>, ApiError> {
    let deadline = tokio::time::Instant::now() + wait;
    let storage = app.writers.storage();
    let mut head = app.writers.heads().subscribe(tenant);
    // The head read after subscribing: a commit between the first read and
    // the subscription is seen here.
    let mut seen = storage.head(tenant).await?.seq;
    loop {
        if seen > filter.after_seq {
            let entries = storage.list_entries(tenant, filter).await?;
            if !entries.is_empty() {
                return Ok(entries);
            }
        }
        tokio::select! {
            changed = head.changed() => {
                if changed.is_err() {
                    return Ok(Vec::new());
                }
                let told = *head.borrow_and_update();
                if told <= seen {
                    continue;
                }
                seen = told;
            }
            _ = tokio::time::sleep_until(deadline) => return Ok(Vec::new()),
        }
    }
}

/// Largest page of `GET /v1/entries`.
pub const MAX_PAGE: i64 = 1_000;
pub const DEFAULT_PAGE: i64 = 100;

#[utoipa::path(
    get,
    path = "/v1/entries/{id}",
    tag = "entries",
    operation_id = "getEntry",
    summary = "Read one entry",
    description = "The entry as first recorded; an entry that was reversed also shows \
        `reversed_by`.",
    params(("id" = String, Path, description = "The entry's `id`.", example = "ent_0193a8d2c4f07b3e9a51c2d4e6f80a1b")),
    security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "The entry.", body = Entry),
        (status = 404, description = text::NOT_FOUND, body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn get_entry(
    State(app): State<AppState>,
    caller: Caller,
    id: PathText,
) -> Result<Json<EntryView>, ApiError> {
    caller.require(Scope::Read)?;
    // The rule of `entry_id` in a reversal's body.
    let id = id.checked("id", check_upstream_id)?;
    let storage = app.writers.storage();
    let entry = storage
        .entry_by_id(caller.tenant(), &id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let mut view = entry.view();
    // The entry itself never changes; its reversal is a later entry that
    // this read points to.
    if let Some(StateValue::ReversedBy(by)) = storage
        .record(caller.tenant(), &StateKey::Reversal(entry.id.clone()))
        .await?
    {
        view.reversed_by = Some(by);
    }
    Ok(Json(view))
}

#[utoipa::path(
    get,
    path = "/v1/entries",
    tag = "entries",
    operation_id = "listEntries",
    summary = "List entries",
    description = "The caller's log in `seq` order, filtered, a page at a time: pass \
        `next_after_seq` as `after_seq` until it is null. With `wait_ms`, a page that would \
        be empty waits for the next matching entry instead (long polling): the answer comes \
        as soon as one is committed, or empty once `wait_ms` has passed.",
    params(EntriesQuery),
    security(("bearer" = ["read"])),
    responses(
        (status = 200, description = "A page.", body = EntryPage),
        (status = 422, description = text::INVALID_QUERY, body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn list_entries(
    State(app): State<AppState>,
    caller: Caller,
    RawQuery(raw): RawQuery,
) -> Result<Json<EntryPage>, ApiError> {
    caller.require(Scope::Read)?;
    let mut q = QueryParams::documented::<EntriesQuery>(raw.as_deref())?;
    let account = q.name("account", check_any_account);
    let kind = match q.text("kind") {
        None => None,
        Some(k) => {
            let parsed = EntryKind::parse(&k);
            if parsed.is_none() {
                let kinds: Vec<&str> = EntryKind::ALL.iter().map(|k| k.as_str()).collect();
                q.error("kind", format!("must be one of {}", kinds.join(", ")));
            }
            parsed
        }
    };
    let after_seq = q.int("after_seq", 0, i64::MAX).unwrap_or(0);
    let limit = q.int("limit", 1, MAX_PAGE).unwrap_or(DEFAULT_PAGE);
    let from = q.timestamp("from");
    let to = q.timestamp("to");
    let wait_ms = q.int("wait_ms", 0, MAX_WAIT_MS).unwrap_or(0);
    let status = match q.text("status") {
        None => None,
        Some(s) => {
            let parsed = EntryStatus::parse(&s);
            if parsed.is_none() {
                q.error("status", "must be posted or rejected");
            }
            parsed
        }
    };
    let upstream_id = q.name("upstream_id", check_upstream_id);
    q.finish()?;
    let unfiltered = account.is_none()
        && kind.is_none()
        && from.is_none()
        && to.is_none()
        && status.is_none()
        && upstream_id.is_none();
    let filter = if unfiltered {
        EntryFilter::log_page(after_seq, limit)
    } else {
        EntryFilter {
            account,
            kind,
            after_seq,
            limit,
            from,
            to,
            upto_seq: None,
            status,
            upstream_id,
        }
    };
    let storage = app.writers.storage();
    let mut entries = storage.list_entries(caller.tenant(), &filter).await?;
    if entries.is_empty() && wait_ms > 0 {
        // A second short of the request timeout, so the answer is an empty
        // page and not the timeout's 503.
        let wait = Duration::from_millis(wait_ms as u64).min(
            app.limits
                .request_timeout
                .saturating_sub(Duration::from_secs(1)),
        );
        entries = wait_for_entries(&app, caller.tenant(), &filter, wait).await?;
    }
    let next_after_seq = if entries.len() as i64 == limit {
        entries.last().map(|e| e.seq)
    } else {
        None
    };
    Ok(Json(EntryPage {
        entries: entries.iter().map(|e| e.view()).collect(),
        next_after_seq,
    }))
}
