//! `/console`: the finance console, three files embedded in the binary
//! (no CDN, nothing downloaded at run time; docs/console.md). Every path
//! under `/console` that is not one of its assets answers the page, so a
//! bookmarked or shared view (`/console/entries?kind=payment`) opens as it
//! was. The page reads the API with the key the user signs in with, kept
//! in the browser's session storage: the server knows nothing of it here.

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

use super::path::PathText;

const INDEX: &str = include_str!("../../console/index.html");
const APP: &str = include_str!("../../console/app.js");
const STYLE: &str = include_str!("../../console/style.css");

/// Only this origin's scripts, styles and API; no framing; no referrer
/// (a URL holds filters, never the key, but it stays on this server).
const CSP: &str = "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; \
    script-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; \
    form-action 'self'; frame-ancestors 'none'";

fn answer(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // The assets change with the binary: revalidate rather than keep them.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// `GET /console`.
#[utoipa::path(
    get,
    path = "/console",
    tag = "console",
    operation_id = "getConsole",
    summary = "The finance console",
    description = "A page for finance: accounts, statements, entries, the audit trail \
        (docs/console.md). It signs in with an API key (`read`; `audit` for the audit page), \
        kept in the browser's session storage.",
    responses((status = 200, description = "The page.", content_type = "text/html", body = String)),
)]
pub async fn get_console() -> Response {
    answer(INDEX, "text/html; charset=utf-8")
}

/// `GET /console/{path}`.
#[utoipa::path(
    get,
    path = "/console/{path}",
    tag = "console",
    operation_id = "getConsolePath",
    summary = "A view or an asset of the finance console",
    description = "`app.js` and `style.css` are the console's script and styles; any other \
        path is a view of the console (the page, which reads the path).",
    params(("path" = String, Path, description = "`app.js`, `style.css`, or a view such as `accounts`.", example = "app.js")),
    responses(
        (status = 200, description = "The asset or the page.", content(
            (String = "text/html"), (String = "text/javascript"), (String = "text/css"),
        )),
        (status = 422, description = "`invalid_request`: the path is not UTF-8 once percent-decoded.", body = crate::views::Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn get_console_path(path: PathText) -> Response {
    match path.into_inner().as_str() {
        "app.js" => answer(APP, "text/javascript; charset=utf-8"),
        "style.css" => answer(STYLE, "text/css; charset=utf-8"),
        _ => answer(INDEX, "text/html; charset=utf-8"),
    }
}
