//! The retrying client against a real server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::str::FromStr;
use std::time::Duration;

use common::{Engine, Ledger};
use rust_decimal::Decimal;
use tally_client::{Client, ClientError, EntryQuery, Operation, Payment, RetryPolicy, UsageDebit};

engine_tests!(
    the_client_posts_replays_and_reads,
    the_client_never_retries_a_final_answer_and_gives_up_clearly,
);

async fn the_client_posts_replays_and_reads(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let client = Client::new(&server.base, &key, RetryPolicy::default()).unwrap();

    let mut debit = UsageDebit::new("ur_1", "cust", Decimal::from_str("1.50").unwrap(), "USD");
    debit.meter = Some("llm-tokens".into());
    debit.quantity = Some(Decimal::from(1250));
    let first = client.post_usage_debit(&debit).await.unwrap();
    assert!(first.created && !first.replayed);
    assert_eq!(first.attempts, 1);
    assert_eq!(first.entry.amount, "1.5");
    let again = client.post_usage_debit(&debit).await.unwrap();
    assert!(!again.created && again.replayed);
    assert_eq!(again.body, first.body);

    let pay = client
        .post_payment(&Payment::new("pay_1", "cust", Decimal::from(10), "USD"))
        .await
        .unwrap();
    assert_eq!(pay.entry.balance_after, "8.5");
    assert_eq!(
        client.get_entry(&first.entry.id).await.unwrap(),
        first.entry
    );
    let page = client
        .list_entries(&EntryQuery {
            limit: Some(10),
            ..EntryQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page.entries.len(), 2);
    assert_eq!(page.next_after_seq, None);
    let payments = client
        .list_entries(&EntryQuery {
            account: Some("@payments".into()),
            kind: Some("payment".into()),
            ..EntryQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(payments.entries, vec![pay.entry.clone()]);
    let balance = client.balance("cust").await.unwrap();
    assert_eq!((balance.posted.as_str(), balance.as_of_seq), ("8.5", 2));
    let before = client.balance_as_of("cust", 1).await.unwrap();
    assert_eq!(before.posted, "-1.5");
    let revenue = client.balance("@revenue").await.unwrap();
    assert_eq!(revenue.posted, "1.5");

    let results = client
        .post_batch(&[
            Operation::UsageDebit(debit.clone()),
            Operation::UsageDebit(UsageDebit::new("ur_2", "cust", Decimal::ONE, "USD")),
            Operation::Payment(Payment::new("pay_2", "@nope", Decimal::ONE, "USD")),
        ])
        .await
        .unwrap();
    let statuses: Vec<u16> = results.iter().map(|r| r.status).collect();
    assert_eq!(statuses, vec![200, 201, 422]);
    assert!(results[0].replayed);
    assert_eq!(results[0].entry.as_ref(), Some(&first.entry));
    assert_eq!(
        results[2].problem.as_ref().unwrap()["code"],
        "invalid_request"
    );
    client.healthz().await.unwrap();
}

async fn the_client_never_retries_a_final_answer_and_gives_up_clearly(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let client = Client::new(&server.base, &key, RetryPolicy::default()).unwrap();
    let debit = UsageDebit::new("ur_1", "cust", Decimal::ONE, "USD");
    client.post_usage_debit(&debit).await.unwrap();

    let mut other = debit.clone();
    other.amount = Decimal::from(2);
    let started = std::time::Instant::now();
    let err = client.post_usage_debit(&other).await.unwrap_err();
    assert!(matches!(err, ClientError::Api { status: 409, .. }), "{err}");
    assert_eq!(err.code(), Some("idempotency_conflict"));
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "a 409 is not retried"
    );
    let bad = UsageDebit::new("ur_2", "@revenue", Decimal::ONE, "USD");
    let err = client.post_usage_debit(&bad).await.unwrap_err();
    assert_eq!(
        (err.status(), err.code()),
        (Some(422), Some("invalid_request"))
    );

    // Nobody listens: connection errors are retried until the budget is spent.
    let addr = server.addr();
    server.kill9().await;
    let policy = RetryPolicy {
        max_attempts: 4,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(40),
        total_budget: Duration::from_secs(5),
        request_timeout: Duration::from_millis(500),
    };
    let gone = Client::new(format!("http://{addr}"), &key, policy).unwrap();
    let err = gone.post_usage_debit(&debit).await.unwrap_err();
    match &err {
        ClientError::Exhausted { attempts, last, .. } => {
            assert_eq!(*attempts, 4);
            assert!(matches!(**last, ClientError::Transport { .. }), "{last}");
        }
        other => panic!("expected Exhausted, got {other}"),
    }
    assert!(
        err.to_string().contains("gave up after 4 attempt(s)"),
        "{err}"
    );
}
