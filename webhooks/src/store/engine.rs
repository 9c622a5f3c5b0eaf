//! What both engines' SQL here shares: the read pool, the write
//! transaction, the clock and new ids (a leaf: imports nothing of `store`).

/// Runs `$body` with `$pool` the engine's read pool.
macro_rules! on_pool {
    ($storage:expr, $pool:ident => $body:expr) => {
        match $storage.engine() {
            tally_ledger::store::EngineRef::Sqlite(s) => {
                let $pool = s.pool();
                $body
            }
            tally_ledger::store::EngineRef::Postgres(s) => {
                let $pool = s.pool();
                $body
            }
        }
    };
}

/// Runs `$body` with `$tx` a connection inside the engine's write
/// transaction, and commits; an early return (`?`) rolls back.
macro_rules! in_write {
    ($storage:expr, $tx:ident => $body:expr) => {
        match $storage.engine() {
            tally_ledger::store::EngineRef::Sqlite(s) => {
                let mut write = s.begin_write().await?;
                let $tx: &mut sqlx::SqliteConnection = &mut write;
                let out = $body;
                write.commit().await?;
                out
            }
            tally_ledger::store::EngineRef::Postgres(s) => {
                let mut write = s.pool().begin().await?;
                let $tx: &mut sqlx::PgConnection = &mut write;
                let out = $body;
                write.commit().await?;
                out
            }
        }
    };
}

/// Runs `$body` with `$tx` a connection inside a read-only transaction on
/// one snapshot, so reads of several tables agree with each other (a
/// delivery's status and its attempts are written together and must be
/// read together).
macro_rules! in_snapshot {
    ($storage:expr, $tx:ident => $body:expr) => {
        match $storage.engine() {
            tally_ledger::store::EngineRef::Sqlite(s) => {
                // A deferred transaction in WAL mode reads one snapshot,
                // taken at its first read.
                let mut read = s.pool().begin().await?;
                let $tx: &mut sqlx::SqliteConnection = &mut read;
                let out = $body;
                read.commit().await?;
                out
            }
            tally_ledger::store::EngineRef::Postgres(s) => {
                let mut read = s
                    .pool()
                    .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    .await?;
                let $tx: &mut sqlx::PgConnection = &mut read;
                let out = $body;
                read.commit().await?;
                out
            }
        }
    };
}

pub(crate) use {in_snapshot, in_write, on_pool};

/// Now, in microseconds since the Unix epoch.
pub fn now_micros() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

/// A new id: `prefix` and a UUIDv7's 32 hex digits (time-ordered).
pub(crate) fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}
