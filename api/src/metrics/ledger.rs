//! The ledger's observations as Prometheus series: the writers' and the
//! usage projector's atomics, the queue depth, the recent entries and the
//! pool, read when a scrape collects them (nothing is copied in between),
//! plus the projection lag the scrape read from the database.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{self, MetricFamily, MetricType};
use tally_ledger::histogram::HistogramSnapshot;
use tally_projections::usage::UsageLag;

use crate::state::AppState;

/// How a series is exposed.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One family: name, kind, help, its labels.
struct Series {
    name: &'static str,
    kind: Kind,
    help: &'static str,
    labels: &'static [&'static str],
}

const MICROS_PER_SECOND: u64 = 1_000_000;

const fn series(name: &'static str, kind: Kind, help: &'static str) -> Series {
    Series {
        name,
        kind,
        help,
        labels: &[],
    }
}

/// Every family this collector exposes (docs/operations.md, "Monitoring").
const SERIES: &[Series] = &[
    series("tally_writer_group_size", Kind::Histogram, "Entry requests decided per group transaction of the tenant writers."),
    series("tally_writer_commit_duration_seconds", Kind::Histogram, "Duration of one group transaction, BEGIN to the end of COMMIT (its one retry included)."),
    series("tally_writer_failed_groups_total", Kind::Counter, "Group transactions that failed after their retry: nothing committed, every caller got 503 (500 if the failure was not transient)."),
    series("tally_writer_answered_before_group_total", Kind::Counter, "Entry requests answered by the key look-up before the writer (replays and conflicts of committed entries); they never entered a group."),
    series("tally_writer_groups_decided_ahead_total", Kind::Counter, "Groups decided from the writer's memory while the group before them was written (pipelining)."),
    series("tally_writer_groups_decided_ahead_redone_total", Kind::Counter, "Groups decided ahead whose write found the head moved or failed: decided again under the head lock, nothing of the first decision sent."),
    series("tally_writer_requests_not_looked_up_total", Kind::Counter, "Entry requests sent to the writer without a key look-up, the look-ups before them having found a run of free keys: the UNIQUE constraint decides."),
    series("tally_writer_groups_key_taken_total", Kind::Counter, "Groups whose write found a key taken (a replay sent without look-up, or a key taken since its look-up): nothing written, decided again with every key looked up."),
    series("tally_writer_look_up_queries_total", Kind::Counter, "Queries of the key look-up before the writer; with tally_writer_keys_looked_up_total, the keys each shared."),
    series("tally_writer_keys_looked_up_total", Kind::Counter, "Keys asked for by the look-up before the writer (found or free)."),
    series("tally_writer_answered_from_recent_total", Kind::Counter, "Entry requests answered from the entries this process recently committed or found (--recent-entries-mib): no writer, no database."),
    series("tally_commit_rounds_total", Kind::Counter, "Commit rounds committed or attempted: one transaction each, holding the groups of every tenant ready at that moment (--committers)."),
    series("tally_commit_round_groups_total", Kind::Counter, "Groups (and writes of groups decided ahead) that went into commit rounds; divided by tally_commit_rounds_total, the groups one fsync carries."),
    series("tally_commit_round_groups_failed_total", Kind::Counter, "Groups of a commit round rolled back to their savepoint (a key taken, the head moved) while the others in the round went on."),
    series("tally_writer_remembered", Kind::Gauge, "Accounts and rule-state records the tenant writers remember between groups, all tenants together."),
    series("tally_writer_remembered_limit", Kind::Gauge, "The most they may remember together: a writer whose next group would pass it starts over."),
    series("tally_recent_entries", Kind::Gauge, "Committed entries held to answer retries."),
    series("tally_recent_entries_bytes", Kind::Gauge, "Bytes those entries are counted as, against the bound --recent-entries-mib."),
    series("tally_writer_queued_requests", Kind::Gauge, "Entry requests waiting in or being decided by the tenant writers, summed over tenants."),
    series("tally_writer_queued_requests_max", Kind::Gauge, "Entry requests waiting in the fullest tenant queue; at tally_writer_queue_capacity requests get 429."),
    series("tally_writer_queue_capacity", Kind::Gauge, "Entry requests a tenant queue holds before requests get 429 (--queue-capacity)."),
    series("tally_writer_tenants", Kind::Gauge, "Tenants with a writer in this process."),
    series("tally_writer_idle_stopped_total", Kind::Counter, "Tenant writers stopped after --writer-idle-ms without work (their remembered balances freed)."),
    series("tally_expired_holds_released_total", Kind::Counter, "Expired holds this process released (hold_release entries written by the sweeper)."),
    series("tally_db_pool_connections", Kind::Gauge, "Database connections open (idle plus in use)."),
    series("tally_db_pool_idle_connections", Kind::Gauge, "Open database connections not in use."),
    series("tally_db_pool_in_use_connections", Kind::Gauge, "Database connections in use."),
    series("tally_db_pool_max_connections", Kind::Gauge, "The most connections the pool opens (--pool-size)."),
    series("tally_usage_projection_lag_entries", Kind::Gauge, "Entries the usage summaries are behind the log: head seq minus usage checkpoint, the largest over tenants. Absent when the database did not answer the scrape in time."),
    series("tally_usage_projection_lagging_tenants", Kind::Gauge, "Tenants whose usage summaries are behind their log. Absent when the database did not answer the scrape in time."),
    series("tally_usage_projector_rounds_total", Kind::Counter, "Rounds of the usage projector completed by this process."),
    series("tally_usage_projector_failures_total", Kind::Counter, "Failed usage projection attempts (retried next round)."),
    Series {
        name: "tally_background_failures_total",
        kind: Kind::Counter,
        help: "Failures of background jobs, by job: expiry (a tenant's expired holds not released, or the listing of expired holds failed), usage (a tenant's usage not projected, or the listing of lagging tenants failed) and webhooks (a fan-out or a claim of deliveries failed). The other tenants go on; the failed work is retried next round, and the log names the tenant.",
        labels: &["job"],
    },
    Series {
        name: "tally_webhook_attempts_total",
        kind: Kind::Counter,
        help: "Webhook delivery attempts this process made, by outcome: delivered (2xx), http_status (any other answer), timeout, connection (no answer, or an address the SSRF guard refused), gone (410: the endpoint was disabled).",
        labels: &["outcome"],
    },
    series("tally_webhook_deliveries_given_up_total", Kind::Counter, "Webhook deliveries this process gave up (failed, dead-lettered) after retrying them for --webhook-max-age-s."),
    Series {
        name: "tally_webhook_oldest_undelivered_seconds",
        kind: Kind::Gauge,
        help: "Per endpoint with a pending delivery: seconds since its oldest pending delivery was scheduled. Absent when the database did not answer the scrape in time.",
        labels: &["tenant", "endpoint"],
    },
    series("tally_webhook_endpoints_disabled", Kind::Gauge, "Webhook endpoints disabled, over every tenant (by a PATCH, or after a 410). Absent when the database did not answer the scrape in time."),
    series("tally_ingest_nats_consumed_total", Kind::Counter, "Messages the NATS consumer of --ingest-nats pulled."),
    series("tally_ingest_nats_committed_total", Kind::Counter, "Entries the NATS consumer created."),
    series("tally_ingest_nats_replayed_total", Kind::Counter, "Operations of NATS messages that replayed committed entries (redeliveries, duplicates)."),
    series("tally_ingest_nats_dead_lettered_total", Kind::Counter, "NATS messages refused for good, published to the dead-letter subject and terminated."),
    series("tally_ingest_nats_redelivered_total", Kind::Counter, "NATS messages negatively acknowledged after a transient failure, to be redelivered."),
    series("tally_ingest_nats_lag_messages", Kind::Gauge, "Messages of the stream not yet delivered to the NATS consumer, as the server last said."),
];

/// The descriptions of [`SERIES`] (a name the crate refused would be
/// missing; the unit tests check that none is).
static DESCS: LazyLock<Vec<Desc>> = LazyLock::new(|| {
    SERIES
        .iter()
        .filter_map(|s| {
            let labels = s.labels.iter().map(|l| (*l).to_owned()).collect();
            Desc::new(s.name.to_owned(), s.help.to_owned(), labels, HashMap::new()).ok()
        })
        .collect()
});

/// A collector of one server's ledger-side series. `lag` is the usage
/// projection lag as the scrape read it, `None` if the database did not
/// answer in time (the two lag series are then absent).
pub struct LedgerCollector {
    app: AppState,
    lag: Option<UsageLag>,
    webhooks: Option<WebhookScrape>,
}

/// What a scrape read of the webhook deliveries from the database.
#[derive(Debug, Clone, Default)]
pub struct WebhookScrape {
    /// `(tenant, endpoint, seconds)` of the oldest pending delivery.
    pub oldest_pending: Vec<(String, String, f64)>,
    pub endpoints_disabled: i64,
}

impl LedgerCollector {
    pub fn new(app: AppState, lag: Option<UsageLag>, webhooks: Option<WebhookScrape>) -> Self {
        Self { app, lag, webhooks }
    }

    /// Every sample, by family name.
    fn samples(&self) -> Vec<(&'static str, proto::Metric)> {
        let writers = &self.app.writers;
        let stats = writers.stats();
        let projector = &self.app.projector;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        let mut out = vec![
            (
                "tally_writer_group_size",
                histogram(&stats.group_size.snapshot(), 1),
            ),
            (
                "tally_writer_commit_duration_seconds",
                histogram(&stats.commit_micros.snapshot(), MICROS_PER_SECOND),
            ),
        ];
        let (held, bytes) = writers.recent().size();
        let rounds = writers.round_stats();
        let depth = writers.queue_depth();
        let pool = writers.storage().pool_stats();
        let plain = [
            (
                "tally_writer_failed_groups_total",
                stats.failed_groups.load(Ordering::Relaxed) as f64,
            ),
            (
                "tally_writer_answered_before_group_total",
                load(&stats.answered_before_group),
            ),
            (
                "tally_writer_groups_decided_ahead_total",
                load(&stats.decided_ahead),
            ),
            (
                "tally_writer_groups_decided_ahead_redone_total",
                load(&stats.decided_ahead_redone),
            ),
            (
                "tally_writer_requests_not_looked_up_total",
                load(&stats.not_looked_up),
            ),
            (
                "tally_writer_groups_key_taken_total",
                load(&stats.key_taken_groups),
            ),
            (
                "tally_writer_look_up_queries_total",
                load(&stats.look_up_queries),
            ),
            (
                "tally_writer_keys_looked_up_total",
                load(&stats.keys_looked_up),
            ),
            (
                "tally_writer_answered_from_recent_total",
                load(&stats.answered_from_recent),
            ),
            ("tally_commit_rounds_total", load(&rounds.rounds)),
            ("tally_commit_round_groups_total", load(&rounds.pieces)),
            (
                "tally_commit_round_groups_failed_total",
                load(&rounds.pieces_failed),
            ),
            (
                "tally_writer_remembered",
                writers.memory_budget().remembered() as f64,
            ),
            (
                "tally_writer_remembered_limit",
                writers.memory_budget().limit() as f64,
            ),
            ("tally_recent_entries", held as f64),
            ("tally_recent_entries_bytes", bytes as f64),
            ("tally_writer_queued_requests", depth.total as f64),
            ("tally_writer_queued_requests_max", depth.max as f64),
            (
                "tally_writer_queue_capacity",
                writers.config().queue_capacity as f64,
            ),
            ("tally_writer_tenants", depth.tenants as f64),
            (
                "tally_writer_idle_stopped_total",
                load(&stats.idle_writers_stopped),
            ),
            (
                "tally_expired_holds_released_total",
                load(&stats.expired_holds_released),
            ),
            ("tally_db_pool_connections", f64::from(pool.open)),
            ("tally_db_pool_idle_connections", f64::from(pool.idle)),
            ("tally_db_pool_in_use_connections", f64::from(pool.in_use)),
            ("tally_db_pool_max_connections", f64::from(pool.max)),
            (
                "tally_usage_projector_rounds_total",
                load(&projector.rounds),
            ),
            (
                "tally_usage_projector_failures_total",
                load(&projector.failures),
            ),
        ];
        out.extend(plain.into_iter().map(|(name, v)| (name, value(&[], v))));
        if let Some(lag) = self.lag {
            out.push((
                "tally_usage_projection_lag_entries",
                value(&[], lag.max_entries.max(0) as f64),
            ));
            out.push((
                "tally_usage_projection_lagging_tenants",
                value(&[], lag.lagging_tenants as f64),
            ));
        }
        let deliveries = &self.app.deliveries;
        for (job, v) in [
            ("expiry", load(&stats.expiry_failures)),
            ("usage", load(&projector.failures)),
            ("webhooks", load(&deliveries.failures)),
        ] {
            out.push(("tally_background_failures_total", value(&[("job", job)], v)));
        }
        for (outcome, n) in deliveries.by_outcome() {
            out.push((
                "tally_webhook_attempts_total",
                value(&[("outcome", outcome)], n as f64),
            ));
        }
        out.push((
            "tally_webhook_deliveries_given_up_total",
            value(&[], load(&deliveries.given_up)),
        ));
        let nats = &self.app.nats;
        for (name, counter) in [
            ("tally_ingest_nats_consumed_total", &nats.consumed),
            ("tally_ingest_nats_committed_total", &nats.committed),
            ("tally_ingest_nats_replayed_total", &nats.replayed),
            ("tally_ingest_nats_dead_lettered_total", &nats.dead_lettered),
            ("tally_ingest_nats_redelivered_total", &nats.redelivered),
            ("tally_ingest_nats_lag_messages", &nats.lag),
        ] {
            out.push((name, value(&[], load(counter))));
        }
        if let Some(w) = &self.webhooks {
            for (tenant, endpoint, seconds) in &w.oldest_pending {
                out.push((
                    "tally_webhook_oldest_undelivered_seconds",
                    value(&[("tenant", tenant), ("endpoint", endpoint)], *seconds),
                ));
            }
            out.push((
                "tally_webhook_endpoints_disabled",
                value(&[], w.endpoints_disabled as f64),
            ));
        }
        out
    }
}

impl Collector for LedgerCollector {
    fn desc(&self) -> Vec<&Desc> {
        DESCS.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut by_name: HashMap<&str, Vec<proto::Metric>> = HashMap::new();
        for (name, mut metric) in self.samples() {
            let Some(series) = SERIES.iter().find(|s| s.name == name) else {
                continue;
            };
            // The value was stored as a gauge; a counter family carries it
            // as a counter.
            if matches!(series.kind, Kind::Counter) {
                let mut counter = proto::Counter::default();
                counter.set_value(metric.get_gauge().get_value());
                metric.set_counter(counter);
            }
            by_name.entry(name).or_default().push(metric);
        }
        SERIES
            .iter()
            .filter_map(|s| {
                let metrics = by_name.remove(s.name)?;
                let mut family = MetricFamily::default();
                family.set_name(s.name.to_owned());
                family.set_help(s.help.to_owned());
                family.set_field_type(match s.kind {
                    Kind::Counter => MetricType::COUNTER,
                    Kind::Gauge => MetricType::GAUGE,
                    Kind::Histogram => MetricType::HISTOGRAM,
                });
                family.set_metric(metrics);
                Some(family)
            })
            .collect()
    }
}

/// A sample with these labels and this value (set as a gauge; `collect`
/// moves it to a counter for counter families).
fn value(labels: &[(&str, &str)], v: f64) -> proto::Metric {
    let mut gauge = proto::Gauge::default();
    gauge.set_value(v);
    let mut metric = proto::Metric::from_gauge(gauge);
    metric.set_label(
        labels
            .iter()
            .map(|(name, value)| {
                let mut pair = proto::LabelPair::default();
                pair.set_name((*name).to_owned());
                pair.set_value((*value).to_owned());
                pair
            })
            .collect(),
    );
    metric
}

/// A ledger histogram as the crate's: cumulative buckets with their upper
/// bounds, the sum and the count, divided by `per_unit`.
pub(super) fn histogram(snapshot: &HistogramSnapshot, per_unit: u64) -> proto::Metric {
    // Division by a power of ten rounds correctly, so 500 µs shows as
    // 0.0005, not 0.0005000000000000001.
    let scale = |v: u64| v as f64 / per_unit as f64;
    let mut h = proto::Histogram::default();
    h.set_bucket(
        snapshot
            .buckets
            .iter()
            .map(|(bound, count)| {
                let mut b = proto::Bucket::default();
                b.set_upper_bound(scale(*bound));
                b.set_cumulative_count(*count);
                b
            })
            .collect(),
    );
    h.set_sample_count(snapshot.count);
    h.set_sample_sum(scale(snapshot.sum));
    let mut metric = proto::Metric::default();
    metric.set_histogram(h);
    metric
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn every_series_has_a_valid_unique_description() {
        assert_eq!(DESCS.len(), SERIES.len(), "a name or label was refused");
        let mut names: Vec<&str> = SERIES.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SERIES.len(), "a series twice");
        for s in SERIES {
            if matches!(s.kind, Kind::Counter) {
                assert!(s.name.ends_with("_total"), "{}", s.name);
            }
        }
    }
}
