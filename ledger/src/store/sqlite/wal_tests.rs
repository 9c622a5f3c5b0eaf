#![allow(clippy::unwrap_used)]

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::ConnectOptions;

use super::{checkpoint_once, WAL_RESTART_WAIT};
use crate::store::SqliteStore;

/// A WAL over the bound starts over: its last frames are copied under
/// the write turn, and the next writes go to the start of the file,
/// which does not grow. One under the bound is left to PASSIVE passes,
/// which never take the turn.
#[tokio::test]
async fn the_checkpointer_restarts_a_wal_over_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wal.db");
    let store = SqliteStore::connect(&format!("sqlite://{}", path.display()), 2)
        .await
        .unwrap();
    let wal = || std::fs::metadata(dir.path().join("wal.db-wal")).map_or(0, |m| m.len());
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
        .unwrap()
        .pragma("wal_autocheckpoint", "0")
        .busy_timeout(WAL_RESTART_WAIT);
    let mut conn = options.connect().await.unwrap();
    let gate = tokio::sync::Mutex::new(());
    let write = || async {
        for i in 0..50 {
            sqlx::query("INSERT INTO api_keys (tenant_id, key_hash, scopes, created_at) VALUES ('t', ?, 'read', '2026-01-01T00:00:00Z')")
                .bind(format!("k{i}-{}", uuid::Uuid::now_v7()))
                .execute(&store.pool)
                .await
                .unwrap();
        }
    };
    write().await;
    // Under the bound: PASSIVE passes beside the writes, never the turn.
    let turn = gate.lock().await;
    let under = tokio::time::timeout(
        Duration::from_millis(300),
        checkpoint_once(&mut conn, &gate, i64::MAX),
    )
    .await;
    assert!(
        under.is_ok(),
        "under the bound the round does not wait for the write turn"
    );
    under.unwrap().unwrap();

    // Over the bound: the last copy waits for the turn.
    write().await;
    let waited = tokio::time::timeout(
        Duration::from_millis(300),
        checkpoint_once(&mut conn, &gate, 0),
    )
    .await;
    assert!(
        waited.is_err(),
        "over the bound the restart waits for the write turn"
    );
    drop(turn);
    checkpoint_once(&mut conn, &gate, 0).await.unwrap();
    let size = wal();
    assert!(size > 0);
    write().await;
    assert_eq!(
        wal(),
        size,
        "the next writes go to the start of the file, which does not grow"
    );
}
