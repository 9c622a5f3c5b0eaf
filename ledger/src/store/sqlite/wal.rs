//! The WAL checkpointer: copies the WAL back into the database file off
//! the commit path and keeps the file bounded.

use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, SqliteConnection, SqlitePool};

/// The WAL is made to start over once it holds more than this (see
/// [`checkpoint_once`]); it bounds the file. High, because each start-over
/// holds this process's writes back while the last frames are copied: with a
/// TRUNCATE checkpoint at 64 MiB that ran every few seconds under single
/// POSTs at 64 clients and their p99 went from 19 to 27 ms.
pub(super) const WAL_RESTART_ABOVE_BYTES: i64 = 1024 * 1024 * 1024;

/// New frames per pass below which the checkpointer stops copying beside
/// the writes and copies the rest holding the write turn (4 MiB of 4 KiB
/// pages). The copy is short; the fsync of the database that ends it is
/// most of the hold (24–85 ms measured right after the passes).
const WAL_BACKLOG_UNDER_TURN: i64 = 1_000;

/// Longest the restarting checkpoint waits for readers of the old frames
/// (SQLite's busy handler, which sleeps 1, 2, 5 … ms): look-ups and the
/// usage projector's reads are short, and this bounds what a long one can
/// add to the writes' wait. A restart that gives up is tried again the
/// next second.
pub(super) const WAL_RESTART_WAIT: Duration = Duration::from_millis(10);

/// Most PASSIVE passes over a WAL past its bound before the turn is taken
/// whatever the backlog: each pass copies what the writes appended during
/// the one before, so a handful brings it down unless the writes outrun
/// the copying, in which case waiting longer would not help.
const WAL_PASSES_BEFORE_TURN: usize = 8;

/// Copies the WAL back into the database file once a second, off the
/// commit path. PASSIVE never blocks writers or readers.
pub(super) async fn checkpoint_wal(
    pool: SqlitePool,
    options: SqliteConnectOptions,
    write_gate: Arc<tokio::sync::Mutex<()>>,
    restart_above: i64,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    // Its own connection, which waits at most `WAL_RESTART_WAIT` for the
    // write lock and for readers: the restarting checkpoint holds this
    // process's writes back while it waits.
    let options = options.busy_timeout(WAL_RESTART_WAIT);
    let mut conn: Option<SqliteConnection> = None;
    loop {
        tick.tick().await;
        if pool.is_closed() {
            return;
        }
        if conn.is_none() {
            match options.connect().await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    tracing::warn!(error = %e, "WAL checkpointer cannot connect; will retry");
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        if let Err(e) = checkpoint_once(c, &write_gate, restart_above).await {
            tracing::warn!(error = %e, "WAL checkpoint failed; will retry");
            conn = None;
        }
    }
}

/// One round of the checkpointer: a PASSIVE checkpoint (copies what it can
/// without waiting for anyone). SQLite starts the WAL over only when a
/// writer begins after every frame was copied, which under a steady stream
/// of groups never happens: the file grew to 6 GB while 1,000,000 entries
/// were loaded. So once the WAL holds more
/// than `restart_above` bytes, the round makes that moment happen. It copies
/// beside the writes, pass after pass, until few frames are left (each
/// pass copies what was appended during the one before), then takes this
/// process's write turn, so no group appends, and runs a RESTART
/// checkpoint: it copies the last frames and waits (at most
/// [`WAL_RESTART_WAIT`]) for readers of the old frames to finish. The next
/// group then writes from the start of the file, which keeps its size.
///
/// Not a TRUNCATE checkpoint right after one PASSIVE pass, which was tried:
/// it held every writer back while it copied the frames
/// appended during that pass and emptied the file, 0.53–0.64 s every ~9 s
/// under a flood of batches. Now the writes wait 7–135 ms (the last copy
/// ends with an fsync of the database, slow right after the passes).
pub(super) async fn checkpoint_once(
    conn: &mut SqliteConnection,
    write_gate: &tokio::sync::Mutex<()>,
    restart_above: i64,
) -> Result<(), sqlx::Error> {
    let (_, mut frames, _) = wal_checkpoint(conn, "PASSIVE").await?;
    let page_size: i64 = sqlx::query_scalar("PRAGMA page_size")
        .fetch_one(&mut *conn)
        .await?;
    if frames.saturating_mul(page_size) <= restart_above {
        return Ok(());
    }
    // A pass copies the frames there were when it began; what the writes
    // append meanwhile is the next pass's work, and what is left when the
    // passes stop is copied holding the turn. They stop once a pass finds
    // few new frames (or fewer than before: the WAL started over by itself).
    let first = frames;
    let mut passes = 1;
    let mut backlog = frames;
    while backlog > WAL_BACKLOG_UNDER_TURN && passes < WAL_PASSES_BEFORE_TURN {
        let (_, now, _) = wal_checkpoint(conn, "PASSIVE").await?;
        backlog = now - frames;
        frames = now;
        passes += 1;
    }
    let started = std::time::Instant::now();
    let (busy, waited) = {
        let _turn = write_gate.lock().await;
        let waited = started.elapsed();
        (wal_checkpoint(conn, "RESTART").await?.0, waited)
    };
    tracing::debug!(
        frames = first,
        passes,
        backlog,
        wait_ms = waited.as_secs_f64() * 1e3,
        held_ms = (started.elapsed() - waited).as_secs_f64() * 1e3,
        restarted = busy == 0,
        "WAL over its bound"
    );
    Ok(())
}

/// `PRAGMA wal_checkpoint(mode)`: whether it was blocked, the frames in the
/// WAL and the frames copied into the database (SQLite's three columns).
async fn wal_checkpoint(
    conn: &mut SqliteConnection,
    mode: &'static str,
) -> Result<(i64, i64, i64), sqlx::Error> {
    sqlx::query_as(&format!("PRAGMA wal_checkpoint({mode})"))
        .fetch_one(&mut *conn)
        .await
}

#[cfg(test)]
#[path = "wal_tests.rs"]
mod tests;
