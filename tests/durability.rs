//! Crashes, tampering and rebuilds: what was acknowledged stays, and what
//! was changed behind the ledger's back is found.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::{debit, Engine, Ledger};
use serde_json::json;

engine_tests!(
    an_acknowledged_entry_survives_kill_9_and_replays_identically,
    the_log_is_append_only_and_verify_finds_tampering,
    a_rebuild_from_the_log_equals_the_writers_balances,
    a_rebuild_in_several_ranges_equals_the_writers_projections,
    sigterm_stops_the_server_gracefully,
);

async fn an_acknowledged_entry_survives_kill_9_and_replays_identically(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = Arc::new(ledger.server().await);
    let bodies: Vec<_> = (0..30)
        .map(|i| debit(&format!("ur_{i}"), &format!("cust_{}", i % 3), "1.1"))
        .collect();
    let tasks: Vec<_> = bodies
        .iter()
        .cloned()
        .map(|b| {
            let server = server.clone();
            let key = key.clone();
            tokio::spawn(async move { server.post("/v1/usage-debits", &key, &b).await })
        })
        .collect();
    let mut acks = Vec::new();
    for t in tasks {
        let r = t.await.unwrap();
        assert_eq!(r.status, 201);
        acks.push(r);
    }
    Arc::into_inner(server).unwrap().kill9().await;

    let restarted = ledger.server().await;
    for (body, ack) in bodies.iter().zip(&acks) {
        let replay = restarted.post("/v1/usage-debits", &key, body).await;
        assert_eq!(replay.status, 200, "{replay:?}");
        assert!(replay.replayed());
        assert_eq!(replay.body, ack.body, "identical after kill -9 and restart");
    }
    let next = restarted
        .post("/v1/usage-debits", &key, &debit("ur_new", "cust_0", "1"))
        .await;
    assert_eq!(next.json()["seq"], 31);
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
}

async fn the_log_is_append_only_and_verify_finds_tampering(engine: Engine) {
    let ledger = Ledger::new(engine.clone()).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    for i in 1..=3 {
        let r = server
            .post(
                "/v1/usage-debits",
                &key,
                &debit(&format!("u{i}"), "cust", "2"),
            )
            .await;
        assert_eq!(r.status, 201);
    }
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
    assert!(out.contains("3 entries"), "{out}");

    let err = ledger
        .sql_error("UPDATE entries SET amount = '999' WHERE seq = 2")
        .await;
    assert!(err.contains("append-only"), "{err}");
    let err = ledger.sql_error("DELETE FROM entries WHERE seq = 3").await;
    assert!(err.contains("append-only"), "{err}");
    assert_eq!(ledger.count("entries").await, 3);

    let drop_trigger = match engine {
        Engine::Sqlite => "DROP TRIGGER entries_append_only_update",
        Engine::Postgres { .. } => "DROP TRIGGER entries_append_only ON entries",
    };
    ledger
        .sql(&[
            drop_trigger,
            "UPDATE entries SET amount = '999' WHERE seq = 2",
        ])
        .await;
    let (ok, out, err) = ledger.tally(&["verify"]).await;
    assert!(!ok, "verify must fail on an altered entry: {out}");
    assert!(
        out.contains("seq 2") && err.contains("seq 2"),
        "{out} / {err}"
    );
}

async fn a_rebuild_from_the_log_equals_the_writers_balances(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    // Names the rebuild must carry through SQL and JSON unchanged.
    let accounts = ["a", "b", "c,\"q é", "d"];
    for i in 0..60 {
        let account = accounts[i % 4];
        let r = if i % 5 == 0 {
            server
                .post(
                    "/v1/payments",
                    &key,
                    &json!({"payment_id": format!("p{i}"), "account": account, "amount": "10.01", "unit": "USD"}),
                )
                .await
        } else {
            server
                .post(
                    "/v1/usage-debits",
                    &key,
                    &debit(&format!("u{i}"), account, &format!("0.{i:02}1")),
                )
                .await
        };
        assert_eq!(r.status, 201, "{r:?}");
    }
    let mut before = Vec::new();
    for a in accounts {
        before.push(server.balance(&key, a).await);
    }
    let revenue_before = server.get("/v1/accounts/@revenue/balance", &key).await.body;
    let ghost_before = server.get("/v1/accounts/ghost/balance", &key).await.body;
    let rows = ledger.count("balances").await;

    // A projection row changed behind the ledger's back is found...
    ledger
        .sql(&["UPDATE balances SET debits = '0' WHERE account = 'b'"])
        .await;
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(!ok, "{out}");
    assert!(out.contains("stored balance of b"), "{out}");
    // ...as are a lost row, a row of an account without entries, and
    // (SQLite stores text) a value that no longer parses...
    ledger
        .sql(&[
            "DELETE FROM balances WHERE account = 'd'",
            "INSERT INTO balances (tenant_id, account, unit, debits, credits, held) \
             SELECT tenant_id, 'ghost', unit, debits, credits, held FROM balances \
             WHERE account = 'a'",
        ])
        .await;
    if matches!(ledger.engine, Engine::Sqlite) {
        ledger
            .sql(&["UPDATE balances SET held = 'none' WHERE account = 'a'"])
            .await;
    }

    // ...and a rebuild from the log restores exactly what the writer kept.
    let (ok, out, err) = ledger.tally(&["projections", "rebuild"]).await;
    assert!(ok, "{out} {err}");
    assert!(out.contains("from 60 entries"), "{out}");
    for (a, want) in accounts.iter().zip(&before) {
        assert_eq!(&server.balance(&key, a).await, want, "{a}");
    }
    assert_eq!(
        server.get("/v1/accounts/@revenue/balance", &key).await.body,
        revenue_before
    );
    assert_eq!(
        server.get("/v1/accounts/ghost/balance", &key).await.body,
        ghost_before
    );
    assert_eq!(ledger.count("balances").await, rows);
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
}

/// A log big enough for the rebuild to fold it in several ranges at once
/// (seq ranges on SQLite, heap block ranges on PostgreSQL), with accounts
/// and counter-accounts spread over all of them: the partial sums add up to
/// exactly what the writer and the usage projector kept.
async fn a_rebuild_in_several_ranges_equals_the_writers_projections(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let accounts: Vec<String> = (0..37).map(|i| format!("cust-{i}")).collect();
    for batch in 0..3 {
        let ops: Vec<_> = (0..1000)
            .map(|i| {
                let n = batch * 1000 + i;
                let mut op = debit(
                    &format!("u{n}"),
                    &accounts[n % accounts.len()],
                    &format!("{}.{:03}", n % 7 + 1, n % 1000),
                );
                op["type"] = json!("usage_debit");
                op["counter_account"] = json!(format!("@revenue-{}", n % 3));
                op["meter"] = json!(if n % 2 == 0 { "tokens" } else { "images" });
                op["quantity"] = json!(format!("{}", n % 11));
                op
            })
            .collect();
        let r = server
            .post("/v1/batch", &key, &json!({ "operations": ops }))
            .await;
        assert_eq!(r.status, 200, "{r:?}");
    }
    let paths: Vec<String> = accounts
        .iter()
        .map(|a| format!("/v1/accounts/{a}/balance"))
        .chain((0..3).map(|i| format!("/v1/accounts/@revenue-{i}/balance")))
        .chain(
            accounts
                .iter()
                .take(5)
                .map(|a| format!("/v1/accounts/{a}/usage")),
        )
        .collect();
    // The usage rows are read once the projector has caught up.
    for path in paths.iter().filter(|p| p.ends_with("/usage")) {
        common::wait::until_usage_current(&server, &key, path).await;
    }
    let mut before = Vec::new();
    for p in &paths {
        let r = server.get(p, &key).await;
        assert_eq!(r.status, 200, "{p}: {r:?}");
        before.push(r.body);
    }

    ledger
        .sql(&["DELETE FROM balances", "DELETE FROM usage_summaries"])
        .await;
    let (ok, out, err) = ledger.tally(&["projections", "rebuild"]).await;
    assert!(ok, "{out} {err}");
    assert!(out.contains("from 3000 entries"), "{out}");
    for (p, want) in paths.iter().zip(&before) {
        assert_eq!(
            String::from_utf8_lossy(&server.get(p, &key).await.body),
            String::from_utf8_lossy(want),
            "{p}"
        );
    }
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
}

async fn sigterm_stops_the_server_gracefully(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let r = server
        .post("/v1/usage-debits", &key, &debit("u1", "cust", "1"))
        .await;
    assert_eq!(r.status, 201);
    let code = server.terminate().await;
    assert_eq!(code, Some(0), "SIGTERM exits cleanly");
    let again = ledger.server().await;
    let replay = again
        .post("/v1/usage-debits", &key, &debit("u1", "cust", "1"))
        .await;
    assert_eq!(replay.body, r.body);
}
