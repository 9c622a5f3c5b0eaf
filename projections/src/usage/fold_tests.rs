//! Tests of the usage fold.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::usage::{summarise, Granularity};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::str::FromStr;
use tally_ledger::entry::DAY_FORMAT;

fn entry(seq: i64, kind: EntryKind, account: &str, amount: &str, params: Value) -> StoredEntry {
    StoredEntry {
        tenant_id: "t".into(),
        seq,
        id: format!("ent_{seq}"),
        kind,
        upstream_id: format!("u{seq}"),
        status: EntryStatus::Posted,
        rejection_code: None,
        rejection_message: None,
        account: account.into(),
        debit_account: account.into(),
        credit_account: "@revenue".into(),
        amount: Decimal::from_str(amount).unwrap(),
        unit: "USD".into(),
        params: params.to_string(),
        fingerprint: String::new(),
        recorded_at: DateTime::parse_from_rfc3339("2026-12-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc),
        balance_after: tally_ledger::balance::WideDecimal::ZERO,
        prev_hash: String::new(),
        hash: String::new(),
    }
}

fn key(meter: &str, day: &str) -> UsageKey {
    UsageKey {
        account: "c".into(),
        meter: meter.into(),
        day: NaiveDate::parse_from_str(day, DAY_FORMAT).unwrap(),
        unit: "USD".into(),
    }
}

fn w(s: &str) -> WideDecimal {
    WideDecimal::parse(s).unwrap()
}

#[test]
fn folds_debits_by_utc_day_and_meter_and_takes_reversals_back_out() {
    let e1 = entry(
        1,
        EntryKind::UsageDebit,
        "c",
        "0.01",
        serde_json::json!({"meter": "tok", "quantity": "1000", "occurred_at": "2026-11-29T23:30:00-01:00"}),
    );
    let e2 = entry(
        2,
        EntryKind::UsageDebit,
        "c",
        "0.0025",
        serde_json::json!({"meter": "tok", "quantity": "250", "occurred_at": "2026-11-30T00:10:00Z"}),
    );
    let e3 = entry(3, EntryKind::UsageDebit, "c", "2", serde_json::json!({}));
    let pay = entry(4, EntryKind::Payment, "c", "5", serde_json::json!({}));
    let rev = entry(
        5,
        EntryKind::Reversal,
        "c",
        "0.0025",
        serde_json::json!({"entry_id": "ent_2", "reason": "oops"}),
    );
    let mut fold = UsageFold::new();
    for e in [&e1, &e2, &e3, &pay] {
        fold.apply(e, None).unwrap();
    }
    assert_eq!(reversal_target(&rev).unwrap().as_deref(), Some("ent_2"));
    assert_eq!(reversal_target(&e1).unwrap(), None);
    fold.apply(&rev, Some(&e2)).unwrap();
    assert_eq!(fold.len(), 2);
    // 23:30 at UTC-1 is 00:30 UTC on the 30th.
    assert_eq!(
        fold.get(&key("tok", "2026-11-30")).unwrap(),
        &UsageTotals {
            quantity: w("1000"),
            amount: w("0.01"),
            entries: 1
        }
    );
    assert_eq!(
        fold.get(&key("", "2026-12-01")).unwrap(),
        &UsageTotals {
            quantity: WideDecimal::ZERO,
            amount: w("2"),
            entries: 1
        }
    );

    let rows: Vec<_> = fold.iter().map(|(k, t)| (k.clone(), t.clone())).collect();
    let days = summarise(&rows, Granularity::Day).unwrap();
    assert_eq!(days.len(), 2);
    assert_eq!(days[0].period, "2026-11-30");
    assert_eq!(days[0].meter.as_deref(), Some("tok"));
    assert_eq!(days[1].meter, None);
    let months = summarise(&rows, Granularity::Month).unwrap();
    assert_eq!(months[0].period, "2026-11");
    assert_eq!(months[1].period, "2026-12");
}

/// The fold reads parameters as JSON strings; any other value counts as
/// absent, and escaped text is read unescaped.
#[test]
fn parameters_that_are_not_strings_count_as_absent() {
    let e = entry(
        1,
        EntryKind::UsageDebit,
        "c",
        "1",
        serde_json::json!({"meter": 5, "quantity": {"x": [1, "2"]}, "occurred_at": null}),
    );
    let (k, t) = usage_of(&e).unwrap().unwrap();
    assert_eq!(k, key("", "2026-12-01"));
    assert_eq!(t.quantity, WideDecimal::ZERO);
    let e = entry(
        2,
        EntryKind::UsageDebit,
        "c",
        "1",
        serde_json::json!({"meter": "a\"b\u{e9}", "quantity": "2.50"}),
    );
    let (k, t) = usage_of(&e).unwrap().unwrap();
    assert_eq!(k.meter, "a\"b\u{e9}");
    assert_eq!(t.quantity, w("2.5"));
    let bad = StoredEntry {
        params: "not json".into(),
        ..e
    };
    assert!(matches!(usage_of(&bad), Err(LedgerError::Corrupt(_))));
}

#[test]
fn a_fold_does_not_depend_on_how_the_log_is_cut() {
    let entries: Vec<StoredEntry> = (1..=20)
        .map(|i| {
            entry(
                i,
                EntryKind::UsageDebit,
                if i % 2 == 0 { "c" } else { "d" },
                "0.3",
                serde_json::json!({"meter": "m", "quantity": "3", "occurred_at": format!("2026-11-{:02}T10:00:00Z", i)}),
            )
        })
        .collect();
    let mut whole = UsageFold::new();
    for e in &entries {
        whole.apply(e, None).unwrap();
    }
    let mut stored = UsageFold::new();
    for chunk in entries.chunks(7) {
        let mut delta = UsageFold::new();
        for e in chunk {
            delta.apply(e, None).unwrap();
        }
        for (k, t) in delta.iter() {
            stored.add(k.clone(), t).unwrap();
        }
    }
    assert_eq!(whole, stored);
}

#[test]
fn reversals_of_anything_but_a_posted_usage_debit_change_nothing() {
    let pay = entry(1, EntryKind::Payment, "c", "5", serde_json::json!({}));
    let rev = entry(
        2,
        EntryKind::Reversal,
        "c",
        "5",
        serde_json::json!({"entry_id": "ent_1"}),
    );
    let mut fold = UsageFold::new();
    fold.apply(&pay, None).unwrap();
    fold.apply(&rev, Some(&pay)).unwrap();
    fold.apply(&rev, None).unwrap();
    assert!(fold.is_empty());
}

#[test]
fn sums_past_28_digits_are_exact() {
    let nines = "9999999999999999999999999999";
    let at = |i: i64, q: &str, day: &str| {
        entry(
            i,
            EntryKind::UsageDebit,
            "c",
            "1",
            serde_json::json!({"meter": "m", "quantity": q, "occurred_at": format!("2026-11-{day}T10:00:00Z")}),
        )
    };
    let mut fold = UsageFold::new();
    for e in [
        at(1, nines, "29"),
        at(2, nines, "29"),
        at(3, "0.000000000000000001", "29"),
        at(4, nines, "30"),
    ] {
        fold.apply(&e, None).unwrap();
    }
    let rows: Vec<_> = fold.iter().map(|(k, t)| (k.clone(), t.clone())).collect();
    let days = summarise(&rows, Granularity::Day).unwrap();
    assert_eq!(
        days[0].quantity,
        "19999999999999999999999999998.000000000000000001"
    );
    let months = summarise(&rows, Granularity::Month).unwrap();
    assert_eq!(
        months[0].quantity,
        "29999999999999999999999999997.000000000000000001"
    );
    assert_eq!(months[0].entries, 4);
    // Taking a debit back out is exact too.
    fold.apply(
        &entry(
            5,
            EntryKind::Reversal,
            "c",
            "1",
            serde_json::json!({"entry_id": "ent_3"}),
        ),
        Some(&at(3, "0.000000000000000001", "29")),
    )
    .unwrap();
    assert_eq!(
        fold.get(&key("m", "2026-11-29")).unwrap().quantity,
        w("19999999999999999999999999998")
    );
}
