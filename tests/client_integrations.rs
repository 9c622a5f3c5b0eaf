//! The Stripe integration's operations of `tally-client` against a real
//! server, on every engine: configure, read (never a secret), list events,
//! reapply, remove; each refusal as its typed error. One event is delivered
//! as Stripe delivers it (signed with `Stripe-Signature`), so that the list
//! has something in it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Engine, Ledger};
use hmac::{Hmac, Mac};
use rust_decimal::Decimal;
use serde_json::json;
use sha2::Sha256;
use tally_client::{
    Client, ClientError, RetryPolicy, StripeEventQuery, StripeEventStatus, StripeIntegrationRequest,
};

engine_tests!(
    the_stripe_integration_through_the_client,
    the_stripe_calls_refuse_what_the_server_refuses,
);

const SECRET: &str = "whsec_client_test_4b7e1d";

/// `Stripe-Signature` as Stripe computes it: `t=<unix>,v1=<hex
/// HMAC-SHA256 of "<t>.<body>">`, keyed by the secret's bytes.
fn signature(body: &str, secret: &str, t: i64) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{t}.{body}").as_bytes());
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// A `payment_intent.succeeded` event as Stripe sends it.
fn payment_event(event_id: &str, pi: &str, account: &str) -> String {
    json!({
        "id": event_id, "object": "event", "type": "payment_intent.succeeded",
        "created": 1_733_500_000,
        "data": {"object": {
            "id": pi, "object": "payment_intent", "amount_received": 1999,
            "currency": "usd", "created": 1_733_499_990,
            "metadata": {"tally_account": account}, "status": "succeeded"
        }}
    })
    .to_string()
}

/// POSTs `body` to the integration's path as Stripe would (no API key).
async fn deliver(base: &str, endpoint_path: &str, body: &str) -> (u16, serde_json::Value) {
    let t = chrono::Utc::now().timestamp();
    let r = reqwest::Client::new()
        .post(format!("{base}{endpoint_path}"))
        .header("content-type", "application/json")
        .header("Stripe-Signature", signature(body, SECRET, t))
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

fn unmapped() -> StripeEventQuery {
    StripeEventQuery {
        status: Some(StripeEventStatus::Unmapped),
        ..StripeEventQuery::default()
    }
}

async fn the_stripe_integration_through_the_client(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,admin").await;
    let server = ledger.server().await;
    let client = Client::new(&server.base, &key, RetryPolicy::default()).unwrap();

    // Nothing configured yet.
    let err = client.get_stripe_integration().await.unwrap_err();
    assert!(matches!(err, ClientError::NotFound { .. }), "{err:?}");

    // Configure: the path to give Stripe, the count of secrets, no secret.
    let request = StripeIntegrationRequest::new([SECRET], "tally_account");
    assert!(!format!("{request:?}").contains(SECRET));
    let made = client.put_stripe_integration(&request).await.unwrap();
    assert!(
        made.endpoint_path.starts_with("/v1/ingest/stripe/sie_"),
        "{made:?}"
    );
    assert!(!made.endpoint_path.contains("acme"));
    assert_eq!(
        (
            made.account_metadata_key.as_str(),
            made.signing_secrets_count
        ),
        ("tally_account", 1)
    );
    assert!(made.updated_at >= made.created_at);
    let read = client.get_stripe_integration().await.unwrap();
    assert_eq!(read, made);
    assert!(!format!("{read:?}").contains("whsec_"));

    // Replaced (a second secret, while they rotate): the same path.
    let rotated = client
        .put_stripe_integration(&StripeIntegrationRequest::new(
            [SECRET, "whsec_client_test_next"],
            "tally_account",
        ))
        .await
        .unwrap();
    assert_eq!(rotated.endpoint_path, made.endpoint_path);
    assert_eq!(rotated.signing_secrets_count, 2);
    assert_eq!(rotated.created_at, made.created_at);

    // No event yet, in any status.
    let page = client
        .list_stripe_events(&StripeEventQuery::default())
        .await
        .unwrap();
    assert!(
        page.events.is_empty() && page.next_after.is_none(),
        "{page:?}"
    );

    // Stripe delivers a payment: listed as applied, with no reason.
    let (status, delivered) = deliver(
        &server.base,
        &made.endpoint_path,
        &payment_event("evt_1", "pi_1", "cust_1"),
    )
    .await;
    assert_eq!(
        (status, delivered["status"].as_str()),
        (200, Some("applied"))
    );
    let page = client
        .list_stripe_events(&StripeEventQuery::default())
        .await
        .unwrap();
    assert_eq!(page.events.len(), 1, "{page:?}");
    let event = &page.events[0];
    assert_eq!(
        (
            event.event_id.as_str(),
            event.event_type.as_str(),
            event.status
        ),
        (
            "evt_1",
            "payment_intent.succeeded",
            StripeEventStatus::Applied
        )
    );
    assert_eq!(
        (event.reason.as_deref(), event.waiting_for.as_deref()),
        (None, None)
    );
    assert!(client
        .list_stripe_events(&unmapped())
        .await
        .unwrap()
        .events
        .is_empty());
    let applied = StripeEventQuery {
        status: Some(StripeEventStatus::Applied),
        ..StripeEventQuery::default()
    };
    assert_eq!(client.list_stripe_events(&applied).await.unwrap(), page);
    let paid = Decimal::new(1999, 2);
    assert_eq!(client.balance("cust_1").await.unwrap().posted, paid);

    // A payment whose account is under another metadata key: unmapped,
    // still unmapped when reapplied, applied once the key is fixed.
    let mut other =
        serde_json::from_str::<serde_json::Value>(&payment_event("evt_2", "pi_2", "cust_2"))
            .unwrap();
    other["data"]["object"]["metadata"] = json!({"customer_account": "cust_2"});
    let (_, delivered) = deliver(&server.base, &made.endpoint_path, &other.to_string()).await;
    assert_eq!(delivered["status"], "unmapped");
    let waiting = client.list_stripe_events(&unmapped()).await.unwrap();
    assert_eq!(waiting.events.len(), 1);
    assert_eq!(waiting.events[0].event_id, "evt_2");
    assert!(waiting.events[0]
        .reason
        .as_deref()
        .unwrap()
        .contains("tally_account"));
    let again = client.reapply_stripe_event("evt_2").await.unwrap();
    assert_eq!(again.status, StripeEventStatus::Unmapped);
    client
        .put_stripe_integration(&StripeIntegrationRequest::new([SECRET], "customer_account"))
        .await
        .unwrap();
    let fixed = client.reapply_stripe_event("evt_2").await.unwrap();
    assert_eq!(
        (
            fixed.event_id.as_str(),
            fixed.status,
            fixed.reason.as_deref()
        ),
        ("evt_2", StripeEventStatus::Applied, None)
    );
    assert_eq!(
        client.reapply_stripe_event("evt_2").await.unwrap().status,
        StripeEventStatus::Applied,
        "a second reapply replays"
    );
    assert_eq!(client.balance("cust_2").await.unwrap().posted, paid);

    // Pages in event_id order.
    let first = client
        .list_stripe_events(&StripeEventQuery {
            limit: Some(1),
            ..StripeEventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(first.events[0].event_id, "evt_1");
    assert_eq!(first.next_after.as_deref(), Some("evt_1"));
    let second = client
        .list_stripe_events(&StripeEventQuery {
            after: first.next_after.clone(),
            limit: Some(1),
            ..StripeEventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(second.events[0].event_id, "evt_2");

    // An unknown event: NotFound.
    let err = client
        .reapply_stripe_event("evt_unknown")
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::NotFound { .. }), "{err:?}");
    assert_eq!((err.status(), err.code()), (Some(404), Some("not_found")));

    // Removed: reads NotFound, deliveries are refused, the events stay.
    client.delete_stripe_integration().await.unwrap();
    let err = client.get_stripe_integration().await.unwrap_err();
    assert!(matches!(err, ClientError::NotFound { .. }), "{err:?}");
    let err = client.delete_stripe_integration().await.unwrap_err();
    assert!(matches!(err, ClientError::NotFound { .. }), "{err:?}");
    let (status, _) = deliver(
        &server.base,
        &made.endpoint_path,
        &payment_event("evt_3", "pi_3", "cust_3"),
    )
    .await;
    assert_eq!(status, 404);
    let all = client
        .list_stripe_events(&StripeEventQuery::default())
        .await
        .unwrap();
    assert_eq!(all.events.len(), 2);
    // Without an integration a reapply cannot map: InvalidRequest.
    let err = client.reapply_stripe_event("evt_2").await.unwrap_err();
    assert!(matches!(err, ClientError::InvalidRequest { .. }), "{err:?}");
}

async fn the_stripe_calls_refuse_what_the_server_refuses(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let admin = ledger.key("acme", "admin").await;
    let read = ledger.key("acme", "read").await;
    let server = ledger.server().await;
    let admin = Client::new(&server.base, &admin, RetryPolicy::default()).unwrap();
    let read = Client::new(&server.base, &read, RetryPolicy::default()).unwrap();

    // Invalid settings: every problem at once, nothing stored, no secret
    // in the answer.
    let bad = StripeIntegrationRequest::new(["not_a_secret"], "");
    let err = admin.put_stripe_integration(&bad).await.unwrap_err();
    match &err {
        ClientError::InvalidRequest { errors, .. } => {
            let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
            assert!(
                fields.iter().any(|f| f.starts_with("signing_secrets")),
                "{fields:?}"
            );
            assert!(fields.contains(&"account_metadata_key"), "{fields:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(!err.to_string().contains("not_a_secret"), "{err}");
    let err = admin
        .put_stripe_integration(&StripeIntegrationRequest::new(
            Vec::<String>::new(),
            "tally_account",
        ))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::InvalidRequest { .. }), "{err:?}");
    assert!(matches!(
        admin.get_stripe_integration().await.unwrap_err(),
        ClientError::NotFound { .. }
    ));

    // Scopes: the settings need admin, the events read, a reapply post.
    let made = admin
        .put_stripe_integration(&StripeIntegrationRequest::new([SECRET], "tally_account"))
        .await
        .unwrap();
    assert_eq!(made.signing_secrets_count, 1);
    for err in [
        read.get_stripe_integration().await.unwrap_err(),
        read.delete_stripe_integration().await.unwrap_err(),
        read.put_stripe_integration(&StripeIntegrationRequest::new([SECRET], "k"))
            .await
            .unwrap_err(),
        read.reapply_stripe_event("evt_1").await.unwrap_err(),
        admin
            .list_stripe_events(&StripeEventQuery::default())
            .await
            .unwrap_err(),
    ] {
        assert!(matches!(err, ClientError::Forbidden { .. }), "{err:?}");
    }
    assert!(read
        .list_stripe_events(&StripeEventQuery::default())
        .await
        .unwrap()
        .events
        .is_empty());
    // A limit out of range: the query's problem, by field.
    let err = read
        .list_stripe_events(&StripeEventQuery {
            limit: Some(0),
            ..StripeEventQuery::default()
        })
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ClientError::InvalidRequest { errors, .. } if errors[0].field == "limit"),
        "{err:?}"
    );
    assert_eq!(
        admin
            .get_stripe_integration()
            .await
            .unwrap()
            .account_metadata_key,
        "tally_account"
    );
}
