//! Tests of the usage summaries in the database.
#![allow(clippy::unwrap_used)]

use serde_json::json;

use tally_ledger::decide::Decision;
use tally_ledger::request::EntryRequest;
use tally_ledger::store::{EntryFilter, Storage};

use super::*;

fn body(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    v.as_object().unwrap().clone()
}

/// The rebuild's fold (SQLite packs rows into JSON, parameters taken out
/// in SQL) and the projector's equal the fold of whole entries, one by
/// one, through `UsageFold::apply`: escaped text, absent parameters,
/// another day, a reversal.
#[tokio::test]
async fn the_packed_fold_equals_the_fold_of_whole_entries() {
    let storage = Storage::connect_with("sqlite::memory:", 1).await.unwrap();
    let debits = [
        json!({"usage_record_id": "u1", "account": "c\"1", "amount": "0.10", "unit": "USD",
               "meter": "tok\"ens\\", "quantity": "1.500"}),
        json!({"usage_record_id": "u2", "account": "c\"1", "amount": "2", "unit": "USD"}),
        json!({"usage_record_id": "u3", "account": "c2", "amount": "0.5", "unit": "EUR",
               "meter": "tok", "quantity": "7", "occurred_at": "2026-01-02T23:59:59.5+00:00"}),
        json!({"usage_record_id": "u4", "account": "c2", "amount": "0.25", "unit": "EUR",
               "meter": "tok", "quantity": "3"}),
    ];
    let mut ids = Vec::new();
    for d in debits {
        let request = EntryRequest::usage_debit(body(d)).unwrap();
        match &tally_ledger::group::commit_group(&storage, "t", &[&request])
            .await
            .unwrap()[0]
        {
            Decision::Created(e) => ids.push(e.id.clone()),
            other => panic!("not created: {other:?}"),
        }
    }
    let payment = EntryRequest::payment(body(
        json!({"payment_id": "p1", "account": "c2", "amount": "9", "unit": "EUR"}),
    ))
    .unwrap();
    let reversal = EntryRequest::reversal(body(
        json!({"reversal_id": "r1", "entry_id": ids[3], "reason": "duplicate"}),
    ))
    .unwrap();
    tally_ledger::group::commit_group(&storage, "t", &[&payment, &reversal])
        .await
        .unwrap();

    let head = storage.head("t").await.unwrap().seq;
    let entries = storage
        .list_entries("t", &EntryFilter::log_page(0, 100))
        .await
        .unwrap();
    assert_eq!(entries.len() as i64, head);
    let mut expected = UsageFold::new();
    for e in &entries {
        let original = match fold::reversal_target(e).unwrap() {
            Some(id) => storage.entry_by_id("t", &id).await.unwrap(),
            None => None,
        };
        expected.apply(e, original.as_ref()).unwrap();
    }
    // Four keys: the reversed one stays, at zero.
    assert_eq!(expected.len(), 4, "{expected:?}");

    assert_eq!(fold_usage(&storage, "t", head).await.unwrap(), expected);
    assert_eq!(project_usage_to_head(&storage, "t").await.unwrap(), head);
    let (stored, checkpoint) = stored_usage(&storage, "t").await.unwrap();
    assert_eq!(checkpoint, head);
    assert_eq!(stored, expected);
}
