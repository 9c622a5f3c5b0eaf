//! `import`: `tally import` of a file of new debits beside the running
//! server, against `POST /v1/batch` of 1,000 at 2 clients measured just
//! before and just after it (A-B-A), on the same database. Target: the
//! import sustains at least 0.8x the batch endpoint's rate.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use tokio::process::Command;

use crate::http_load::{self, Target};
use crate::scenarios::batch;
use crate::workload::{new_debit, with_type, Rng};

const GOAL: f64 = 0.8;

pub async fn measure(
    target: &Target,
    tally: &Path,
    url: &str,
    secs: Duration,
) -> anyhow::Result<()> {
    let batches = || Box::new(|rng: &mut Rng| batch((0..1000).map(|_| new_debit(rng, false))));
    let before = http_load::run(target, 2, secs / 2, batches()).await;
    let batch_before = before.rows_per_sec();
    // As many rows as the batch endpoint posts in the scenario's time.
    let rows = ((batch_before * secs.as_secs_f64()) as u64).max(20_000);
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("import.jsonl");
    let mut rng = Rng::new(0x1e5_0a7);
    let mut text = String::with_capacity(rows as usize * 160);
    for _ in 0..rows {
        text.push_str(&with_type(new_debit(&mut rng, false)).to_string());
        text.push('\n');
    }
    std::fs::write(&file, text)?;

    let started = Instant::now();
    let out = Command::new(tally)
        .arg("import")
        .arg(&file)
        .args(["--tenant", "bench", "--database-url", url])
        .env("TALLY_LOG", "warn")
        .output()
        .await?;
    let elapsed = started.elapsed().as_secs_f64();
    let summary = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || count(&summary, "created") != Some(rows) {
        bail!(
            "tally import failed: {summary}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let import_rate = rows as f64 / elapsed;

    let after = http_load::run(target, 2, secs / 2, batches()).await;
    let batch_rate =
        (before.rows + after.rows) as f64 / (before.elapsed + after.elapsed).as_secs_f64();
    let ratio = import_rate / batch_rate;
    println!(
        "import: {rows} rows in {elapsed:.1} s (the process: start, open, import, exit) = {import_rate:.0} rows/s; \
         POST /v1/batch of 1,000 @2 clients {batch_before:.0} rows/s before, {:.0} after; \
         ratio {ratio:.2}x (target {GOAL}x: {})",
        after.rows_per_sec(),
        if ratio >= GOAL { "met" } else { "MISSED" }
    );
    Ok(())
}

/// The count of `outcome` in the summary `tally import` prints.
fn count(summary: &str, outcome: &str) -> Option<u64> {
    summary.lines().find_map(|l| {
        let mut words = l.split_whitespace();
        (words.next() == Some(outcome)).then(|| words.next()?.parse().ok())?
    })
}
