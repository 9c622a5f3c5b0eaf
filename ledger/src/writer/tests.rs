//! The writer end to end: look-ups, pipelining, retirement, recent
//! entries and unlooked keys, on both engines.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::look_up::look_up;
use super::retry::{commit_with_retry, is_unique_violation};
use super::*;
use crate::group::{DecidedWrite, WriterMemory};
use crate::store::{EntryFilter, Storage};
use crate::test_databases::TestDb;

fn debit(id: &str, amount: &str) -> Intent {
    let body = serde_json::json!({
        "usage_record_id": id, "account": "cust", "amount": amount, "unit": "USD"
    });
    Intent::usage_debit(body.as_object().unwrap().clone()).unwrap()
}

async fn entries(storage: &Storage) -> usize {
    let filter = EntryFilter {
        limit: 100,
        ..EntryFilter::default()
    };
    storage.list_entries("t", &filter).await.unwrap().len()
}

/// A key found free before the writer and taken before its group: the
/// UNIQUE constraint refuses the second entry, and the retry, looking
/// the key up under the lock, answers a replay.
#[tokio::test]
async fn a_key_taken_after_the_look_up_is_replayed_not_posted_twice() {
    let storage = Storage::connect_with("sqlite::memory:", 1).await.unwrap();
    let first = debit("u1", "1");
    storage.commit_group("t", &[&first]).await.unwrap();

    let again = debit("u1", "1");
    let mut memory = WriterMemory::default();
    let stale = storage
        .commit_group_with("t", &[&again], &[true], &mut |_, _| {}, &mut memory)
        .await;
    assert!(
        matches!(&stale, Err(LedgerError::Database(e)) if is_unique_violation(e)),
        "{stale:?}"
    );
    assert_eq!(entries(&storage).await, 1);

    let decisions = commit_with_retry(
        &storage,
        "t",
        &[&again],
        &[true],
        &mut |_, _| {},
        &mut memory,
    )
    .await
    .unwrap();
    assert!(
        matches!(&decisions[..], [Decision::Replayed(e)] if e.seq == 1),
        "{decisions:?}"
    );
    assert_eq!(entries(&storage).await, 1);
}

/// Runs the look-up task over `requests` until they are all handled:
/// their answers, what reached the writer, and how many were answered
/// before it.
async fn look_up_alone(
    storage: &Storage,
    requests: Vec<Vec<Intent>>,
) -> (Vec<Option<Vec<Decision>>>, Vec<Job>, u64) {
    let (to_look_up, queue) = mpsc::unbounded_channel();
    let (to_writer, mut writer_queue) = mpsc::unbounded_channel();
    let stage = Stage {
        pending: Arc::new(AtomicUsize::new(requests.iter().map(Vec::len).sum())),
        config: WriterConfig::default(),
        stats: Arc::default(),
        key_taken: KeyTaken::default(),
    };
    let stats = stage.stats.clone();
    let mut answers = Vec::new();
    for intents in requests {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            intents,
            absent: Vec::new(),
            reply,
        };
        to_look_up.send(job).unwrap();
        answers.push(answer);
    }
    drop(to_look_up);
    look_up(
        storage.clone(),
        "t".to_owned(),
        queue,
        to_writer,
        stage,
        Weak::new(),
    )
    .await;
    let mut forwarded = Vec::new();
    while let Some(job) = writer_queue.recv().await {
        forwarded.push(job);
    }
    let mut answered = Vec::new();
    for mut answer in answers {
        answered.push(answer.try_recv().ok().map(Result::unwrap));
    }
    let before = stats.answered_before_group.load(Ordering::Relaxed);
    (answered, forwarded, before)
}

/// Replays and conflicts of committed entries are answered before the
/// writer; a request mixing them with a new intent goes to the writer
/// with only the free key marked.
#[tokio::test]
async fn committed_keys_are_answered_before_the_writer() {
    let storage = Storage::connect_with("sqlite::memory:", 1).await.unwrap();
    storage
        .commit_group("t", &[&debit("u1", "1")])
        .await
        .unwrap();
    let requests = || {
        vec![
            vec![debit("u1", "1")],
            vec![debit("u1", "2")],
            vec![debit("u1", "1"), debit("u2", "1")],
        ]
    };

    let (answered, forwarded, before) = look_up_alone(&storage, requests()).await;
    assert!(
        matches!(answered[0].as_deref(), Some([Decision::Replayed(_)])),
        "{answered:?}"
    );
    assert!(
        matches!(answered[1].as_deref(), Some([Decision::Conflict { .. }])),
        "{answered:?}"
    );
    assert!(
        answered[2].is_none(),
        "the mixed request waits for the writer"
    );
    assert_eq!(forwarded.len(), 1);
    assert_eq!(forwarded[0].absent, vec![false, true]);
    assert_eq!(before, 2);
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

/// Through the writers, sequential requests get the same answers
/// whichever path they take.
#[tokio::test]
async fn replays_and_conflicts_through_the_writers() {
    let storage = Storage::connect_with("sqlite::memory:", 1).await.unwrap();
    let writers = Writers::new(storage.clone(), nothing_recent());
    writers.decide("t", debit("u1", "1")).await.unwrap();
    let replay = writers.decide("t", debit("u1", "1")).await.unwrap();
    assert!(matches!(replay, Decision::Replayed(_)), "{replay:?}");
    let conflict = writers.decide("t", debit("u1", "2")).await.unwrap();
    assert!(
        matches!(conflict, Decision::Conflict { .. }),
        "{conflict:?}"
    );
    replay_of_u1_and_new_u2(&writers).await;
    let stats = writers.stats();
    assert_eq!(
        stats.intents.load(Ordering::Relaxed) as u64
            + stats.answered_before_group.load(Ordering::Relaxed),
        5
    );
    // A request of replays and conflicts opens no transaction, even
    // with the writer idle: only the two requests with a new key did.
    assert_eq!(stats.groups.load(Ordering::Relaxed), 2);
    assert_eq!(stats.answered_before_group.load(Ordering::Relaxed), 2);
    assert_eq!(entries(&storage).await, 2);
}

fn debit_of(id: &str, account: &str) -> Intent {
    let body = serde_json::json!({
        "usage_record_id": id, "account": account, "amount": "1", "unit": "USD"
    });
    Intent::usage_debit(body.as_object().unwrap().clone()).unwrap()
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
            rust_decimal::Decimal::from(total / 4),
            "cust{account}"
        );
    }
}

/// Only a full group is decided ahead: groups of at most 4 intents fill
/// up under a flood of single requests.
fn small_groups() -> WriterConfig {
    WriterConfig {
        max_group: 4,
        ..WriterConfig::default()
    }
}

/// Under a flood, groups are decided from the writer's memory while the
/// group before them is written, and the ledger is exactly what one
/// group at a time would have written. With one process, nothing moves
/// the head under them: each waits for the commit of the group before
/// and is written, none is decided a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn groups_decided_ahead_leave_the_ledger_exact() {
    for db in TestDb::every_engine(4).await {
        let writers = Writers::new(db.storage.clone(), small_groups());
        flood_and_check(&db.storage, std::slice::from_ref(&writers), 16, 40).await;
        let stats = writers.stats();
        assert!(
            stats.decided_ahead.load(Ordering::Relaxed) > 0,
            "{}: no group was decided ahead",
            db.engine()
        );
        assert_eq!(
            stats.decided_ahead_redone.load(Ordering::Relaxed),
            0,
            "{}: a group decided ahead did not find the head its group before left",
            db.engine()
        );
        db.remove().await;
    }
}

/// Two writers of one tenant on one database (two processes): each
/// moves the head under the other's groups decided ahead, whose writes
/// then refuse to write and are decided again under the lock. After a
/// refusal a writer decides under the lock for `CONTENDED_FOR`, so
/// refusals stay rare: without that, half of the groups were decided
/// from memory and 20 to 37 of them (of ~80) decided again, in under a
/// second.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_head_moved_under_a_group_decided_ahead_is_decided_again() {
    for db in TestDb::every_engine(8).await {
        let writers = [
            Writers::new(db.storage.clone(), small_groups()),
            Writers::new(db.storage.clone(), small_groups()),
        ];
        let started = Instant::now();
        flood_and_check(&db.storage, &writers, 8, 40).await;
        let redone: u64 = writers
            .iter()
            .map(|w| w.stats().decided_ahead_redone.load(Ordering::Relaxed))
            .sum();
        assert!(
            redone > 0,
            "{}: no group decided ahead found the head moved",
            db.engine()
        );
        // At most one refusal per writer per `CONTENDED_FOR`, and one
        // more for the refusals of a pipelined pair.
        let windows = started.elapsed().as_secs_f64() / crate::group::CONTENDED_FOR.as_secs_f64();
        let bound = 2.0 * writers.len() as f64 * (windows.floor() + 1.0);
        assert!(
            redone as f64 <= bound,
            "{}: {redone} groups decided twice (at most {bound}): decided from memory while contended",
            db.engine()
        );
        db.remove().await;
    }
}

/// Commits a first debit, `u1`; the memory its writer is left with.
async fn first_debit_remembered(storage: &Storage) -> WriterMemory {
    let mut memory = WriterMemory::default();
    storage
        .commit_group_with("t", &[&debit("u1", "1")], &[], &mut |_, _| {}, &mut memory)
        .await
        .unwrap();
    memory
}

/// A debit `id`, decided from `memory` alone as entry `seq`; its write.
async fn decided_from_memory(
    storage: &Storage,
    id: &str,
    seq: i64,
    memory: &mut WriterMemory,
) -> crate::group::PendingWrite {
    let next = debit(id, "1");
    let DecidedWrite {
        decisions, write, ..
    } = storage
        .decide_ahead("t", &[&next], &[true], memory)
        .await
        .expect("everything it needs is remembered");
    assert!(matches!(&decisions[..], [Decision::Created(e)] if e.seq == seq));
    write
}

/// The write of a group decided ahead may start before the group before
/// it has committed: it waits for the head, then finds it where that
/// group left it, and writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_decided_ahead_waits_for_the_commit_before_it() {
    for db in TestDb::every_engine(4).await {
        let storage = &db.storage;
        let mut memory = first_debit_remembered(storage).await;
        // Decided under the head lock, which its transaction holds until
        // the write below commits.
        let first = storage
            .decide_group("t", &[&debit("u2", "1")], &[], &mut |_, _| {}, &mut memory)
            .await
            .unwrap()
            .write;
        let second = tokio::spawn(decided_from_memory(storage, "u3", 3, &mut memory).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!second.is_finished(), "{}: it did not wait", db.engine());
        first.await.unwrap();
        second.await.unwrap().unwrap_or_else(|e| {
            panic!("{}: the group decided ahead was refused: {e}", db.engine())
        });
        assert_eq!(entries(storage).await, 3, "{}", db.engine());
        db.remove().await;
    }
}

/// A group decided ahead writes nothing once the head is not where it
/// was decided: another process appended, or a rebuild rewrote the
/// balances (which moves no seq, only the generation).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_decided_ahead_writes_nothing_if_the_head_moved() {
    for moved_by_rebuild in [false, true] {
        for db in TestDb::every_engine(4).await {
            let storage = &db.storage;
            let mut memory = first_debit_remembered(storage).await;
            let write = decided_from_memory(storage, "u2", 2, &mut memory).await;
            if moved_by_rebuild {
                storage.rebuild_balances("t").await.unwrap();
            } else {
                storage
                    .commit_group("t", &[&debit("other", "1")])
                    .await
                    .unwrap();
            }
            assert!(
                write.await.is_err(),
                "{} rebuild: {moved_by_rebuild}",
                db.engine()
            );
            let posted: Vec<String> = storage
                .list_entries(
                    "t",
                    &EntryFilter {
                        limit: 10,
                        ..EntryFilter::default()
                    },
                )
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.upstream_id)
                .collect();
            let expected: &[&str] = if moved_by_rebuild {
                &["u1"]
            } else {
                &["u1", "other"]
            };
            assert_eq!(posted, expected, "{}", db.engine());
            db.remove().await;
        }
    }
}

fn idle_after(ms: u64) -> WriterConfig {
    WriterConfig {
        idle_after: Duration::from_millis(ms),
        ..WriterConfig::default()
    }
}

/// A tenant's writer that has nothing to do stops, and takes what it
/// remembered with it; the tenant's next request starts a new one, which
/// finds the log as it was.
#[tokio::test]
async fn an_idle_writer_stops_and_the_next_request_starts_another() {
    let storage = Storage::connect_with("sqlite::memory:", 1).await.unwrap();
    let writers = Writers::new(storage.clone(), idle_after(50));
    writers.decide("t", debit("u1", "1")).await.unwrap();
    assert_eq!(writers.queue_depth().tenants, 1);
    let stopped = || writers.stats().idle_writers_stopped.load(Ordering::Relaxed);
    let waited = Instant::now();
    while writers.queue_depth().tenants > 0 {
        assert!(
            waited.elapsed() < Duration::from_secs(5),
            "the idle writer never stopped"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(stopped(), 1);

    let replay = writers.decide("t", debit("u1", "1")).await.unwrap();
    assert!(
        matches!(replay, Decision::Replayed(ref e) if e.seq == 1),
        "{replay:?}"
    );
    let created = writers.decide("t", debit("u2", "1")).await.unwrap();
    assert!(
        matches!(created, Decision::Created(ref e) if e.seq == 2),
        "{created:?}"
    );
    assert_eq!(writers.queue_depth().tenants, 1);
    assert_eq!(entries(&storage).await, 2);
}

/// Requests arriving while their tenant's writer retires (it stops
/// after 1 ms without work, so it retires between most of them) are
/// every one answered, and each key is posted exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn requests_racing_a_retiring_writer_are_all_answered() {
    let storage = Storage::connect_with("sqlite::memory:", 1).await.unwrap();
    let writers = Writers::new(storage.clone(), idle_after(1));
    let mut tasks = Vec::new();
    for client in 0..4 {
        let writers = writers.clone();
        tasks.push(tokio::spawn(async move {
            for n in 0..25u64 {
                let id = format!("c{client}-{n}");
                let created = writers.decide("t", debit(&id, "1")).await.unwrap();
                assert!(matches!(created, Decision::Created(_)), "{created:?}");
                let replay = writers.decide("t", debit(&id, "1")).await.unwrap();
                assert!(matches!(replay, Decision::Replayed(_)), "{replay:?}");
                tokio::time::sleep(Duration::from_micros(500 * (n % 5))).await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let filter = EntryFilter {
        limit: 1_000,
        ..EntryFilter::default()
    };
    let posted = storage.list_entries("t", &filter).await.unwrap();
    assert_eq!(posted.len(), 100);
    let keys: HashSet<&str> = posted.iter().map(|e| e.upstream_id.as_str()).collect();
    assert_eq!(keys.len(), 100);
    assert!(
        writers.stats().idle_writers_stopped.load(Ordering::Relaxed) > 0,
        "no writer retired during the run: the race was not exercised"
    );
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

/// A retry of an entry this process committed, or found, is answered
/// from memory with exactly what the look-up would answer; a request
/// with one key not held goes the usual way.
#[tokio::test]
async fn retries_of_committed_entries_are_answered_from_recent_entries() {
    for db in TestDb::every_engine(2).await {
        let writers = Writers::new(db.storage.clone(), WriterConfig::default());
        let created = writers.decide("t", debit("u1", "1")).await.unwrap();
        let Decision::Created(original) = created else {
            panic!("{created:?}")
        };
        let replay = writers.decide("t", debit("u1", "1")).await.unwrap();
        assert!(
            matches!(&replay, Decision::Replayed(e) if **e == *original),
            "{replay:?}"
        );
        let conflict = writers.decide("t", debit("u1", "2")).await.unwrap();
        assert!(
            matches!(&conflict, Decision::Conflict { entry_id, differing_fields }
                if *entry_id == original.id && differing_fields == &["amount"]),
            "{conflict:?}"
        );
        // Another tenant's key of the same name is not this one.
        let other = writers.decide("t2", debit("u1", "1")).await.unwrap();
        assert!(matches!(other, Decision::Created(_)), "{other:?}");
        replay_of_u1_and_new_u2(&writers).await;
        let stats = writers.stats();
        assert_eq!(stats.answered_from_recent.load(Ordering::Relaxed), 2);
        assert_eq!(stats.answered_before_group.load(Ordering::Relaxed), 0);
        assert_eq!(stats.intents.load(Ordering::Relaxed), 4);

        // Another process: its first retry is looked up in the
        // database, and what the look-up found answers the next one.
        let other_process = Writers::new(db.storage.clone(), WriterConfig::default());
        for _ in 0..2 {
            let replay = other_process.decide("t", debit("u2", "1")).await.unwrap();
            assert!(matches!(replay, Decision::Replayed(_)), "{replay:?}");
        }
        let stats = other_process.stats();
        assert_eq!(stats.answered_before_group.load(Ordering::Relaxed), 1);
        assert_eq!(stats.answered_from_recent.load(Ordering::Relaxed), 1);
        assert_eq!(stats.intents.load(Ordering::Relaxed), 0);
        assert_eq!(entries(&db.storage).await, 2);
        db.remove().await;
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
async fn verified_debits(storage: &Storage, account: &str) -> (i64, rust_decimal::Decimal) {
    let report = crate::verify::verify_tenant(storage, "t", |_| {})
        .await
        .unwrap()
        .unwrap();
    let balances = storage.stored_balances("t").await.unwrap();
    (report.entries, balances.get(account, "USD").unwrap().debits)
}

/// A debit of 1 on `other`, credited to `@other-revenue`.
fn other_debit(id: &str) -> Intent {
    let body = serde_json::json!({
        "usage_record_id": id, "account": "other", "amount": "1", "unit": "USD",
        "counter_account": "@other-revenue"
    });
    Intent::usage_debit(body.as_object().unwrap().clone()).unwrap()
}

fn created_id(d: &Decision) -> String {
    match d {
        Decision::Created(e) => e.id.clone(),
        other => panic!("expected a new entry, got {other:?}"),
    }
}

/// After a run of free keys, keys reach the writer unlooked. A replay
/// and a conflict among them still get the committed entry's answer,
/// on the group's second decision, and nothing is posted twice; the
/// taken key resumes look-ups, and is no sign of another writer (the
/// next group is still decided from memory).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlooked_keys_still_replay_and_conflict_and_look_ups_resume() {
    for db in TestDb::every_engine(4).await {
        let engine = db.engine();
        let writers = Writers::new(db.storage.clone(), skip_look_ups_after(8));
        let stats = writers.stats();
        let mut ids = Vec::new();
        // u9 moves two other accounts, which the failed group below
        // does not touch.
        for n in 0..10 {
            let d = if n == 9 {
                writers.decide("t", other_debit("u9")).await
            } else {
                writers.decide("t", debit(&format!("u{n}"), "1")).await
            };
            ids.push(created_id(&d.unwrap()));
        }
        assert_eq!(
            stats.not_looked_up.load(Ordering::Relaxed),
            2,
            "{engine}: the keys after a run of 8 free ones go unlooked"
        );

        let replay = writers.decide("t", debit("u0", "1")).await.unwrap();
        match &replay {
            Decision::Replayed(e) => assert_eq!(e.id, ids[0], "{engine}"),
            other => panic!("{engine}: {other:?}"),
        }
        assert_eq!(stats.not_looked_up.load(Ordering::Relaxed), 3, "{engine}");
        assert_eq!(
            stats.key_taken_groups.load(Ordering::Relaxed),
            1,
            "{engine}"
        );

        // Look-ups resumed: a conflict is answered before any group.
        let before = stats.answered_before_group.load(Ordering::Relaxed);
        let conflict = writers.decide("t", debit("u1", "2")).await.unwrap();
        assert!(
            matches!(&conflict, Decision::Conflict { entry_id, .. } if *entry_id == ids[1]),
            "{engine}: {conflict:?}"
        );
        assert_eq!(
            stats.answered_before_group.load(Ordering::Relaxed),
            before + 1,
            "{engine}"
        );
        // ... and the key taken cost nothing more than forgetting what
        // the failed group touched: no lock path as if another process
        // appended, and a group on another account is decided from
        // memory at once.
        let ahead = stats.decided_ahead.load(Ordering::Relaxed);
        created_id(&writers.decide("t", other_debit("u10")).await.unwrap());
        assert_eq!(
            stats.decided_ahead.load(Ordering::Relaxed),
            ahead + 1,
            "{engine}: the group after a key taken is decided from memory"
        );
        created_id(&writers.decide("t", debit("u11", "1")).await.unwrap());

        // Unlooked again after 8 more free keys; then one request holds
        // a new key, a replay, a conflict and a key repeated inside it.
        for n in 12..18 {
            created_id(
                &writers
                    .decide("t", debit(&format!("u{n}"), "1"))
                    .await
                    .unwrap(),
            );
        }
        let unlooked = stats.not_looked_up.load(Ordering::Relaxed);
        let mixed = writers
            .decide_all(
                "t",
                vec![
                    debit("u18", "1"),
                    debit("u2", "1"),
                    debit("u3", "5"),
                    debit("u18", "1"),
                ],
            )
            .await
            .unwrap();
        assert_eq!(
            stats.not_looked_up.load(Ordering::Relaxed),
            unlooked + 4,
            "{engine}"
        );
        let new_id = created_id(&mixed[0]);
        assert!(
            matches!(&mixed[1], Decision::Replayed(e) if e.id == ids[2]),
            "{engine}: {mixed:?}"
        );
        assert!(
            matches!(&mixed[2], Decision::Conflict { entry_id, .. } if *entry_id == ids[3]),
            "{engine}: {mixed:?}"
        );
        assert!(
            matches!(&mixed[3], Decision::Replayed(e) if e.id == new_id),
            "{engine}: {mixed:?}"
        );
        assert_eq!(
            stats.key_taken_groups.load(Ordering::Relaxed),
            2,
            "{engine}"
        );

        assert_eq!(
            entries(&db.storage).await,
            19,
            "{engine}: u0..u18, once each"
        );
        let (entries, debits) = verified_debits(&db.storage, "cust").await;
        assert_eq!(entries, 19, "{engine}");
        assert_eq!(debits, rust_decimal::Decimal::from(17), "{engine}");
        let (_, debits) = verified_debits(&db.storage, "other").await;
        assert_eq!(debits, rust_decimal::Decimal::from(2), "{engine}");
    }
}

/// Many clients post new keys and replays of their own keys while keys
/// go unlooked and groups are decided ahead: every replay returns the
/// first entry, and the ledger holds each key once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replays_among_unlooked_keys_under_a_flood_leave_the_ledger_exact() {
    for db in TestDb::every_engine(4).await {
        let engine = db.engine();
        let config = unlooked_small_groups(16);
        let writers = Writers::new(db.storage.clone(), config);
        let mut tasks = Vec::new();
        for client in 0..8 {
            let writers = writers.clone();
            tasks.push(tokio::spawn(async move {
                let mut ids = Vec::new();
                for n in 0..60 {
                    if n % 6 == 5 {
                        let k = n / 2;
                        let d = writers
                            .decide("t", debit_of(&format!("c{client}-{k}"), "cust0"))
                            .await
                            .unwrap();
                        assert!(
                            matches!(&d, Decision::Replayed(e) if e.id == ids[k]),
                            "{d:?}"
                        );
                    } else {
                        let id = format!("c{client}-{}", ids.len());
                        let d = writers.decide("t", debit_of(&id, "cust0")).await.unwrap();
                        ids.push(created_id(&d));
                    }
                }
                ids.len()
            }));
        }
        let mut total = 0;
        for task in tasks {
            total += task.await.unwrap();
        }
        let stats = writers.stats();
        assert!(stats.not_looked_up.load(Ordering::Relaxed) > 0, "{engine}");
        assert!(
            stats.key_taken_groups.load(Ordering::Relaxed) > 0,
            "{engine}"
        );
        assert_eq!(
            stats.decided_ahead_redone.load(Ordering::Relaxed),
            0,
            "{engine}: a key taken was taken for another writer's append"
        );
        let (entries, debits) = verified_debits(&db.storage, "cust0").await;
        assert_eq!(entries, total as i64, "{engine}");
        assert_eq!(debits, rust_decimal::Decimal::from(total), "{engine}");
    }
}

/// Two processes (two writers on one database) post the same keys at
/// once while keys go unlooked in both: each key is posted once, both
/// answers name the same entry, and the ledger verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_posting_the_same_unlooked_keys_post_each_once() {
    for db in TestDb::every_engine(8).await {
        let engine = db.engine();
        let config = unlooked_small_groups(8);
        let writers = [
            Writers::new(db.storage.clone(), config),
            Writers::new(db.storage.clone(), config),
        ];
        // A run of free keys in each, so what follows goes unlooked.
        for (w, writers) in writers.iter().enumerate() {
            for n in 0..8 {
                let d = writers.decide("t", debit_of(&format!("own{w}-{n}"), "cust0"));
                created_id(&d.await.unwrap());
            }
        }
        let mut tasks = Vec::new();
        for (w, writers) in writers.iter().enumerate() {
            for client in 0..4 {
                let writers = writers.clone();
                tasks.push(tokio::spawn(async move {
                    let mut answers = Vec::new();
                    for n in 0..30 {
                        // Both processes post every key, in other orders.
                        let k = if w == 0 { n } else { 29 - n };
                        let id = format!("shared-{client}-{k}");
                        let d = writers.decide("t", debit_of(&id, "cust0")).await.unwrap();
                        let entry = match d {
                            Decision::Created(e) | Decision::Replayed(e) => e.id.clone(),
                            other => panic!("{other:?}"),
                        };
                        answers.push((id, entry));
                    }
                    answers
                }));
            }
        }
        let mut seen: HashMap<String, String> = HashMap::new();
        for task in tasks {
            for (id, entry) in task.await.unwrap() {
                let first = seen.entry(id.clone()).or_insert_with(|| entry.clone());
                assert_eq!(*first, entry, "{engine}: {id} answered two entries");
            }
        }
        assert_eq!(seen.len(), 120, "{engine}");
        let unlooked: u64 = writers
            .iter()
            .map(|w| w.stats().not_looked_up.load(Ordering::Relaxed))
            .sum();
        assert!(unlooked > 0, "{engine}: no key went unlooked");
        let (entries, debits) = verified_debits(&db.storage, "cust0").await;
        assert_eq!(entries, 136, "{engine}: 16 own keys, 120 shared, once each");
        assert_eq!(debits, rust_decimal::Decimal::from(136), "{engine}");
        db.remove().await;
    }
}
