//! Rounds shared by tenants: one commit for all, and a piece that fails
//! takes nothing of the others with it. Both engines.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::Ordering::Relaxed;

use super::*;
use crate::balance::AccountBalance;
use crate::store::{Fence, GroupTransaction};
use crate::test_databases::TestDb;

/// How a piece of [`set_balance`] ends.
#[derive(Clone, Copy, PartialEq)]
enum Ends {
    /// Its write is good.
    Writes,
    /// Its write expects a head that is not there: the write fails.
    WritesOnAMovedHead,
    /// It fails before it has anything to write.
    FailsFirst,
}

/// A piece that locks `tenant`'s head and writes its balance of `acct`
/// as `debits`, leaving the head where it is.
fn set_balance(tenant: &'static str, debits: i64, ends: Ends) -> RoundWork {
    Box::new(move |mut tx| {
        Box::pin(async move {
            let mut start = tx.lock_head(tenant).await?;
            if ends == Ends::FailsFirst {
                return Err(LedgerError::Unavailable("this piece fails".to_owned()));
            }
            let head = start.head;
            if ends == Ends::WritesOnAMovedHead {
                start.generation += 1;
            }
            let balance = AccountBalance {
                debits: crate::balance::WideDecimal::from(debits),
                ..AccountBalance::default()
            };
            Ok(Some(GroupWrite {
                tenant: tenant.to_owned(),
                entries: Vec::new(),
                balances: vec![("acct".to_owned(), "USD".to_owned(), balance)],
                records: Vec::new(),
                start,
                head,
            }))
        })
    })
}

async fn debits(storage: &Storage, tenant: &str) -> Option<crate::balance::WideDecimal> {
    let balances = storage.stored_balances(tenant).await.unwrap();
    balances.get("acct", "USD").map(|b| b.debits.clone())
}

/// Pieces queued together share one round. The ones that fail (one
/// before it writes, one whose write is refused) are told so and leave
/// nothing; the others commit, in one round.
#[tokio::test(flavor = "current_thread")]
async fn a_failing_piece_leaves_nothing_and_the_rest_of_its_round_commits() {
    for db in TestDb::every_engine_and_routed(4).await {
        let stats = Arc::new(RoundStats::default());
        let commits = RoundCommitter::start(db.storage.clone(), 2, stats.clone());
        // Queued before the committer first runs (one thread): one round.
        let a = commits.submit("a", 1, None, set_balance("a", 5, Ends::Writes));
        let b = commits.submit("b", 1, None, set_balance("b", 7, Ends::WritesOnAMovedHead));
        let c = commits.submit("c", 1, None, set_balance("c", 9, Ends::Writes));
        let d = commits.submit("d", 1, None, set_balance("d", 3, Ends::FailsFirst));
        let e = commits.submit("e", 1, None, set_balance("e", 1, Ends::Writes));
        let engine = db.engine();
        assert!(a.await.unwrap().is_ok(), "{engine}");
        assert!(b.await.unwrap().is_err(), "{engine}");
        assert!(c.await.unwrap().is_ok(), "{engine}");
        assert!(d.await.unwrap().is_err(), "{engine}");
        assert!(e.await.unwrap().is_ok(), "{engine}");
        if db.routed() {
            // Routed by tenant, a round holds one tenant's group.
            assert_eq!(stats.rounds.load(Relaxed), 5, "{engine}");
        } else {
            assert_eq!(stats.rounds.load(Relaxed), 1, "{engine}");
            assert_eq!(stats.pieces_failed.load(Relaxed), 2, "{engine}");
        }
        assert_eq!(stats.pieces.load(Relaxed), 5);
        assert_eq!(
            debits(&db.storage, "a").await,
            Some(crate::balance::WideDecimal::from(5))
        );
        assert_eq!(debits(&db.storage, "b").await, None, "{engine}");
        assert_eq!(
            debits(&db.storage, "c").await,
            Some(crate::balance::WideDecimal::from(9))
        );
        assert_eq!(debits(&db.storage, "d").await, None, "{engine}");
        assert_eq!(
            debits(&db.storage, "e").await,
            Some(crate::balance::WideDecimal::from(1))
        );

        // Alone in its round, a piece whose write is refused leaves nothing.
        let b = commits.submit("b", 1, None, set_balance("b", 7, Ends::WritesOnAMovedHead));
        assert!(b.await.unwrap().is_err());
        assert_eq!(debits(&db.storage, "b").await, None, "{engine}");
        db.remove().await;
    }
}

/// The head of `tenant`, as a group would lock it (the lock is let go).
async fn head_of(storage: &Storage, tenant: &str) -> Fence {
    let mut tx = storage.begin_group().await.unwrap();
    let fence = tx.lock_head(tenant).await.unwrap();
    GroupTransaction::commit(tx).await.unwrap();
    fence
}

/// The rows of a group decided ahead on `start`: `tenant`'s balance of
/// `acct` set to `debits`, the head left where it is.
fn balance_write(tenant: &str, debits: i64, start: Fence) -> GroupWrite {
    GroupWrite {
        tenant: tenant.to_owned(),
        entries: Vec::new(),
        balances: vec![(
            "acct".to_owned(),
            "USD".to_owned(),
            AccountBalance {
                debits: crate::balance::WideDecimal::from(debits),
                ..AccountBalance::default()
            },
        )],
        records: Vec::new(),
        start,
        head: start.head,
    }
}

/// Groups decided ahead of five tenants share a round (on PostgreSQL one
/// statement in autocommit; with a group to decide among them, one
/// transaction), written together. Another process moved one tenant's
/// head after its group was decided (a rebuild's lock bumps the
/// generation): that group alone is refused and writes nothing, the
/// others commit in the same round.
#[tokio::test(flavor = "current_thread")]
async fn a_head_moved_by_another_process_refuses_only_its_tenant_in_the_round() {
    for db in TestDb::every_engine_and_routed(4).await {
        let engine = db.engine();
        for with_a_group_to_decide in [false, true] {
            let stats = Arc::new(RoundStats::default());
            let commits = RoundCommitter::start(db.storage.clone(), 2, stats.clone());
            let tenants: Vec<String> = (0..5)
                .map(|t| format!("moved-{with_a_group_to_decide}-{t}"))
                .collect();
            let mut starts = Vec::new();
            for t in &tenants {
                starts.push(head_of(&db.storage, t).await);
            }
            db.storage
                .lock_tenant(&tenants[2])
                .await
                .unwrap()
                .commit()
                .await
                .unwrap();
            let mut outcomes = Vec::new();
            for (i, (t, start)) in tenants.iter().zip(&starts).enumerate() {
                outcomes.push(commits.submit_write(1, balance_write(t, 10 + i as i64, *start)));
            }
            let decided = with_a_group_to_decide.then(|| {
                commits.submit(
                    "moved-0-decided",
                    1,
                    None,
                    set_balance("moved-0-decided", 4, Ends::Writes),
                )
            });
            for (i, outcome) in outcomes.into_iter().enumerate() {
                let outcome = outcome.await.unwrap();
                assert_eq!(outcome.is_ok(), i != 2, "{engine}: {i} {outcome:?}");
            }
            if let Some(decided) = decided {
                assert!(decided.await.unwrap().is_ok(), "{engine}");
            }
            for (i, t) in tenants.iter().enumerate() {
                let expected = (i != 2).then(|| crate::balance::WideDecimal::from(10 + i as i64));
                assert_eq!(debits(&db.storage, t).await, expected, "{engine}: {t}");
            }
            if !db.routed() {
                assert_eq!(stats.rounds.load(Relaxed), 1, "{engine}");
                assert_eq!(stats.pieces_failed.load(Relaxed), 1, "{engine}");
            }
        }
        db.remove().await;
    }
}

/// A tenant's writer can have two pieces waiting at once (the rows of a
/// group decided ahead and the retry of the group under it). A round takes
/// one piece of a tenant; the other waits for the next round, ahead of
/// anything of its tenant that came after it, and other tenants' pieces
/// are not held up by it.
#[tokio::test(flavor = "current_thread")]
async fn a_round_holds_at_most_one_piece_of_a_tenant() {
    let (sender, receiver) = mpsc::unbounded_channel();
    let mut queue = Queue {
        receiver,
        held: VecDeque::new(),
    };
    let piece = |tenant: &str, debits: i64| {
        let (committed, _outcome) = oneshot::channel();
        Piece {
            tenant: tenant.to_owned(),
            requests: 1,
            work: Work::Write(balance_write(tenant, debits, Fence::EMPTY)),
            committed,
        }
    };
    let debits_of = |round: &[Piece]| -> Vec<(String, i64)> {
        round
            .iter()
            .map(|p| match &p.work {
                Work::Write(w) => (
                    p.tenant.clone(),
                    w.balances[0].2.debits.to_string().parse().unwrap(),
                ),
                Work::Decide { .. } => unreachable!("only writes queued"),
            })
            .collect()
    };
    for (tenant, debits) in [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("a", 3), ("b", 2)] {
        sender.send(piece(tenant, debits)).map_err(|_| ()).unwrap();
    }
    let first = queue.next_round(MAX_ROUND_WORK).await.unwrap();
    assert_eq!(
        debits_of(&first),
        [("a".into(), 1), ("b".into(), 1), ("c".into(), 1)]
    );
    sender.send(piece("d", 1)).map_err(|_| ()).unwrap();
    let second = queue.next_round(MAX_ROUND_WORK).await.unwrap();
    assert_eq!(
        debits_of(&second),
        [("a".into(), 2), ("b".into(), 2), ("d".into(), 1)]
    );
    // A full round takes the held piece first; what came after it of its
    // tenant waits for the round after.
    sender.send(piece("a", 4)).map_err(|_| ()).unwrap();
    let third = queue.next_round(1).await.unwrap();
    assert_eq!(debits_of(&third), [("a".into(), 3)]);
    let fourth = queue.next_round(MAX_ROUND_WORK).await.unwrap();
    assert_eq!(debits_of(&fourth), [("a".into(), 4)]);
    drop(sender);
    assert!(queue.next_round(MAX_ROUND_WORK).await.is_none());
}
