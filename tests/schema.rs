//! Every primary key and unique constraint of tenant data starts with
//! `tenant_id`, read from the database's own catalog after the migrations
//! ran. That is what lets the tables be distributed by `tenant_id` across
//! nodes (docs/scaling.md): a unique constraint can be enforced on a node
//! only if every row it compares lives there, and with the tenant first,
//! each tenant's rows do. It also keeps every look-up inside one tenant's
//! part of the index.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use common::{Engine, Ledger};
use sqlx::{Connection, Row};

/// Tables that are not tenant data, and why: not checked.
const EXCEPTIONS: [(&str, &str); 1] = [(
    "_sqlx_migrations",
    "sqlx's record of the applied migrations: schema, not tenant data",
)];

/// Reference tables: a copy on every node instead of distributed
/// (docs/scaling.md), and why. Their keys are checked all the same: led by
/// `tenant_id`, no key of one tenant can collide with another's.
const REFERENCE_TABLES: [(&str, &str); 1] = [(
    "api_keys",
    "a request's key is looked up by its hash before its tenant is known, \
     so every node holds every key",
)];

/// Tables that must be found, each with a key: a catalog query that found
/// nothing must not pass.
const EXPECTED: [&str; 7] = [
    "api_keys",
    "ledger_heads",
    "entries",
    "balances",
    "rule_state",
    "usage_summaries",
    "projector_checkpoints",
];

/// One primary key or unique constraint (or unique index): its name and
/// columns in order; `None` for an expression.
#[derive(Debug)]
struct UniqueKey {
    name: String,
    columns: Vec<Option<String>>,
}

/// Table -> its columns, and its unique keys.
type Catalog = BTreeMap<String, (Vec<String>, Vec<UniqueKey>)>;

async fn postgres_catalog(url: &str) -> Catalog {
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    let mut catalog = Catalog::new();
    let tables = sqlx::query(
        "SELECT c.relname::text, a.attname::text \
         FROM pg_class c \
         JOIN pg_namespace n ON n.oid = c.relnamespace \
         JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped \
         WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') \
         ORDER BY c.relname, a.attnum",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    for row in tables {
        let table: String = row.get(0);
        catalog.entry(table).or_default().0.push(row.get(1));
    }
    // Every unique index, which includes those behind PRIMARY KEY and
    // UNIQUE constraints; columns in key order, NULL for an expression.
    let keys = sqlx::query(
        "SELECT t.relname::text, i.relname::text, \
                array_agg(a.attname::text ORDER BY k.ord) \
         FROM pg_index x \
         JOIN pg_class i ON i.oid = x.indexrelid \
         JOIN pg_class t ON t.oid = x.indrelid \
         JOIN pg_namespace n ON n.oid = t.relnamespace \
         CROSS JOIN LATERAL unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord) \
         LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum \
         WHERE n.nspname = current_schema() AND (x.indisunique OR x.indisprimary) \
         GROUP BY t.relname, i.relname",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    for row in keys {
        let table: String = row.get(0);
        catalog.entry(table).or_default().1.push(UniqueKey {
            name: row.get(1),
            columns: row.get(2),
        });
    }
    catalog
}

async fn sqlite_catalog(url: &str) -> Catalog {
    let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
    let mut catalog = Catalog::new();
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    for table in tables {
        let columns = sqlx::query(&format!("PRAGMA table_info(\"{table}\")"))
            .fetch_all(&mut c)
            .await
            .unwrap();
        let names: Vec<String> = columns.iter().map(|r| r.get("name")).collect();
        let mut keys = Vec::new();
        // A rowid table's own PRIMARY KEY on one INTEGER column has no
        // index of its own: read it from table_info (pk = position in key).
        let mut pk: Vec<(i64, String)> = columns
            .iter()
            .filter(|r| r.get::<i64, _>("pk") > 0)
            .map(|r| (r.get("pk"), r.get("name")))
            .collect();
        pk.sort();
        if !pk.is_empty() {
            keys.push(UniqueKey {
                name: format!("{table} primary key"),
                columns: pk.into_iter().map(|(_, n)| Some(n)).collect(),
            });
        }
        let indexes = sqlx::query(&format!("PRAGMA index_list(\"{table}\")"))
            .fetch_all(&mut c)
            .await
            .unwrap();
        for index in indexes {
            if index.get::<i64, _>("unique") == 0 {
                continue;
            }
            let name: String = index.get("name");
            let info = sqlx::query(&format!("PRAGMA index_info(\"{name}\")"))
                .fetch_all(&mut c)
                .await
                .unwrap();
            let mut columns: Vec<(i64, Option<String>)> = info
                .iter()
                .map(|r| (r.get("seqno"), r.get("name")))
                .collect();
            columns.sort();
            keys.push(UniqueKey {
                name,
                columns: columns.into_iter().map(|(_, n)| n).collect(),
            });
        }
        catalog.insert(table, (names, keys));
    }
    catalog
}

async fn every_unique_key_of_tenant_data_starts_with_tenant_id(engine: Engine) {
    let ledger = Ledger::new(engine.clone()).await;
    // Creating a key opens the database, which runs every migration.
    ledger.key("acme", "read").await;
    let catalog = match engine {
        Engine::Sqlite => sqlite_catalog(&ledger.database_url).await,
        Engine::Postgres { .. } => postgres_catalog(&ledger.database_url).await,
    };
    for (table, _) in EXCEPTIONS.iter().chain(&REFERENCE_TABLES) {
        assert!(
            catalog.contains_key(*table),
            "{table} names no table: drop it from the list"
        );
    }
    for table in EXPECTED {
        assert!(
            catalog.get(table).is_some_and(|(_, keys)| !keys.is_empty()),
            "no key of {table} found: {:?}",
            catalog.keys().collect::<Vec<_>>()
        );
    }
    let mut checked = 0;
    let mut violations = Vec::new();
    for (table, (columns, keys)) in &catalog {
        if EXCEPTIONS.iter().any(|(t, _)| t == table) {
            continue;
        }
        checked += 1;
        if !columns.iter().any(|c| c == "tenant_id") {
            violations.push(format!("{table} has no tenant_id column"));
        }
        if keys.is_empty() {
            violations.push(format!("{table} has no primary key"));
        }
        for key in keys {
            if key.columns.first().and_then(|c| c.as_deref()) != Some("tenant_id") {
                violations.push(format!("{table}: {} is {:?}", key.name, key.columns));
            }
        }
    }
    assert!(checked >= EXPECTED.len(), "{checked} tables checked");
    assert!(
        violations.is_empty(),
        "{} tenant-data keys do not start with tenant_id:\n{}",
        engine.name(),
        violations.join("\n")
    );
}

engine_tests!(every_unique_key_of_tenant_data_starts_with_tenant_id);
