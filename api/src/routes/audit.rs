//! `GET /v1/audit/export` and `GET /v1/audit/head` (scope `audit`;
//! docs/audit.md).

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::Utc;
use tally_ledger::audit::export::{export_stream, ExportFormat, ExportRange, EXPORT_PAGE};
use tally_ledger::entry::format_recorded_at;
use tally_ledger::keys::Scope;

use super::query::QueryParams;
use crate::auth::Caller;
use crate::problem::ApiError;
use crate::requests::ExportQuery;
use crate::state::AppState;
use crate::views::{HeadView, Problem};

/// Streams the caller's log, `from_seq` (default 1) to `to_seq` (default
/// the head), as JSONL (default) or CSV. The range is fixed when the
/// request starts, so entries appended meanwhile are not in this export.
/// A database failure mid-way aborts the response before its trailer.
#[utoipa::path(
    get,
    path = "/v1/audit/export",
    tag = "audit",
    operation_id = "getAuditExport",
    summary = "Export the log",
    description = "Streams the caller's entries `from_seq`..`to_seq` as JSON Lines or CSV, with a \
        trailer (signed when the server has a signing key) that `tally verify --export` checks \
        offline (docs/audit.md). A failure mid-way ends the stream without its trailer.",
    params(ExportQuery),
    security(("bearer" = ["audit"])),
    responses(
        (status = 200, description = "The export, as an attachment.", content(
            (String = "application/x-ndjson"), (String = "text/csv"),
        ), headers(("Content-Disposition" = String, description = "`attachment; filename=\"tally-export-…\"`"))),
        (status = 422, description = "`invalid_request`: `format` not `jsonl` or `csv`, a seq out \
            of range, or an unknown or repeated parameter.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn get_export(
    State(app): State<AppState>,
    caller: Caller,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    caller.require(Scope::Audit)?;
    let mut q = QueryParams::documented::<ExportQuery>(raw.as_deref())?;
    let format = match q.text("format") {
        None => Some(ExportFormat::Jsonl),
        Some(text) => {
            let format = ExportFormat::parse(&text);
            if format.is_none() {
                q.error("format", "must be jsonl or csv");
            }
            format
        }
    };
    let from_seq = q.int("from_seq", 1, i64::MAX);
    let to_seq = q.int("to_seq", 0, i64::MAX);
    let storage = app.writers.storage().clone();
    let tenant = caller.tenant().to_owned();
    let head = storage.head(&tenant).await?;
    let range = match ExportRange::resolve(head.seq, from_seq, to_seq) {
        Ok(range) => Some(range),
        Err(errors) => {
            for e in errors.errors {
                q.error(&e.field, e.message);
            }
            None
        }
    };
    q.finish()?;
    let (Some(format), Some(range)) = (format, range) else {
        return Err(ApiError::Internal("export parameters unchecked".into()));
    };
    let disposition = format!(
        "attachment; filename=\"{}\"",
        format.file_name(&tenant, range)
    );
    let stream = export_stream(
        storage,
        tenant,
        format,
        range,
        app.signer.clone(),
        EXPORT_PAGE,
    );
    let mut response = (StatusCode::OK, Body::from_stream(stream)).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// The caller's chain head now, signed when the server has a key.
#[utoipa::path(
    get,
    path = "/v1/audit/head",
    tag = "audit",
    operation_id = "getAuditHead",
    summary = "The signed chain head",
    description = "The caller's last `seq` and `hash` now, with an Ed25519 signature over \
        (tenant, seq, hash, checked_at) when signing is on.",
    security(("bearer" = ["audit"])),
    responses(
        (status = 200, description = "The head.", body = HeadView),
        (status = 422, description = "`invalid_request`: any query parameter.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn get_head(
    State(app): State<AppState>,
    caller: Caller,
    RawQuery(raw): RawQuery,
) -> Result<Json<HeadView>, ApiError> {
    caller.require(Scope::Audit)?;
    QueryParams::parse(raw.as_deref(), &[])?.finish()?;
    let tenant = caller.tenant();
    let head = app.writers.storage().head(tenant).await?;
    let now = Utc::now();
    let hash = hex::encode(head.hash);
    let signature = app
        .signer
        .as_ref()
        .map(|s| s.sign(tenant, head.seq, &hash, now));
    Ok(Json(HeadView {
        tenant: tenant.to_owned(),
        seq: head.seq,
        checked_at: signature
            .as_ref()
            .map(|s| s.signed_at.clone())
            .unwrap_or_else(|| format_recorded_at(&now)),
        hash,
        signing: if signature.is_some() { "on" } else { "off" },
        notice: signature.is_none().then_some(
            "signing is off: start tally serve with TALLY_SIGNING_KEY or --signing-key-file to sign checkpoints",
        ),
        signature: signature.map(Into::into),
    }))
}
