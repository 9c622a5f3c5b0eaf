//! tally on a real Citus cluster (`TALLY_TEST_CITUS_URL`, started by
//! `scripts/citus-cluster.sh`): the schema distributed by `tally serve`
//! and by `tally db distribute`, its placement read from Citus's catalog,
//! and the append-only protection checked on a worker's own shard. The
//! rest of the suite runs on the cluster too, through `engine_tests!`.
//! Skipped without a cluster, unless `TALLY_REQUIRE_CITUS=1`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use common::{debit, Engine, Ledger};
use sqlx::{Connection, PgConnection};

/// Every table of the public schema Citus knows: (name, kind, colocation).
async fn citus_tables(url: &str) -> Vec<(String, String, i32)> {
    let mut c = PgConnection::connect(url).await.unwrap();
    sqlx::query_as(
        "SELECT table_name::text, citus_table_type, colocation_id FROM citus_tables \
         ORDER BY table_name::text",
    )
    .fetch_all(&mut c)
    .await
    .unwrap()
}

/// Every table of the public schema (tally's own, sqlx's record aside).
async fn public_tables(url: &str) -> BTreeSet<String> {
    let mut c = PgConnection::connect(url).await.unwrap();
    sqlx::query_scalar::<_, String>(
        "SELECT relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') \
           AND relname <> '_sqlx_migrations'",
    )
    .fetch_all(&mut c)
    .await
    .unwrap()
    .into_iter()
    .collect()
}

/// Asserts the placement docs/scaling.md promises: the directory tables
/// read before the tenant is known (`api_keys`, `stripe_integrations`)
/// reference tables, every other table distributed by `tenant_id` in one
/// colocation group, nothing left local.
async fn assert_distributed(url: &str) {
    let tables = citus_tables(url).await;
    let known: BTreeSet<String> = tables.iter().map(|t| t.0.clone()).collect();
    assert_eq!(known, public_tables(url).await, "a table was left local");
    let mut colocation = BTreeSet::new();
    for (table, kind, group) in &tables {
        if table == "api_keys" || table == "stripe_integrations" {
            assert_eq!(kind, "reference", "{table}");
        } else {
            assert_eq!(kind, "distributed", "{table}");
            colocation.insert(*group);
        }
    }
    assert_eq!(colocation.len(), 1, "not colocated: {tables:?}");
    let mut c = PgConnection::connect(url).await.unwrap();
    let columns: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT distribution_column::text FROM citus_tables \
         WHERE citus_table_type = 'distributed'",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    assert_eq!(columns, ["tenant_id"]);
}

/// The worker (host:port) holding each tenant's entries.
async fn worker_of_each_tenant(url: &str) -> BTreeSet<String> {
    let mut c = PgConnection::connect(url).await.unwrap();
    sqlx::query_scalar::<_, String>(
        "SELECT DISTINCT n.nodename || ':' || n.nodeport \
         FROM (SELECT DISTINCT tenant_id FROM entries) t \
         JOIN pg_dist_placement p \
           ON p.shardid = get_shard_id_for_distribution_column('entries', t.tenant_id) \
         JOIN pg_dist_node n ON n.groupid = p.groupid",
    )
    .fetch_all(&mut c)
    .await
    .unwrap()
    .into_iter()
    .collect()
}

/// An `UPDATE` and a `DELETE` of an entry run on the worker holding it,
/// straight on its shard: both must be refused there.
async fn assert_append_only_on_the_worker(url: &str, tenant: &str) {
    let mut c = PgConnection::connect(url).await.unwrap();
    let (shard, host, port): (String, String, i32) = sqlx::query_as(
        "SELECT shard_name('entries'::regclass, p.shardid)::text, n.nodename, n.nodeport \
         FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid \
         WHERE p.shardid = get_shard_id_for_distribution_column('entries', $1)",
    )
    .bind(tenant)
    .fetch_one(&mut c)
    .await
    .unwrap();
    let database = url.rsplit('/').next().unwrap();
    let worker_url = format!("postgres://postgres@{host}:{port}/{database}");
    let mut worker = PgConnection::connect(&worker_url).await.unwrap();
    let rows: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {shard} WHERE tenant_id = $1"
    ))
    .bind(tenant)
    .fetch_one(&mut worker)
    .await
    .unwrap();
    assert!(
        rows > 0,
        "the shard {shard} on {host}:{port} holds {tenant}'s entries"
    );
    for statement in [
        format!("UPDATE {shard} SET amount = amount + 1 WHERE tenant_id = '{tenant}'"),
        format!("DELETE FROM {shard} WHERE tenant_id = '{tenant}'"),
    ] {
        let error = sqlx::raw_sql(&statement)
            .execute(&mut worker)
            .await
            .expect_err(&statement)
            .to_string();
        assert!(error.contains("append-only"), "{statement}: {error}");
    }
}

/// Posts one debit for each of `tenants` (a key each) on a running server.
async fn post_for_tenants(ledger: &Ledger, server: &common::Server, tenants: &[String]) {
    for tenant in tenants {
        let key = ledger.key(tenant, "post,read").await;
        let r = server
            .post(
                "/v1/usage-debits",
                &key,
                &debit(&format!("ur_{tenant}"), "c1", "1.25"),
            )
            .await;
        assert_eq!(
            r.status,
            201,
            "{tenant}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_distributes_the_schema_and_tenants_spread_over_both_workers() {
    let Some(engine) = Engine::citus() else {
        return;
    };
    let ledger = Ledger::new(engine).await;
    let server = ledger.server().await;
    assert_distributed(&ledger.database_url).await;

    let tenants: Vec<String> = (0..12).map(|i| format!("spread{i}")).collect();
    post_for_tenants(&ledger, &server, &tenants).await;
    let workers = worker_of_each_tenant(&ledger.database_url).await;
    assert_eq!(workers.len(), 2, "entries on {workers:?}");
    assert_append_only_on_the_worker(&ledger.database_url, &tenants[0]).await;

    // A second process starting on the distributed schema changes nothing.
    let second = ledger.server().await;
    assert_distributed(&ledger.database_url).await;
    drop(second);
    drop(server);
    let (ok, out, err) = ledger.tally(&["verify"]).await;
    assert!(ok, "verify: {out}{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_distribute_moves_a_ledger_made_on_plain_postgresql() {
    let Some(engine) = Engine::citus() else {
        return;
    };
    let ledger = Ledger::new(engine).await;
    // The same database as plain PostgreSQL: no citus extension on the
    // coordinator, so tally keeps every table local.
    let mut c = PgConnection::connect(&ledger.database_url).await.unwrap();
    let nodes: Vec<(String, i32, i32)> =
        sqlx::query_as("SELECT nodename, nodeport, groupid FROM pg_dist_node ORDER BY groupid")
            .fetch_all(&mut c)
            .await
            .unwrap();
    sqlx::raw_sql("DROP EXTENSION citus CASCADE")
        .execute(&mut c)
        .await
        .unwrap();
    let tenants: Vec<String> = (0..8).map(|i| format!("plain{i}")).collect();
    let server = ledger.server().await;
    post_for_tenants(&ledger, &server, &tenants).await;
    let key = ledger.key("plain0", "post,read").await;
    let before = server.balance(&key, "c1").await;
    drop(server);
    assert!(public_tables(&ledger.database_url)
        .await
        .contains("entries"));

    // Refused while the database has no Citus, having changed nothing.
    let (ok, _, err) = ledger.tally(&["db", "distribute", "--yes"]).await;
    assert!(!ok && err.contains("no citus extension"), "{err}");

    // The operator makes it a coordinator with the cluster's workers.
    sqlx::raw_sql("CREATE EXTENSION citus")
        .execute(&mut c)
        .await
        .unwrap();
    for (host, port, group) in &nodes {
        let register = if *group == 0 {
            "SELECT citus_set_coordinator_host($1, $2)"
        } else {
            "SELECT citus_add_node($1, $2)"
        };
        sqlx::query(register)
            .bind(host)
            .bind(port)
            .execute(&mut c)
            .await
            .unwrap();
    }

    // Without --yes: the plan, and nothing done.
    let (ok, out, err) = ledger.tally(&["db", "distribute"]).await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("api_keys: reference table"), "{out}");
    assert!(
        out.contains("entries: distributed by tenant_id, colocated with ledger_heads"),
        "{out}"
    );
    assert!(out.contains("--yes"), "{out}");
    assert!(citus_tables(&ledger.database_url).await.is_empty());

    let (ok, out, err) = ledger.tally(&["db", "distribute", "--yes"]).await;
    assert!(ok, "{out}{err}");
    assert_distributed(&ledger.database_url).await;
    assert_eq!(worker_of_each_tenant(&ledger.database_url).await.len(), 2);
    assert_append_only_on_the_worker(&ledger.database_url, "plain0").await;
    let (ok, out, err) = ledger.tally(&["verify"]).await;
    assert!(ok, "verify after distribute: {out}{err}");

    // The ledger goes on where it was: the same balance, then a replay and
    // a new entry on the distributed tables.
    let server = ledger.server().await;
    assert_eq!(server.balance(&key, "c1").await, before);
    let replay = server
        .post("/v1/usage-debits", &key, &debit("ur_plain0", "c1", "1.25"))
        .await;
    assert_eq!(replay.status, 200);
    let fresh = server
        .post("/v1/usage-debits", &key, &debit("ur_after", "c1", "1"))
        .await;
    assert_eq!(fresh.status, 201);
    let (ok, out, _) = ledger.tally(&["db", "distribute"]).await;
    assert!(ok && out.contains("nothing to do"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_distribute_refuses_a_server_without_citus() {
    let Some(engine) = Engine::postgres() else {
        return;
    };
    let ledger = Ledger::new(engine).await;
    let (ok, _, err) = ledger.tally(&["db", "distribute", "--yes"]).await;
    assert!(!ok, "{err}");
    assert!(
        err.contains("no Citus") || err.contains("no citus extension"),
        "{err}"
    );
    assert!(!public_tables(&ledger.database_url)
        .await
        .contains("entries"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_distribute_refuses_sqlite() {
    let ledger = Ledger::new(Engine::Sqlite).await;
    let (ok, _, err) = ledger.tally(&["db", "distribute"]).await;
    assert!(!ok && err.contains("SQLite"), "{err}");
}

/// Every statement on a request's path is routed to one node: the server
/// runs with `citus.multi_task_query_log_level = error`, under which Citus
/// refuses any statement it would split into tasks on several shards, and
/// a request of every kind must still be answered as on one server. (The
/// background jobs' discovery queries span tenants on purpose and fail
/// meanwhile; no request depends on them.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_is_routed_to_one_node() {
    let Some(engine) = Engine::citus() else {
        return;
    };
    let ledger = Ledger::new(engine).await;
    // Distributed first, by a process without the setting.
    drop(ledger.server().await);
    let key = ledger.key("routed", "post,read,admin,audit").await;
    let url = format!(
        "{}?options=-c%20citus.multi_task_query_log_level%3Derror",
        ledger.database_url
    );
    let server = common::Server::start(&url, &[]).await;
    let ok = |r: &common::Resp, what: &str| {
        assert!(
            (200..300).contains(&r.status),
            "{what}: {} {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        );
    };
    let put = server
        .put(
            "/v1/accounts/cust",
            &key,
            &serde_json::json!({"unit": "USD", "overdraft": "forbid"}),
        )
        .await;
    ok(&put, "settings");
    let posts = [
        (
            "/v1/payments",
            serde_json::json!({"payment_id": "p1", "account": "cust", "amount": "10", "unit": "USD"}),
        ),
        (
            "/v1/usage-debits",
            serde_json::json!({"usage_record_id": "u1", "account": "cust", "amount": "1", "unit": "USD", "meter": "tokens", "quantity": "100"}),
        ),
        (
            "/v1/usage-debits",
            serde_json::json!({"usage_record_id": "u1", "account": "cust", "amount": "1", "unit": "USD", "meter": "tokens", "quantity": "100"}),
        ),
        (
            "/v1/holds",
            serde_json::json!({"hold_id": "h1", "account": "cust", "amount": "2", "unit": "USD", "ttl_seconds": 600}),
        ),
        (
            "/v1/holds/h1/capture",
            serde_json::json!({"capture_id": "c1", "amount": "1"}),
        ),
        (
            "/v1/refunds",
            serde_json::json!({"refund_id": "r1", "payment_id": "p1", "amount": "1"}),
        ),
        (
            "/v1/batch",
            serde_json::json!({"operations": [
                {"type": "usage_debit", "usage_record_id": "b1", "account": "cust", "amount": "0.5", "unit": "USD"},
                {"type": "usage_debit", "usage_record_id": "b2", "account": "other", "amount": "0.5", "unit": "USD"}
            ]}),
        ),
        (
            "/v1/webhook-endpoints",
            serde_json::json!({"url": "https://example.com/hook", "event_types": ["entry.posted"]}),
        ),
    ];
    for (path, body) in &posts {
        ok(&server.post(path, &key, body).await, path);
    }
    let first = server.get("/v1/entries?upstream_id=u1", &key).await;
    ok(&first, "entries");
    let id = first.json()["entries"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let reversal = server
        .post(
            "/v1/reversals",
            &key,
            &serde_json::json!({"reversal_id": "rev1", "entry_id": id, "reason": "test"}),
        )
        .await;
    ok(&reversal, "reversal");
    for path in [
        "/v1/accounts/cust/balance".to_owned(),
        "/v1/accounts/cust".to_owned(),
        "/v1/accounts?limit=10".to_owned(),
        format!("/v1/entries/{id}"),
        "/v1/entries?account=cust&limit=5".to_owned(),
        "/v1/entries?status=rejected".to_owned(),
        "/v1/entries?upstream_id=u1".to_owned(),
        "/v1/holds/h1".to_owned(),
        format!(
            "/v1/accounts/cust/statement?from=2020-01-01T00:00:00Z&to={}",
            chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ")
        ),
        "/v1/accounts/cust/usage".to_owned(),
        "/v1/audit/head".to_owned(),
        "/v1/webhook-endpoints".to_owned(),
    ] {
        ok(&server.get(&path, &key).await, &path);
    }
    drop(server);
    let (ok_verify, out, err) = ledger.tally(&["verify"]).await;
    assert!(ok_verify, "verify: {out}{err}");
}
