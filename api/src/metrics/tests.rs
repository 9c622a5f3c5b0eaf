#![allow(clippy::unwrap_used, clippy::expect_used)]

use prometheus::core::Collector;
use prometheus::proto::{MetricFamily, MetricType};
use prometheus::TextEncoder;
use tally_ledger::histogram::Histogram;

use super::ledger::histogram;
use super::*;

fn encode(families: &[MetricFamily]) -> String {
    TextEncoder::new().encode_to_string(families).unwrap()
}

#[test]
fn the_http_series_are_valid_and_unique() {
    let m = Metrics::new().unwrap();
    let registry = prometheus::Registry::new();
    for c in m.collectors() {
        assert!(!c.desc().is_empty());
    }
    // The crate's registry refuses a name registered twice.
    registry
        .register(Box::new(m.http_requests.clone()))
        .unwrap();
    registry.register(Box::new(m.http_seconds.clone())).unwrap();
    registry.register(Box::new(m.replays.clone())).unwrap();
    registry.register(Box::new(m.conflicts.clone())).unwrap();
    registry.register(Box::new(m.rejections.clone())).unwrap();
    registry.register(Box::new(m.refusals.clone())).unwrap();
    registry
        .register(Box::new(m.internal_errors.clone()))
        .unwrap();
    registry.register(Box::new(m.build_info.clone())).unwrap();
}

#[test]
fn label_values_are_escaped() {
    let m = Metrics::new().unwrap();
    m.rejections.with_label_values(&["q\"b\\n\nz"]).inc_by(3);
    let text = encode(&m.rejections.collect());
    assert!(
        text.ends_with("tally_rejections_total{code=\"q\\\"b\\\\n\\nz\"} 3\n"),
        "{text}"
    );
}

#[test]
fn http_durations_are_seconds_with_the_documented_bounds() {
    let m = Metrics::new().unwrap();
    m.observe_http("GET", "/r", StatusCode::OK, Duration::from_micros(400));
    let text = encode(&m.http_seconds.collect());
    assert!(
        text.contains(
            "tally_http_request_duration_seconds_bucket{method=\"GET\",route=\"/r\",le=\"0.00025\"} 0\n\
             tally_http_request_duration_seconds_bucket{method=\"GET\",route=\"/r\",le=\"0.0005\"} 1\n"
        ),
        "{text}"
    );
    assert!(text.contains("le=\"10\"} 1\n"), "{text}");
    assert!(text.contains("le=\"+Inf\"} 1\n"), "{text}");
}

#[test]
fn ledger_histograms_have_buckets_sum_and_count() {
    static BOUNDS: [u64; 2] = [500, 1_000_000];
    let h = Histogram::new(&BOUNDS);
    h.observe(400);
    h.observe(2_000_000);
    let mut metric = histogram(&h.snapshot(), 1_000_000);
    let mut route = prometheus::proto::LabelPair::default();
    route.set_name("route".to_owned());
    route.set_value("/r".to_owned());
    metric.set_label(vec![route]);
    let mut family = MetricFamily::default();
    family.set_name("d_seconds".to_owned());
    family.set_help("Durations.".to_owned());
    family.set_field_type(MetricType::HISTOGRAM);
    family.set_metric(vec![metric]);
    assert_eq!(
        encode(&[family]),
        "# HELP d_seconds Durations.\n\
         # TYPE d_seconds histogram\n\
         d_seconds_bucket{route=\"/r\",le=\"0.0005\"} 1\n\
         d_seconds_bucket{route=\"/r\",le=\"1\"} 1\n\
         d_seconds_bucket{route=\"/r\",le=\"+Inf\"} 2\n\
         d_seconds_sum{route=\"/r\"} 2.0004\n\
         d_seconds_count{route=\"/r\"} 2\n"
    );
}
