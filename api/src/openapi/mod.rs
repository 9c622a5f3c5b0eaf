//! The OpenAPI 3.1 document of the HTTP API, generated from the code.
//!
//! Every route is registered in `crate::server::routes` with
//! `utoipa_axum::routes!`, which takes the method and path from the
//! handler's `#[utoipa::path]` attribute: the router serves exactly the
//! operations the document lists (tests/openapi.rs checks both ways over
//! HTTP). Response bodies are the handlers' own types (`ToSchema`, in
//! [`crate::views`]); request bodies and query strings are the typed
//! structs of [`crate::requests`], which the handlers parse with.
//! [`complete`] then adds what every operation of a kind shares: the
//! bearer scheme, the scope in each description, and the problems any
//! authenticated, body-carrying or `/v1` request can get.
//!
//! Served at `GET /openapi.json`; `GET /docs` is Swagger UI, embedded in
//! the binary (no network needed to build or to browse it).

mod decimal;
mod links;

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use axum::body::Bytes;
use axum::http::{header, HeaderValue};
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use utoipa::openapi::path::Operation;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::server::Server;
use utoipa::openapi::{ContentBuilder, HeaderBuilder, OpenApi, Ref, RefOr};

use crate::problem::ApiError;
use crate::routes::path::PathText;
use crate::views::{Problem, ProblemCode};

/// The name of the security scheme (an `Authorization: Bearer` API key).
pub const BEARER: &str = "bearer";
/// Where the document is committed, relative to the workspace root (a
/// test fails when it differs from [`document`]; `tally openapi` writes it).
pub const COMMITTED_PATH: &str = "api/openapi.json";
/// Where the document is served.
pub const DOCUMENT_PATH: &str = "/openapi.json";
/// Paths that load balancers and scrapers probe: never rate limited.
const PROBES: [&str; 3] = ["/healthz", "/readyz", "/metrics"];
const PROBLEM_JSON: &str = "application/problem+json";

/// The hand-written part of the document: info, tags, and schemas no
/// operation names directly. Paths come only from the router.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "tally",
        description = include_str!("description.md"),
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    components(schemas(ProblemCode, Problem)),
    tags(
        (name = "entries", description = "Usage debits, payments, batches, and reading the log."),
        (name = "accounts", description = "Account settings, balances, usage summaries, statements."),
        (name = "holds", description = "Reserve, capture, release."),
        (name = "integrations", description = "Stripe webhooks as payments and refunds: the integration's settings, its events, deliveries from Stripe (docs/ingest.md)."),
        (name = "intents", description = "Any costly action done once: claims under fenced leases, stored outcomes, ledger entries committed with them (docs/intents.md)."),
        (name = "rules", description = "Refunds, reversals, adjustments (docs/ledger-rules.md)."),
        (name = "audit", description = "Exports of the log, the signed chain head, a verification run by the server (docs/audit.md)."),
        (name = "webhooks", description = "Signed webhooks: endpoints, deliveries, retries and replays (docs/events.md)."),
        (name = "operations", description = "Liveness, readiness, metrics. No authentication."),
        (name = "reference", description = "This document and its browsable form. No authentication."),
        (name = "console", description = "The finance console in the browser (docs/console.md). No authentication: it signs in with an API key."),
    )
)]
pub struct ApiDoc;

static DOCUMENT: OnceLock<OpenApi> = OnceLock::new();

/// The document of the router's operations (`routes`: what
/// `crate::server::routes` assembles), completed once; every later call
/// gives the same document. The router is assembled above this module, so
/// it hands its document down instead of this module reaching up for it.
pub fn document(routes: impl FnOnce() -> OpenApi) -> &'static OpenApi {
    DOCUMENT.get_or_init(|| {
        let mut doc = routes();
        complete(&mut doc);
        decimal::accept_numbers(&mut doc);
        links::add(&mut doc);
        doc
    })
}

fn problem(description: &str) -> RefOr<utoipa::openapi::response::Response> {
    ResponseBuilder::new()
        .description(description)
        .content(
            PROBLEM_JSON,
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Problem")))
                .build(),
        )
        .build()
        .into()
}

fn retryable_problem(description: &str) -> RefOr<utoipa::openapi::response::Response> {
    let response = ResponseBuilder::new()
        .description(description)
        .content(
            PROBLEM_JSON,
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Problem")))
                .build(),
        )
        .header(
            "Retry-After",
            HeaderBuilder::new()
                .schema(utoipa::openapi::schema::Object::with_type(
                    utoipa::openapi::schema::Type::Integer,
                ))
                .description(Some("Seconds to wait before retrying the same request."))
                .build(),
        );
    response.build().into()
}

/// The scopes an operation's security requirement names.
fn scopes(op: &Operation) -> Vec<String> {
    let Ok(value) = serde_json::to_value(&op.security) else {
        return Vec::new();
    };
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|req| req.get(BEARER))
        .filter_map(|s| s.as_array())
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect()
}

/// Adds to each operation what every operation of its kind shares, and
/// the bearer security scheme.
fn complete(doc: &mut OpenApi) {
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        BEARER,
        SecurityScheme::Http(Http::builder().scheme(HttpAuthScheme::Bearer).description(Some(
            "An API key from `tally keys create --tenant T --scopes post,read,audit,admin`, \
             sent as `Authorization: Bearer <key>`. Each operation names the scope it needs.",
        )).build()),
    );
    // Where tally listens by default; clients point at their own server.
    doc.servers = Some(vec![Server::builder()
        .url("http://127.0.0.1:8080")
        .description(Some("`tally serve` with its defaults; any tally server"))
        .build()]);
    for (path, item) in doc.paths.paths.iter_mut() {
        let ops = [
            item.get.as_mut(),
            item.put.as_mut(),
            item.post.as_mut(),
            item.delete.as_mut(),
            item.options.as_mut(),
            item.head.as_mut(),
            item.patch.as_mut(),
            item.trace.as_mut(),
        ];
        for op in ops.into_iter().flatten() {
            complete_operation(path, op);
        }
    }
}

fn complete_operation(path: &str, op: &mut Operation) {
    let scopes = scopes(op);
    let responses = &mut op.responses.responses;
    let mut add = |status: &str, response: RefOr<utoipa::openapi::response::Response>| {
        responses.entry(status.to_owned()).or_insert(response);
    };
    if op.request_body.is_some() {
        add(
            "400",
            problem(
                "`malformed_json`: the body is not JSON, or not `application/json` (or `…+json`).",
            ),
        );
        add(
            "413",
            problem(
                "`payload_too_large`: the body is over the limit (1 MiB; 8 MiB for `/v1/batch`).",
            ),
        );
        add(
            "415",
            problem(
                "`unsupported_media_type`: a JSON content type with a `charset` other than \
                 UTF-8; nothing was read.",
            ),
        );
        add(
            "422",
            problem("`invalid_request`: validation failed (`errors` lists every field at once; unknown fields too)."),
        );
    }
    let names_in_path = op
        .parameters
        .iter()
        .flatten()
        .any(|p| matches!(p.parameter_in, utoipa::openapi::path::ParameterIn::Path));
    if names_in_path {
        add(
            "422",
            problem(
                "`invalid_request`: a path parameter breaks its name rule (control characters, \
                 length, not UTF-8 once percent-decoded); `errors` names it.",
            ),
        );
    }
    if !scopes.is_empty() {
        add("401", problem("`unauthenticated`: no or unknown API key."));
        add(
            "403",
            problem("`forbidden`: the API key lacks the scope this operation needs."),
        );
        add(
            "429",
            retryable_problem(
                "`rate_limited`: the tenant's writer queue is full, or the API key is over its \
                 rate limit; retry after `Retry-After` seconds.",
            ),
        );
        add(
            "500",
            problem("`internal`: an unexpected error; nothing to retry."),
        );
    }
    if !PROBES.contains(&path) {
        add(
            "503",
            retryable_problem(
                "`unavailable`: the database is unreachable, the server is saturated or the \
                 request timed out; always retryable with the same request (a mutation that was \
                 committed answers as a replay).",
            ),
        );
    }
    if !scopes.is_empty() {
        let list: Vec<String> = scopes.iter().map(|s| format!("`{s}`")).collect();
        let line = format!("**Scope:** {}.", list.join(", "));
        op.description = Some(match op.description.take() {
            Some(d) if !d.is_empty() => format!("{line}\n\n{d}"),
            _ => line,
        });
    } else {
        // An empty requirement is OpenAPI's "no authentication": said per
        // operation, so a reader (and a linter) need not infer it.
        op.security = Some(vec![SecurityRequirement::default()]);
        let line = "**No authentication.**".to_owned();
        op.description = Some(match op.description.take() {
            Some(d) if !d.is_empty() => format!("{line}\n\n{d}"),
            _ => line,
        });
    }
}

/// `GET /openapi.json`.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "reference",
    operation_id = "getOpenApi",
    summary = "This OpenAPI 3.1 document",
    description = "Generated from the server's code at start: every route it serves, with its \
        request body, query parameters, responses and the scope it needs.",
    responses((status = 200, description = "The document.", body = serde_json::Value)),
)]
pub async fn get_openapi() -> Response {
    match DOCUMENT.get() {
        Some(doc) => Json(doc).into_response(),
        // `crate::server::router` builds the document before it serves.
        None => ApiError::Internal("the OpenAPI document was not built".into()).into_response(),
    }
}

/// The Swagger UI configuration: the document above, no online validator.
fn swagger_config() -> Arc<utoipa_swagger_ui::Config<'static>> {
    static CONFIG: OnceLock<Arc<utoipa_swagger_ui::Config<'static>>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            Arc::new(
                utoipa_swagger_ui::Config::new([DOCUMENT_PATH])
                    .validator_url("none")
                    .try_it_out_enabled(true)
                    .persist_authorization(false)
                    .display_operation_id(true),
            )
        })
        .clone()
}

/// The page of `GET /docs`: Swagger UI with every asset under `/docs/`.
const DOCS_PAGE: &str = r#"<!DOCTYPE html>
<html lang="en">
  <head>
    <meta charset="UTF-8">
    <title>tally API reference</title>
    <link rel="stylesheet" type="text/css" href="/docs/swagger-ui.css">
    <link rel="stylesheet" type="text/css" href="/docs/index.css">
    <link rel="icon" type="image/png" href="/docs/favicon-32x32.png" sizes="32x32">
    <link rel="icon" type="image/png" href="/docs/favicon-16x16.png" sizes="16x16">
  </head>
  <body>
    <div id="swagger-ui"></div>
    <script src="/docs/swagger-ui-bundle.js" charset="UTF-8"></script>
    <script src="/docs/swagger-ui-standalone-preset.js" charset="UTF-8"></script>
    <script src="/docs/swagger-initializer.js" charset="UTF-8"></script>
  </body>
</html>
"#;

/// `GET /docs`.
#[utoipa::path(
    get,
    path = "/docs",
    tag = "reference",
    operation_id = "getDocs",
    summary = "Browsable API reference (Swagger UI)",
    description = "Swagger UI over `/openapi.json`. Its assets are embedded in the `tally` \
        binary and served under `/docs/`: it works without network access.",
    responses((status = 200, description = "The page.", content_type = "text/html", body = String)),
)]
pub async fn get_docs() -> Html<&'static str> {
    Html(DOCS_PAGE)
}

/// `GET /docs/{file}`.
#[utoipa::path(
    get,
    path = "/docs/{file}",
    tag = "reference",
    operation_id = "getDocsAsset",
    summary = "An asset of the API reference page",
    params(("file" = String, Path, description = "A file of Swagger UI's distribution.", example = "swagger-ui.css")),
    responses(
        (status = 200, description = "The file.", content(
            (String = "text/css"), (String = "text/javascript"), (String = "image/png"), (String = "text/html"),
        )),
        (status = 404, description = "`not_found`: no such file.", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_request`: the file name is not UTF-8 once percent-decoded.", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn get_docs_asset(file: PathText) -> Result<Response, ApiError> {
    let file = file.into_inner();
    let found = utoipa_swagger_ui::serve(&file, swagger_config())
        .map_err(|e| ApiError::Internal(format!("swagger ui asset {file}: {e}")))?;
    let Some(found) = found else {
        return Err(ApiError::NotFound);
    };
    let bytes = match found.bytes {
        Cow::Borrowed(b) => Bytes::from_static(b),
        Cow::Owned(b) => Bytes::from(b),
    };
    let mut response = bytes.into_response();
    if let Ok(value) = HeaderValue::from_str(&found.content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    Ok(response)
}
