//! `GET /metrics`: the Prometheus text exposition format (version 0.0.4),
//! written by the `prometheus` crate's text encoder. Nothing is pushed
//! anywhere: a scraper pulls, and the process never connects out.
//!
//! What is counted where:
//! - HTTP requests (route template, method, status) and their durations: the
//!   request middleware (`crate::observe`).
//! - Replays, idempotency conflicts, stored rejections and refusals: the one
//!   place decisions become answers, `crate::problem::answer`, so a batch's
//!   items count like single requests.
//! - Writer groups, commit latency, queue depth, expired holds: the ledger's
//!   `WriterStats` and `Writers::queue_depth`; the usage projector's
//!   `ProjectorStats`; the pool's `Storage::pool_stats`. They are the
//!   ledger's own atomics, read at scrape time by a collector
//!   ([`ledger::LedgerCollector`]).
//!
//! The series and what to alert on are documented in docs/operations.md
//! ("Monitoring").

mod ledger;

use std::sync::LazyLock;
use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use prometheus::core::Collector;
use prometheus::{
    HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts, TextEncoder,
};
use serde_json::Value;
use tally_ledger::decide::{Decision, IntentAnswer};
use tally_ledger::entry::EntryStatus;

use crate::problem::Answer;
use crate::state::AppState;

pub use ledger::LedgerCollector;

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Bounds of `tally_http_request_duration_seconds`, in seconds.
const HTTP_SECONDS_BOUNDS: [f64; 15] = [
    0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The label value of requests that matched no route (404s of unknown
/// paths): never the raw path, which a client could vary without bound.
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// How long a scrape waits for the database (the projection lag); the
/// other series never wait.
pub const LAG_READ_TIMEOUT: Duration = Duration::from_millis(500);

// The names, help texts and labels are constants of this file, valid for
// the crate's checks (the unit tests build them): `Metrics::new` cannot fail.
#[allow(clippy::expect_used)]
static METRICS: LazyLock<Metrics> =
    LazyLock::new(|| Metrics::new().expect("the metric names and labels are valid constants"));

/// This process's HTTP-level counters.
pub fn global() -> &'static Metrics {
    &METRICS
}

/// Counters of the HTTP layer and of answered decisions.
#[derive(Debug)]
pub struct Metrics {
    build_info: IntGaugeVec,
    /// method, route, status.
    http_requests: IntCounterVec,
    /// method, route.
    http_seconds: HistogramVec,
    replays: IntCounter,
    conflicts: IntCounter,
    /// code.
    rejections: IntCounterVec,
    /// code.
    refusals: IntCounterVec,
    /// cause class of a 500.
    internal_errors: IntCounterVec,
}

/// What kind of answer a decision gets, as far as the counters care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A new posted entry or a settings decision: only the HTTP counters.
    Other,
    /// `Idempotent-Replayed: true` (of a posted entry or a stored rejection).
    Replay,
    Conflict,
    /// A new stored rejection (`insufficient_funds`, `hold_not_open`, …).
    Rejected,
    /// Refused, nothing stored (`unit_mismatch`, `not_found`, …).
    Refused,
}

impl Outcome {
    pub fn of(decision: &Decision) -> Outcome {
        match decision {
            Decision::Replayed(_) => Outcome::Replay,
            Decision::Conflict { .. } => Outcome::Conflict,
            Decision::Created(e) if e.status == EntryStatus::Rejected => Outcome::Rejected,
            Decision::Refused(_) => Outcome::Refused,
            Decision::Intent(IntentAnswer::Replayed { .. }) => Outcome::Replay,
            Decision::Intent(IntentAnswer::Conflict { .. }) => Outcome::Conflict,
            Decision::Intent(
                IntentAnswer::InProgress { .. } | IntentAnswer::LeaseLost | IntentAnswer::NotFound,
            ) => Outcome::Refused,
            Decision::Created(_) | Decision::Unchanged(_) | Decision::Intent(_) => Outcome::Other,
        }
    }
}

/// An HTTP method as a label: the standard ones by name, any other as
/// `other` (a client must not be able to mint label values).
pub fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method as M;
    match *method {
        M::GET => "GET",
        M::POST => "POST",
        M::PUT => "PUT",
        M::DELETE => "DELETE",
        M::PATCH => "PATCH",
        M::HEAD => "HEAD",
        M::OPTIONS => "OPTIONS",
        M::TRACE => "TRACE",
        M::CONNECT => "CONNECT",
        _ => "other",
    }
}

impl Metrics {
    fn new() -> prometheus::Result<Self> {
        let build_info = IntGaugeVec::new(
            Opts::new(
                "tally_build_info",
                "Always 1; the version of the running tally binary is its label.",
            ),
            &["version"],
        )?;
        build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);
        Ok(Self {
            build_info,
            http_requests: IntCounterVec::new(
                Opts::new(
                    "tally_http_requests_total",
                    "HTTP requests answered, by method, route template and status code.",
                ),
                &["method", "route", "status"],
            )?,
            http_seconds: HistogramVec::new(
                HistogramOpts::new(
                    "tally_http_request_duration_seconds",
                    "Time from receiving a request to sending its response head, by method and route template.",
                )
                .buckets(HTTP_SECONDS_BOUNDS.to_vec()),
                &["method", "route"],
            )?,
            replays: IntCounter::new(
                "tally_replays_total",
                "Answers marked Idempotent-Replayed: a retry of an entry request already decided (batch items included).",
            )?,
            conflicts: IntCounter::new(
                "tally_idempotency_conflicts_total",
                "409 idempotency_conflict answers: an upstream ID reused with other parameters.",
            )?,
            rejections: IntCounterVec::new(
                Opts::new(
                    "tally_rejections_total",
                    "New stored rejections (entries recorded with status rejected), by code; their replays count as replays.",
                ),
                &["code"],
            )?,
            refusals: IntCounterVec::new(
                Opts::new(
                    "tally_refusals_total",
                    "Decisions refused with nothing stored (unit_mismatch, not_found, invalid_request, ...), by code.",
                ),
                &["code"],
            )?,
            internal_errors: IntCounterVec::new(
                Opts::new(
                    "tally_internal_errors_total",
                    "500 internal answers (a failure a retry cannot cure: the cause is logged with the request ID), by cause class.",
                ),
                &["cause"],
            )?,
        })
    }

    /// One answered HTTP request. `route` is the route template (or
    /// [`UNMATCHED_ROUTE`]); `elapsed` runs until the response head.
    pub fn observe_http(&self, method: &str, route: &str, status: StatusCode, elapsed: Duration) {
        self.http_requests
            .with_label_values(&[method, route, status.as_str()])
            .inc();
        self.http_seconds
            .with_label_values(&[method, route])
            .observe(elapsed.as_secs_f64());
    }

    /// One decided entry request and the answer it got (single or batch item).
    pub fn observe_answer(&self, outcome: Outcome, answer: &Answer) {
        let code = || match answer {
            Answer::Problem { body, .. } => body.get("code").and_then(Value::as_str).unwrap_or(""),
            Answer::Entry { .. } => "",
        };
        match outcome {
            Outcome::Other => {}
            Outcome::Replay => self.replays.inc(),
            Outcome::Conflict => self.conflicts.inc(),
            Outcome::Rejected => self.rejections.with_label_values(&[code()]).inc(),
            Outcome::Refused => self.refusals.with_label_values(&[code()]).inc(),
        }
    }

    /// One 500 answered, by its fixed cause class (`schema`, `constraint`,
    /// `data`, `corrupt`, `other`, `internal`, `io`, …).
    pub fn observe_internal_error(&self, cause: &'static str) {
        self.internal_errors.with_label_values(&[cause]).inc();
    }

    /// The collectors of this process's HTTP-level series.
    fn collectors(&self) -> [&dyn Collector; 8] {
        [
            &self.build_info,
            &self.http_requests,
            &self.http_seconds,
            &self.replays,
            &self.conflicts,
            &self.rejections,
            &self.refusals,
            &self.internal_errors,
        ]
    }

    /// The whole exposition: these counters and the ledger's observations.
    /// Reads the database once (the projection lag), for at most
    /// [`LAG_READ_TIMEOUT`]; everything else is in memory.
    pub async fn render(&self, app: &AppState) -> String {
        let lag = match tokio::time::timeout(
            LAG_READ_TIMEOUT,
            tally_projections::usage::usage_lags(app.writers.storage()),
        )
        .await
        {
            Ok(Ok(lag)) => Some(lag),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "metrics: reading the usage projection lag failed");
                None
            }
            Err(_) => {
                tracing::warn!("metrics: the usage projection lag was not read in time");
                None
            }
        };
        let webhooks = match tokio::time::timeout(LAG_READ_TIMEOUT, webhook_scrape(app)).await {
            Ok(Ok(w)) => Some(w),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "metrics: reading the webhook deliveries failed");
                None
            }
            Err(_) => {
                tracing::warn!("metrics: the webhook deliveries were not read in time");
                None
            }
        };
        self.render_with(&LedgerCollector::new(app.clone(), lag, webhooks))
    }

    fn render_with(&self, ledger: &LedgerCollector) -> String {
        let mut families: Vec<_> = self
            .collectors()
            .into_iter()
            .chain([ledger as &dyn Collector])
            .flat_map(|c| c.collect())
            // A labelled family nothing was counted in yet has no sample:
            // the encoder refuses those (as the crate's registry drops them).
            .filter(|f| !f.get_metric().is_empty())
            .collect();
        families.sort_by(|a, b| a.name().cmp(b.name()));
        let mut text = String::new();
        if let Err(e) = TextEncoder::new().encode_utf8(&families, &mut text) {
            // Only a family without samples or name fails, and none is left.
            tracing::error!(error = %e, "metrics: encoding the exposition failed");
        }
        text
    }
}

/// The webhook series read from the database: two aggregate queries.
async fn webhook_scrape(
    app: &AppState,
) -> Result<ledger::WebhookScrape, tally_webhooks::WebhookError> {
    use tally_webhooks::store::{now_micros, DeliveryRow, EndpointRow};
    let storage = app.writers.storage();
    let now = now_micros();
    let oldest_pending = DeliveryRow::pending_ages(storage)
        .await?
        .into_iter()
        .map(|a| {
            let seconds = (now - a.oldest_scheduled_at).max(0) as f64 / 1e6;
            (a.tenant_id, a.endpoint_id, seconds)
        })
        .collect();
    Ok(ledger::WebhookScrape {
        oldest_pending,
        endpoints_disabled: EndpointRow::count_disabled(storage).await?,
    })
}

/// `GET /metrics` (no authentication, like `/healthz`): keep it off the
/// public network (docs/operations.md, "Monitoring").
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    operation_id = "getMetrics",
    summary = "Prometheus metrics",
    description = "The Prometheus text exposition format 0.0.4; the series are documented in \
        docs/operations.md (\"Monitoring\"). Keep it off the public network.",
    responses((status = 200, description = "The metrics.", content_type = "text/plain; version=0.0.4", body = String)),
)]
pub async fn get_metrics(axum::extract::State(app): axum::extract::State<AppState>) -> Response {
    let mut response = global().render(&app).await.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}

#[cfg(test)]
mod tests;
