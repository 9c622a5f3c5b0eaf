//! Where an operation on an intent is decided: a claim, a completion, a
//! failure, a heartbeat, each against the intent's record under the
//! tenant's head lock (docs/intents.md). Every change of state but a
//! heartbeat's is an entry of the log.

use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;
use serde_json::{json, Map, Value};

use crate::clock::format_recorded_at;
use crate::entry::{EntryStatus, StoredEntry};
use crate::fingerprint::{canonical_params, differing_fields, Fingerprint};
use crate::intents::{
    claim_upstream_id, ClaimOp, CompleteOp, FailOp, HeartbeatOp, IntentError, IntentOp,
    IntentOutcome, IntentRecord, IntentStatus,
};
use crate::request::EntryKind;
use crate::rule_state::{StateKey, StateValue};

use super::append::chain_entry;
use super::{Decision, GroupOutcome, GroupState};

/// What an operation on an intent came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntentAnswer {
    /// A new claim: the lease's token goes to this caller alone.
    Claimed {
        record: Box<IntentRecord>,
        token: String,
    },
    /// The outcome is stored (or the same release replayed): answered
    /// again, for ever.
    Replayed { record: Box<IntentRecord> },
    /// A completion, failure or heartbeat applied.
    Applied { record: Box<IntentRecord> },
    /// Another claim holds a live lease; nothing written.
    InProgress {
        retry_after_seconds: i64,
        fence: i64,
    },
    /// The token is not the current claim's (or its outcome is another
    /// call's); nothing written.
    LeaseLost,
    /// The intent exists with another action or other params.
    Conflict { differing_fields: Vec<String> },
    /// No claim was ever made of this intent.
    NotFound,
}

impl IntentAnswer {
    /// Whether the ledger entries sent with the operation are decided
    /// (a completion stored now, or the same completion replayed).
    pub(super) fn lets_entries_through(&self) -> bool {
        matches!(
            self,
            IntentAnswer::Applied { .. } | IntentAnswer::Replayed { .. }
        )
    }
}

/// Decides `op` at `now` against the intent's record in `state`.
pub(super) fn decide_intent(
    state: &mut GroupState,
    op: &IntentOp,
    now: DateTime<Utc>,
    new_entry_id: &mut impl FnMut() -> String,
    out: &mut GroupOutcome,
) -> Decision {
    let record = match state
        .records
        .get(&StateKey::Intent(op.intent_id().to_owned()))
    {
        Some(StateValue::Intent(r)) => Some(r.as_ref().clone()),
        _ => None,
    };
    let mut step = Step {
        state,
        now,
        new_entry_id,
        out,
    };
    let answer = match (op, record) {
        (IntentOp::Claim(c), record) => step.claim(c, record),
        (_, None) => IntentAnswer::NotFound,
        (IntentOp::Complete(c), Some(r)) => step.complete(c, r),
        (IntentOp::Fail(f), Some(r)) => step.fail(f, r),
        (IntentOp::Heartbeat(h), Some(r)) => step.heartbeat(h, r),
    };
    Decision::Intent(answer)
}

/// The state an operation is decided in, and where its entry goes.
struct Step<'a, F: FnMut() -> String> {
    state: &'a mut GroupState,
    now: DateTime<Utc>,
    new_entry_id: &'a mut F,
    out: &'a mut GroupOutcome,
}

fn lease_end(now: DateTime<Utc>, seconds: i64) -> DateTime<Utc> {
    // At most an hour: always within chrono's range.
    now + Duration::seconds(seconds)
}

impl<F: FnMut() -> String> Step<'_, F> {
    fn claim(&mut self, c: &ClaimOp, record: Option<IntentRecord>) -> IntentAnswer {
        let now = self.now;
        let next = match record {
            None => IntentRecord {
                intent_id: c.intent_id.clone(),
                action: c.action.clone(),
                params: c.params_text.clone(),
                max_attempts: c.max_attempts,
                status: IntentStatus::Claimed,
                attempt: 1,
                fence: 1,
                token_sha256: c.token.sha256.clone(),
                lease_expires_at: lease_end(now, c.lease_seconds),
                released_error: None,
                last_call: None,
                outcome: None,
                outcome_seq: None,
                outcome_entries: 0,
                created_at: now,
                updated_at: now,
            },
            Some(r) => {
                let mut differing = Vec::new();
                if r.action != c.action {
                    differing.push("action".to_owned());
                }
                if r.params != c.params_text {
                    differing.extend(
                        differing_fields(&r.params, &c.params)
                            .into_iter()
                            .map(|f| format!("params.{f}")),
                    );
                }
                if !differing.is_empty() {
                    return IntentAnswer::Conflict {
                        differing_fields: differing,
                    };
                }
                if r.outcome.is_some() {
                    return IntentAnswer::Replayed {
                        record: Box::new(r),
                    };
                }
                if r.lease_live(now) {
                    let left = (r.lease_expires_at - now).num_milliseconds();
                    return IntentAnswer::InProgress {
                        retry_after_seconds: ((left + 999) / 1000).max(1),
                        fence: r.fence,
                    };
                }
                if r.status == IntentStatus::Claimed && r.attempt >= r.max_attempts {
                    // The last allowed lease ran out: that is the outcome.
                    let failed = self.fail_for_good(r, IntentError::lease_expired(), None);
                    return IntentAnswer::Replayed {
                        record: Box::new(failed),
                    };
                }
                IntentRecord {
                    status: IntentStatus::Claimed,
                    attempt: r.attempt + 1,
                    fence: r.fence + 1,
                    token_sha256: c.token.sha256.clone(),
                    lease_expires_at: lease_end(now, c.lease_seconds),
                    updated_at: now,
                    ..r
                }
            }
        };
        let params = fields([
            ("intent_id", json!(next.intent_id)),
            ("action", json!(next.action)),
            ("params", json!(Value::Object(c.params.clone()))),
            ("max_attempts", json!(next.max_attempts)),
            ("attempt", json!(next.attempt)),
            ("fence", json!(next.fence)),
            ("lease_seconds", json!(c.lease_seconds)),
            (
                "lease_expires_at",
                json!(format_recorded_at(&next.lease_expires_at)),
            ),
            ("token_sha256", json!(next.token_sha256)),
        ]);
        let upstream = claim_upstream_id(&next.intent_id, next.fence);
        self.append(EntryKind::IntentClaimed, upstream, params);
        self.store(next.clone());
        IntentAnswer::Claimed {
            record: Box::new(next),
            token: c.token.secret.clone(),
        }
    }

    fn complete(&mut self, c: &CompleteOp, r: IntentRecord) -> IntentAnswer {
        if let Some(answer) = finished_already(&r, &c.call) {
            return answer;
        }
        if r.status != IntentStatus::Claimed || r.token_sha256 != c.token_sha256 {
            return IntentAnswer::LeaseLost;
        }
        let params = fields([
            ("intent_id", json!(r.intent_id)),
            ("fence", json!(r.fence)),
            ("attempt", json!(r.attempt)),
            ("result", json!(c.result)),
            ("call", json!(c.call)),
            ("entries", json!(c.entries)),
        ]);
        let seq = self.append(EntryKind::IntentSucceeded, r.intent_id.clone(), params);
        let next = IntentRecord {
            status: IntentStatus::Succeeded,
            outcome: Some(IntentOutcome::Succeeded {
                result: c.result.clone(),
            }),
            last_call: Some(c.call.clone()),
            outcome_seq: Some(seq),
            outcome_entries: i64::try_from(c.entries).unwrap_or(i64::MAX),
            updated_at: self.now,
            ..r
        };
        self.store(next.clone());
        IntentAnswer::Applied {
            record: Box::new(next),
        }
    }

    fn fail(&mut self, f: &FailOp, r: IntentRecord) -> IntentAnswer {
        if let Some(answer) = finished_already(&r, &f.call) {
            return answer;
        }
        if r.status == IntentStatus::Released
            && r.token_sha256 == f.token_sha256
            && r.last_call.as_deref() == Some(f.call.as_str())
        {
            return IntentAnswer::Replayed {
                record: Box::new(r),
            };
        }
        if r.status != IntentStatus::Claimed || r.token_sha256 != f.token_sha256 {
            return IntentAnswer::LeaseLost;
        }
        if f.retryable && r.attempt < r.max_attempts {
            let params = fields([
                ("intent_id", json!(r.intent_id)),
                ("fence", json!(r.fence)),
                ("attempt", json!(r.attempt)),
                ("error", json!(f.error.to_json())),
                ("call", json!(f.call)),
            ]);
            let upstream = claim_upstream_id(&r.intent_id, r.fence);
            self.append(EntryKind::IntentReleased, upstream, params);
            let next = IntentRecord {
                status: IntentStatus::Released,
                released_error: Some(f.error.clone()),
                last_call: Some(f.call.clone()),
                updated_at: self.now,
                ..r
            };
            self.store(next.clone());
            return IntentAnswer::Applied {
                record: Box::new(next),
            };
        }
        let failed = self.fail_for_good(r, f.error.clone(), Some(&f.call));
        IntentAnswer::Applied {
            record: Box::new(failed),
        }
    }

    fn heartbeat(&mut self, h: &HeartbeatOp, r: IntentRecord) -> IntentAnswer {
        if r.status != IntentStatus::Claimed || r.token_sha256 != h.token_sha256 {
            return IntentAnswer::LeaseLost;
        }
        // A lease never gets shorter: a heartbeat asking for less than is
        // left keeps what is left.
        let next = IntentRecord {
            lease_expires_at: r.lease_expires_at.max(lease_end(self.now, h.lease_seconds)),
            ..r
        };
        self.store(next.clone());
        IntentAnswer::Applied {
            record: Box::new(next),
        }
    }

    /// Stores `failed` with `error`: an `intent_failed` entry.
    fn fail_for_good(
        &mut self,
        r: IntentRecord,
        error: IntentError,
        call: Option<&str>,
    ) -> IntentRecord {
        let mut params = Map::new();
        params.insert("intent_id".into(), json!(r.intent_id));
        params.insert("fence".into(), json!(r.fence));
        params.insert("attempt".into(), json!(r.attempt));
        params.insert("error".into(), error.to_json());
        if let Some(call) = call {
            params.insert("call".into(), json!(call));
        }
        let seq = self.append(EntryKind::IntentFailed, r.intent_id.clone(), params);
        let next = IntentRecord {
            status: IntentStatus::Failed,
            outcome: Some(IntentOutcome::Failed { error }),
            last_call: call.map(str::to_owned),
            outcome_seq: Some(seq),
            outcome_entries: 0,
            updated_at: self.now,
            ..r
        };
        self.store(next.clone());
        next
    }

    fn store(&mut self, record: IntentRecord) {
        let key = StateKey::Intent(record.intent_id.clone());
        self.out.touched_records.insert(key.clone());
        self.state
            .records
            .insert(key, StateValue::Intent(Box::new(record)));
    }

    /// Appends an entry of `kind` with `params` (no amount, no account) and
    /// returns its seq.
    fn append(&mut self, kind: EntryKind, upstream_id: String, params: Map<String, Value>) -> i64 {
        let params = canonical_params(&params);
        let entry = StoredEntry {
            tenant_id: self.state.tenant_id.clone(),
            seq: self.state.head.seq + 1,
            id: (self.new_entry_id)(),
            kind,
            upstream_id,
            status: EntryStatus::Posted,
            rejection_code: None,
            rejection_message: None,
            account: String::new(),
            debit_account: String::new(),
            credit_account: String::new(),
            amount: Decimal::ZERO,
            unit: String::new(),
            fingerprint: Fingerprint::of_canonical(&params).text(),
            params,
            recorded_at: self.now,
            balance_after: crate::balance::WideDecimal::ZERO,
            prev_hash: crate::hex_text::lower_hex(&self.state.head.hash),
            hash: String::new(),
        };
        chain_entry(self.state, entry, self.out).seq
    }
}

fn fields<const N: usize>(pairs: [(&str, Value); N]) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// The answer to a finishing call on an intent that already has its
/// outcome: the outcome again for the same call, else `lease_lost`.
fn finished_already(r: &IntentRecord, call: &str) -> Option<IntentAnswer> {
    r.outcome.as_ref()?;
    Some(if r.last_call.as_deref() == Some(call) {
        IntentAnswer::Replayed {
            record: Box::new(r.clone()),
        }
    } else {
        IntentAnswer::LeaseLost
    })
}
