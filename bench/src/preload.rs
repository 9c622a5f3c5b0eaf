//! Filling the ledger before measuring, and waiting for the usage projector
//! to catch up between windows.

use std::time::{Duration, Instant};

use anyhow::bail;

use crate::http_load::Target;
use crate::scenarios::batch;
use crate::workload::preload_debit;
use crate::writer_metrics;

/// Posts `n` entries in batches of 1,000 from 4 clients; the rate, rows/s.
pub async fn preload(target: &Target, n: u64) -> anyhow::Result<f64> {
    let started = Instant::now();
    let clients = 4u64;
    let per_batch = 1_000u64;
    let batches = n.div_ceil(per_batch);
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let target = target.clone();
            tokio::spawn(async move {
                let mut conn = target.connect().await?;
                let mut b = c;
                while b < batches {
                    let from = b * per_batch;
                    let to = ((b + 1) * per_batch).min(n);
                    let req = batch((from..to).map(preload_debit));
                    let status = target.send(&mut conn, &req).await?;
                    if status != 200 {
                        bail!("preload batch answered {status}");
                    }
                    if b % 100 == 0 {
                        eprint!("\r  preloading: {} / {n} entries", to);
                    }
                    b += clients;
                }
                Ok(())
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    eprintln!();
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

/// Waits until the usage projector has folded what the previous window
/// wrote; otherwise its catch-up would run during the next one and be
/// counted against it.
pub async fn settle(target: &Target, name: &str) -> anyhow::Result<()> {
    let settling = Instant::now();
    if !wait_for_usage_projection(target, Duration::from_secs(120)).await? {
        eprintln!("  (usage projector still behind after 120 s: {name} includes its work)");
    } else if settling.elapsed() > Duration::from_secs(1) {
        eprintln!(
            "  (usage projector caught up in {:.1} s before {name})",
            settling.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// Polls `/metrics` until the usage projection lag is 0 (true) or `limit`
/// passes (false).
pub async fn wait_for_usage_projection(target: &Target, limit: Duration) -> anyhow::Result<bool> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let text = target.metrics().await?;
        let lag = writer_metrics::sample(&text, "tally_usage_projection_lag_entries");
        if lag == Some(0.0) {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(false)
}
