//! Decisions of whole groups, without a database.

#![allow(clippy::unwrap_used)]

use chrono::Utc;

use super::*;
use crate::balance::WideDecimal;
use crate::chain::Head;
use crate::rule_state::{StateKey, StateValue};
use serde_json::json;

fn debit(id: &str, account: &str, amount: &str, unit: &str) -> EntryRequest {
    EntryRequest::usage_debit(
        json!({"usage_record_id": id, "account": account, "amount": amount, "unit": unit})
            .as_object()
            .unwrap()
            .clone(),
    )
    .unwrap()
}

fn empty_state() -> GroupState {
    GroupState::new("t", Head::EMPTY)
}

fn ids() -> impl FnMut() -> String {
    let mut n = 0;
    move || {
        n += 1;
        format!("ent_{n}")
    }
}

#[test]
fn a_group_chains_and_collapses_duplicate_keys() {
    let mut state = empty_state();
    let a = debit("u1", "c", "1.5", "USD");
    let a_again = debit("u1", "c", "1.50", "USD");
    let a_other = debit("u1", "c", "2", "USD");
    let b = debit("u2", "c", "1", "USD");
    let out = decide_group(&mut state, &[&a, &a_again, &a_other, &b], Utc::now(), ids());
    assert_eq!(out.new_entries.len(), 2);
    let Decision::Created(first) = &out.decisions[0] else {
        panic!("first is created")
    };
    assert_eq!(out.decisions[1], Decision::Replayed(first.clone()));
    assert_eq!(
        out.decisions[2],
        Decision::Conflict {
            entry_id: first.id.clone(),
            differing_fields: vec!["amount".into()]
        }
    );
    let second = &out.new_entries[1];
    assert_eq!((first.seq, second.seq), (1, 2));
    assert_eq!(first.prev_hash, hex::encode([0u8; 32]));
    assert_eq!(second.prev_hash, first.hash);
    assert_eq!(second.balance_after.to_string(), "-2.5");
    assert_eq!(state.head.seq, 2);
    assert_eq!(state.balances.unit_total("USD"), WideDecimal::ZERO);
}

#[test]
fn a_unit_mismatch_is_refused_and_changes_nothing() {
    let mut state = empty_state();
    state.account_units.insert("c".into(), "credits".into());
    let out = decide_group(
        &mut state,
        &[&debit("u1", "c", "1", "USD")],
        Utc::now(),
        ids(),
    );
    assert!(out.new_entries.is_empty());
    assert!(out.touched.is_empty());
    assert!(matches!(
        out.decisions[0],
        Decision::Refused(Refusal::UnitMismatch {
            field: "account",
            ..
        })
    ));
    assert_eq!(state.head, Head::EMPTY);
}

fn settings(account: &str, overdraft: crate::rule_state::Overdraft) -> EntryRequest {
    let body = json!({"unit": "USD", "overdraft": overdraft.to_json()});
    EntryRequest::settings(account, body.as_object().unwrap().clone()).unwrap()
}

fn payment(id: &str, account: &str, amount: &str) -> EntryRequest {
    EntryRequest::payment(
        json!({"payment_id": id, "account": account, "amount": amount, "unit": "USD"})
            .as_object()
            .unwrap()
            .clone(),
    )
    .unwrap()
}

#[test]
fn debits_of_one_group_are_held_to_the_floor_one_after_another() {
    let mut state = empty_state();
    let mut requests = vec![
        settings("c", crate::rule_state::Overdraft::Forbid),
        payment("p", "c", "3"),
    ];
    for i in 0..5 {
        requests.push(debit(&format!("u{i}"), "c", "1", "USD"));
    }
    let refs: Vec<&EntryRequest> = requests.iter().collect();
    let out = decide_group(&mut state, &refs, Utc::now(), ids());
    let statuses: Vec<&str> = out
        .new_entries
        .iter()
        .map(|e| e.rejection_code.as_deref().unwrap_or("posted"))
        .collect();
    assert_eq!(
        statuses,
        vec![
            "posted",
            "posted",
            "posted",
            "posted",
            "posted",
            "insufficient_funds",
            "insufficient_funds"
        ]
    );
    assert_eq!(state.balance("c", "USD").available(), WideDecimal::ZERO);
    // Rejections take a seq and chain like any entry.
    assert_eq!(state.head.seq, 7);
}

#[test]
fn a_hold_made_earlier_in_the_group_is_captured_once() {
    let mut state = empty_state();
    let hold = EntryRequest::hold(
        json!({"hold_id": "h", "account": "c", "amount": "5", "unit": "USD", "ttl_seconds": 60})
            .as_object()
            .unwrap()
            .clone(),
    )
    .unwrap();
    let capture = |id: &str| {
        EntryRequest::capture(
            "h",
            json!({"capture_id": id, "amount": "2"})
                .as_object()
                .unwrap()
                .clone(),
        )
        .unwrap()
    };
    let (c1, c2) = (capture("c1"), capture("c2"));
    let out = decide_group(&mut state, &[&hold, &c1, &c2], Utc::now(), ids());
    let codes: Vec<Option<&str>> = out
        .new_entries
        .iter()
        .map(|e| e.rejection_code.as_deref())
        .collect();
    assert_eq!(codes, vec![None, None, Some("hold_not_open")]);
    let b = state.balance("c", "USD");
    assert_eq!(
        (b.posted().to_string(), b.held.to_string()),
        ("-2".into(), "0".into())
    );
    assert!(out.touched_records.contains(&StateKey::Hold("h".into())));
}

#[test]
fn totals_past_28_digits_post_exactly() {
    let nines = "9999999999999999999999999999";
    let mut state = empty_state();
    let a = debit("u1", "c", nines, "USD");
    let b = debit("u2", "c", nines, "USD");
    let tiny = payment("p", "c", "0.000000000000000001");
    let out = decide_group(&mut state, &[&a, &b, &tiny], Utc::now(), ids());
    let codes: Vec<Option<&str>> = out
        .new_entries
        .iter()
        .map(|e| e.rejection_code.as_deref())
        .collect();
    assert_eq!(codes, vec![None, None, None]);
    assert_eq!(
        out.new_entries[1].balance_after.to_string(),
        "-19999999999999999999999999998"
    );
    // 47 significant digits, which a `Decimal` would round.
    assert_eq!(
        out.new_entries[2].balance_after.to_string(),
        "-19999999999999999999999999997.999999999999999999"
    );
    let c = state.balance("c", "USD");
    assert_eq!(c.debits.to_string(), "19999999999999999999999999998");
    assert_eq!(c.credits.to_string(), "0.000000000000000001");
    // @revenue has no ceiling either: another account's debit posts.
    let other = debit("u3", "d", "1", "USD");
    let out = decide_group(&mut state, &[&other], Utc::now(), ids());
    assert_eq!(out.new_entries[0].rejection_code, None);
    assert_eq!(
        state.balance("@revenue", "USD").credits.to_string(),
        "19999999999999999999999999999"
    );
}

#[test]
fn refunded_totals_are_added_and_compared_exactly() {
    let nines = "9999999999999999999999999999";
    let refund = |id: &str, amount: &str| {
        EntryRequest::refund(
            json!({"refund_id": id, "payment_id": "p", "amount": amount})
                .as_object()
                .unwrap()
                .clone(),
        )
        .unwrap()
    };
    let mut state = empty_state();
    decide_group(&mut state, &[&payment("p", "c", nines)], Utc::now(), ids());
    let first = refund("r0", "0.000000000000000001");
    let over = refund("r1", nines);
    let within = refund("r2", "9999999999999999999999999998");
    let out = decide_group(&mut state, &[&first, &over, &within], Utc::now(), ids());
    let codes: Vec<Option<&str>> = out
        .new_entries
        .iter()
        .map(|e| e.rejection_code.as_deref())
        .collect();
    // 1e-18 + 28 nines exceeds the payment, by less than rust_decimal rounds;
    // 1e-18 + 9999999999999999999999999998 is within it, with 46 digits.
    assert_eq!(codes, vec![None, Some("refund_exceeds_payment"), None]);
    assert_eq!(
        state.records.get(&StateKey::Refunded("p".into())),
        Some(&StateValue::Refunded(
            WideDecimal::parse("9999999999999999999999999998.000000000000000001").unwrap()
        ))
    );
}
