//! `GET /metrics` as the tests read it: every test that looks at a series
//! goes through [`scrape`], which also checks the exposition's structure
//! (HELP and TYPE before samples, counters named `_total`, cumulative
//! histogram buckets ending in `+Inf`).
//!
//! Not a parser crate: `prometheus-parse` reads labels up to the first `}`,
//! so it drops every sample whose `route` is a template such as
//! `/v1/accounts/{account}`; `openmetrics-parser` is LGPL. The checks below
//! are what the tests assert about the format, so they stay here, shared.

use std::collections::{BTreeMap, HashMap};

use super::Server;

/// One sample line: name, labels, value.
#[derive(Debug, Clone)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A parsed exposition: the families' HELP and TYPE, and every sample.
#[derive(Debug, Default)]
pub struct Exposition {
    pub help: HashMap<String, String>,
    pub kind: HashMap<String, String>,
    pub samples: Vec<Sample>,
}

impl Exposition {
    /// The value of the one sample with this name and exactly these labels.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let found: Vec<&Sample> = self
            .samples
            .iter()
            .filter(|s| s.name == name && s.labels == want)
            .collect();
        assert!(found.len() <= 1, "{name} {labels:?} appears twice");
        found.first().map(|s| s.value)
    }

    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.value(name, labels)
            .unwrap_or_else(|| panic!("no sample {name} {labels:?}"))
    }
}

fn is_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parses `{a="x",b="y\"z"}`; returns the labels and the rest of the line.
fn parse_labels(text: &str) -> (BTreeMap<String, String>, &str) {
    let mut labels = BTreeMap::new();
    let mut rest = text.strip_prefix('{').expect("labels start with {");
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return (labels, r);
        }
        let eq = rest.find('=').expect("label=value");
        let name = &rest[..eq];
        assert!(is_label_name(name), "bad label name {name:?}");
        rest = rest[eq + 1..]
            .strip_prefix('"')
            .expect("quoted label value");
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            let (i, c) = chars.next().expect("unterminated label value");
            match c {
                '"' => break i,
                '\\' => match chars.next().expect("escape").1 {
                    '\\' => value.push('\\'),
                    '"' => value.push('"'),
                    'n' => value.push('\n'),
                    other => panic!("bad escape \\{other}"),
                },
                c => value.push(c),
            }
        };
        assert!(
            labels.insert(name.to_owned(), value).is_none(),
            "label {name} twice"
        );
        rest = &rest[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

fn parse_value(text: &str) -> f64 {
    match text {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        t => t
            .parse()
            .unwrap_or_else(|_| panic!("bad sample value {t:?}")),
    }
}

/// The family a sample belongs to: a histogram's `_bucket`, `_sum` and
/// `_count` samples belong to the histogram.
fn family_of<'a>(name: &'a str, kinds: &HashMap<String, String>) -> &'a str {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix) {
            if kinds.get(base).map(String::as_str) == Some("histogram") {
                return base;
            }
        }
    }
    name
}

/// Parses the text exposition format strictly: every line is a HELP, a TYPE
/// or a `name{labels} value` sample of a family whose HELP and TYPE came
/// first; histograms have cumulative buckets ending in `+Inf` equal to
/// `_count`, and a `_sum`.
pub fn parse_exposition(text: &str) -> Exposition {
    let mut e = Exposition::default();
    assert!(text.ends_with('\n'), "the exposition ends with a newline");
    for line in text.lines() {
        assert!(!line.is_empty(), "empty line in {text}");
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP name text");
            assert!(is_metric_name(name), "{line}");
            assert!(!help.is_empty(), "{line}");
            assert!(
                e.help.insert(name.to_owned(), help.to_owned()).is_none(),
                "HELP twice: {line}"
            );
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(is_metric_name(name), "{line}");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "{line}"
            );
            assert!(e.help.contains_key(name), "TYPE before HELP: {line}");
            assert!(
                e.kind.insert(name.to_owned(), kind.to_owned()).is_none(),
                "TYPE twice: {line}"
            );
        } else {
            assert!(!line.starts_with('#'), "unexpected comment {line}");
            let name_end = line.find(['{', ' ']).expect("name then labels or value");
            let name = &line[..name_end];
            assert!(is_metric_name(name), "{line}");
            let (labels, rest) = if line[name_end..].starts_with('{') {
                parse_labels(&line[name_end..])
            } else {
                (BTreeMap::new(), &line[name_end..])
            };
            let value = rest.strip_prefix(' ').expect("a space before the value");
            assert!(!value.contains(' '), "no timestamps expected: {line}");
            let family = family_of(name, &e.kind);
            assert!(e.help.contains_key(family), "no HELP for {line}");
            let kind = e
                .kind
                .get(family)
                .unwrap_or_else(|| panic!("no TYPE for {line}"));
            if kind == "counter" {
                assert!(name.ends_with("_total"), "counter without _total: {line}");
            }
            e.samples.push(Sample {
                name: name.to_owned(),
                labels,
                value: parse_value(value),
            });
        }
    }
    // Histograms: per label set, ascending cumulative buckets ending in +Inf
    // equal to _count, and a _sum.
    for (family, kind) in &e.kind {
        if kind != "histogram" {
            continue;
        }
        let mut series: BTreeMap<BTreeMap<String, String>, Vec<(f64, f64)>> = BTreeMap::new();
        for s in e
            .samples
            .iter()
            .filter(|s| s.name == format!("{family}_bucket"))
        {
            let mut labels = s.labels.clone();
            let le = parse_value(&labels.remove("le").expect("a bucket has le"));
            series.entry(labels).or_default().push((le, s.value));
        }
        for (labels, buckets) in series {
            assert!(buckets.len() >= 2, "{family} {labels:?} has buckets");
            for w in buckets.windows(2) {
                assert!(w[0].0 < w[1].0, "{family} le ascending: {buckets:?}");
                assert!(w[0].1 <= w[1].1, "{family} cumulative: {buckets:?}");
            }
            let (last_le, last) = *buckets.last().unwrap();
            assert!(last_le.is_infinite(), "{family} ends with +Inf");
            let pairs: Vec<(&str, &str)> = labels
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            assert_eq!(e.get(&format!("{family}_count"), &pairs), last, "{family}");
            assert!(
                e.value(&format!("{family}_sum"), &pairs).is_some(),
                "{family}_sum"
            );
        }
    }
    e
}

/// A scrape that holds the usage projection lag: the lag is absent from a
/// scrape whose database read did not finish in time (docs/operations.md),
/// as on a loaded machine, so this scrapes again until it is there.
pub async fn scrape_with_lag(server: &Server) -> Exposition {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let m = scrape(server).await;
        if m.value("tally_usage_projection_lag_entries", &[]).is_some() {
            return m;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no scrape read the usage projection lag in 30 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

pub async fn scrape(server: &Server) -> Exposition {
    let r = server
        .send(server.client.get(format!("{}/metrics", server.base)))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.content_type().starts_with("text/plain; version=0.0.4"),
        "{}",
        r.content_type()
    );
    parse_exposition(std::str::from_utf8(&r.body).unwrap())
}
