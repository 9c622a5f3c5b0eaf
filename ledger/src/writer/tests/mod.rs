//! The writer end to end: look-ups, pipelining, retirement, recent
//! entries and unlooked keys, on both engines. Shared helpers here; the
//! tests in one file per subject.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::look_up::look_up;
use super::retry::{commit_with_retry, is_unique_violation};
use super::*;
use crate::group::Group;
use crate::group::RoundCommitter;
use crate::group::{DecidedWrite, WriterMemory};
use crate::store::{EntryFilter, Storage};
use crate::test_databases::TestDb;

mod ahead;
mod heads;
mod look_ups;
mod recent;
mod retirement;
mod rounds;
mod unlooked;

fn debit(id: &str, amount: &str) -> EntryRequest {
    let body = serde_json::json!({
        "usage_record_id": id, "account": "cust", "amount": amount, "unit": "USD"
    });
    EntryRequest::usage_debit(body.as_object().unwrap().clone()).unwrap()
}

async fn entries(storage: &Storage) -> usize {
    let filter = EntryFilter {
        limit: 100,
        ..EntryFilter::default()
    };
    storage.list_entries("t", &filter).await.unwrap().len()
}

fn debit_of(id: &str, account: &str) -> EntryRequest {
    let body = serde_json::json!({
        "usage_record_id": id, "account": account, "amount": "1", "unit": "USD"
    });
    EntryRequest::usage_debit(body.as_object().unwrap().clone()).unwrap()
}

/// `clients` tasks per writer post `per_client` debits of 1 each, spread
/// over four accounts, all through `writers` (one per simulated process,
/// each with its own memory, on one database). Then the log verifies,
/// every key is posted once, and each account's debits add up.
async fn flood_and_check(
    storage: &Storage,
    writers: &[Writers],
    clients: usize,
    per_client: usize,
) {
    let mut tasks = Vec::new();
    for (w, writers) in writers.iter().enumerate() {
        for client in 0..clients {
            let writers = writers.clone();
            tasks.push(tokio::spawn(async move {
                for n in 0..per_client {
                    let id = format!("w{w}-c{client}-{n}");
                    let account = format!("cust{}", n % 4);
                    let d = writers.decide("t", debit_of(&id, &account)).await.unwrap();
                    assert!(matches!(d, Decision::Created(_)), "{d:?}");
                }
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    let total = writers.len() * clients * per_client;
    let report = crate::verify::verify_tenant(storage, "t", |_| {})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.entries, total as i64);
    let filter = EntryFilter {
        limit: 10_000,
        ..EntryFilter::default()
    };
    let posted = storage.list_entries("t", &filter).await.unwrap();
    let keys: HashSet<&str> = posted.iter().map(|e| e.upstream_id.as_str()).collect();
    assert_eq!(keys.len(), total);
    let balances = storage.stored_balances("t").await.unwrap();
    for account in 0..4 {
        let b = balances.get(&format!("cust{account}"), "USD").unwrap();
        assert_eq!(
            b.debits,
            crate::balance::WideDecimal::from((total / 4) as i64),
            "cust{account}"
        );
    }
}

/// Only a full group is decided ahead: groups of at most 4 requests fill
/// up under a flood of single requests.
fn small_groups() -> WriterConfig {
    WriterConfig {
        max_group: 4,
        ..WriterConfig::default()
    }
}

fn idle_after(ms: u64) -> WriterConfig {
    WriterConfig {
        idle_after: Duration::from_millis(ms),
        ..WriterConfig::default()
    }
}

/// No entry held in memory: every key reaches the look-up or the writer.
fn nothing_recent() -> WriterConfig {
    WriterConfig {
        recent_entries_bytes: 0,
        ..WriterConfig::default()
    }
}

fn skip_look_ups_after(n: usize) -> WriterConfig {
    WriterConfig {
        skip_look_ups_after: n,
        ..nothing_recent()
    }
}

/// Groups of at most 4, keys unlooked after `after` free ones.
fn unlooked_small_groups(after: usize) -> WriterConfig {
    WriterConfig {
        skip_look_ups_after: after,
        recent_entries_bytes: 0,
        ..small_groups()
    }
}

/// After verifying the tenant's log: its entries, and the debits of
/// `account` in USD.
async fn verified_debits(storage: &Storage, account: &str) -> (i64, crate::balance::WideDecimal) {
    let report = crate::verify::verify_tenant(storage, "t", |_| {})
        .await
        .unwrap()
        .unwrap();
    let balances = storage.stored_balances("t").await.unwrap();
    (
        report.entries,
        balances.get(account, "USD").unwrap().debits.clone(),
    )
}

/// A debit of 1 on `other`, credited to `@other-revenue`.
fn other_debit(id: &str) -> EntryRequest {
    let body = serde_json::json!({
        "usage_record_id": id, "account": "other", "amount": "1", "unit": "USD",
        "counter_account": "@other-revenue"
    });
    EntryRequest::usage_debit(body.as_object().unwrap().clone()).unwrap()
}

fn created_id(d: &Decision) -> String {
    match d {
        Decision::Created(e) => e.id.clone(),
        other => panic!("expected a new entry, got {other:?}"),
    }
}

/// One request of a replay of u1 and a new key u2: it goes to the
/// writer, which answers the replay and posts u2.
async fn replay_of_u1_and_new_u2(writers: &Writers) {
    let mixed = writers
        .decide_all("t", vec![debit("u1", "1"), debit("u2", "1")])
        .await
        .unwrap();
    assert!(matches!(mixed[0], Decision::Replayed(_)), "{mixed:?}");
    assert!(matches!(mixed[1], Decision::Created(_)), "{mixed:?}");
}
