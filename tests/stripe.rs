//! Stripe webhooks against the real server on every engine
//! (docs/ingest.md): payloads shaped like Stripe's documented event
//! objects, signed as Stripe signs them with a test secret.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Engine, Ledger, Resp, Server};
use hmac::{Hmac, Mac};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use sha2::Sha256;

engine_tests!(
    one_event_delivered_five_times_concurrently_makes_one_payment,
    a_wrong_secret_a_stale_or_missing_signature_writes_nothing,
    minor_units_follow_the_currency_exponent,
    a_refund_before_its_payment_waits_and_is_applied_when_it_arrives,
    ignored_and_unmapped_events_are_acknowledged_and_reapplied_once_fixed,
    the_settings_never_show_a_secret_and_a_removed_integration_refuses,
);

const SECRET: &str = "whsec_test_5f2c0c1e8d";

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// `Stripe-Signature` as Stripe computes it (its docs, "Verify
/// manually"), written here apart from the server's code.
fn signature(body: &str, secret: &str, t: i64) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{t}.{body}").as_bytes());
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// A `payment_intent.succeeded` event as Stripe sends it.
fn payment_event(event_id: &str, pi: &str, account: &str, minor: i64, currency: &str) -> Value {
    json!({
        "id": event_id, "object": "event", "api_version": "2024-06-20",
        "created": 1_733_500_000, "livemode": false, "pending_webhooks": 1,
        "request": {"id": null, "idempotency_key": null},
        "type": "payment_intent.succeeded",
        "data": {"object": {
            "id": pi, "object": "payment_intent", "amount": minor,
            "amount_capturable": 0, "amount_received": minor, "capture_method": "automatic",
            "created": 1_733_499_990, "currency": currency, "customer": "cus_Q1",
            "latest_charge": format!("ch_{pi}"), "livemode": false,
            "metadata": {"tally_account": account, "order": "o_1"},
            "payment_method_types": ["card"], "status": "succeeded"
        }}
    })
}

/// A `charge.refunded` event of the charge of `pi`, with these refunds.
fn refund_event(event_id: &str, pi: &str, refunds: &[(&str, i64)]) -> Value {
    let data: Vec<Value> = refunds
        .iter()
        .map(|(id, minor)| {
            json!({
                "id": id, "object": "refund", "amount": minor, "charge": format!("ch_{pi}"),
                "created": 1_733_500_100, "currency": "usd", "metadata": {},
                "payment_intent": pi, "reason": "requested_by_customer", "status": "succeeded"
            })
        })
        .collect();
    let refunded: i64 = refunds.iter().map(|r| r.1).sum();
    json!({
        "id": event_id, "object": "event", "api_version": "2024-06-20",
        "created": 1_733_500_100, "livemode": false, "pending_webhooks": 1,
        "request": {"id": "req_1", "idempotency_key": "k_1"},
        "type": "charge.refunded",
        "data": {"object": {
            "id": format!("ch_{pi}"), "object": "charge", "amount": 1999,
            "amount_captured": 1999, "amount_refunded": refunded, "captured": true,
            "currency": "usd", "paid": true, "payment_intent": pi, "refunded": false,
            "refunds": {"object": "list", "data": data, "has_more": false,
                        "url": format!("/v1/charges/ch_{pi}/refunds")},
            "status": "succeeded"
        }},
        "previous_attributes": {"amount_refunded": 0}
    })
}

struct Stripe {
    server: Server,
    path: String,
    admin: String,
    read: String,
    http: reqwest::Client,
}

impl Stripe {
    async fn start(ledger: &Ledger) -> Stripe {
        let admin = ledger.key("acme", "admin").await;
        let read = ledger.key("acme", "read,post").await;
        let server = ledger.server().await;
        let r = server
            .put(
                "/v1/integrations/stripe",
                &admin,
                &json!({"signing_secrets": [SECRET], "account_metadata_key": "tally_account"}),
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        let path = r.json()["endpoint_path"].as_str().unwrap().to_owned();
        Stripe {
            server,
            path,
            admin,
            read,
            http: reqwest::Client::new(),
        }
    }

    async fn deliver_signed(&self, body: &str, header: Option<String>) -> Resp {
        let mut req = self
            .http
            .post(format!("http://{}{}", self.server.addr(), self.path))
            .header("content-type", "application/json")
            .body(body.to_owned());
        if let Some(h) = header {
            req = req.header("Stripe-Signature", h);
        }
        self.server.send(req).await
    }

    async fn deliver(&self, event: &Value) -> Resp {
        let body = event.to_string();
        self.deliver_signed(&body, Some(signature(&body, SECRET, now())))
            .await
    }

    async fn events(&self, status: &str) -> Vec<Value> {
        let r = self
            .server
            .get(
                &format!("/v1/integrations/stripe/events?status={status}"),
                &self.read,
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        r.json()["events"].as_array().unwrap().clone()
    }

    async fn balance(&self, account: &str) -> (Decimal, Decimal) {
        let b = self.server.balance(&self.read, account).await;
        (dec(&b["credits"]), dec(&b["debits"]))
    }
}

fn text(r: &Resp) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

fn dec(v: &Value) -> Decimal {
    v.as_str().unwrap().parse().unwrap()
}

async fn verify(ledger: &Ledger) {
    let (ok, out, err) = ledger.tally(&["verify"]).await;
    assert!(ok, "tally verify: {out} {err}");
}

async fn one_event_delivered_five_times_concurrently_makes_one_payment(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let stripe = std::sync::Arc::new(Stripe::start(&ledger).await);
    let event = payment_event("evt_1", "pi_1", "cust_1", 1999, "usd");
    let deliveries: Vec<_> = (0..5)
        .map(|_| {
            let (stripe, event) = (stripe.clone(), event.clone());
            tokio::spawn(async move { stripe.deliver(&event).await })
        })
        .collect();
    let mut fresh = 0;
    let mut bodies = Vec::new();
    for d in deliveries {
        let r = d.await.unwrap();
        assert_eq!(r.status, 200, "{r:?}");
        if !r.replayed() {
            fresh += 1;
        }
        bodies.push(r.json());
    }
    assert_eq!(
        fresh, 1,
        "one delivery recorded the event; the others answer as it did"
    );
    assert!(bodies.iter().all(|b| b == &bodies[0]), "{bodies:?}");
    assert_eq!(bodies[0]["status"], "applied");
    // A sixth, later: the same answer, replayed.
    let again = stripe.deliver(&event).await;
    assert!(again.replayed());
    assert_eq!(again.json(), bodies[0]);

    let entries = stripe.server.all_entries(&stripe.read).await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["kind"], "payment");
    assert_eq!(entries[0]["upstream_id"], "pi_1");
    assert_eq!(entries[0]["processor"], "stripe");
    assert_eq!(stripe.balance("cust_1").await.0, dec(&json!("19.99")));
    assert_eq!(stripe.events("applied").await.len(), 1);
    verify(&ledger).await;
}

async fn a_wrong_secret_a_stale_or_missing_signature_writes_nothing(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let stripe = Stripe::start(&ledger).await;
    let body = payment_event("evt_2", "pi_2", "cust_2", 500, "usd").to_string();
    let refused = [
        Some(signature(&body, "whsec_someone_else", now())),
        Some(signature(&body, SECRET, now() - 301)),
        // From the future: the server reads its clock after this one, so a
        // signature one second past the tolerance here can be within it
        // there on a loaded machine. The exact boundary is the unit test
        // in api/src/ingest/stripe/signature.rs, on a fixed clock.
        Some(signature(&body, SECRET, now() + 360)),
        Some(format!("t={},v1=deadbeef", now())),
        Some("garbage".to_owned()),
        None,
    ];
    for header in refused {
        let r = stripe.deliver_signed(&body, header.clone()).await;
        assert_eq!(r.status, 400, "{header:?}: {r:?}");
        assert_eq!(r.code(), "invalid_signature", "{header:?}");
        assert!(!text(&r).contains(SECRET));
    }
    // A body altered after signing.
    let header = signature(&body, SECRET, now());
    let altered = body.replace("\"amount_received\":500", "\"amount_received\":50000");
    assert_ne!(altered, body);
    assert_eq!(
        stripe.deliver_signed(&altered, Some(header)).await.status,
        400
    );
    assert!(stripe.server.all_entries(&stripe.read).await.is_empty());
    for status in ["applied", "ignored", "unmapped"] {
        assert!(stripe.events(status).await.is_empty());
    }
    // A path nobody was given.
    let r = stripe
        .server
        .send(
            stripe
                .http
                .post(format!(
                    "http://{}/v1/ingest/stripe/sie_00",
                    stripe.server.addr()
                ))
                .header("Stripe-Signature", signature(&body, SECRET, now()))
                .body(body.clone()),
        )
        .await;
    assert_eq!(r.status, 404);

    // Rotation: a second secret; either signs.
    let r = stripe
        .server
        .put(
            "/v1/integrations/stripe",
            &stripe.admin,
            &json!({"signing_secrets": [SECRET, "whsec_next_7a1b"], "account_metadata_key": "tally_account"}),
        )
        .await;
    assert_eq!(
        r.json()["endpoint_path"],
        stripe.path.as_str(),
        "the path stays"
    );
    let r = stripe
        .deliver_signed(
            &body,
            // Four minutes old: within the tolerance with room for a slow
            // request (299 s could be 301 s by the server's clock).
            Some(signature(&body, "whsec_next_7a1b", now() - 240)),
        )
        .await;
    assert_eq!(
        (r.status, r.json()["status"].clone()),
        (200, json!("applied")),
        "{r:?}"
    );
    verify(&ledger).await;
}

async fn minor_units_follow_the_currency_exponent(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let stripe = Stripe::start(&ledger).await;
    for (i, (currency, minor, account)) in [
        ("jpy", 500, "cust_jp"),
        ("usd", 1999, "cust_us"),
        ("kwd", 1999, "cust_kw"),
    ]
    .into_iter()
    .enumerate()
    {
        let event = payment_event(
            &format!("evt_c{i}"),
            &format!("pi_c{i}"),
            account,
            minor,
            currency,
        );
        let r = stripe.deliver(&event).await;
        assert_eq!(r.json()["status"], "applied", "{r:?}");
    }
    let entries = stripe.server.all_entries(&stripe.read).await;
    let amounts: Vec<(String, String)> = entries
        .iter()
        .map(|e| {
            (
                e["unit"].as_str().unwrap().to_owned(),
                e["amount"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: Vec<(String, Decimal)> = vec![
        ("JPY".into(), dec(&json!("500"))),
        ("USD".into(), dec(&json!("19.99"))),
        ("KWD".into(), dec(&json!("1.999"))),
    ];
    for ((unit, amount), (want_unit, want)) in amounts.iter().zip(&expected) {
        assert_eq!((unit, dec(&json!(amount))), (want_unit, *want));
    }
    assert_eq!(entries[0]["amount"], "500");
    assert_eq!(entries[1]["amount"], "19.99");
    assert_eq!(entries[2]["amount"], "1.999");
}

async fn a_refund_before_its_payment_waits_and_is_applied_when_it_arrives(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let stripe = Stripe::start(&ledger).await;
    let refund = refund_event("evt_r1", "pi_r", &[("re_1", 500), ("re_2", 250)]);
    let r = stripe.deliver(&refund).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"], "unmapped", "{r:?}");
    let waiting = stripe.events("unmapped").await;
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0]["waiting_for"], "pi_r");
    assert!(waiting[0]["reason"].as_str().unwrap().contains("pi_r"));
    assert!(stripe.server.all_entries(&stripe.read).await.is_empty());

    let r = stripe
        .deliver(&payment_event("evt_p1", "pi_r", "cust_r", 1999, "usd"))
        .await;
    assert_eq!(r.json()["status"], "applied");
    let applied = stripe.events("applied").await;
    assert_eq!(applied.len(), 2, "{applied:?}");
    assert!(stripe.events("unmapped").await.is_empty());
    let entries = stripe.server.all_entries(&stripe.read).await;
    let kinds: Vec<&str> = entries
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["payment", "refund", "refund"]);
    // 19.99 paid, 7.50 refunded.
    let (credits, debits) = stripe.balance("cust_r").await;
    assert_eq!(credits - debits, dec(&json!("12.49")));
    // Redelivering the refund now: the first answer, and nothing more.
    let again = stripe.deliver(&refund).await;
    assert!(again.replayed());
    assert_eq!(
        again.json()["status"],
        "unmapped",
        "answered as the first delivery was"
    );
    assert_eq!(stripe.server.all_entries(&stripe.read).await.len(), 3);
    verify(&ledger).await;
}

async fn ignored_and_unmapped_events_are_acknowledged_and_reapplied_once_fixed(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let stripe = Stripe::start(&ledger).await;
    let other = json!({"id": "evt_o", "object": "event", "type": "customer.created",
                       "created": 1_733_500_000, "data": {"object": {"id": "cus_1", "object": "customer"}}});
    let r = stripe.deliver(&other).await;
    assert_eq!(
        (r.status, r.json()["status"].clone()),
        (200, json!("ignored"))
    );
    assert_eq!(stripe.events("ignored").await.len(), 1);

    // The account is under another metadata key than configured.
    let mut event = payment_event("evt_m", "pi_m", "cust_m", 1200, "eur");
    event["data"]["object"]["metadata"] = json!({"customer_account": "cust_m"});
    let r = stripe.deliver(&event).await;
    assert_eq!(r.json()["status"], "unmapped");
    assert!(r.json()["reason"]
        .as_str()
        .unwrap()
        .contains("tally_account"));
    let reapply = "/v1/integrations/stripe/events/evt_m/reapply";
    // Still unmapped until the mapping is fixed.
    let r = stripe.server.post(reapply, &stripe.read, &json!({})).await;
    assert_eq!(
        (r.status, r.json()["status"].clone()),
        (200, json!("unmapped")),
        "{r:?}"
    );
    stripe
        .server
        .put(
            "/v1/integrations/stripe",
            &stripe.admin,
            &json!({"signing_secrets": [SECRET], "account_metadata_key": "customer_account"}),
        )
        .await;
    for _ in 0..2 {
        let r = stripe.server.post(reapply, &stripe.read, &json!({})).await;
        assert_eq!(
            (r.status, r.json()["status"].clone()),
            (200, json!("applied")),
            "{r:?}"
        );
    }
    assert_eq!(stripe.server.all_entries(&stripe.read).await.len(), 1);
    assert_eq!(stripe.balance("cust_m").await.0, dec(&json!("12")));
    let missing = stripe
        .server
        .post(
            "/v1/integrations/stripe/events/evt_none/reapply",
            &stripe.read,
            &json!({}),
        )
        .await;
    assert_eq!(missing.status, 404);
    verify(&ledger).await;
}

async fn the_settings_never_show_a_secret_and_a_removed_integration_refuses(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let stripe = Stripe::start(&ledger).await;
    assert!(!stripe.path.contains("acme"));
    assert!(stripe.path.len() > "/v1/ingest/stripe/".len() + 32);
    let r = stripe
        .server
        .get("/v1/integrations/stripe", &stripe.admin)
        .await;
    assert_eq!(r.status, 200);
    assert!(!text(&r).contains("whsec_"), "{}", text(&r));
    assert_eq!(r.json()["signing_secrets_count"], 1);
    assert_eq!(r.json()["endpoint_path"], stripe.path.as_str());
    // The settings need admin; a bad body changes nothing.
    let forbidden = stripe
        .server
        .get("/v1/integrations/stripe", &stripe.read)
        .await;
    assert_eq!(forbidden.status, 403);
    for bad in [
        json!({"signing_secrets": [], "account_metadata_key": "k"}),
        json!({"signing_secrets": ["not_a_secret"], "account_metadata_key": "k"}),
        json!({"signing_secrets": [SECRET], "account_metadata_key": ""}),
        json!({"signing_secrets": [SECRET], "account_metadata_key": "k", "extra": 1}),
    ] {
        let r = stripe
            .server
            .put("/v1/integrations/stripe", &stripe.admin, &bad)
            .await;
        assert_eq!(r.status, 422, "{bad}: {r:?}");
        assert!(!text(&r).contains(SECRET));
    }
    let r = stripe
        .server
        .get("/v1/integrations/stripe", &stripe.admin)
        .await;
    assert_eq!(r.json()["account_metadata_key"], "tally_account");

    let r = stripe
        .server
        .send(
            stripe
                .http
                .delete(format!(
                    "http://{}/v1/integrations/stripe",
                    stripe.server.addr()
                ))
                .bearer_auth(&stripe.admin),
        )
        .await;
    assert_eq!(r.status, 204);
    let r = stripe
        .deliver(&payment_event("evt_d", "pi_d", "cust_d", 100, "usd"))
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(
        stripe
            .server
            .get("/v1/integrations/stripe", &stripe.admin)
            .await
            .status,
        404
    );
}
