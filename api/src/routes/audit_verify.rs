//! `POST /v1/audit/verify` (scope `audit`): the checks of `tally verify`
//! for the caller's tenant, run by the server, bounded in time.
//!
//! Cancellable by the client: a request whose connection closes is dropped
//! by the server, and the verification with it (it only reads).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::Json;
use tally_ledger::keys::Scope;
use tally_projections::verify::{verify_tenant, verify_usage};

use crate::auth::Caller;
use crate::problem::ApiError;
use crate::state::AppState;
use crate::views::{AuditVerification, HeadSummary, VerificationProblem};

/// The longest a verification runs (less if the request timeout is
/// shorter): a larger ledger is verified offline by `tally verify`.
pub const VERIFY_BUDGET: Duration = Duration::from_secs(25);

#[utoipa::path(
    post,
    path = "/v1/audit/verify",
    tag = "audit",
    operation_id = "postAuditVerify",
    summary = "Verify the tenant's ledger now",
    description = "Runs the checks of `tally verify` for the caller's tenant: gap-free `seq`, \
        every fingerprint and chain hash, every `balance_after`, the head, the stored balances, \
        rule state and usage summaries against a fresh fold of the log. Bounded in time (25 s, \
        or a second less than the server's request timeout): past it the answer is \
        `incomplete` with how far it got. Closing the connection cancels it. It only reads.",
    security(("bearer" = ["audit"])),
    responses(
        (status = 200, description = "The report: `verified`, `broken` (with the problems \
            found) or `incomplete`.", body = AuditVerification),
    ),
)]
pub async fn post_audit_verify(
    State(app): State<AppState>,
    caller: Caller,
) -> Result<Json<AuditVerification>, ApiError> {
    caller.require(Scope::Audit)?;
    let budget = VERIFY_BUDGET.min(
        app.limits
            .request_timeout
            .saturating_sub(Duration::from_secs(1)),
    );
    let storage = app.writers.storage();
    let tenant = caller.tenant();
    let started = Instant::now();
    let checked = Arc::new(AtomicI64::new(0));
    let progress = {
        let checked = checked.clone();
        move |n: i64| checked.store(n, Ordering::Relaxed)
    };
    let run = async {
        let log = verify_tenant(storage, tenant, progress).await?;
        let usage = match &log {
            Ok(_) => Some(verify_usage(storage, tenant).await?),
            Err(_) => None,
        };
        Ok::<_, tally_ledger::LedgerError>((log, usage))
    };
    let outcome = tokio::time::timeout(budget, run).await;
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let budget_ms = budget.as_millis() as u64;
    let report = |status: &str, head, balances, records, usage_rows, problems| AuditVerification {
        tenant: tenant.to_owned(),
        status: status.to_owned(),
        checked_entries: checked.load(Ordering::Relaxed),
        head,
        balances,
        records,
        usage_rows,
        problems,
        elapsed_ms,
        budget_ms,
    };
    Ok(Json(match outcome {
        Err(_) => report("incomplete", None, 0, 0, 0, Vec::new()),
        Ok(Err(e)) => return Err(e.into()),
        Ok(Ok((Err(broken), _))) => report(
            "broken",
            None,
            0,
            0,
            0,
            broken.iter().map(VerificationProblem::from).collect(),
        ),
        Ok(Ok((Ok(t), usage))) => {
            let head = Some(HeadSummary {
                seq: t.head.seq,
                hash: hex::encode(t.head.hash),
            });
            match usage {
                Some(Err(broken)) => report(
                    "broken",
                    head,
                    t.balances,
                    t.records,
                    0,
                    vec![VerificationProblem::from(&broken)],
                ),
                Some(Ok(u)) => report("verified", head, t.balances, t.records, u.rows, Vec::new()),
                None => report("verified", head, t.balances, t.records, 0, Vec::new()),
            }
        }
    }))
}
