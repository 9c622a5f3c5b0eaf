//! The groups of many tenants committed together in shared rounds.

use super::*;

/// Many tenants posting at once: their groups share rounds (fewer
/// commits than groups), and every tenant's ledger is exactly its own
/// posts, in its own chain, which verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tenants_posting_at_once_share_commits_and_keep_their_own_chains() {
    for db in TestDb::every_engine(8).await {
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
                        let intent = debit_of(&format!("{tenant}-{n}"), &account);
                        let d = writers.decide(&tenant, intent).await.unwrap();
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
                        crate::wide::WideDecimal::from(per_tenant / 4),
                        "{account}"
                    );
                }
            }
            let rounds = writers.round_stats();
            let (rounds, pieces) = (
                rounds.rounds.load(Ordering::Relaxed),
                rounds.pieces.load(Ordering::Relaxed),
            );
            assert!(
                pieces >= tenants as u64 * per_tenant as u64 / 10 && rounds < pieces,
                "{} with {committers} committers: {pieces} groups in {rounds} rounds",
                db.engine()
            );
        }
        db.remove().await;
    }
}
