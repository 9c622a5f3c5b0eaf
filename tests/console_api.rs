//! What the finance console reads besides the rest of the API: the
//! accounts list (`GET /v1/accounts`), entries by status and upstream ID,
//! and a verification run by the server (`POST /v1/audit/verify`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{debit, Engine, Ledger, Server};
use serde_json::{json, Value};

engine_tests!(
    accounts_are_listed_in_order_searched_and_paged,
    entries_are_filtered_by_status_and_upstream_id,
    the_server_verifies_the_tenant_and_names_what_is_broken,
);

async fn accounts_are_listed_in_order_searched_and_paged(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    for (i, account) in ["cust_b", "cust_a", "Cust_C", "vip_1", "cust_d"]
        .iter()
        .enumerate()
    {
        let r = server
            .post(
                "/v1/usage-debits",
                &key,
                &debit(&format!("u{i}"), account, "1.50"),
            )
            .await;
        assert_eq!(r.status, 201);
    }
    let pay = json!({"payment_id": "p1", "account": "cust_a", "amount": "10", "unit": "USD"});
    assert_eq!(server.post("/v1/payments", &key, &pay).await.status, 201);
    let other = ledger.key("other", "post,read").await;
    assert_eq!(
        server
            .post("/v1/usage-debits", &other, &debit("x", "cust_zz", "1"))
            .await
            .status,
        201
    );

    let names = |page: &Value| -> Vec<String> {
        page["accounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["account"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = server.get("/v1/accounts", &key).await;
    assert_eq!(all.status, 200);
    let all = all.json();
    // Byte order; no system account, no other tenant's.
    assert_eq!(
        names(&all),
        ["Cust_C", "cust_a", "cust_b", "cust_d", "vip_1"]
    );
    assert_eq!(all["next_after"], Value::Null);
    let a = &all["accounts"][1];
    assert_eq!(
        *a,
        json!({"account": "cust_a", "unit": "USD", "debits": "1.5", "credits": "10",
               "posted": "8.5", "held": "0", "available": "8.5"})
    );
    // The same figures as the account's own balance.
    let balance = server.balance(&key, "cust_a").await;
    for field in ["debits", "credits", "posted", "held", "available"] {
        assert_eq!(a[field], balance[field], "{field}");
    }
    // Search: a substring, ASCII letters in any case.
    let found = server.get("/v1/accounts?q=CUST_", &key).await.json();
    assert_eq!(names(&found), ["Cust_C", "cust_a", "cust_b", "cust_d"]);
    assert_eq!(
        names(&server.get("/v1/accounts?q=ip_", &key).await.json()),
        ["vip_1"]
    );
    assert_eq!(
        names(&server.get("/v1/accounts?q=nobody", &key).await.json()),
        Vec::<String>::new()
    );
    // Pages of two.
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let path = match &after {
            None => "/v1/accounts?limit=2".to_owned(),
            Some(a) => format!("/v1/accounts?limit=2&after={a}"),
        };
        let page = server.get(&path, &key).await.json();
        seen.extend(names(&page));
        match page["next_after"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, names(&all));
    for bad in ["limit=0", "limit=1001", "zz=1", "q=%00"] {
        assert_eq!(
            server
                .get(&format!("/v1/accounts?{bad}"), &key)
                .await
                .status,
            422,
            "{bad}"
        );
    }
    let no_read = ledger.key("acme", "post").await;
    assert_eq!(server.get("/v1/accounts", &no_read).await.status, 403);
}

async fn entries_are_filtered_by_status_and_upstream_id(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,admin").await;
    let server = ledger.server().await;
    let forbid = json!({"unit": "USD", "overdraft": "forbid"});
    assert_eq!(
        server.put("/v1/accounts/tight", &key, &forbid).await.status,
        200
    );
    assert_eq!(
        server
            .post("/v1/usage-debits", &key, &debit("ur_1", "tight", "5"))
            .await
            .status,
        422
    );
    assert_eq!(
        server
            .post("/v1/usage-debits", &key, &debit("ur_2", "loose", "5"))
            .await
            .status,
        201
    );
    let pay = json!({"payment_id": "ur_2", "account": "loose", "amount": "1", "unit": "USD"});
    assert_eq!(server.post("/v1/payments", &key, &pay).await.status, 201);

    let kinds = |path: &str| {
        let server = &server;
        let key = &key;
        let path = path.to_owned();
        async move {
            let page = server.get(&path, key).await;
            assert_eq!(page.status, 200, "{path}");
            page.json()["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    format!(
                        "{}:{}:{}",
                        e["kind"].as_str().unwrap(),
                        e["upstream_id"].as_str().unwrap(),
                        e["status"].as_str().unwrap()
                    )
                })
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        kinds("/v1/entries?status=rejected").await,
        ["usage_debit:ur_1:rejected"]
    );
    assert_eq!(
        kinds("/v1/entries?status=posted&kind=usage_debit").await,
        ["usage_debit:ur_2:posted"]
    );
    // One upstream ID may key one entry per kind.
    assert_eq!(
        kinds("/v1/entries?upstream_id=ur_2").await,
        ["usage_debit:ur_2:posted", "payment:ur_2:posted"]
    );
    assert_eq!(
        kinds("/v1/entries?upstream_id=ur_2&kind=payment").await,
        ["payment:ur_2:posted"]
    );
    assert_eq!(
        kinds("/v1/entries?upstream_id=nope").await,
        Vec::<String>::new()
    );
    for bad in ["status=maybe", "upstream_id=%00"] {
        let r = server.get(&format!("/v1/entries?{bad}"), &key).await;
        assert_eq!(r.status, 422, "{bad}");
    }
}

async fn the_server_verifies_the_tenant_and_names_what_is_broken(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,audit").await;
    let server = ledger.server().await;
    for i in 0..20 {
        assert_eq!(
            server
                .post("/v1/usage-debits", &key, &debit(&format!("v{i}"), "c", "1"))
                .await
                .status,
            201
        );
    }
    let report = server.post("/v1/audit/verify", &key, &json!({})).await;
    assert_eq!(report.status, 200);
    let report = report.json();
    assert_eq!(report["status"], "verified", "{report}");
    assert_eq!(report["checked_entries"], 20);
    assert_eq!(report["head"]["seq"], 20);
    assert_eq!(report["problems"], json!([]));
    let head = server.get("/v1/audit/head", &key).await.json();
    assert_eq!(report["head"]["hash"], head["hash"]);
    // Scope audit only.
    let reader = ledger.key("acme", "post,read").await;
    assert_eq!(
        server
            .post("/v1/audit/verify", &reader, &json!({}))
            .await
            .status,
        403
    );

    // A stored balance altered behind the ledger's back is named.
    ledger
        .sql(&["UPDATE balances SET debits = '19' WHERE tenant_id = 'acme' AND account = 'c'"])
        .await;
    let report = server
        .post("/v1/audit/verify", &key, &json!({}))
        .await
        .json();
    assert_eq!(report["status"], "broken", "{report}");
    let problems = report["problems"].as_array().unwrap();
    assert!(!problems.is_empty());
    assert!(
        problems[0]["problem"].as_str().unwrap().contains('c'),
        "{report}"
    );

    // Bounded in time: with a request timeout of just over a second the
    // budget is a millisecond, and the answer says how far it got.
    drop(server);
    let hurried = Server::start(&ledger.database_url, &["--request-timeout-ms", "1001"]).await;
    let report = hurried
        .post("/v1/audit/verify", &key, &json!({}))
        .await
        .json();
    assert!(
        report["status"] == "incomplete" || report["status"] == "broken",
        "{report}"
    );
    assert_eq!(report["budget_ms"], 1);
}
