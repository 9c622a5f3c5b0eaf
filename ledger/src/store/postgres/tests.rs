#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::connect_options;
use crate::store::Storage;
use crate::test_databases::TestDb;

#[test]
fn jit_is_off_unless_the_url_chooses() {
    let plain = connect_options("postgres://u@localhost/db").unwrap();
    assert_eq!(plain.get_options(), Some("-c jit=off"));
    let other = connect_options("postgres://u@localhost/db?options=-c%20work_mem%3D8MB").unwrap();
    assert_eq!(other.get_options(), Some("-c work_mem=8MB -c jit=off"));
    for url in [
        "postgres://u@localhost/db?options=-c%20jit%3Don",
        "postgres://u@localhost/db?options[jit]=on",
    ] {
        let chosen = connect_options(url).unwrap();
        assert_eq!(chosen.get_options(), Some("-c jit=on"), "{url}");
    }
}

#[tokio::test]
async fn tally_sessions_run_without_jit() {
    let Some(db) = TestDb::postgres(2).await else {
        return;
    };
    let Storage::Postgres(store) = &db.storage else {
        unreachable!("TestDb::postgres gives a PostgreSQL store");
    };
    let jit: String = sqlx::query_scalar("SHOW jit")
        .fetch_one(&store.pool)
        .await
        .unwrap();
    assert_eq!(jit, "off");
    db.remove().await;
}

#[tokio::test]
async fn look_ups_in_flight_take_at_most_a_quarter_of_the_pool() {
    for (pool, in_flight) in [(2, 1), (8, 2), (16, 4), (64, 4)] {
        let Some(db) = TestDb::postgres(pool).await else {
            return;
        };
        assert_eq!(db.storage.look_ups_in_flight(), in_flight, "pool {pool}");
        db.remove().await;
    }
    let db = TestDb::sqlite(16).await;
    assert_eq!(db.storage.look_ups_in_flight(), 1);
    db.remove().await;
}

/// Migration 0007: whatever locale the database was created with, no
/// index of tally's compares text through strcoll(); a later migration
/// that adds an index on a column of the default collation fails here.
#[tokio::test]
async fn every_indexed_text_column_compares_bytes() {
    let Some(db) = TestDb::postgres(2).await else {
        return;
    };
    let Storage::Postgres(store) = &db.storage else {
        unreachable!("TestDb::postgres gives a PostgreSQL store");
    };
    let linguistic: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname || '.' || a.attname \
         FROM pg_index i \
         JOIN pg_class c ON c.oid = i.indrelid \
         JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema() \
         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) \
         WHERE a.atttypid = 'text'::regtype AND c.relname <> '_sqlx_migrations' \
           AND a.attcollation <> (SELECT oid FROM pg_collation WHERE collname = 'C') \
         ORDER BY 1",
    )
    .fetch_all(&store.pool)
    .await
    .unwrap();
    assert!(linguistic.is_empty(), "not byte-ordered: {linguistic:?}");
    db.remove().await;
}
