//! `tally verify`: recompute every chain and fold, trust nothing stored.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::balance::BalanceProjection;
use crate::chain::{entry_hash, Head, GENESIS_HASH};
use crate::entry::StoredEntry;
use crate::fingerprint::Fingerprint;
use crate::fold::LogFold;
use crate::rule_fold::RuleFold;
use crate::store::{EntryFilter, Storage, LOG_PAGE};
use crate::LedgerError;

/// Pages of the log in seq order, read one page ahead of the checks. After
/// the last full page, one unbounded read finds anything a gap hides.
fn read_ahead(
    storage: Storage,
    tenant: String,
) -> mpsc::Receiver<Result<Vec<StoredEntry>, LedgerError>> {
    let (tx, rx) = mpsc::channel(2);
    tokio::spawn(async move {
        let mut after = 0;
        loop {
            let mut page = storage
                .list_entries(&tenant, &EntryFilter::log_page(after, LOG_PAGE))
                .await;
            if matches!(&page, Ok(p) if (p.len() as i64) < LOG_PAGE) {
                // Short: the end of the log, or a gap in it, which the
                // checks must see and report.
                let filter = EntryFilter {
                    after_seq: after,
                    limit: LOG_PAGE,
                    ..EntryFilter::default()
                };
                page = storage.list_entries(&tenant, &filter).await;
            }
            let last = match &page {
                Ok(p) => p.last().map(|e| e.seq),
                Err(_) => None,
            };
            let full = matches!(&page, Ok(p) if (p.len() as i64) == LOG_PAGE);
            if tx.send(page).await.is_err() {
                return;
            }
            match last {
                Some(seq) if full => after = seq,
                _ => return,
            }
        }
    });
    rx
}

/// Checks seq continuity, `prev_hash`, fingerprint and hash of every entry
/// of `page`, the first chaining from (`after_seq`, `chained_from`), in as
/// many chunks at once as the machine has cores. Resolves to the first
/// problem in seq order.
fn check_hashes_in_parallel(
    page: &Arc<Vec<StoredEntry>>,
    after_seq: i64,
    chained_from: [u8; 32],
) -> impl std::future::Future<Output = Result<Option<(i64, String)>, LedgerError>> {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    let chunk = page.len().div_ceil(cores).max(1);
    let tasks: Vec<_> = (0..page.len())
        .step_by(chunk)
        .map(|start| {
            let page = Arc::clone(page);
            tokio::task::spawn_blocking(move || {
                let end = (start + chunk).min(page.len());
                // Each chunk chains from the hash its predecessor stores;
                // were that hash wrong, the predecessor's check, which comes
                // first in seq order, reports it.
                let (seq, hash) = match start.checked_sub(1).map(|i| &page[i]) {
                    None => (after_seq, chained_from),
                    Some(before) => match crate::chain::decode_hash(&before.hash) {
                        Some(hash) => (before.seq, hash),
                        None => return Some((before.seq, "hash is not hex".to_owned())),
                    },
                };
                check_chain(&page[start..end], seq, hash)
            })
        })
        .collect();
    async move {
        let mut first = None;
        for task in tasks {
            let found = task
                .await
                .map_err(|e| LedgerError::Unavailable(format!("a hash check stopped: {e}")))?;
            if first.is_none() {
                first = found;
            }
        }
        Ok(first)
    }
}

/// The chain checks of consecutive entries, the first chaining from
/// (`seq`, `hash`): the first problem found, if any.
fn check_chain(entries: &[StoredEntry], mut seq: i64, mut hash: [u8; 32]) -> Option<(i64, String)> {
    for e in entries {
        if e.seq != seq + 1 {
            return Some((seq + 1, format!("missing; next stored seq is {}", e.seq)));
        }
        if !crate::hex_text::is_lower_hex_of(&e.prev_hash, &hash) {
            return Some((
                e.seq,
                "prev_hash does not match the previous entry's hash".into(),
            ));
        }
        if !Fingerprint::of_canonical(&e.params).is_text_of(&e.fingerprint) {
            return Some((
                e.seq,
                "fingerprint does not match the stored parameters".into(),
            ));
        }
        let computed = entry_hash(&hash, e);
        if !crate::hex_text::is_lower_hex_of(&e.hash, &computed) {
            return Some((e.seq, "hash does not match the entry's contents".into()));
        }
        (seq, hash) = (e.seq, computed);
    }
    None
}

/// What was checked for one tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantReport {
    pub tenant: String,
    pub entries: i64,
    pub balances: usize,
    /// Rule-state records (settings, holds, refunded totals, reversals).
    pub records: usize,
    pub head: Head,
}

/// One thing found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub tenant: String,
    /// The first entry found broken, when the problem is in the log.
    pub seq: Option<i64>,
    pub problem: String,
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.seq {
            Some(seq) => write!(f, "tenant {}: seq {}: {}", self.tenant, seq, self.problem),
            None => write!(f, "tenant {}: {}", self.tenant, self.problem),
        }
    }
}

/// What [`verify_log`] found in a log that holds together.
#[derive(Debug, Clone)]
pub struct VerifiedLog {
    pub report: TenantReport,
    /// The balances the log folds to, for the check of the stored ones
    /// (tally-projections).
    pub balances: BalanceProjection,
    /// Every difference between the stored rule state and the log's.
    pub rule_problems: Vec<Broken>,
}

/// Verifies one tenant's log: gap-free seq, every fingerprint and hash,
/// every `balance_after`, the head; then the rule state the writer decides
/// by (account settings, holds, refunded totals, reversals) against a
/// fresh fold of the log. A problem in the log is reported alone (the fold
/// stops there); every difference of rule state is reported. The stored
/// balances are checked against [`VerifiedLog::balances`] by the caller.
/// `progress` is told how many entries have been checked so far.
pub async fn verify_log(
    storage: &Storage,
    tenant: &str,
    mut progress: impl FnMut(i64),
) -> Result<Result<VerifiedLog, Vec<Broken>>, LedgerError> {
    let broken = |seq: Option<i64>, problem: String| Broken {
        tenant: tenant.to_owned(),
        seq,
        problem,
    };
    let head = storage.head(tenant).await?;
    let mut log = LogFold::new();
    let mut rules = RuleFold::new();
    let mut prev = Head {
        seq: 0,
        hash: GENESIS_HASH,
    };
    // Pages are read ahead while the last one is checked; each page's
    // hashes are checked in parallel chunks, since every entry stores the
    // hash it chains from, while the folds, which must go in order, run here.
    let mut pages = read_ahead(storage.clone(), tenant.to_owned());
    while let Some(page) = pages.recv().await {
        let page = Arc::new(page?);
        let chained_from = prev.hash;
        let hashes = check_hashes_in_parallel(&page, prev.seq, chained_from);
        let mut folded_to = None;
        for e in page.iter() {
            if let Err(LedgerError::Corrupt(problem)) = log.apply(e) {
                folded_to = Some((e.seq, problem));
                break;
            }
            if let Err(LedgerError::Corrupt(problem)) = rules.apply(e) {
                folded_to = Some((e.seq, problem));
                break;
            }
            let posted = log
                .balances
                .get(&e.account, &e.unit)
                .map(|b| b.posted())
                .unwrap_or_default();
            if posted != e.balance_after {
                folded_to = Some((
                    e.seq,
                    format!(
                        "balance_after is {} but the log folds to {}",
                        e.balance_after, posted
                    ),
                ));
                break;
            }
        }
        // The first problem in seq order wins; at one entry, the chain's.
        match (hashes.await?, folded_to) {
            (Some((seq, problem)), Some((fseq, _))) if seq <= fseq => {
                return Ok(Err(vec![broken(Some(seq), problem)]))
            }
            (_, Some((seq, problem))) => return Ok(Err(vec![broken(Some(seq), problem)])),
            (Some((seq, problem)), None) => return Ok(Err(vec![broken(Some(seq), problem)])),
            (None, None) => {}
        }
        if let Some(last) = page.last() {
            let hash = crate::chain::decode_hash(&last.hash).ok_or_else(|| {
                LedgerError::Corrupt(format!("hash of seq {} is not hex", last.seq))
            })?;
            prev = Head {
                seq: last.seq,
                hash,
            };
        }
        progress(prev.seq);
    }
    if prev != head {
        return Ok(Err(vec![broken(
            None,
            format!(
                "head says seq {} but the log ends at seq {}",
                head.seq, prev.seq
            ),
        )]));
    }
    // The rule state the writer decides by must be exactly the log's.
    let stored = storage.rule_state_rows(tenant).await?;
    let rule_problems = crate::rule_fold::compare(&rules, &stored)
        .into_iter()
        .map(|difference| broken(None, difference.to_string()))
        .collect();
    Ok(Ok(VerifiedLog {
        report: TenantReport {
            tenant: tenant.to_owned(),
            entries: prev.seq,
            balances: log.balances.len(),
            records: rules.records.len(),
            head,
        },
        balances: log.balances,
        rule_problems,
    }))
}

/// [`verify_log`], and the stored balances equal to the log's fold: what
/// `tally verify` checks of a tenant, for the tests of the writer.
#[cfg(test)]
pub(crate) async fn verify_tenant(
    storage: &Storage,
    tenant: &str,
    progress: impl FnMut(i64),
) -> Result<Result<TenantReport, Vec<Broken>>, LedgerError> {
    let verified = match verify_log(storage, tenant, progress).await? {
        Ok(v) => v,
        Err(broken) => return Ok(Err(broken)),
    };
    let mut problems = verified.rule_problems;
    let stored = storage.stored_balances(tenant).await?;
    let differs = stored.len() != verified.balances.len()
        || verified
            .balances
            .iter()
            .any(|(account, unit, b)| stored.get(account, unit) != Some(b));
    if differs {
        problems.push(Broken {
            tenant: tenant.to_owned(),
            seq: None,
            problem: "stored balances differ from the log's fold".to_owned(),
        });
    }
    if !problems.is_empty() {
        return Ok(Err(problems));
    }
    Ok(Ok(verified.report))
}
