//! Statements of an account over a period and balances at a time, on
//! `recorded_at` (docs/audit.md, "Statements and balances at a time").

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use common::{debit, Engine, Ledger, Resp, Server};
use rust_decimal::Decimal;
use serde_json::{json, Value};

engine_tests!(
    adjacent_statements_add_up_and_list_every_entry,
    a_balance_at_a_time_is_the_fold_up_to_that_time,
    statement_and_as_of_parameters_are_checked,
    statements_are_per_tenant_and_per_unit,
);

/// Long enough that entries on either side of a boundary get different
/// `recorded_at` microseconds, whatever the clock's resolution.
const GAP: Duration = Duration::from_millis(30);

fn time(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

fn text(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// One microsecond after the entry in a 201/422 answer was recorded: a
/// boundary that puts it before, and anything recorded later after.
fn just_after(r: &Resp) -> DateTime<Utc> {
    let body = r.json();
    let entry = if body["entry"].is_object() {
        &body["entry"]
    } else {
        &body
    };
    time(entry["recorded_at"].as_str().unwrap()) + TimeDelta::microseconds(1)
}

fn dec(v: &Value) -> Decimal {
    Decimal::from_str(v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))).unwrap()
}

async fn created(server: &Server, path: &str, key: &str, body: Value) -> Resp {
    let r = server.post(path, key, &body).await;
    assert_eq!(r.status, 201, "{path}: {r:?}");
    r
}

async fn statement(server: &Server, key: &str, account: &str, from: &str, to: &str) -> Value {
    let r = server
        .get(
            &format!(
                "/v1/accounts/{account}/statement?from={}&to={}",
                enc(from),
                enc(to)
            ),
            key,
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    r.json()
}

/// RFC 3339 in a query string: `+` must not become a space.
fn enc(t: &str) -> String {
    t.replace('+', "%2B").replace(':', "%3A")
}

const FIGURES: [&str; 5] = ["debits", "credits", "posted", "held", "available"];

fn assert_sum(a: &Value, b: &Value, total: &Value, fields: &[&str], what: &str) {
    for f in fields {
        assert_eq!(dec(&a[f]) + dec(&b[f]), dec(&total[f]), "{what}: {f}");
    }
}

async fn adjacent_statements_add_up_and_list_every_entry(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let admin = ledger.key("acme", "admin").await;
    let server = ledger.server().await;

    // Before t1: a payment, a debit (reversed later), a hold.
    created(
        &server,
        "/v1/payments",
        &key,
        json!({"payment_id": "p1", "account": "cust", "amount": "100", "unit": "USD"}),
    )
    .await;
    let u1 = created(&server, "/v1/usage-debits", &key, debit("u1", "cust", "10")).await;
    let h1 = created(&server, "/v1/holds", &key, json!({"hold_id": "h1", "account": "cust", "amount": "30", "unit": "USD", "ttl_seconds": 3600})).await;
    let t1 = just_after(&h1);
    // Distinct recording times are the input under test: what falls
    // before, inside and after each bound.
    tokio::time::sleep(GAP).await;

    // [t1, t2): the capture, the reversal, settings, a stored rejection,
    // another hold, and someone else's debit.
    created(
        &server,
        "/v1/holds/h1/capture",
        &key,
        json!({"capture_id": "c1", "amount": "25"}),
    )
    .await;
    let u1_id = u1.json()["id"].as_str().unwrap().to_owned();
    created(
        &server,
        "/v1/reversals",
        &key,
        json!({"reversal_id": "rv1", "entry_id": u1_id, "reason": "duplicate"}),
    )
    .await;
    let r = server
        .put(
            "/v1/accounts/cust",
            &admin,
            &json!({"unit": "USD", "overdraft": "forbid"}),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = server
        .post("/v1/usage-debits", &key, &debit("u2", "cust", "1000"))
        .await;
    assert_eq!((r.status, r.code().as_str()), (422, "insufficient_funds"));
    let rejected_id = r.json()["entry"]["id"].as_str().unwrap().to_owned();
    created(&server, "/v1/holds", &key, json!({"hold_id": "h2", "account": "cust", "amount": "5", "unit": "USD", "ttl_seconds": 3600})).await;
    let other = created(&server, "/v1/usage-debits", &key, debit("o1", "other", "3")).await;
    let t2 = just_after(&other);
    tokio::time::sleep(GAP).await;

    // [t2, t3): one more debit.
    let u3 = created(&server, "/v1/usage-debits", &key, debit("u3", "cust", "2")).await;
    let t3 = just_after(&u3);

    let (t1, t2, t3) = (text(t1), text(t2), text(t3));
    let first = statement(&server, &key, "cust", "2000-01-01T00:00:00Z", &t1).await;
    let s1 = statement(&server, &key, "cust", &t1, &t2).await;
    let s2 = statement(&server, &key, "cust", &t2, &t3).await;
    let union = statement(&server, &key, "cust", &t1, &t3).await;

    // The figures, worked by hand.
    assert_eq!(
        first["opening_balance"],
        json!({"debits": "0", "credits": "0", "posted": "0", "held": "0", "available": "0"})
    );
    assert_eq!(
        s1["opening_balance"],
        json!({"debits": "10", "credits": "100", "posted": "90", "held": "30", "available": "60"})
    );
    assert_eq!(
        s1["movements"],
        json!({"debits": "25", "credits": "10", "net": "-15", "held": "-25", "entries": 5})
    );
    assert_eq!(
        s1["closing_balance"],
        json!({"debits": "35", "credits": "110", "posted": "75", "held": "5", "available": "70"})
    );
    assert_eq!(
        (s1["account"].as_str(), s1["unit"].as_str()),
        (Some("cust"), Some("USD"))
    );
    assert_eq!(
        (s1["from"].as_str(), s1["to"].as_str()),
        (Some(t1.as_str()), Some(t2.as_str()))
    );
    let kinds: Vec<&str> = s1["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "hold_capture",
            "reversal",
            "account_settings",
            "usage_debit",
            "hold"
        ]
    );
    let rejected = &s1["entries"][3];
    assert_eq!(rejected["id"].as_str(), Some(rejected_id.as_str()));
    assert_eq!(rejected["status"], "rejected");
    assert_eq!(rejected["rejection"]["code"], "insufficient_funds");

    // Adjacent periods chain, and add up to their union.
    assert_eq!(first["closing_balance"], s1["opening_balance"]);
    assert_eq!(s1["closing_balance"], s2["opening_balance"]);
    assert_eq!(union["opening_balance"], s1["opening_balance"]);
    assert_eq!(union["closing_balance"], s2["closing_balance"]);
    assert_sum(
        &s1["movements"],
        &s2["movements"],
        &union["movements"],
        &["debits", "credits", "net", "held"],
        "movements",
    );
    for s in [&first, &s1, &s2, &union] {
        let m = &s["movements"];
        assert_eq!(
            m["entries"].as_u64().unwrap() as usize,
            s["entries"].as_array().unwrap().len()
        );
        for f in ["debits", "credits", "held"] {
            assert_eq!(
                dec(&s["opening_balance"][f]) + dec(&m[f]),
                dec(&s["closing_balance"][f]),
                "{f}"
            );
        }
    }
    let mut both = s1["entries"].as_array().unwrap().clone();
    both.extend(s2["entries"].as_array().unwrap().iter().cloned());
    assert_eq!(&both, union["entries"].as_array().unwrap());

    // Entries exactly as GET /v1/entries returns them, in seq order.
    let all = server.all_entries(&key).await;
    let of_cust_in = |from: &str, to: &str| -> Vec<Value> {
        all.iter()
            .filter(|e| e["debit_account"] == "cust" || e["credit_account"] == "cust")
            .filter(|e| {
                let at = time(e["recorded_at"].as_str().unwrap());
                time(from) <= at && at < time(to)
            })
            .cloned()
            .collect()
    };
    assert_eq!(s1["entries"].as_array().unwrap(), &of_cust_in(&t1, &t2));
    assert_eq!(union["entries"].as_array().unwrap(), &of_cust_in(&t1, &t3));
    assert_eq!(union["entries"].as_array().unwrap().len(), 6);

    // The last closing balance is today's balance; as_of_seq is cust's last entry.
    let now = server.balance(&key, "cust").await;
    for f in FIGURES {
        assert_eq!(union["closing_balance"][f], now[f], "{f}");
    }
    assert_eq!(union["as_of_seq"], u3.json()["seq"]);
    assert_eq!(s1["as_of_seq"], s1["entries"][4]["seq"]);

    // A period with nothing in it: opening = closing, no entries.
    let quiet = statement(
        &server,
        &key,
        "cust",
        "2000-01-01T00:00:00Z",
        "2000-01-02T00:00:00Z",
    )
    .await;
    assert_eq!(quiet["movements"]["entries"], 0);
    assert_eq!(quiet["as_of_seq"], 0);
    assert_eq!(quiet["opening_balance"], quiet["closing_balance"]);

    // A system account: credited by the capture of another account's hold.
    let revenue = statement(&server, &key, "@revenue", &t1, &t3).await;
    assert_eq!(
        revenue["movements"],
        json!({"debits": "10", "credits": "30", "net": "20", "held": "0", "entries": 5})
    );
    let revenue_now = server.balance(&key, "@revenue").await;
    for f in FIGURES {
        assert_eq!(
            revenue["closing_balance"][f], revenue_now[f],
            "@revenue {f}"
        );
    }
}

async fn a_balance_at_a_time_is_the_fold_up_to_that_time(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let mut points = Vec::new();
    let steps = [
        json!({"payment_id": "p1", "account": "cust", "amount": "50", "unit": "USD"}),
        debit("u1", "cust", "1.25"),
        json!({"hold_id": "h1", "account": "cust", "amount": "7", "unit": "USD", "ttl_seconds": 3600}),
        json!({"capture_id": "c1", "amount": "6.5"}),
        debit("o1", "other", "4"),
        debit("u2", "cust", "0.75"),
    ];
    let paths = [
        "/v1/payments",
        "/v1/usage-debits",
        "/v1/holds",
        "/v1/holds/h1/capture",
        "/v1/usage-debits",
        "/v1/usage-debits",
    ];
    for (path, body) in paths.iter().zip(steps) {
        let r = created(&server, path, &key, body).await;
        points.push(time(r.json()["recorded_at"].as_str().unwrap()));
        tokio::time::sleep(GAP).await;
    }
    let start = points[0] - TimeDelta::milliseconds(5);
    let zero = server
        .get(
            &format!("/v1/accounts/cust/balance?as_of={}", enc(&text(start))),
            &key,
        )
        .await;
    assert_eq!(zero.status, 200, "{zero:?}");
    assert_eq!(
        zero.json(),
        json!({"account": "cust", "unit": "USD", "debits": "0", "credits": "0", "posted": "0", "held": "0", "available": "0", "as_of_seq": 0})
    );
    for (i, at) in points.iter().enumerate() {
        // At the very microsecond an entry was recorded (inclusive), and a
        // little later (before the next one): the same balance.
        for t in [*at, *at + TimeDelta::milliseconds(10)] {
            let b = server
                .get(
                    &format!("/v1/accounts/cust/balance?as_of={}", enc(&text(t))),
                    &key,
                )
                .await;
            assert_eq!(b.status, 200, "{b:?}");
            let b = b.json();
            // The fold to the same point by seq.
            let seq = b["as_of_seq"].as_i64().unwrap();
            let by_seq = server
                .get(&format!("/v1/accounts/cust/balance?as_of_seq={seq}"), &key)
                .await
                .json();
            // Entry 5 (index 4) is another account's: cust's last stays 4.
            let want_seq = if i == 4 { 4 } else { i as i64 + 1 };
            assert_eq!(seq, want_seq, "point {i}");
            assert_eq!(b, by_seq, "point {i}");
            // And the closing balance of a statement ending just after.
            let s = statement(
                &server,
                &key,
                "cust",
                "2000-01-01T00:00:00Z",
                &text(t + TimeDelta::microseconds(1)),
            )
            .await;
            for f in FIGURES {
                assert_eq!(s["closing_balance"][f], b[f], "point {i} {f}");
            }
            assert_eq!(s["as_of_seq"], b["as_of_seq"]);
        }
    }
    let end = server
        .get(
            &format!("/v1/accounts/cust/balance?as_of={}", enc(&text(points[5]))),
            &key,
        )
        .await
        .json();
    let now = server.balance(&key, "cust").await;
    for f in FIGURES {
        assert_eq!(end[f], now[f], "{f}");
    }
    assert_eq!(end["held"], "0");
    assert_eq!(end["posted"], "41.5");
    // The hold, still open just after it was taken.
    let held = server
        .get(
            &format!("/v1/accounts/cust/balance?as_of={}", enc(&text(points[2]))),
            &key,
        )
        .await
        .json();
    assert_eq!(
        (
            held["posted"].as_str(),
            held["held"].as_str(),
            held["available"].as_str()
        ),
        (Some("48.75"), Some("7"), Some("41.75"))
    );
    // Another time zone names the same instant.
    let offset = points[2].with_timezone(&chrono::FixedOffset::east_opt(2 * 3600).unwrap());
    let same = server
        .get(
            &format!(
                "/v1/accounts/cust/balance?as_of={}",
                enc(&offset.to_rfc3339_opts(chrono::SecondsFormat::Micros, false))
            ),
            &key,
        )
        .await
        .json();
    assert_eq!(same, held);
    // A system account at a time, after a capture credited it.
    let revenue = server
        .get(
            &format!(
                "/v1/accounts/@revenue/balance?as_of={}",
                enc(&text(points[3]))
            ),
            &key,
        )
        .await;
    assert_eq!(revenue.status, 200, "{revenue:?}");
    let revenue = revenue.json();
    assert_eq!(revenue["credits"], "7.75");
    assert_eq!(revenue["as_of_seq"], 4);
    let by_seq = server
        .get("/v1/accounts/@revenue/balance?as_of_seq=4", &key)
        .await;
    assert_eq!(by_seq.status, 200, "{by_seq:?}");
    assert_eq!(by_seq.json(), revenue);
}

async fn statement_and_as_of_parameters_are_checked(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let poster = ledger.key("acme", "post").await;
    let server = ledger.server().await;
    let r = created(&server, "/v1/usage-debits", &key, debit("u1", "cust", "1")).await;
    let at = text(just_after(&r));
    let old = "2000-01-01T00:00:00Z";
    let future = text(Utc::now() + TimeDelta::days(1));

    let cases: Vec<(String, Vec<&str>)> = vec![
        (String::new(), vec!["from", "to"]),
        (format!("to={}", enc(&at)), vec!["from"]),
        (format!("from={old}"), vec!["to"]),
        (format!("from=yesterday&to={}", enc(&at)), vec!["from"]),
        (format!("from={old}&to=2026-13-01"), vec!["to"]),
        (format!("from={}&to={}", enc(&at), enc(&at)), vec!["to"]),
        (format!("from={}&to={old}", enc(&at)), vec!["to"]),
        (format!("from={old}&to={}", enc(&future)), vec!["to"]),
        (
            format!("from={old}&to={}&colour=red", enc(&at)),
            vec!["colour"],
        ),
        (
            format!("from={old}&from={old}&to={}", enc(&at)),
            vec!["from"],
        ),
    ];
    for (query, fields) in cases {
        let r = server
            .get(&format!("/v1/accounts/cust/statement?{query}"), &key)
            .await;
        assert_eq!(
            (r.status, r.code().as_str()),
            (422, "invalid_request"),
            "{query}: {r:?}"
        );
        let got: Vec<String> = r.json()["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["field"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(got, fields, "{query}");
    }
    let r = server
        .get(
            &format!("/v1/accounts/cust/statement?from={old}&to={}", enc(&at)),
            &poster,
        )
        .await;
    assert_eq!((r.status, r.code().as_str()), (403, "forbidden"));

    let as_of_cases: Vec<(String, &str)> = vec![
        (format!("as_of={}&as_of_seq=1", enc(&at)), "as_of"),
        (format!("as_of={}", enc(&future)), "as_of"),
        ("as_of=noon".to_owned(), "as_of"),
        (format!("as_of={}&as_of={}", enc(&at), enc(&at)), "as_of"),
    ];
    for (query, field) in as_of_cases {
        let r = server
            .get(&format!("/v1/accounts/cust/balance?{query}"), &key)
            .await;
        assert_eq!(
            (r.status, r.code().as_str()),
            (422, "invalid_request"),
            "{query}: {r:?}"
        );
        assert_eq!(r.json()["errors"][0]["field"], field, "{query}");
    }
    // An account without entries is unknown at any time, as today.
    let r = server
        .get(
            &format!("/v1/accounts/nobody/balance?as_of={}", enc(&at)),
            &key,
        )
        .await;
    assert_eq!((r.status, r.code().as_str()), (404, "not_found"));
    let r = server
        .get(
            &format!("/v1/accounts/nobody/statement?from={old}&to={}", enc(&at)),
            &key,
        )
        .await;
    assert_eq!((r.status, r.code().as_str()), (404, "not_found"));
}

async fn statements_are_per_tenant_and_per_unit(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let stranger = ledger.key("globex", "post,read").await;
    let server = ledger.server().await;
    created(&server, "/v1/usage-debits", &key, debit("u1", "cust", "2")).await;
    created(
        &server,
        "/v1/usage-debits",
        &key,
        json!({"usage_record_id": "t1", "account": "bot", "amount": "900", "unit": "tokens"}),
    )
    .await;
    let last = created(&server, "/v1/usage-debits", &key, debit("u2", "cust", "3")).await;
    let to = text(just_after(&last));
    let window = format!("from=2000-01-01T00%3A00%3A00Z&to={}", enc(&to));

    // Another tenant sees nothing of acme's accounts.
    for path in [
        format!("/v1/accounts/cust/statement?{window}"),
        format!("/v1/accounts/cust/balance?as_of={}", enc(&to)),
    ] {
        let r = server.get(&path, &stranger).await;
        assert_eq!((r.status, r.code().as_str()), (404, "not_found"), "{path}");
    }
    // @revenue holds two units: one must be chosen.
    let r = server
        .get(&format!("/v1/accounts/@revenue/statement?{window}"), &key)
        .await;
    assert_eq!((r.status, r.code().as_str()), (422, "invalid_request"));
    assert_eq!(r.json()["errors"][0]["field"], "unit");
    let usd = server
        .get(
            &format!("/v1/accounts/@revenue/statement?{window}&unit=USD"),
            &key,
        )
        .await;
    assert_eq!(usd.status, 200, "{usd:?}");
    let usd = usd.json();
    assert_eq!(usd["unit"], "USD");
    assert_eq!(usd["closing_balance"]["credits"], "5");
    assert_eq!(usd["movements"]["entries"], 2);
    let tokens = server
        .get(
            &format!("/v1/accounts/@revenue/statement?{window}&unit=tokens"),
            &key,
        )
        .await
        .json();
    assert_eq!(tokens["closing_balance"]["credits"], "900");
    assert_eq!(tokens["entries"][0]["upstream_id"], "t1");
    let r = server
        .get(
            &format!(
                "/v1/accounts/@revenue/balance?as_of={}&unit=tokens",
                enc(&to)
            ),
            &key,
        )
        .await;
    assert_eq!(r.json()["posted"], "900");
    // A unit the account does not hold.
    let r = server
        .get(
            &format!("/v1/accounts/cust/statement?{window}&unit=EUR"),
            &key,
        )
        .await;
    assert_eq!((r.status, r.code().as_str()), (404, "not_found"));
}
