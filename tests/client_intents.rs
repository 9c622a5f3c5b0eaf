//! `tally-client`'s intents against a real server on every engine: the six
//! operations and `Client::once` (a step that succeeds, raises, outlives
//! its lease, and whose completion answer is lost).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::proxy::{Fault, Proxy};
use common::{Engine, Ledger};
use rust_decimal::Decimal;
use serde_json::json;
use tally_client::{
    Claim, ClaimIntent, Client, ClientError, IntentQuery, OnceError, OnceOptions, Operation,
    Payment, RetryPolicy, StepError, StepOutput,
};

engine_tests!(
    once_runs_a_step_once_and_replays_its_outcome,
    once_heartbeats_a_step_that_outlives_its_lease,
    a_lost_completion_is_retried_by_the_client
);

fn options(lease_seconds: u32) -> OnceOptions {
    OnceOptions {
        lease_seconds,
        max_attempts: 3,
        wait_budget: Duration::from_secs(20),
    }
}

async fn once_runs_a_step_once_and_replays_its_outcome(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let client = Client::new(&server.base, &key, RetryPolicy::default()).unwrap();
    let runs = Arc::new(AtomicU32::new(0));
    let charge = ClaimIntent::new("inv_7", "invoice.charge", json!({"amount": "5"}));

    let step_runs = runs.clone();
    let done = client
        .once(&charge, &options(30), |lease| async move {
            step_runs.fetch_add(1, Ordering::SeqCst);
            assert_eq!((lease.attempt, lease.fence), (1, 1));
            Ok(StepOutput {
                result: json!({"charge": "ch_7", "key": lease.intent_id}),
                entries: vec![Operation::Payment(Payment::new(
                    "ch_7",
                    "cust",
                    Decimal::from_str("5").unwrap(),
                    "USD",
                ))],
            })
        })
        .await
        .unwrap();
    assert_eq!(done.intent.status, "succeeded");
    assert!(!done.replayed);
    assert_eq!(done.entries[0].status, 201);
    let again = client
        .once(&charge, &options(30), |_| async {
            panic!("a stored outcome runs nothing")
        })
        .await
        .unwrap();
    assert!(again.replayed);
    assert_eq!(
        again.intent.result,
        Some(json!({"charge": "ch_7", "key": "inv_7"}))
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // A retryable failure, then success on the next call.
    let flaky = ClaimIntent::new("inv_8", "invoice.charge", json!({}));
    let failed = client
        .once(&flaky, &options(30), |_| async {
            Err::<StepOutput, _>(StepError::retryable("timeout", "provider timed out"))
        })
        .await;
    match failed {
        Err(OnceError::Step { intent, .. }) => assert_eq!(intent.status, "released"),
        other => panic!("{other:?}"),
    }
    let second = client
        .once(&flaky, &options(30), |lease| async move {
            assert_eq!(lease.attempt, 2);
            Ok(json!("ok").into())
        })
        .await
        .unwrap();
    assert_eq!(second.intent.status, "succeeded");

    // A fatal failure is the outcome for ever.
    let fatal = ClaimIntent::new("inv_9", "invoice.charge", json!({}));
    let _ = client
        .once(&fatal, &options(30), |_| async {
            Err::<StepOutput, _>(StepError::fatal("card_declined", "declined"))
        })
        .await;
    let replay = client
        .once(&fatal, &options(30), |_| async { Ok(json!(1).into()) })
        .await;
    let replay = replay.unwrap();
    assert!(replay.replayed);
    assert_eq!(replay.intent.error.unwrap().code, "card_declined");

    let page = client
        .list_intents(&IntentQuery {
            status: Some("succeeded".into()),
            ..IntentQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page.intents.len(), 2);
    let read = client.get_intent("inv_8").await.unwrap();
    assert_eq!(
        read.history.unwrap().len(),
        4,
        "claim, release, claim, success"
    );
    let (ok, out, err) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out} {err}");
}

async fn once_heartbeats_a_step_that_outlives_its_lease(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let client = Client::new(&server.base, &key, RetryPolicy::default()).unwrap();
    let slow = ClaimIntent::new("job_slow", "report.build", json!({}));
    let other = client.clone();
    let probe = slow.clone();
    let done = client
        .once(&slow, &options(2), |_| async move {
            tokio::time::sleep(Duration::from_millis(3500)).await;
            // The lease is still held: another worker is told to wait.
            match other.claim_intent(&probe).await {
                Err(ClientError::IntentInProgress { .. }) => {}
                answer => panic!("{answer:?}"),
            }
            Ok(json!("built").into())
        })
        .await
        .unwrap();
    assert_eq!(
        (done.intent.status.as_str(), done.intent.attempt),
        ("succeeded", 1)
    );
}

async fn a_lost_completion_is_retried_by_the_client(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let proxy = Proxy::start(server.addr()).await;
    let client = Client::new(proxy.url(), &key, RetryPolicy::default()).unwrap();
    let claim = ClaimIntent::new("inv_lost", "invoice.charge", json!({}));
    let Claim::Claimed { lease, .. } = client.claim_intent(&claim).await.unwrap() else {
        panic!("a new intent is claimed");
    };
    proxy.set_fault(Fault::DropOnce);
    let entries = [Operation::Payment(Payment::new(
        "pay_lost",
        "cust",
        Decimal::from_str("3").unwrap(),
        "USD",
    ))];
    let done = client
        .complete_intent("inv_lost", &lease.token, &json!({"ok": true}), &entries)
        .await
        .unwrap();
    assert_eq!(proxy.injected(), 1, "one answer was dropped");
    assert_eq!(done.intent.status, "succeeded");
    assert_eq!(done.entries[0].status, 201, "answered as the first time");
    let direct = Client::new(&server.base, &key, RetryPolicy::default()).unwrap();
    assert_eq!(
        direct.balance("cust").await.unwrap().posted,
        Decimal::from_str("3").unwrap(),
        "the payment once"
    );
}
