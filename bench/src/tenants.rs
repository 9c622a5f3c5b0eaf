//! The tenants of the tenant scenarios: one key each, created before the
//! server starts, through the ledger's storage itself. `tally keys create`
//! per tenant would open the database and check its migrations 10,000
//! times.

use std::sync::Arc;
use std::time::Instant;

use tally_ledger::keys::{generate_secret, hash_secret};
use tally_ledger::store::Storage;
use tokio::task::JoinSet;

use crate::http_load::auth_line;

/// Tasks inserting keys at once (PostgreSQL commits them side by side;
/// SQLite takes them in turn).
const INSERTERS: usize = 8;

/// Creates `count` tenants named `{prefix}-00000`… with a `post,read` key
/// each; their `Authorization` lines, in tenant order.
pub async fn create(url: &str, prefix: &str, count: usize) -> anyhow::Result<Arc<[Arc<str>]>> {
    if count == 0 {
        return Ok(Arc::from(Vec::new()));
    }
    let started = Instant::now();
    let storage = Storage::connect_with(url, INSERTERS as u32).await?;
    let mut inserters = JoinSet::new();
    for first in 0..INSERTERS {
        let (storage, prefix) = (storage.clone(), prefix.to_owned());
        inserters.spawn(async move {
            let mut keys = Vec::new();
            for i in (first..count).step_by(INSERTERS) {
                let secret = generate_secret()?;
                let tenant = format!("{prefix}-{i:05}");
                storage
                    .insert_api_key(&tenant, &hash_secret(&secret), "post,read")
                    .await?;
                keys.push((i, auth_line(&secret)));
            }
            anyhow::Ok(keys)
        });
    }
    let mut keys = Vec::with_capacity(count);
    while let Some(done) = inserters.join_next().await {
        keys.extend(done??);
    }
    keys.sort_by_key(|(i, _)| *i);
    eprintln!(
        "created {count} tenants ({prefix}-…) with a key each in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(keys.into_iter().map(|(_, key)| key).collect())
}

/// The resident anonymous memory of process `pid` in KiB (Linux
/// `RssAnon`: the heap and stacks), if readable. Not `VmRSS`: with SQLite
/// that counts the pages of the database file the server has mapped and
/// touched (`mmap_size`), which grow with the rows read, not with tenants,
/// and which the kernel reclaims at will.
pub fn rss_kib(pid: Option<u32>) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid?)).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}
