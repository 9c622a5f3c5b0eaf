//! The ledger's rules under concurrency: overdraft floors, hold captures,
//! refund totals and hold expiry, raced by many clients over several real
//! server processes sharing one database.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use common::{debit, Engine, Ledger, Resp, Server};
use serde_json::{json, Value};

engine_tests!(
    racing_debits_never_overdraw,
    overdraft_limit_race,
    concurrent_captures_of_one_hold,
    concurrent_refunds_never_exceed_the_payment,
    expired_holds_are_released_exactly_once_by_many_processes,
    hold_and_capture_racing_the_expiry,
    concurrent_reversals_of_one_entry_post_one,
);

const SCOPES: &str = "post,read,admin,audit";

/// Sends every (server, path, body) at once from its own task; the answers
/// come back in the order of `calls`.
async fn all_at_once(calls: Vec<(Arc<Server>, String, Value)>, key: &str) -> Vec<Resp> {
    let barrier = Arc::new(tokio::sync::Barrier::new(calls.len()));
    let tasks: Vec<_> = calls
        .into_iter()
        .map(|(server, path, body)| {
            let key = key.to_owned();
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                server.post(&path, &key, &body).await
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// `n` servers on the ledger's database, each started with `args`.
async fn servers(ledger: &Ledger, n: usize, args: &[&str]) -> Vec<Arc<Server>> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(Arc::new(ledger.server_with(args).await));
    }
    out
}

async fn set_overdraft(server: &Server, key: &str, account: &str, overdraft: Value) {
    let r = server
        .put(
            &format!("/v1/accounts/{account}"),
            key,
            &json!({"unit": "USD", "overdraft": overdraft}),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let view = r.json();
    assert_eq!(view["overdraft"], overdraft, "{view}");
    assert_eq!(view["unit"], "USD");
    assert_eq!(view["settings_version"], 1);
}

async fn pay(server: &Server, key: &str, payment_id: &str, account: &str, amount: &str) -> Value {
    let r = server
        .post(
            "/v1/payments",
            key,
            &json!({"payment_id": payment_id, "account": account, "amount": amount, "unit": "USD"}),
        )
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    r.json()
}

async fn hold(server: &Server, key: &str, hold_id: &str, amount: &str, ttl_seconds: i64) -> Value {
    let r = server
        .post(
            "/v1/holds",
            key,
            &json!({"hold_id": hold_id, "account": "cust", "amount": amount,
                    "unit": "USD", "ttl_seconds": ttl_seconds}),
        )
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    let entry = r.json();
    assert_eq!(entry["kind"], "hold");
    entry
}

async fn get_hold(server: &Server, key: &str, hold_id: &str) -> Value {
    let r = server.get(&format!("/v1/holds/{hold_id}"), key).await;
    assert_eq!(r.status, 200, "{r:?}");
    r.json()
}

/// A 422 carrying the stored rejected entry; returns that entry.
fn rejected(r: &Resp, code: &str, kind: &str) -> Value {
    assert_eq!((r.status, r.code().as_str()), (422, code), "{r:?}");
    assert!(!r.replayed(), "a first answer is not a replay: {r:?}");
    let entry = r.json()["entry"].clone();
    assert_eq!(entry["status"], "rejected", "{entry}");
    assert_eq!(entry["kind"], kind, "{entry}");
    assert!(entry["seq"].as_i64().unwrap() > 0, "{entry}");
    entry
}

/// Asserts the log is gap-free 1..=len and returns it keyed by seq.
fn gap_free(entries: &[Value]) -> BTreeMap<i64, Value> {
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(e["seq"], (i + 1) as i64, "gap-free seq across processes");
    }
    entries
        .iter()
        .map(|e| (e["seq"].as_i64().unwrap(), e.clone()))
        .collect()
}

/// Every answer's entry (the body of a 201, `entry` of a 422) is the log's
/// entry at its seq, and the answers hold distinct seqs.
fn answers_match_log(answers: &[Resp], log: &BTreeMap<i64, Value>) -> BTreeSet<i64> {
    let mut seqs = BTreeSet::new();
    for r in answers {
        let entry = match r.status {
            201 => r.json(),
            422 => r.json()["entry"].clone(),
            other => panic!("unexpected status {other}: {r:?}"),
        };
        let seq = entry["seq"].as_i64().unwrap();
        assert!(seqs.insert(seq), "two answers share seq {seq}");
        assert_eq!(log[&seq], entry, "the answer is the stored entry");
    }
    seqs
}

/// A balance's [posted, held, available].
fn amounts(b: &Value) -> [&str; 3] {
    ["posted", "held", "available"].map(|k| b[k].as_str().unwrap_or("<missing>"))
}

async fn verify(ledger: &Ledger) {
    let (ok, out, err) = ledger.tally(&["verify"]).await;
    assert!(ok, "tally verify failed:\n{out}\n{err}");
}

async fn racing_debits_never_overdraw(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", SCOPES).await;
    let s = servers(&ledger, 3, &[]).await;
    set_overdraft(&s[0], &key, "cust", json!("forbid")).await;
    pay(&s[1], &key, "pay_1", "cust", "46.25").await; // 37 × 1.25

    let bodies: Vec<Value> = (0..100)
        .map(|i| debit(&format!("ur_{i}"), "cust", "1.25"))
        .collect();
    let calls = bodies
        .iter()
        .enumerate()
        .map(|(i, b)| (s[i % 3].clone(), "/v1/usage-debits".to_owned(), b.clone()))
        .collect();
    let answers = all_at_once(calls, &key).await;

    let posted = answers.iter().filter(|r| r.status == 201).count();
    assert_eq!(posted, 37, "exactly the funded debits post");
    for r in answers.iter().filter(|r| r.status != 201) {
        rejected(r, "insufficient_funds", "usage_debit");
    }
    for (i, r) in answers.iter().enumerate() {
        let entry = if r.status == 201 {
            r.json()
        } else {
            r.json()["entry"].clone()
        };
        assert_eq!(entry["upstream_id"], format!("ur_{i}"));
    }
    for server in &s {
        let b = server.balance(&key, "cust").await;
        assert_eq!(amounts(&b), ["0", "0", "0"], "{b}");
    }

    // Settings, payment, then every debit, rejected ones included.
    let entries = s[2].all_entries(&key).await;
    assert_eq!(entries.len(), 102);
    let log = gap_free(&entries);
    assert_eq!(log[&1]["kind"], "account_settings");
    assert_eq!(log[&2]["kind"], "payment");
    let seqs = answers_match_log(&answers, &log);
    assert_eq!(seqs, (3..=102).collect::<BTreeSet<i64>>());
    // Equal debits against a balance nothing refills: in log order the
    // first 37 post and every later one is rejected.
    for seq in 3..=102 {
        let want = if seq <= 39 { "posted" } else { "rejected" };
        assert_eq!(log[&seq]["status"], want, "{}", log[&seq]);
    }

    // A top-up changes nothing for the decided requests: a rejection is forever.
    pay(&s[0], &key, "pay_2", "cust", "1000").await;
    let calls = bodies
        .iter()
        .enumerate()
        .map(|(i, b)| {
            (
                s[(i + 1) % 3].clone(),
                "/v1/usage-debits".to_owned(),
                b.clone(),
            )
        })
        .collect();
    let replays = all_at_once(calls, &key).await;
    for (first, again) in answers.iter().zip(&replays) {
        let want = if first.status == 201 { 200 } else { 422 };
        assert_eq!(again.status, want, "{again:?}");
        assert!(again.replayed(), "{again:?}");
        assert_eq!(again.body, first.body, "a replay is the same body");
    }
    assert_eq!(
        s[1].all_entries(&key).await.len(),
        103,
        "replays append nothing"
    );
    let b = s[1].balance(&key, "cust").await;
    assert_eq!(b["posted"], "1000");
    assert_eq!(b["available"], "1000");
    verify(&ledger).await;
}

async fn overdraft_limit_race(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", SCOPES).await;
    let s = servers(&ledger, 3, &[]).await;
    set_overdraft(&s[0], &key, "cust", json!({"limit": "10"})).await;

    let calls = (0..100)
        .map(|i| {
            (
                s[i % 3].clone(),
                "/v1/usage-debits".to_owned(),
                debit(&format!("ur_{i}"), "cust", "1"),
            )
        })
        .collect();
    let answers = all_at_once(calls, &key).await;
    assert_eq!(answers.iter().filter(|r| r.status == 201).count(), 10);
    for r in answers.iter().filter(|r| r.status != 201) {
        rejected(r, "insufficient_funds", "usage_debit");
    }
    let b = s[1].balance(&key, "cust").await;
    assert_eq!(b["posted"], "-10", "{b}");
    assert_eq!(b["available"], "-10", "{b}");
    let account = s[2].get("/v1/accounts/cust", &key).await;
    assert_eq!(account.status, 200, "{account:?}");
    assert_eq!(account.json()["balance"]["available"], "-10");
    assert_eq!(account.json()["overdraft"], json!({"limit": "10"}));

    let entries = s[0].all_entries(&key).await;
    assert_eq!(entries.len(), 101);
    let log = gap_free(&entries);
    let seqs = answers_match_log(&answers, &log);
    assert_eq!(seqs, (2..=101).collect::<BTreeSet<i64>>());
    for seq in 2..=101 {
        let want = if seq <= 11 { "posted" } else { "rejected" };
        assert_eq!(log[&seq]["status"], want, "{}", log[&seq]);
    }
    verify(&ledger).await;
}

async fn concurrent_captures_of_one_hold(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", SCOPES).await;
    let s = servers(&ledger, 2, &[]).await;
    pay(&s[0], &key, "pay_1", "cust", "50").await;
    hold(&s[0], &key, "h1", "10", 3600).await;
    let b = s[1].balance(&key, "cust").await;
    assert_eq!(amounts(&b), ["50", "10", "40"], "{b}");

    // Distinct captures: one wins, the others find the hold closed.
    let calls = (0..20)
        .map(|i| {
            (
                s[i % 2].clone(),
                "/v1/holds/h1/capture".to_owned(),
                json!({"capture_id": format!("cap_{i}"), "amount": "4"}),
            )
        })
        .collect();
    let answers = all_at_once(calls, &key).await;
    let won: Vec<&Resp> = answers.iter().filter(|r| r.status == 201).collect();
    assert_eq!(won.len(), 1, "exactly one capture of one hold");
    let capture = won[0].json();
    assert_eq!(capture["kind"], "hold_capture");
    assert_eq!(capture["status"], "posted");
    assert_eq!(capture["amount"], "4");
    for r in answers.iter().filter(|r| r.status != 201) {
        rejected(r, "hold_not_open", "hold_capture");
    }
    let h = get_hold(&s[1], &key, "h1").await;
    assert_eq!(h["status"], "captured", "{h}");
    assert_eq!(h["closed_by"], capture["id"], "{h}");
    let b = s[1].balance(&key, "cust").await;
    assert_eq!(amounts(&b), ["46", "0", "46"], "{b}");
    let revenue = s[0]
        .get("/v1/accounts/@revenue/balance?unit=USD", &key)
        .await;
    assert_eq!(revenue.json()["posted"], "4", "{revenue:?}");

    // Identical captures: one entry, every other caller gets it replayed.
    hold(&s[1], &key, "h2", "10", 3600).await;
    let same = json!({"capture_id": "cap_same", "amount": "4"});
    let calls = (0..20)
        .map(|i| {
            (
                s[i % 2].clone(),
                "/v1/holds/h2/capture".to_owned(),
                same.clone(),
            )
        })
        .collect();
    let answers = all_at_once(calls, &key).await;
    let created: Vec<&Resp> = answers.iter().filter(|r| r.status == 201).collect();
    assert_eq!(created.len(), 1, "exactly one 201");
    for r in &answers {
        assert!(
            r.status == 201 || (r.status == 200 && r.replayed()),
            "{r:?}"
        );
        assert_eq!(
            r.body, created[0].body,
            "every caller receives the one entry"
        );
    }
    assert_eq!(get_hold(&s[0], &key, "h2").await["status"], "captured");
    let b = s[0].balance(&key, "cust").await;
    assert_eq!(amounts(&b), ["42", "0", "42"], "{b}");

    // payment + hold + 20 captures + hold + 1 capture.
    let entries = s[1].all_entries(&key).await;
    assert_eq!(entries.len(), 24);
    gap_free(&entries);
    let captures = posted_captures(&entries);
    assert_eq!(captures.get("h1"), Some(&1), "{captures:?}");
    assert_eq!(captures.get("h2"), Some(&1), "{captures:?}");
    verify(&ledger).await;
}

async fn concurrent_refunds_never_exceed_the_payment(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", SCOPES).await;
    let s = servers(&ledger, 2, &[]).await;
    pay(&s[0], &key, "pay_1", "cust", "100").await;

    let calls = (0..30)
        .map(|i| {
            (
                s[i % 2].clone(),
                "/v1/refunds".to_owned(),
                json!({"refund_id": format!("ref_{i}"), "payment_id": "pay_1", "amount": "7"}),
            )
        })
        .collect();
    let answers = all_at_once(calls, &key).await;
    let posted: Vec<Value> = answers
        .iter()
        .filter(|r| r.status == 201)
        .map(Resp::json)
        .collect();
    assert_eq!(
        posted.len(),
        14,
        "14 × 7 = 98 fits in 100; a 15th would not"
    );
    for e in &posted {
        assert_eq!(
            (e["kind"].as_str(), e["amount"].as_str()),
            (Some("refund"), Some("7"))
        );
    }
    for r in answers.iter().filter(|r| r.status != 201) {
        rejected(r, "refund_exceeds_payment", "refund");
    }
    let b = s[1].balance(&key, "cust").await;
    assert_eq!(b["posted"], "2", "100 − 98: {b}");

    let entries = s[0].all_entries(&key).await;
    assert_eq!(entries.len(), 31);
    let log = gap_free(&entries);
    let seqs = answers_match_log(&answers, &log);
    assert_eq!(seqs, (2..=31).collect::<BTreeSet<i64>>());
    for seq in 2..=31 {
        let want = if seq <= 15 { "posted" } else { "rejected" };
        assert_eq!(log[&seq]["status"], want, "{}", log[&seq]);
    }
    // Still exceeded afterwards, whichever server is asked.
    let r = s[1]
        .post(
            "/v1/refunds",
            &key,
            &json!({"refund_id": "ref_late", "payment_id": "pay_1", "amount": "2.01"}),
        )
        .await;
    rejected(&r, "refund_exceeds_payment", "refund");
    verify(&ledger).await;
}

/// The expiry release entries of the log, by hold id.
fn expiry_releases(entries: &[Value]) -> BTreeMap<String, Vec<Value>> {
    let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for e in entries {
        if e["kind"] == "hold_release" {
            let upstream = e["upstream_id"].as_str().unwrap();
            let hold_id = upstream
                .strip_prefix("@expired:")
                .unwrap_or_else(|| panic!("only the server releases here: {e}"));
            out.entry(hold_id.to_owned()).or_default().push(e.clone());
        }
    }
    out
}

/// How many posted captures the log holds, by hold id.
fn posted_captures(entries: &[Value]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for e in entries {
        if e["kind"] == "hold_capture" && e["status"] == "posted" {
            *out.entry(e["hold_id"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
    }
    out
}

async fn expired_holds_are_released_exactly_once_by_many_processes(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", SCOPES).await;
    let s = servers(&ledger, 3, &["--hold-sweep-ms", "50"]).await;
    pay(&s[0], &key, "pay_1", "cust", "100").await;
    hold(&s[0], &key, "long", "5", 3600).await;
    let calls = (0..20)
        .map(|i| {
            (
                s[i % 3].clone(),
                "/v1/holds".to_owned(),
                json!({"hold_id": format!("exp_{i}"), "account": "cust", "amount": "1",
                       "unit": "USD", "ttl_seconds": 1}),
            )
        })
        .collect();
    for r in all_at_once(calls, &key).await {
        assert_eq!(r.status, 201, "{r:?}");
    }

    let ids: Vec<String> = (0..20).map(|i| format!("exp_{i}")).collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut pending: BTreeSet<String> = ids.iter().cloned().collect();
    while !pending.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "holds not expired within 15 s: {pending:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut still = BTreeSet::new();
        for (n, id) in pending.iter().enumerate() {
            let h = get_hold(&s[n % 3], &key, id).await;
            match h["status"].as_str() {
                Some("expired") => {}
                Some("open") => {
                    still.insert(id.clone());
                }
                other => panic!("hold {id} is {other:?}: {h}"),
            }
        }
        pending = still;
    }
    // Let every process sweep a good many more times: repeated sweeps
    // racing over holds already released are the behaviour under test.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let entries = s[2].all_entries(&key).await;
    gap_free(&entries);
    let releases = expiry_releases(&entries);
    assert_eq!(
        releases.keys().cloned().collect::<Vec<_>>(),
        {
            let mut sorted = ids.clone();
            sorted.sort();
            sorted
        },
        "one release per expired hold, none for the open one"
    );
    for (id, list) in &releases {
        assert_eq!(
            list.len(),
            1,
            "hold {id} released {} times: {list:?}",
            list.len()
        );
        let release = &list[0];
        assert_eq!(release["status"], "posted", "{release}");
        assert_eq!(release["amount"], "1", "{release}");
        let h = get_hold(&s[0], &key, id).await;
        assert_eq!(h["status"], "expired", "{h}");
        assert_eq!(h["closed_by"], release["id"], "{h}");
    }
    // payment + 21 holds + 20 releases.
    assert_eq!(entries.len(), 42);
    assert_eq!(get_hold(&s[1], &key, "long").await["status"], "open");
    let b = s[1].balance(&key, "cust").await;
    assert_eq!(amounts(&b), ["100", "5", "95"], "{b}");

    let r = s[1]
        .post(
            "/v1/holds/exp_3/capture",
            &key,
            &json!({"capture_id": "cap_late", "amount": "1"}),
        )
        .await;
    rejected(&r, "hold_not_open", "hold_capture");
    let r = s[2]
        .post(
            "/v1/holds/exp_4/release",
            &key,
            &json!({"release_id": "rel_late"}),
        )
        .await;
    rejected(&r, "hold_not_open", "hold_release");
    assert_eq!(s[0].balance(&key, "cust").await["held"], "5");
    verify(&ledger).await;
}

async fn hold_and_capture_racing_the_expiry(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", SCOPES).await;
    let s = servers(&ledger, 2, &["--hold-sweep-ms", "50"]).await;
    pay(&s[0], &key, "pay_1", "cust", "100").await;

    // Each hold gets one capture, sent at its own offset from its expiry.
    let offsets_ms: Vec<i64> = vec![-400, -150, -60, -25, -5, 0, 5, 25, 60, 150];
    let mut tasks = Vec::new();
    for (i, offset) in offsets_ms.iter().copied().enumerate() {
        let server = s[i % 2].clone();
        let key = key.clone();
        tasks.push(tokio::spawn(async move {
            let hold_id = format!("race_{i}");
            hold(&server, &key, &hold_id, "10", 1).await;
            let expires_at = get_hold(&server, &key, &hold_id).await["expires_at"]
                .as_str()
                .unwrap()
                .to_owned();
            let expires_at = chrono::DateTime::parse_from_rfc3339(&expires_at)
                .unwrap()
                .with_timezone(&chrono::Utc);
            let at = expires_at + chrono::Duration::milliseconds(offset);
            // A capture at a chosen offset from the expiry is the race
            // under test.
            if let Ok(wait) = (at - chrono::Utc::now()).to_std() {
                tokio::time::sleep(wait).await;
            }
            let r = server
                .post(
                    &format!("/v1/holds/{hold_id}/capture"),
                    &key,
                    &json!({"capture_id": format!("cap_{i}"), "amount": "4"}),
                )
                .await;
            (hold_id, offset, r)
        }));
    }
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap());
    }

    // Wait until no hold is open: the losers are released by a sweep.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let mut open = Vec::new();
        for (hold_id, _, _) in &outcomes {
            if get_hold(&s[0], &key, hold_id).await["status"] == "open" {
                open.push(hold_id.clone());
            }
        }
        if open.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "holds still open after 15 s: {open:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // More sweeps over released holds, racing: the behaviour under test.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let entries = s[1].all_entries(&key).await;
    gap_free(&entries);
    let releases = expiry_releases(&entries);
    let captures = posted_captures(&entries);
    let mut captured = 0;
    let mut summary = Vec::new();
    for (hold_id, offset, r) in &outcomes {
        let h = get_hold(&s[1], &key, hold_id).await;
        let released = releases.get(hold_id).map(Vec::len).unwrap_or(0);
        let posted_capture = captures.get(hold_id).copied().unwrap_or(0);
        assert_eq!(
            posted_capture + released,
            1,
            "{hold_id} is captured or released, never both, never neither"
        );
        summary.push(if r.status == 201 {
            format!("{offset}ms→201")
        } else {
            format!("{offset}ms→422 {}", r.code())
        });
        if r.status == 201 {
            captured += 1;
            let capture = r.json();
            assert_eq!(capture["status"], "posted");
            assert_eq!(h["status"], "captured", "{hold_id} at {offset} ms: {h}");
            assert_eq!(h["closed_by"], capture["id"], "{h}");
            assert_eq!(released, 0, "a captured hold is never released: {hold_id}");
        } else {
            assert_eq!(r.status, 422, "{hold_id} at {offset} ms: {r:?}");
            let code = r.code();
            assert!(
                code == "hold_expired" || code == "hold_not_open",
                "{hold_id} at {offset} ms: {r:?}"
            );
            assert_eq!(r.json()["entry"]["status"], "rejected", "{r:?}");
            assert_eq!(h["status"], "expired", "{hold_id} at {offset} ms: {h}");
            assert_eq!(released, 1, "an expired hold is released once: {hold_id}");
            assert_eq!(h["closed_by"], releases[hold_id][0]["id"], "{h}");
        }
    }
    eprintln!("capture outcomes by offset from expiry: {summary:?}");
    let b = s[0].balance(&key, "cust").await;
    let posted = (100 - 4 * captured).to_string();
    assert_eq!(amounts(&b), [posted.as_str(), "0", posted.as_str()], "{b}");
    verify(&ledger).await;
}

/// Twenty distinct reversals of one debit, raced over two servers: one is
/// posted, every other is the stored rejection `already_reversed`, and
/// the debit is compensated exactly once.
async fn concurrent_reversals_of_one_entry_post_one(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", SCOPES).await;
    let s = servers(&ledger, 2, &[]).await;
    let d = s[0]
        .post("/v1/usage-debits", &key, &debit("u1", "cust", "2.5"))
        .await;
    assert_eq!(d.status, 201, "{d:?}");
    let d = d.json();
    let calls = (0..20)
        .map(|i| {
            (
                s[i % 2].clone(),
                "/v1/reversals".to_owned(),
                json!({"reversal_id": format!("rv_{i}"), "entry_id": d["id"], "reason": "raced"}),
            )
        })
        .collect();
    let answers = all_at_once(calls, &key).await;
    let won: Vec<&Resp> = answers.iter().filter(|r| r.status == 201).collect();
    assert_eq!(won.len(), 1, "exactly one reversal of one entry");
    let reversal = won[0].json();
    assert_eq!(
        (reversal["kind"].as_str(), reversal["amount"].as_str()),
        (Some("reversal"), Some("2.5"))
    );
    for r in answers.iter().filter(|r| r.status != 201) {
        rejected(r, "already_reversed", "reversal");
    }
    for server in &s {
        assert_eq!(server.balance(&key, "cust").await["posted"], "0");
    }
    let entries = s[1].all_entries(&key).await;
    assert_eq!(entries.len(), 21);
    let log = gap_free(&entries);
    answers_match_log(&answers, &log);
    let posted_reversals = entries
        .iter()
        .filter(|e| e["kind"] == "reversal" && e["status"] == "posted")
        .count();
    assert_eq!(posted_reversals, 1);
    verify(&ledger).await;
}
