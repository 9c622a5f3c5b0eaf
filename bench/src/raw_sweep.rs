//! The raw limits at their best: each kind of raw work (the minimal work,
//! and tally's work on copies of its tables) in one entry per transaction
//! and in batches, over 1, 8, 16 and 64 connections. Every statement is
//! prepared (sqlx prepares and caches each statement text per connection;
//! the raw statements keep one text per batch size). One connection is
//! the SQLite configuration with prepared multi-row inserts. The best of
//! each kind and shape is what tally is measured against.

use std::time::Duration;

use crate::cpu::{self, CpuPerRow, CpuSample, Watched};
use crate::raw::{self, RawDb};
use crate::stats::Stats;

pub const CONNECTIONS: [u32; 4] = [1, 8, 16, 64];

/// Rows per transaction of the batched shape.
pub const BATCH: usize = 1_000;

/// The best rate of one kind of raw work in one shape, and what won.
#[derive(Debug, Clone)]
pub struct Best {
    pub rows_per_sec: f64,
    pub connections: u32,
    /// Where the CPU went per row in that configuration: the raw client is
    /// the load generator (with SQLite, the database runs in it too).
    pub cpu: Option<CpuPerRow>,
}

/// The best of each: [minimal, tally's tables] × [one entry a transaction,
/// batches of [`BATCH`]].
#[derive(Debug, Clone, Default)]
pub struct Bests {
    pub minimal_single: Option<Best>,
    pub minimal_batch: Option<Best>,
    pub tables_single: Option<Best>,
    pub tables_batch: Option<Best>,
}

impl Bests {
    /// Each best with its name, for the report.
    pub fn named(&self) -> Vec<(&'static str, &Option<Best>)> {
        vec![
            ("minimal work, 1 entry/tx", &self.minimal_single),
            ("minimal work, 1,000 entries/tx", &self.minimal_batch),
            ("tally's tables, 1 entry/tx", &self.tables_single),
            ("tally's tables, 1,000 entries/tx", &self.tables_batch),
        ]
    }
}

/// Runs the sweep for `each` per configuration, printing a table, then
/// the CPU per row of each best configuration (`watched`: the idle tally
/// server, counted as a check, and PostgreSQL's processes).
pub async fn sweep(
    db: &RawDb,
    url: &str,
    each: Duration,
    watched: Watched,
    database: Option<&str>,
) -> anyhow::Result<Bests> {
    let ticks_per_second = cpu::ticks_per_second();
    let mut bests = Bests::default();
    println!(
        "raw limits at their best ({} s each):   {:>8} {:>8} {:>8} {:>8}   (rows/s by connections)",
        each.as_secs(),
        CONNECTIONS[0],
        CONNECTIONS[1],
        CONNECTIONS[2],
        CONNECTIONS[3]
    );
    for (minimal, batch) in [(true, 1), (true, BATCH), (false, 1), (false, BATCH)] {
        let mut rates = Vec::new();
        let mut best: Option<Best> = None;
        for connections in CONNECTIONS {
            let pool = db.with(url, connections, minimal).await?;
            let cpu_before = CpuSample::take(watched);
            let stats: Stats = raw::run(&pool, connections as usize, batch, each).await;
            let cpu = cpu_before
                .zip(CpuSample::take(watched))
                .map(|(a, b)| a.per_row(&b, stats.rows, ticks_per_second));
            pool.close().await;
            let rate = if stats.errors == 0 {
                stats.rows_per_sec()
            } else {
                0.0
            };
            rates.push(format!("{rate:>8.0}"));
            if best.as_ref().is_none_or(|b| rate > b.rows_per_sec) {
                best = Some(Best {
                    rows_per_sec: rate,
                    connections,
                    cpu,
                });
            }
        }
        let what = match minimal {
            true => "minimal work",
            false => "tally's tables",
        };
        println!(
            "  {:<36} {}",
            match batch {
                1 => format!("{what}, 1 entry/tx"),
                n => format!("{what}, {n} entries/tx"),
            },
            rates.join(" ")
        );
        let slot = match (minimal, batch == 1) {
            (true, true) => &mut bests.minimal_single,
            (true, false) => &mut bests.minimal_batch,
            (false, true) => &mut bests.tables_single,
            (false, false) => &mut bests.tables_batch,
        };
        *slot = best;
    }
    for (name, best) in bests.named() {
        if let Some(Best {
            connections,
            cpu: Some(cpu),
            ..
        }) = best
        {
            println!(
                "  {name} at its best ({connections} conn): {}",
                cpu.describe("tally (idle)", database)
            );
        }
    }
    Ok(bests)
}
