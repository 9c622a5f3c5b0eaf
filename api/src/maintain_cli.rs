//! `tally verify` (of the database) and `tally projections rebuild`.
//!
//! Both go through every tenant whatever happens to one of them: a tenant
//! that is broken, or that cannot be checked or rebuilt, is reported (on
//! stdout, on stderr and in the log, by tenant name only) and the next
//! tenant is taken. The exit status counts them all.

use std::process::ExitCode;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use tally_ledger::store::Storage;
use tally_ledger::LedgerError;
use tally_projections::balances::rebuild_balances;
use tally_projections::usage::rebuild_usage;
use tally_projections::verify::{verify_tenant, verify_usage, Broken};

/// How one tenant's check ended.
enum Outcome {
    /// Everything holds: the entries checked.
    Ok(i64),
    /// Found wrong: each problem.
    Broken(Vec<Broken>),
    /// Not checked to the end: the error (database unreachable, …).
    Unchecked(LedgerError),
}

/// A stored value that does not read is the tenant's data found wrong; any
/// other error leaves the tenant unchecked.
fn classify(tenant: &str, e: LedgerError) -> Outcome {
    match e {
        LedgerError::Corrupt(problem) => Outcome::Broken(vec![Broken {
            tenant: tenant.to_owned(),
            seq: None,
            problem: format!("stored data is corrupt: {problem}"),
        }]),
        e => Outcome::Unchecked(e),
    }
}

async fn verify_one(storage: &Storage, tenant: &str) -> Outcome {
    let head = match storage.head(tenant).await {
        Ok(h) => h,
        Err(e) => return classify(tenant, e),
    };
    // Drawn only on a terminal: indicatif hides itself otherwise.
    let bar = ProgressBar::new(head.seq.max(0) as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:40}] {pos}/{len} entries ({per_sec})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(tenant.to_owned());
    let started = Instant::now();
    let result = verify_tenant(storage, tenant, |seq| bar.set_position(seq.max(0) as u64)).await;
    bar.finish_and_clear();
    let mut problems = Vec::new();
    let mut entries = 0;
    match result {
        Err(e) => return classify(tenant, e),
        Ok(Err(found)) => problems.extend(found),
        Ok(Ok(report)) => {
            entries = report.entries;
            println!(
            "tenant {}: {} entries, seq 1..{} gap-free, every fingerprint and hash recomputed, \
             chain head {}:{}; {} balances and {} rule-state records equal a fresh fold of the log ({:.2} s)",
            report.tenant,
            report.entries,
            report.entries,
            report.head.seq,
            hex::encode(report.head.hash),
            report.balances,
            report.records,
            started.elapsed().as_secs_f64()
            )
        }
    }
    // The usage summaries are checked even when the rest is broken: they
    // are another projection, and each difference is worth naming.
    match verify_usage(storage, tenant).await {
        Err(e) => match classify(tenant, e) {
            Outcome::Broken(found) => problems.extend(found),
            // Problems found already make the tenant broken, checked or not.
            unchecked if problems.is_empty() => return unchecked,
            _ => {}
        },
        Ok(Err(found)) => problems.push(found),
        Ok(Ok(usage)) => println!(
            "tenant {tenant}: {} usage summary rows equal a fresh fold of the log up to seq {}",
            usage.rows, usage.checkpoint
        ),
    }
    if problems.is_empty() {
        Outcome::Ok(entries)
    } else {
        Outcome::Broken(problems)
    }
}

/// Verifies every tenant. Exit 0 when all hold; 1 when any tenant is found
/// broken (every problem of every tenant is listed); 2 when none is broken
/// but some could not be checked.
pub async fn verify(storage: &Storage, tenants: &[String]) -> ExitCode {
    let (mut broken, mut unchecked) = (Vec::new(), Vec::new());
    let mut entries = 0i64;
    for tenant in tenants {
        match verify_one(storage, tenant).await {
            Outcome::Ok(checked) => entries += checked,
            Outcome::Broken(problems) => {
                for p in &problems {
                    println!("BROKEN {p}");
                    eprintln!("tally verify: FAILED: {p}");
                }
                tracing::warn!(
                    tenant = tenant.as_str(),
                    problems = problems.len(),
                    "verify found the tenant broken"
                );
                broken.push(tenant.as_str());
            }
            Outcome::Unchecked(e) => {
                println!("UNCHECKED tenant {tenant}: {e}");
                eprintln!("tally verify: tenant {tenant} could not be checked: {e}");
                tracing::warn!(tenant = tenant.as_str(), error = %e, "verify could not check the tenant");
                unchecked.push(tenant.as_str());
            }
        }
    }
    if broken.is_empty() && unchecked.is_empty() {
        println!(
            "verify OK: {} tenant(s), {} entries",
            tenants.len(),
            entries
        );
        return ExitCode::SUCCESS;
    }
    if !broken.is_empty() {
        println!(
            "verify FAILED: {} of {} tenant(s) broken: {}",
            broken.len(),
            tenants.len(),
            broken.join(", ")
        );
    }
    if !unchecked.is_empty() {
        println!(
            "verify INCOMPLETE: {} of {} tenant(s) could not be checked: {}",
            unchecked.len(),
            tenants.len(),
            unchecked.join(", ")
        );
    }
    ExitCode::from(if broken.is_empty() { 2 } else { 1 })
}

fn rate(entries: i64, started: Instant) -> (f64, f64) {
    let secs = started.elapsed().as_secs_f64();
    (secs, entries as f64 / secs.max(1e-9))
}

/// Rebuilds one tenant's projections; the names of those that failed.
async fn rebuild_one(storage: &Storage, tenant: &str) -> Vec<&'static str> {
    let mut failed = Vec::new();
    let mut fail = |what: &'static str, e: LedgerError| {
        println!("FAILED tenant {tenant}: {what} not rebuilt: {e}");
        eprintln!("tally projections rebuild: tenant {tenant}: {what} not rebuilt: {e}");
        tracing::warn!(tenant, projection = what, error = %e, "rebuild failed for the tenant");
        failed.push(what);
    };
    let started = Instant::now();
    match rebuild_balances(storage, tenant).await {
        Ok((entries, balances)) => {
            let (secs, per_sec) = rate(entries, started);
            println!(
                "tenant {tenant}: {balances} balances rebuilt from {entries} entries in {secs:.3} s ({per_sec:.0} entries/s)"
            );
        }
        Err(e) => fail("balances", e),
    }
    let started = Instant::now();
    match storage.rebuild_rule_state(tenant).await {
        Ok(r) => {
            let (secs, _) = rate(0, started);
            println!(
                "tenant {tenant}: {} rule-state records rebuilt from {} entries in {secs:.3} s \
                 ({} rows written, {} removed)",
                r.records, r.entries, r.written, r.removed
            );
        }
        Err(e) => fail("rule state", e),
    }
    let started = Instant::now();
    match rebuild_usage(storage, tenant).await {
        Ok((entries, rows)) => {
            let (secs, per_sec) = rate(entries, started);
            println!(
                "tenant {tenant}: {rows} usage summary rows rebuilt from {entries} entries in {secs:.3} s ({per_sec:.0} entries/s)"
            );
        }
        Err(e) => fail("usage summaries", e),
    }
    failed
}

/// Rebuilds every tenant it can. Exit 0 when every projection of every
/// tenant was rebuilt, 1 when any was not (each named).
pub async fn rebuild(storage: &Storage, tenants: &[String]) -> ExitCode {
    let mut failed = Vec::new();
    for tenant in tenants {
        if !rebuild_one(storage, tenant).await.is_empty() {
            failed.push(tenant.as_str());
        }
    }
    if failed.is_empty() {
        return ExitCode::SUCCESS;
    }
    println!(
        "rebuild FAILED for {} of {} tenant(s): {}",
        failed.len(),
        tenants.len(),
        failed.join(", ")
    );
    ExitCode::from(1)
}
