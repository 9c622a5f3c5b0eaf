//! The groups of many tenants committed together in commit rounds.

use super::*;

/// Many tenants posting at once: their groups share rounds (fewer
/// commits than groups), and every tenant's ledger is exactly its own
/// posts, in its own chain, which verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tenants_posting_at_once_share_commits_and_keep_their_own_chains() {
    for db in TestDb::every_engine_and_routed(8).await {
        for committers in [1, 3] {
            let config = WriterConfig {
                committers: Some(committers),
                ..nothing_recent()
            };
            let writers = Writers::new(db.storage.clone(), config);
            let (tenants, per_tenant): (usize, i64) = (40, 12);
            let mut tasks = Vec::new();
            for t in 0..tenants {
                let writers = writers.clone();
                tasks.push(tokio::spawn(async move {
                    let tenant = format!("c{committers}-t{t}");
                    for n in 0..per_tenant {
                        // Accounts new to the writer's memory keep the round reading.
                        let account = format!("cust{}", n as usize % 4 + t % 3);
                        let request = debit_of(&format!("{tenant}-{n}"), &account);
                        let d = writers.decide(&tenant, request).await.unwrap();
                        assert!(matches!(d, Decision::Created(_)), "{d:?}");
                    }
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
            for t in 0..tenants {
                let tenant = format!("c{committers}-t{t}");
                let report = crate::verify::verify_tenant(&db.storage, &tenant, |_| {})
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(report.entries, per_tenant, "{}: {tenant}", db.engine());
                let balances = db.storage.stored_balances(&tenant).await.unwrap();
                for a in 0..4 {
                    let account = format!("cust{}", a + t % 3);
                    let debits = balances.get(&account, "USD").unwrap().debits.clone();
                    assert_eq!(
                        debits,
                        crate::balance::WideDecimal::from(per_tenant / 4),
                        "{account}"
                    );
                }
            }
            let rounds = writers.round_stats();
            let (rounds, pieces) = (
                rounds.rounds.load(Ordering::Relaxed),
                rounds.pieces.load(Ordering::Relaxed),
            );
            // Routed by tenant (Citus), a round holds one tenant's group.
            let shared = if db.routed() {
                rounds == pieces
            } else {
                rounds < pieces
            };
            assert!(
                pieces >= tenants as u64 * per_tenant as u64 / 10 && shared,
                "{} with {committers} committers: {pieces} groups in {rounds} rounds",
                db.engine()
            );
        }
        db.remove().await;
    }
}

/// One tenant's group of a round of five, written together: another
/// process took its key after the key was found free (marked absent, so
/// the group does not look it up). The joint write fails on the UNIQUE
/// constraint; the groups are written again one by one and only that
/// tenant's is refused (its writer then replays the key); the other four
/// commit in the same round. Every ledger verifies.
#[tokio::test(flavor = "current_thread")]
async fn a_key_taken_by_another_process_refuses_only_its_tenant_in_the_round() {
    use crate::group::{decide_in_round, Group};
    for db in TestDb::every_engine_and_routed(4).await {
        let engine = db.engine();
        let stats = Arc::new(crate::group::RoundStats::default());
        let commits = RoundCommitter::start(db.storage.clone(), 1, stats.clone());
        let tenants = ["k0", "k1", "k2", "k3", "k4"];
        // Another process: a group of its own on the same database.
        crate::group::commit_group(&db.storage, "k2", &[&debit("taken", "1")])
            .await
            .unwrap();
        let requests: Vec<EntryRequest> = tenants
            .iter()
            .map(|t| match *t {
                "k2" => debit("taken", "1"),
                t => debit(&format!("{t}-new"), "1"),
            })
            .collect();
        let mut memories: Vec<WriterMemory> =
            tenants.iter().map(|_| WriterMemory::default()).collect();
        let mut runs = Vec::new();
        for ((tenant, request), memory) in tenants.iter().zip(&requests).zip(memories.iter_mut()) {
            let commits = &commits;
            runs.push(async move {
                let decided = decide_in_round(
                    commits,
                    Group::looked_up(tenant, &[request], &[true]),
                    &mut |_, _| {},
                    memory,
                )
                .await?;
                decided.write.await
            });
        }
        // Polled together on one thread: every group is queued before the
        // committer runs, so they share one round.
        let outcomes = futures_util::future::join_all(runs).await;
        for (tenant, outcome) in tenants.iter().zip(&outcomes) {
            if *tenant == "k2" {
                assert!(
                    matches!(outcome, Err(LedgerError::Database(e)) if is_unique_violation(e)),
                    "{engine}: {outcome:?}"
                );
            } else {
                assert!(outcome.is_ok(), "{engine}: {tenant} {outcome:?}");
            }
        }
        if !db.routed() {
            assert_eq!(stats.rounds.load(Ordering::Relaxed), 1, "{engine}");
            assert_eq!(stats.pieces_failed.load(Ordering::Relaxed), 1, "{engine}");
        }
        for tenant in tenants {
            let report = crate::verify::verify_tenant(&db.storage, tenant, |_| {})
                .await
                .unwrap()
                .unwrap();
            assert_eq!(report.entries, 1, "{engine}: {tenant}");
        }
        db.remove().await;
    }
}
