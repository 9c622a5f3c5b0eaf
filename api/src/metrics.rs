//! `GET /metrics`: the Prometheus text exposition format (version 0.0.4),
//! rendered by hand from atomics. No exporter library, nothing pushed
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
//!   `ProjectorStats`; the pool's `Storage::pool_stats`. Read at scrape time.
//!
//! The series and what to alert on are documented in docs/operations.md
//! ("Monitoring").

use std::collections::BTreeMap;
use std::fmt::{Display, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, RwLock};
use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tally_ledger::decide::Decision;
use tally_ledger::entry::EntryStatus;
use tally_ledger::stats::{Histogram, HistogramSnapshot};

use crate::problem::Answer;
use crate::state::AppState;

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Bounds of `tally_http_request_duration_seconds`, in microseconds.
const HTTP_MICROS_BOUNDS: [u64; 15] = [
    250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000, 5_000_000, 10_000_000,
];

/// The label value of requests that matched no route (404s of unknown
/// paths): never the raw path, which a client could vary without bound.
pub const UNMATCHED_ROUTE: &str = "unmatched";

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::default);

/// This process's HTTP-level counters.
pub fn global() -> &'static Metrics {
    &METRICS
}

/// Counters with labels, created on first use.
#[derive(Debug, Default)]
struct CounterFamily {
    values: RwLock<BTreeMap<Vec<String>, AtomicU64>>,
}

impl CounterFamily {
    fn inc(&self, labels: &[&str]) {
        let key: Vec<String> = labels.iter().map(|s| (*s).to_owned()).collect();
        if let Some(c) = self
            .values
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            c.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.values
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key)
            .or_default()
            .fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> Vec<(Vec<String>, u64)> {
        self.values
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), v.load(Ordering::Relaxed)))
            .collect()
    }
}

/// Histograms with labels, created on first use.
#[derive(Debug)]
struct HistogramFamily {
    bounds: &'static [u64],
    values: RwLock<BTreeMap<Vec<String>, Histogram>>,
}

impl HistogramFamily {
    fn new(bounds: &'static [u64]) -> Self {
        Self {
            bounds,
            values: RwLock::default(),
        }
    }

    fn observe(&self, labels: &[&str], value: u64) {
        let key: Vec<String> = labels.iter().map(|s| (*s).to_owned()).collect();
        if let Some(h) = self
            .values
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            h.observe(value);
            return;
        }
        self.values
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key)
            .or_insert_with(|| Histogram::new(self.bounds))
            .observe(value);
    }

    fn snapshot(&self) -> Vec<(Vec<String>, HistogramSnapshot)> {
        self.values
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, h)| (k.clone(), h.snapshot()))
            .collect()
    }
}

/// Counters of the HTTP layer and of answered decisions.
#[derive(Debug)]
pub struct Metrics {
    /// method, route, status.
    http_requests: CounterFamily,
    /// method, route; microseconds.
    http_micros: HistogramFamily,
    replays: AtomicU64,
    conflicts: AtomicU64,
    /// code.
    rejections: CounterFamily,
    /// code.
    refusals: CounterFamily,
    /// cause class of a 500.
    internal_errors: CounterFamily,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            http_requests: CounterFamily::default(),
            http_micros: HistogramFamily::new(&HTTP_MICROS_BOUNDS),
            replays: AtomicU64::new(0),
            conflicts: AtomicU64::new(0),
            rejections: CounterFamily::default(),
            refusals: CounterFamily::default(),
            internal_errors: CounterFamily::default(),
        }
    }
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
            Decision::Created(_) | Decision::Unchanged(_) => Outcome::Other,
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
    /// One answered HTTP request. `route` is the route template (or
    /// [`UNMATCHED_ROUTE`]); `elapsed` runs until the response head.
    pub fn observe_http(&self, method: &str, route: &str, status: StatusCode, elapsed: Duration) {
        self.http_requests.inc(&[method, route, status.as_str()]);
        self.http_micros.observe(
            &[method, route],
            u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
        );
    }

    /// One decided intent and the answer it got (single or batch item).
    pub fn observe_answer(&self, outcome: Outcome, answer: &Answer) {
        let code = || match answer {
            Answer::Problem { body, .. } => body.get("code").and_then(Value::as_str).unwrap_or(""),
            Answer::Entry { .. } => "",
        };
        match outcome {
            Outcome::Other => {}
            Outcome::Replay => {
                self.replays.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Conflict => {
                self.conflicts.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Rejected => self.rejections.inc(&[code()]),
            Outcome::Refused => self.refusals.inc(&[code()]),
        }
    }

    /// One 500 answered, by its fixed cause class (`schema`, `constraint`,
    /// `data`, `corrupt`, `other`, `internal`, `io`, …).
    pub fn observe_internal_error(&self, cause: &'static str) {
        self.internal_errors.inc(&[cause]);
    }

    /// The whole exposition: these counters and the ledger's observations.
    /// Reads the database once (the projection lag), for at most
    /// [`LAG_READ_TIMEOUT`]; everything else is in memory.
    pub async fn render(&self, app: &AppState) -> String {
        let lags = match tokio::time::timeout(
            LAG_READ_TIMEOUT,
            tally_projections::usage::usage_lags(app.writers.storage()),
        )
        .await
        {
            Ok(Ok(lags)) => Some(lags),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "metrics: reading the usage projection lag failed");
                None
            }
            Err(_) => {
                tracing::warn!("metrics: the usage projection lag was not read in time");
                None
            }
        };
        self.render_with(app, lags)
    }

    fn render_with(&self, app: &AppState, lags: Option<Vec<(String, i64)>>) -> String {
        let mut out = Exposition::default();

        out.family(
            "tally_build_info",
            "gauge",
            "Always 1; the version of the running tally binary is its label.",
        );
        out.sample(
            "tally_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))],
            1,
        );

        out.family(
            "tally_http_requests_total",
            "counter",
            "HTTP requests answered, by method, route template and status code.",
        );
        for (labels, value) in self.http_requests.snapshot() {
            out.sample(
                "tally_http_requests_total",
                &zip(&["method", "route", "status"], &labels),
                value,
            );
        }
        out.family(
            "tally_http_request_duration_seconds",
            "histogram",
            "Time from receiving a request to sending its response head, by method and route template.",
        );
        for (labels, snapshot) in self.http_micros.snapshot() {
            out.histogram(
                "tally_http_request_duration_seconds",
                &zip(&["method", "route"], &labels),
                &snapshot,
                MICROS_PER_SECOND,
            );
        }

        out.family(
            "tally_replays_total",
            "counter",
            "Answers marked Idempotent-Replayed: a retry of an intent already decided (batch items included).",
        );
        out.sample(
            "tally_replays_total",
            &[],
            self.replays.load(Ordering::Relaxed),
        );
        out.family(
            "tally_idempotency_conflicts_total",
            "counter",
            "409 idempotency_conflict answers: an upstream ID reused with other parameters.",
        );
        out.sample(
            "tally_idempotency_conflicts_total",
            &[],
            self.conflicts.load(Ordering::Relaxed),
        );
        out.family(
            "tally_rejections_total",
            "counter",
            "New stored rejections (entries recorded with status rejected), by code; their replays count as replays.",
        );
        for (labels, value) in self.rejections.snapshot() {
            out.sample("tally_rejections_total", &zip(&["code"], &labels), value);
        }
        out.family(
            "tally_refusals_total",
            "counter",
            "Decisions refused with nothing stored (unit_mismatch, not_found, invalid_request, ...), by code.",
        );
        for (labels, value) in self.refusals.snapshot() {
            out.sample("tally_refusals_total", &zip(&["code"], &labels), value);
        }
        out.family(
            "tally_internal_errors_total",
            "counter",
            "500 internal answers (a failure a retry cannot cure: the cause is logged with the request ID), by cause class.",
        );
        for (labels, value) in self.internal_errors.snapshot() {
            out.sample(
                "tally_internal_errors_total",
                &zip(&["cause"], &labels),
                value,
            );
        }

        let writers = &app.writers;
        let stats = writers.stats();
        out.family(
            "tally_writer_group_size",
            "histogram",
            "Intents decided per group transaction of the tenant writers.",
        );
        out.histogram(
            "tally_writer_group_size",
            &[],
            &stats.group_size.snapshot(),
            1,
        );
        out.family(
            "tally_writer_commit_duration_seconds",
            "histogram",
            "Duration of one group transaction, BEGIN to the end of COMMIT (its one retry included).",
        );
        out.histogram(
            "tally_writer_commit_duration_seconds",
            &[],
            &stats.commit_micros.snapshot(),
            MICROS_PER_SECOND,
        );
        out.family(
            "tally_writer_failed_groups_total",
            "counter",
            "Group transactions that failed after their retry: nothing committed, every caller got 503 (500 if the failure was not transient).",
        );
        out.sample(
            "tally_writer_failed_groups_total",
            &[],
            stats.failed_groups.load(Ordering::Relaxed),
        );
        out.family(
            "tally_writer_answered_before_group_total",
            "counter",
            "Intents answered by the key look-up before the writer (replays and conflicts of committed entries); they never entered a group.",
        );
        out.sample(
            "tally_writer_answered_before_group_total",
            &[],
            stats.answered_before_group.load(Ordering::Relaxed),
        );
        out.family(
            "tally_writer_groups_decided_ahead_total",
            "counter",
            "Groups decided from the writer's memory while the group before them was written (pipelining).",
        );
        out.sample(
            "tally_writer_groups_decided_ahead_total",
            &[],
            stats.decided_ahead.load(Ordering::Relaxed),
        );
        out.family(
            "tally_writer_groups_decided_ahead_redone_total",
            "counter",
            "Groups decided ahead whose write found the head moved or failed: decided again under the head lock, nothing of the first decision sent.",
        );
        out.sample(
            "tally_writer_groups_decided_ahead_redone_total",
            &[],
            stats.decided_ahead_redone.load(Ordering::Relaxed),
        );
        out.family(
            "tally_writer_intents_not_looked_up_total",
            "counter",
            "Intents sent to the writer without a key look-up, the look-ups before them having found a run of free keys: the UNIQUE constraint decides.",
        );
        out.sample(
            "tally_writer_intents_not_looked_up_total",
            &[],
            stats.not_looked_up.load(Ordering::Relaxed),
        );
        out.family(
            "tally_writer_groups_key_taken_total",
            "counter",
            "Groups whose write found a key taken (a replay sent without look-up, or a key taken since its look-up): nothing written, decided again with every key looked up.",
        );
        out.sample(
            "tally_writer_groups_key_taken_total",
            &[],
            stats.key_taken_groups.load(Ordering::Relaxed),
        );
        out.family(
            "tally_writer_look_up_queries_total",
            "counter",
            "Queries of the key look-up before the writer; with tally_writer_keys_looked_up_total, the keys each shared.",
        );
        out.sample(
            "tally_writer_look_up_queries_total",
            &[],
            stats.look_up_queries.load(Ordering::Relaxed),
        );
        out.family(
            "tally_writer_keys_looked_up_total",
            "counter",
            "Keys asked for by the look-up before the writer (found or free).",
        );
        out.sample(
            "tally_writer_keys_looked_up_total",
            &[],
            stats.keys_looked_up.load(Ordering::Relaxed),
        );
        out.family(
            "tally_writer_answered_from_recent_total",
            "counter",
            "Intents answered from the entries this process recently committed or found (--recent-entries-mib): no writer, no database.",
        );
        out.sample(
            "tally_writer_answered_from_recent_total",
            &[],
            stats.answered_from_recent.load(Ordering::Relaxed),
        );
        let (held, bytes) = writers.recent().size();
        out.family(
            "tally_recent_entries",
            "gauge",
            "Committed entries held to answer retries.",
        );
        out.sample("tally_recent_entries", &[], held);
        out.family(
            "tally_recent_entries_bytes",
            "gauge",
            "Bytes those entries are counted as, against the bound --recent-entries-mib.",
        );
        out.sample("tally_recent_entries_bytes", &[], bytes);
        let depth = writers.queue_depth();
        out.family(
            "tally_writer_queued_intents",
            "gauge",
            "Intents waiting in or being decided by the tenant writers, summed over tenants.",
        );
        out.sample("tally_writer_queued_intents", &[], depth.total);
        out.family(
            "tally_writer_queued_intents_max",
            "gauge",
            "Intents waiting in the fullest tenant queue; at tally_writer_queue_capacity requests get 429.",
        );
        out.sample("tally_writer_queued_intents_max", &[], depth.max);
        out.family(
            "tally_writer_queue_capacity",
            "gauge",
            "Intents a tenant queue holds before requests get 429 (--queue-capacity).",
        );
        out.sample(
            "tally_writer_queue_capacity",
            &[],
            writers.config().queue_capacity,
        );
        out.family(
            "tally_writer_tenants",
            "gauge",
            "Tenants with a writer in this process.",
        );
        out.sample("tally_writer_tenants", &[], depth.tenants);
        out.family(
            "tally_writer_idle_stopped_total",
            "counter",
            "Tenant writers stopped after --writer-idle-ms without work (their remembered balances freed).",
        );
        out.sample(
            "tally_writer_idle_stopped_total",
            &[],
            stats.idle_writers_stopped.load(Ordering::Relaxed),
        );
        out.family(
            "tally_expired_holds_released_total",
            "counter",
            "Expired holds this process released (hold_release entries written by the sweeper).",
        );
        out.sample(
            "tally_expired_holds_released_total",
            &[],
            stats.expired_holds_released.load(Ordering::Relaxed),
        );

        let pool = writers.storage().pool_stats();
        for (name, help, value) in [
            (
                "tally_db_pool_connections",
                "Database connections open (idle plus in use).",
                pool.open,
            ),
            (
                "tally_db_pool_idle_connections",
                "Open database connections not in use.",
                pool.idle,
            ),
            (
                "tally_db_pool_in_use_connections",
                "Database connections in use.",
                pool.in_use,
            ),
            (
                "tally_db_pool_max_connections",
                "The most connections the pool opens (--pool-size).",
                pool.max,
            ),
        ] {
            out.family(name, "gauge", help);
            out.sample(name, &[], value);
        }

        out.family(
            "tally_usage_projection_lag_entries",
            "gauge",
            "Entries the usage summaries are behind the log: head seq minus usage checkpoint, the largest over tenants. Absent when the database did not answer the scrape in time.",
        );
        out.family(
            "tally_usage_projection_lagging_tenants",
            "gauge",
            "Tenants whose usage summaries are behind their log. Absent when the database did not answer the scrape in time.",
        );
        if let Some(lags) = lags {
            let max = lags.iter().map(|(_, lag)| *lag).max().unwrap_or(0);
            out.sample("tally_usage_projection_lag_entries", &[], max.max(0));
            out.sample("tally_usage_projection_lagging_tenants", &[], lags.len());
        }
        let projector = &app.projector;
        out.family(
            "tally_usage_projector_rounds_total",
            "counter",
            "Rounds of the usage projector completed by this process.",
        );
        out.sample(
            "tally_usage_projector_rounds_total",
            &[],
            projector.rounds.load(Ordering::Relaxed),
        );
        out.family(
            "tally_usage_projector_failures_total",
            "counter",
            "Failed usage projection attempts (retried next round).",
        );
        out.sample(
            "tally_usage_projector_failures_total",
            &[],
            projector.failures.load(Ordering::Relaxed),
        );
        out.family(
            "tally_background_failures_total",
            "counter",
            "Failures of background jobs, by job: expiry (a tenant's expired holds not released, or the listing of expired holds failed) and usage (a tenant's usage not projected, or the listing of lagging tenants failed). The other tenants go on; the failed work is retried next round, and the log names the tenant.",
        );
        for (job, value) in [
            ("expiry", stats.expiry_failures.load(Ordering::Relaxed)),
            ("usage", projector.failures.load(Ordering::Relaxed)),
        ] {
            out.sample("tally_background_failures_total", &[("job", job)], value);
        }

        out.text
    }
}

const MICROS_PER_SECOND: u64 = 1_000_000;

/// How long a scrape waits for the database (the projection lag); the
/// other series never wait.
pub const LAG_READ_TIMEOUT: Duration = Duration::from_millis(500);

fn zip<'a>(names: &[&'static str], values: &'a [String]) -> Vec<(&'static str, &'a str)> {
    names
        .iter()
        .copied()
        .zip(values.iter().map(String::as_str))
        .collect()
}

/// The text being rendered.
#[derive(Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        // Help texts are ours: no backslash or newline to escape.
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (label, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                self.text.push_str(label);
                self.text.push_str("=\"");
                for c in v.chars() {
                    match c {
                        '\\' => self.text.push_str("\\\\"),
                        '"' => self.text.push_str("\\\""),
                        '\n' => self.text.push_str("\\n"),
                        c => self.text.push(c),
                    }
                }
                self.text.push('"');
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }

    /// `_bucket` lines (cumulative, `le` in the exposed unit), `_sum` and
    /// `_count`; observations are divided by `per_unit` (1 for counts,
    /// 1,000,000 for microseconds shown as seconds).
    fn histogram(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        snapshot: &HistogramSnapshot,
        per_unit: u64,
    ) {
        let scale = |v: u64| -> String {
            if per_unit == 1 {
                v.to_string()
            } else {
                // Division by a power of ten rounds correctly, so 500 µs
                // prints as 0.0005, not 0.0005000000000000001.
                format!("{}", v as f64 / per_unit as f64)
            }
        };
        let bucket = format!("{name}_bucket");
        for (bound, count) in &snapshot.buckets {
            let le = scale(*bound);
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket, &with_le, count);
        }
        let mut with_le = labels.to_vec();
        with_le.push(("le", "+Inf"));
        self.sample(&bucket, &with_le, snapshot.count);
        self.sample(&format!("{name}_sum"), labels, scale(snapshot.sum));
        self.sample(&format!("{name}_count"), labels, snapshot.count);
    }
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
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let mut out = Exposition::default();
        out.sample("x_total", &[("a", "q\"b\\n\nz")], 3);
        assert_eq!(out.text, "x_total{a=\"q\\\"b\\\\n\\nz\"} 3\n");
    }

    #[test]
    fn histograms_have_buckets_sum_and_count() {
        static BOUNDS: [u64; 2] = [500, 1_000_000];
        let h = Histogram::new(&BOUNDS);
        h.observe(400);
        h.observe(2_000_000);
        let mut out = Exposition::default();
        out.histogram(
            "d_seconds",
            &[("route", "/r")],
            &h.snapshot(),
            MICROS_PER_SECOND,
        );
        assert_eq!(
            out.text,
            "d_seconds_bucket{route=\"/r\",le=\"0.0005\"} 1\n\
             d_seconds_bucket{route=\"/r\",le=\"1\"} 1\n\
             d_seconds_bucket{route=\"/r\",le=\"+Inf\"} 2\n\
             d_seconds_sum{route=\"/r\"} 2.0004\n\
             d_seconds_count{route=\"/r\"} 2\n"
        );
    }
}
