//! Property tests of the canonical fingerprint (SPEC §1.3): the same request
//! written any way JSON allows — keys in any order, any whitespace, equal
//! decimals in any form, one instant in any offset — has one fingerprint,
//! and changing any business field changes it.
//!
//! Each property prints how many generated cases it ran (`-- --nocapture`);
//! `PROPTEST_CASES` raises the count for a longer run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Map, Value};
use tally_ledger::request::EntryRequest;

#[derive(Debug, Clone)]
struct Debit {
    id: String,
    account: String,
    /// Mantissa and scale of the amount (> 0).
    amount: (u64, u32),
    unit: String,
    meter: Option<String>,
    quantity: Option<(u64, u32)>,
    /// Seconds since the epoch.
    occurred_at: Option<i64>,
    metadata: Vec<(String, String)>,
}

fn text() -> impl Strategy<Value = String> {
    // Quotes, backslashes and non-ASCII included: escaping must not change
    // the canonical form.
    "[a-zA-Z0-9_ \"\\\\é€-]{1,12}"
}

fn debit() -> impl Strategy<Value = Debit> {
    (
        text(),
        "[a-z0-9_]{1,10}",
        (1u64..10_000_000, 0u32..8),
        "[A-Z]{3}",
        proptest::option::of("[a-z-]{1,8}"),
        proptest::option::of((0u64..1_000_000, 0u32..6)),
        proptest::option::of(0i64..4_000_000_000),
        proptest::collection::vec(("[a-z]{1,6}", text()), 0..4),
    )
        .prop_map(
            |(id, account, amount, unit, meter, quantity, occurred_at, mut metadata)| {
                metadata.sort();
                metadata.dedup_by(|a, b| a.0 == b.0);
                Debit {
                    id,
                    account,
                    amount,
                    unit,
                    meter,
                    quantity,
                    occurred_at,
                    metadata,
                }
            },
        )
}

/// How one debit is written.
#[derive(Debug, Clone)]
struct Style {
    /// Swaps applied to the field order.
    order: Vec<usize>,
    /// Whitespace between tokens.
    space: String,
    /// Trailing zeros added to decimals.
    extra_zeros: usize,
    /// Amount as a JSON number (quantity then as a string), or the reverse.
    numbers: bool,
    /// UTC offset, in minutes, to write `occurred_at` in.
    offset_minutes: i32,
}

fn style() -> impl Strategy<Value = Style> {
    (
        proptest::collection::vec(0usize..16, 8),
        "[ \t\n]{0,3}",
        0usize..4,
        any::<bool>(),
        -48i32..48,
    )
        .prop_map(|(order, space, extra_zeros, numbers, quarter)| Style {
            order,
            space,
            extra_zeros,
            numbers,
            offset_minutes: quarter * 15,
        })
}

const PLAIN: fn() -> Style = || Style {
    order: Vec::new(),
    space: String::new(),
    extra_zeros: 0,
    numbers: false,
    offset_minutes: 0,
};

fn decimal_text((mantissa, scale): (u64, u32), extra: usize, as_number: bool) -> String {
    let mut text = rust_decimal::Decimal::from_i128_with_scale(mantissa as i128, scale).to_string();
    if extra > 0 {
        if !text.contains('.') {
            text.push('.');
        }
        text.push_str(&"0".repeat(extra));
    }
    if as_number {
        text
    } else {
        format!("\"{text}\"")
    }
}

fn render(d: &Debit, st: &Style) -> String {
    let s = |v: &str| serde_json::to_string(v).unwrap();
    let sp = st.space.as_str();
    let mut fields: Vec<(String, String)> = vec![
        ("usage_record_id".into(), s(&d.id)),
        ("account".into(), s(&d.account)),
        (
            "amount".into(),
            decimal_text(d.amount, st.extra_zeros, st.numbers),
        ),
        ("unit".into(), s(&d.unit)),
    ];
    if let Some(m) = &d.meter {
        fields.push(("meter".into(), s(m)));
    }
    if let Some(q) = d.quantity {
        fields.push((
            "quantity".into(),
            decimal_text(q, st.extra_zeros, !st.numbers),
        ));
    }
    if let Some(secs) = d.occurred_at {
        let offset = chrono::FixedOffset::east_opt(st.offset_minutes * 60).unwrap();
        let t = chrono::DateTime::from_timestamp(secs, 0)
            .unwrap()
            .with_timezone(&offset);
        fields.push(("occurred_at".into(), s(&t.to_rfc3339())));
    }
    if !d.metadata.is_empty() {
        let mut inner: Vec<String> = d
            .metadata
            .iter()
            .map(|(k, v)| format!("{}{sp}:{sp}{}", s(k), s(v)))
            .collect();
        if !st.order.is_empty() {
            inner.reverse();
        }
        fields.push((
            "metadata".into(),
            format!("{{{sp}{}{sp}}}", inner.join(&format!(",{sp}"))),
        ));
    }
    let n = fields.len();
    let mut idx: Vec<usize> = (0..n).collect();
    for (i, o) in st.order.iter().enumerate() {
        idx.swap(i % n, o % n);
    }
    let body: Vec<String> = idx
        .iter()
        .map(|&i| format!("{sp}{}{sp}:{sp}{}", s(&fields[i].0), fields[i].1))
        .collect();
    format!("{{{}{sp}}}", body.join(","))
}

fn fingerprint(text: &str) -> String {
    let map: Map<String, Value> = serde_json::from_str(text).unwrap();
    EntryRequest::usage_debit(map)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .fingerprint
        .to_string()
}

fn runner() -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(2_000);
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

#[test]
fn one_request_written_any_way_has_one_fingerprint() {
    let mut runner = runner();
    let ran = std::cell::Cell::new(0u32);
    runner
        .run(&(debit(), style()), |(d, st)| {
            ran.set(ran.get() + 1);
            let plain = render(&d, &PLAIN());
            let other = render(&d, &st);
            prop_assert_eq!(
                fingerprint(&plain),
                fingerprint(&other),
                "{} vs {}",
                plain,
                other
            );
            Ok(())
        })
        .unwrap();
    eprintln!(
        "one_request_written_any_way_has_one_fingerprint: {} cases",
        ran.get()
    );
}

#[test]
fn every_business_field_changes_the_fingerprint() {
    let mut runner = runner();
    let ran = std::cell::Cell::new(0u32);
    runner
        .run(&(debit(), 0usize..8), |(d, which)| {
            ran.set(ran.get() + 1);
            let mut changed = d.clone();
            match which {
                0 => changed.account.push('x'),
                1 => changed.amount.0 += 1,
                2 => changed.unit.push('X'),
                3 => changed.meter = Some(changed.meter.map_or("m".into(), |m| format!("{m}x"))),
                4 => changed.quantity = Some(changed.quantity.map_or((1, 0), |(m, s)| (m + 1, s))),
                5 => changed.occurred_at = Some(changed.occurred_at.map_or(0, |s| s + 1)),
                6 => changed.metadata.push(("zz_new".into(), "v".into())),
                // A field sent is part of the request, absent is another request.
                _ => {
                    changed.meter = match changed.meter {
                        Some(_) => None,
                        None => Some("m".into()),
                    }
                }
            }
            let a = fingerprint(&render(&d, &PLAIN()));
            let b = fingerprint(&render(&changed, &PLAIN()));
            prop_assert_ne!(a, b);
            Ok(())
        })
        .unwrap();
    eprintln!(
        "every_business_field_changes_the_fingerprint: {} cases",
        ran.get()
    );
}
