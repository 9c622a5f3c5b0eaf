//! Keys sent to the writer unlooked still replay, conflict and post once.

use super::*;

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
        assert_eq!(debits, crate::balance::WideDecimal::from(17), "{engine}");
        let (_, debits) = verified_debits(&db.storage, "other").await;
        assert_eq!(debits, crate::balance::WideDecimal::from(2), "{engine}");
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
        assert_eq!(
            debits,
            crate::balance::WideDecimal::from(total as i64),
            "{engine}"
        );
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
        assert_eq!(debits, crate::balance::WideDecimal::from(136), "{engine}");
        db.remove().await;
    }
}
