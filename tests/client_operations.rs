//! Every operation of `tally-client` once against a real server, on both
//! engines, with the typed error of each problem code the ledger answers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::str::FromStr;
use std::time::{Duration, Instant};

use chrono::Utc;
use common::{Engine, Ledger};
use rust_decimal::Decimal;
use tally_client::{
    AccountQuery, AccountSettings, Adjustment, BalanceQuery, Capture, Client, ClientError,
    Direction, Entry, EntryKind, EntryQuery, EntryStatus, ExportFormat, ExportQuery, Granularity,
    Hold, HoldStatus, Operation, Overdraft, Payment, Refund, Release, RetryPolicy, Reversal,
    StatementQuery, UsageDebit, UsageQuery, VerificationStatus, WebhookDeliveryQuery,
    WebhookDeliveryStatus, WebhookEndpointChange, WebhookEndpointRequest, WebhookEventType,
};

engine_tests!(
    every_operation_once,
    stored_rejections_and_refusals_are_typed
);

fn dec(s: &str) -> Decimal {
    Decimal::from_str(s).unwrap()
}

async fn all_entries(client: &Client) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut query = EntryQuery {
        limit: Some(1000),
        ..EntryQuery::default()
    };
    loop {
        let page = client.list_entries(&query).await.unwrap();
        out.extend(page.entries);
        match page.next_after_seq {
            Some(n) => query.after_seq = n,
            None => return out,
        }
    }
}

async fn every_operation_once(engine: Engine) {
    let postgres = engine.is_postgres();
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,audit,admin").await;
    let server = ledger.server().await;
    let client = Client::new(&server.base, &key, RetryPolicy::default()).unwrap();
    let started = Utc::now() - chrono::Duration::seconds(5);

    // Accounts: PUT is idempotent by content; GET reads it back.
    let mut settings = AccountSettings::new("USD");
    settings.overdraft = Some(Overdraft::Limit(dec("100.00")));
    settings.metadata = Some([("plan".to_owned(), "pro".to_owned())].into());
    let account = client.put_account("cust", &settings).await.unwrap();
    assert_eq!(
        (
            account.unit.as_str(),
            account.overdraft,
            account.settings_version
        ),
        ("USD", Overdraft::Limit(dec("100")), 1)
    );
    assert!(account.settings_entry_id.is_some());
    let same = client.put_account("cust", &settings).await.unwrap();
    assert_eq!(same.settings_version, 1, "the same settings write nothing");
    let read = client.get_account("cust").await.unwrap();
    assert_eq!(read.metadata, settings.metadata);
    assert_eq!(read.settings_entry_id, account.settings_entry_id);

    // Money in and out.
    let pay = client
        .post_payment(&Payment::new("pay_1", "cust", dec("10"), "USD"))
        .await
        .unwrap();
    assert_eq!(pay.entry.kind, EntryKind::Payment);
    let mut debit = UsageDebit::new("ur_1", "cust", dec("1.50"), "USD");
    debit.meter = Some("llm-tokens".into());
    debit.quantity = Some(dec("1250"));
    debit.occurred_at = Some(Utc::now());
    let debit = client.post_usage_debit(&debit).await.unwrap().entry;

    // Holds: post, read, capture; post, release.
    let hold = client
        .post_hold(&Hold::with_ttl("hold_1", "cust", dec("3"), "USD", 3600))
        .await
        .unwrap();
    assert!(hold.created);
    assert_eq!(
        (hold.entry.kind, hold.entry.upstream_id.as_str()),
        (EntryKind::Hold, "hold_1")
    );
    assert_eq!(hold.entry.ttl_seconds, Some(3600));
    assert!(hold.entry.expires_at.is_some());
    let info = client.get_hold("hold_1").await.unwrap();
    assert_eq!(
        (info.status, info.amount, info.entry_id.as_str()),
        (HoldStatus::Open, dec("3"), hold.entry.id.as_str())
    );
    assert_eq!(info.closed_by, None);
    assert_eq!(client.balance("cust").await.unwrap().held, dec("3"));
    let capture = client
        .post_capture("hold_1", &Capture::new("cap_1", dec("2")))
        .await
        .unwrap();
    assert_eq!(
        (capture.entry.kind, capture.entry.hold_id.as_deref()),
        (EntryKind::HoldCapture, Some("hold_1"))
    );
    let again = client
        .post_capture("hold_1", &Capture::new("cap_1", dec("2.0")))
        .await
        .unwrap();
    assert!(again.replayed && again.body == capture.body);
    let info = client.get_hold("hold_1").await.unwrap();
    assert_eq!(info.status, HoldStatus::Captured);
    assert_eq!(info.closed_by.as_ref(), Some(&capture.entry.id));
    client
        .post_hold(&Hold::until(
            "hold_2",
            "cust",
            dec("1"),
            "USD",
            Utc::now() + chrono::Duration::hours(1),
        ))
        .await
        .unwrap();
    let release = client
        .post_release("hold_2", &Release::new("rel_1"))
        .await
        .unwrap();
    assert_eq!(release.entry.kind, EntryKind::HoldRelease);
    assert_eq!(
        client.get_hold("hold_2").await.unwrap().status,
        HoldStatus::Released
    );

    // Refund, reversal, adjustment.
    let mut refund = Refund::new("ref_1", "pay_1", dec("1"));
    refund.reason = Some("duplicate charge".into());
    let refund = client.post_refund(&refund).await.unwrap();
    assert_eq!(
        (refund.entry.kind, refund.entry.payment_id.as_deref()),
        (EntryKind::Refund, Some("pay_1"))
    );
    let reversal = client
        .post_reversal(&Reversal::new("rev_1", &debit.id, "recorded twice"))
        .await
        .unwrap();
    assert_eq!(reversal.entry.kind, EntryKind::Reversal);
    assert_eq!(reversal.entry.entry_id.as_ref(), Some(&debit.id));
    let reversed = client.get_entry(&debit.id).await.unwrap();
    assert_eq!(reversed.reversed_by.as_ref(), Some(&reversal.entry.id));
    let mut adjustment = Adjustment::new(
        "adj_1",
        "cust",
        dec("0.5"),
        Direction::Credit,
        "support credit",
    );
    adjustment.unit = Some("USD".into());
    let adjustment = client.post_adjustment(&adjustment).await.unwrap();
    assert_eq!(
        (adjustment.entry.kind, adjustment.entry.direction),
        (EntryKind::Adjustment, Some(Direction::Credit))
    );

    // Batch of the other kinds.
    client
        .post_payment(&Payment::new("pay_2", "cust2", dec("4"), "USD"))
        .await
        .unwrap();
    let results = client
        .post_batch(&[
            Operation::Hold(Hold::with_ttl("hold_b", "cust2", dec("1"), "USD", 60)),
            Operation::Refund(Refund::new("ref_b", "pay_2", dec("0.5"))),
            Operation::Reversal(Reversal::new("rev_b", &adjustment.entry.id, "undo")),
        ])
        .await
        .unwrap();
    let kinds: Vec<EntryKind> = results
        .into_iter()
        .map(|r| {
            assert_eq!(r.status, 201, "{r:?}");
            r.into_result().unwrap().kind
        })
        .collect();
    assert_eq!(
        kinds,
        [EntryKind::Hold, EntryKind::Refund, EntryKind::Reversal]
    );

    // Reads.
    // cust: +10 −1.5 −2 −1 +1.5 +0.5 −0.5 = 7.
    let balance = client.balance("cust").await.unwrap();
    assert_eq!((balance.posted, balance.held), (dec("7"), dec("0")));
    let at_pay = client
        .get_balance(
            "cust",
            &BalanceQuery {
                as_of_seq: Some(pay.entry.seq),
                ..BalanceQuery::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(at_pay.posted, dec("10"));
    let holds = client
        .list_entries(&EntryQuery {
            kind: Some(EntryKind::Hold),
            ..EntryQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(holds.entries.len(), 3);
    let entries = all_entries(&client).await;
    let head = entries.last().unwrap().clone();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let now = Utc::now();
    let as_of_now = client
        .get_balance(
            "cust",
            &BalanceQuery {
                as_of: Some(now),
                ..BalanceQuery::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(as_of_now.posted, balance.posted);
    let statement = client
        .get_statement("cust", &StatementQuery::new(started, now))
        .await
        .unwrap();
    let of_cust = entries
        .iter()
        .filter(|e| e.debit_account == "cust" || e.credit_account == "cust")
        .count();
    assert_eq!(statement.entries.len(), of_cust);
    assert_eq!(statement.closing_balance.posted, dec("7"));
    assert_eq!(statement.opening_balance.posted, dec("0"));

    // Accounts: listed in order with their balances now; search and pages.
    let listed = client
        .list_accounts(&AccountQuery::default())
        .await
        .unwrap();
    let names: Vec<&str> = listed.accounts.iter().map(|a| a.account.as_str()).collect();
    assert_eq!(names, ["cust", "cust2"]);
    assert_eq!(listed.next_after, None);
    for a in &listed.accounts {
        let b = client.balance(&a.account).await.unwrap();
        assert_eq!(
            (&a.unit, a.debits, a.credits, a.posted, a.held, a.available),
            (&b.unit, b.debits, b.credits, b.posted, b.held, b.available)
        );
    }
    let found = client
        .list_accounts(&AccountQuery {
            q: Some("ST2".into()),
            ..AccountQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(found.accounts, listed.accounts[1..]);
    let mut paged = Vec::new();
    let mut query = AccountQuery {
        limit: Some(1),
        ..AccountQuery::default()
    };
    loop {
        let page = client.list_accounts(&query).await.unwrap();
        assert!(page.accounts.len() <= 1);
        paged.extend(page.accounts);
        match page.next_after {
            Some(after) => query.after = Some(after),
            None => break,
        }
    }
    assert_eq!(paged, listed.accounts);

    // Entries by upstream ID and by status.
    let by_id = client
        .list_entries(&EntryQuery {
            upstream_id: Some("ur_1".into()),
            ..EntryQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(by_id.entries.len(), 1);
    assert_eq!(by_id.entries[0].id, debit.id);
    let posted = client
        .list_entries(&EntryQuery {
            status: Some(EntryStatus::Posted),
            limit: Some(1000),
            ..EntryQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(posted.entries, entries);
    let rejected = client
        .list_entries(&EntryQuery {
            status: Some(EntryStatus::Rejected),
            ..EntryQuery::default()
        })
        .await
        .unwrap();
    assert!(rejected.entries.is_empty());

    // Usage summaries are a projection that catches up.
    let waited = Instant::now();
    let usage = loop {
        let usage = client
            .get_usage(
                "cust",
                &UsageQuery {
                    granularity: Some(Granularity::Month),
                    ..UsageQuery::default()
                },
            )
            .await
            .unwrap();
        if usage.current_as_of_seq == usage.head_seq || waited.elapsed() > Duration::from_secs(20) {
            break usage;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(usage.current_as_of_seq, usage.head_seq, "{usage:?}");
    assert_eq!(
        (usage.account.as_str(), usage.granularity),
        ("cust", Granularity::Month)
    );

    // Audit.
    let export = client
        .get_audit_export(&ExportQuery::default())
        .await
        .unwrap();
    let lines: Vec<serde_json::Value> = export
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), entries.len() + 2, "header, entries, trailer");
    assert_eq!(lines.last().unwrap()["record"], "trailer");
    assert_eq!(lines.last().unwrap()["last_hash"], head.hash.as_str());
    let csv = client
        .get_audit_export(&ExportQuery {
            format: Some(ExportFormat::Csv),
            from_seq: Some(2),
            to_seq: Some(3),
        })
        .await
        .unwrap();
    assert_eq!(csv.lines().count(), 3, "a header and two rows: {csv}");
    let audit_head = client.get_audit_head().await.unwrap();
    assert_eq!(
        (
            audit_head.tenant.as_str(),
            audit_head.seq,
            audit_head.hash.as_str()
        ),
        ("acme", head.seq, head.hash.as_str())
    );
    let verified = client.post_audit_verify().await.unwrap();
    assert_eq!(
        verified.status,
        VerificationStatus::Verified,
        "{verified:?}"
    );
    assert_eq!(
        (verified.tenant.as_str(), verified.checked_entries),
        ("acme", head.seq)
    );
    let verified_head = verified.head.unwrap();
    assert_eq!(
        (verified_head.seq, verified_head.hash.as_str()),
        (head.seq, head.hash.as_str())
    );
    assert!(verified.problems.is_empty());

    // Webhooks (admin): an https:// URL of a public name is accepted without
    // --webhook-allow-insecure; it is only contacted later.
    let request = WebhookEndpointRequest::new(
        "https://hooks.example.com/tally",
        [WebhookEventType::EntryPosted],
    );
    let made = client.post_webhook_endpoint(&request).await.unwrap();
    assert!(made.secret.starts_with("whsec_"));
    assert!(!format!("{made:?}").contains(&made.secret));
    let id = made.endpoint.id.clone();
    assert_eq!(
        client.list_webhook_endpoints().await.unwrap(),
        vec![made.endpoint.clone()]
    );
    assert_eq!(
        client.get_webhook_endpoint(&id).await.unwrap(),
        made.endpoint
    );
    let change = WebhookEndpointChange {
        enabled: Some(false),
        ..WebhookEndpointChange::default()
    };
    let disabled = client.patch_webhook_endpoint(&id, &change).await.unwrap();
    assert_eq!(disabled.disabled_reason.as_deref(), Some("disabled"));
    let rotated = client.rotate_webhook_secret(&id).await.unwrap();
    assert!(rotated.secret != made.secret && rotated.previous_secret_expires_at.is_some());
    let replay = client.replay_webhook_events(&id, 1).await.unwrap();
    assert_eq!((replay.from_seq, replay.next_from_seq), (1, None));
    assert!(replay.scheduled >= 1);
    let query = WebhookDeliveryQuery {
        status: Some(WebhookDeliveryStatus::Pending),
        limit: Some(100),
        ..WebhookDeliveryQuery::default()
    };
    let page = client.list_webhook_deliveries(&id, &query).await.unwrap();
    assert_eq!(page.deliveries.len() as u64, replay.scheduled);
    let retried = client
        .retry_webhook_delivery(&page.deliveries[0].id)
        .await
        .unwrap();
    assert_eq!(retried.event_id, page.deliveries[0].event_id);
    client.delete_webhook_endpoint(&id).await.unwrap();
    let err = client.get_webhook_endpoint(&id).await.unwrap_err();
    assert_eq!(err.code(), Some("not_found"));

    // Health.
    let engine = if postgres { "postgres" } else { "sqlite" };
    let health = client.healthz().await.unwrap();
    assert_eq!(
        (health.status.as_str(), health.engine.as_str()),
        ("ok", engine)
    );
    let ready = client.readyz().await.unwrap();
    assert_eq!(ready.status, "ready");
    assert!(ready.schema_version.is_some());
}

async fn stored_rejections_and_refusals_are_typed(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,admin").await;
    let reader = ledger.key("acme", "read").await;
    let server = ledger.server().await;
    let client = Client::new(&server.base, &key, RetryPolicy::default()).unwrap();
    let mut settings = AccountSettings::new("USD");
    settings.overdraft = Some(Overdraft::Forbid);
    client.put_account("cust", &settings).await.unwrap();
    let pay = client
        .post_payment(&Payment::new("pay_1", "cust", dec("5"), "USD"))
        .await
        .unwrap();
    let debit = client
        .post_usage_debit(&UsageDebit::new("ur_1", "cust", dec("1"), "USD"))
        .await
        .unwrap();

    // Stored rejections carry the rejected entry, identical on replay.
    let big = UsageDebit::new("ur_big", "cust", dec("100"), "USD");
    let entry = match client.post_usage_debit(&big).await.unwrap_err() {
        ClientError::InsufficientFunds { entry, problem } => {
            assert_eq!(entry.status, EntryStatus::Rejected);
            assert_eq!(
                entry.rejection.as_ref().map(|r| r.code.as_str()),
                Some("insufficient_funds")
            );
            assert_eq!(problem.status, 422);
            entry
        }
        other => panic!("expected InsufficientFunds, got {other:?}"),
    };
    let replay = client.post_usage_debit(&big).await.unwrap_err();
    assert_eq!(replay.rejected_entry(), Some(&*entry));
    assert_eq!(replay.code(), Some("insufficient_funds"));

    client
        .post_hold(&Hold::with_ttl("hold_1", "cust", dec("1"), "USD", 3600))
        .await
        .unwrap();
    client
        .post_release("hold_1", &Release::new("rel_1"))
        .await
        .unwrap();
    let err = client
        .post_capture("hold_1", &Capture::new("cap_1", dec("1")))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::HoldNotOpen { .. }), "{err:?}");

    let reversal = Reversal::new("rev_1", &debit.entry.id, "twice");
    client.post_reversal(&reversal).await.unwrap();
    let err = client
        .post_reversal(&Reversal::new("rev_2", &debit.entry.id, "again"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::AlreadyReversed { .. }),
        "{err:?}"
    );

    client
        .post_payment(&Payment::new("pay_2", "cust2", dec("1"), "USD"))
        .await
        .unwrap();
    let err = client
        .post_refund(&Refund::new("ref_1", "pay_2", dec("5")))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::RefundExceedsPayment { .. }),
        "{err:?}"
    );

    // Refusals: nothing is written.
    let before = server.all_entries(&key).await.len();
    let err = client
        .post_payment(&Payment::new("pay_eur", "cust", dec("1"), "EUR"))
        .await
        .unwrap_err();
    match &err {
        ClientError::UnitMismatch { account, unit, .. } => {
            assert_eq!((account.as_str(), unit.as_str()), ("cust", "USD"))
        }
        other => panic!("expected UnitMismatch, got {other:?}"),
    }
    let err = client
        .post_refund(&Refund::new("ref_2", "pay_nope", dec("1")))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ClientError::NotFound { field: Some(f), .. } if f == "payment_id"),
        "{err:?}"
    );
    let err = client.get_hold("nope").await.unwrap_err();
    assert!(matches!(err, ClientError::NotFound { .. }), "{err:?}");
    let err = client
        .get_entry("ent_00000000000000000000000000000000")
        .await
        .unwrap_err();
    assert_eq!((err.status(), err.code()), (Some(404), Some("not_found")));
    let read_only = Client::new(&server.base, &reader, RetryPolicy::default()).unwrap();
    let err = read_only
        .post_payment(&Payment::new("pay_3", "cust", dec("1"), "USD"))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Forbidden { .. }), "{err:?}");
    assert_eq!(read_only.get_entry(&pay.entry.id).await.unwrap(), pay.entry);
    let stranger = Client::new(&server.base, "tally_nope", RetryPolicy::default()).unwrap();
    let err = stranger.balance("cust").await.unwrap_err();
    assert!(
        matches!(err, ClientError::Unauthenticated { .. }),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    assert_eq!(server.all_entries(&key).await.len(), before);
}
