//! Groups decided ahead from the writer's memory, and written only where
//! they were decided.

use super::*;

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
    crate::group::commit_group_with(
        storage,
        Group::new("t", &[&debit("u1", "1")]),
        &mut |_, _| {},
        &mut memory,
    )
    .await
    .unwrap();
    memory
}

/// The commit rounds of a writer on `storage`.
fn rounds(storage: &Storage) -> RoundCommitter {
    RoundCommitter::start(storage.clone(), 1, Arc::default())
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
    } = crate::group::decide_ahead(
        Group::looked_up("t", &[&next], &[true]),
        memory,
        &rounds(storage),
    )
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
        let first = crate::group::decide_in_transaction(
            storage,
            Group::new("t", &[&debit("u2", "1")]),
            &mut |_, _| {},
            &mut memory,
        )
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
                // What a balances rebuild does to the head: it locks it
                // and bumps its generation, moving no seq.
                storage
                    .lock_tenant("t")
                    .await
                    .unwrap()
                    .commit()
                    .await
                    .unwrap();
            } else {
                crate::group::commit_group(storage, "t", &[&debit("other", "1")])
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

/// A tenant whose chain was empty when its writer first locked the head
/// has nothing stored its writer did not see: an account it never used
/// has no balance, so a group debiting only new accounts is decided from
/// memory too, without a read under the lock. A writer that starts on a
/// tenant with history (another process, a restart) knows no such thing
/// and reads; the balances are exact either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_accounts_of_a_tenant_seen_from_its_empty_chain_are_decided_from_memory() {
    for db in TestDb::every_engine(4).await {
        let engine = db.engine();
        let writers = Writers::new(db.storage.clone(), WriterConfig::default());
        for n in 0..10 {
            let d = writers
                .decide("t", debit_of(&format!("u{n}"), &format!("new{n}")))
                .await
                .unwrap();
            assert!(matches!(d, Decision::Created(_)), "{engine}: {d:?}");
        }
        let ahead = writers.stats().decided_ahead.load(Ordering::Relaxed);
        assert_eq!(ahead, 9, "{engine}: every group after the first");

        let restarted = Writers::new(db.storage.clone(), WriterConfig::default());
        for n in 10..14 {
            let account = format!("new{}", n % 2);
            let d = restarted
                .decide("t", debit_of(&format!("u{n}"), &account))
                .await
                .unwrap();
            assert!(matches!(d, Decision::Created(_)), "{engine}: {d:?}");
        }
        let balances = db.storage.stored_balances("t").await.unwrap();
        for (account, debits) in [("new0", 3), ("new1", 3), ("new2", 1), ("new9", 1)] {
            assert_eq!(
                balances.get(account, "USD").unwrap().debits,
                crate::balance::WideDecimal::from(debits),
                "{engine}: {account}"
            );
        }
        crate::verify::verify_tenant(&db.storage, "t", |_| {})
            .await
            .unwrap()
            .unwrap();
        db.remove().await;
    }
}
