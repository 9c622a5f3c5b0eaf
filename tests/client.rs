//! The retrying client against a real server: the behavioural suite every
//! client of tally passes (post, replay, conflict, 429 with `Retry-After`, a
//! response lost after commit, a terminal error once the budget is spent).
//! Every operation once: tests/client_operations.rs; https: tests/client_tls.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::str::FromStr;
use std::time::{Duration, Instant};

use common::proxy::{Fault, Proxy};
use common::{Engine, Ledger};
use rust_decimal::Decimal;
use tally_client::{
    Client, ClientError, EntryKind, EntryQuery, Operation, Payment, RetryPolicy, UsageDebit,
};

engine_tests!(
    the_client_posts_replays_and_reads,
    the_client_never_retries_a_final_answer_and_gives_up_clearly,
    a_429_is_retried_no_sooner_than_its_retry_after,
    a_response_lost_after_commit_is_retried_into_the_original_entry,
);

fn dec(s: &str) -> Decimal {
    Decimal::from_str(s).unwrap()
}

/// Short waits, so that a test of retries stays quick.
fn quick(max_attempts: u32, total_budget: Duration) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(40),
        total_budget,
        request_timeout: Duration::from_secs(5),
    }
}

async fn the_client_posts_replays_and_reads(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let client = Client::new(&server.base, &key, RetryPolicy::default()).unwrap();

    let mut debit = UsageDebit::new("ur_1", "cust", dec("1.50"), "USD");
    debit.meter = Some("llm-tokens".into());
    debit.quantity = Some(Decimal::from(1250));
    let first = client.post_usage_debit(&debit).await.unwrap();
    assert!(first.created && !first.replayed);
    assert_eq!(first.attempts, 1);
    assert_eq!(first.entry.amount.to_string(), "1.5");
    assert_eq!(first.entry.kind, EntryKind::UsageDebit);
    // A replay: the same body, 200, `Idempotent-Replayed: true`.
    let again = client.post_usage_debit(&debit).await.unwrap();
    assert!(!again.created && again.replayed);
    assert_eq!(again.body, first.body);
    assert_eq!(again.entry, first.entry);

    let pay = client
        .post_payment(&Payment::new("pay_1", "cust", Decimal::from(10), "USD"))
        .await
        .unwrap();
    assert_eq!(pay.entry.balance_after, dec("8.5"));
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
            kind: Some(EntryKind::Payment),
            ..EntryQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(payments.entries, vec![pay.entry.clone()]);
    let balance = client.balance("cust").await.unwrap();
    assert_eq!((balance.posted, balance.as_of_seq), (dec("8.5"), 2));
    let before = client.balance_as_of("cust", 1).await.unwrap();
    assert_eq!(before.posted, dec("-1.5"));
    let revenue = client.balance("@revenue").await.unwrap();
    assert_eq!(revenue.posted, dec("1.5"));

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
    assert_eq!(results[2].problem.as_ref().unwrap().code, "invalid_request");
    match results[2].clone().into_result() {
        Err(ClientError::InvalidRequest { errors, .. }) => {
            assert!(errors.iter().any(|e| e.field == "account"), "{errors:?}")
        }
        other => panic!("expected InvalidRequest, got {other:?}"),
    }
    let health = client.healthz().await.unwrap();
    assert_eq!(health.status, "ok");
}

async fn the_client_never_retries_a_final_answer_and_gives_up_clearly(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let client = Client::new(&server.base, &key, RetryPolicy::default()).unwrap();
    let debit = UsageDebit::new("ur_1", "cust", Decimal::ONE, "USD");
    let original = client.post_usage_debit(&debit).await.unwrap();

    // A conflict: the same ID with another amount. Final, and it names the
    // original entry and the fields that differ.
    let mut other = debit.clone();
    other.amount = Decimal::from(2);
    let started = Instant::now();
    let err = client.post_usage_debit(&other).await.unwrap_err();
    match &err {
        ClientError::IdempotencyConflict {
            entry_id,
            differing_fields,
            problem,
        } => {
            assert_eq!(entry_id, &original.entry.id);
            assert_eq!(differing_fields, &["amount"]);
            assert_eq!(problem.status, 409);
        }
        other => panic!("expected IdempotencyConflict, got {other:?}"),
    }
    assert_eq!(
        (err.status(), err.code()),
        (Some(409), Some("idempotency_conflict"))
    );
    assert!(!err.is_retryable());
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "a 409 is not retried"
    );
    let bad = UsageDebit::new("ur_2", "@revenue", Decimal::ONE, "USD");
    let err = client.post_usage_debit(&bad).await.unwrap_err();
    assert!(
        matches!(&err, ClientError::InvalidRequest { errors, .. } if !errors.is_empty()),
        "{err:?}"
    );
    assert_eq!(
        (err.status(), err.code()),
        (Some(422), Some("invalid_request"))
    );
    assert_eq!(server.all_entries(&key).await.len(), 1, "nothing written");

    // Nobody listens: connection errors are retried until the attempts are
    // spent, then a terminal error says so.
    let addr = server.addr();
    server.kill9().await;
    let policy = RetryPolicy {
        request_timeout: Duration::from_millis(500),
        ..quick(4, Duration::from_secs(5))
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
    assert!(!err.is_retryable());
    assert!(
        err.to_string().contains("gave up after 4 attempt(s)"),
        "{err}"
    );
    // The time budget bounds retrying as well as the attempt limit does.
    let policy = RetryPolicy {
        request_timeout: Duration::from_millis(500),
        ..quick(1_000, Duration::from_millis(300))
    };
    let gone = Client::new(format!("http://{addr}"), &key, policy).unwrap();
    let started = Instant::now();
    let err = gone.post_usage_debit(&debit).await.unwrap_err();
    assert!(
        matches!(&err, ClientError::Exhausted { attempts, .. } if *attempts > 1 && *attempts < 1_000),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(2), "{err}");
}

/// The server's per-key rate limit answers 429 with `Retry-After: 1`; the
/// client waits at least that long, then succeeds. A budget shorter than
/// the wait gives up at once instead.
async fn a_429_is_retried_no_sooner_than_its_retry_after(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger
        .server_with(&["--rate-limit-per-second", "1", "--rate-limit-burst", "1"])
        .await;
    let client = Client::new(&server.base, &key, quick(5, Duration::from_secs(10))).unwrap();
    let first = client
        .post_usage_debit(&UsageDebit::new("ur_1", "cust", Decimal::ONE, "USD"))
        .await
        .unwrap();
    assert_eq!(first.attempts, 1);

    // The bucket is empty: one attempt only shows the 429 and its header.
    let once = Client::new(&server.base, &key, quick(1, Duration::from_secs(10))).unwrap();
    let second = UsageDebit::new("ur_2", "cust", Decimal::ONE, "USD");
    match once.post_usage_debit(&second).await.unwrap_err() {
        ClientError::Exhausted {
            attempts: 1, last, ..
        } => match *last {
            ClientError::RateLimited {
                retry_after,
                ref problem,
            } => {
                assert_eq!(retry_after, Some(Duration::from_secs(1)));
                assert_eq!(problem.code, "rate_limited");
            }
            other => panic!("expected RateLimited, got {other:?}"),
        },
        other => panic!("expected Exhausted, got {other:?}"),
    }
    // A budget shorter than Retry-After: no retry starts, a terminal error now.
    let short = Client::new(&server.base, &key, quick(5, Duration::from_millis(300))).unwrap();
    let started = Instant::now();
    let err = short.post_usage_debit(&second).await.unwrap_err();
    assert!(
        matches!(&err, ClientError::Exhausted { attempts: 1, last, .. } if matches!(**last, ClientError::RateLimited { .. })),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_millis(900), "{err}");

    // With the budget: the backoff (≤ 40 ms) is raised to Retry-After (1 s),
    // so the second attempt finds a token.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    client
        .post_usage_debit(&UsageDebit::new("ur_3", "cust", Decimal::ONE, "USD"))
        .await
        .unwrap();
    let started = Instant::now();
    let posted = client.post_usage_debit(&second).await.unwrap();
    assert!(posted.created);
    assert_eq!(posted.attempts, 2, "one 429, then success");
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "Retry-After honoured: {:?}",
        started.elapsed()
    );
}

/// A proxy swallows the server's answer after it committed: the client's
/// retry with the same ID gets the original entry back, and the ledger
/// holds it once.
async fn a_response_lost_after_commit_is_retried_into_the_original_entry(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let proxy = Proxy::start(server.addr()).await;
    let client = Client::new(proxy.url(), &key, quick(5, Duration::from_secs(20))).unwrap();
    client.healthz().await.unwrap();
    // The next answer, the debit's, is lost; the ones after it pass.
    proxy.set_fault(Fault::DropOnce);
    let debit = UsageDebit::new("ur_lost", "cust", dec("2.50"), "USD");
    let posted = client.post_usage_debit(&debit).await.unwrap();
    assert_eq!(proxy.injected(), 1, "one answer was dropped");
    assert_eq!(posted.attempts, 2, "the lost answer was retried");
    assert!(
        posted.replayed && !posted.created,
        "the retry found the committed entry"
    );

    let entries = server.all_entries(&key).await;
    assert_eq!(entries.len(), 1, "posted once: {entries:?}");
    assert_eq!(entries[0]["upstream_id"], "ur_lost");
    let direct = Client::new(&server.base, &key, RetryPolicy::default()).unwrap();
    assert_eq!(
        direct.get_entry(&posted.entry.id).await.unwrap(),
        posted.entry
    );
    assert_eq!(direct.balance("cust").await.unwrap().posted, dec("-2.5"));
}
