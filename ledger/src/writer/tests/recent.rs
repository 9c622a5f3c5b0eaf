//! Retries answered from the recent entries.

use super::*;

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
        assert_eq!(stats.requests.load(Ordering::Relaxed), 4);

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
        assert_eq!(stats.requests.load(Ordering::Relaxed), 0);
        assert_eq!(entries(&db.storage).await, 2);
        db.remove().await;
    }
}
