//! Intent operations in any order, without a database: property tests over
//! sequences of claims, completions, failures, heartbeats and the clock
//! moving, by workers holding current and stale tokens.

#![allow(clippy::unwrap_used)]

use chrono::{DateTime, Duration, Utc};
use proptest::prelude::*;
use serde_json::{json, Map};

use super::*;
use crate::chain::Head;
use crate::intents::{
    ClaimOp, CompleteOp, FailOp, HeartbeatOp, IntentOp, IntentStatus, LeaseToken,
};
use crate::request::EntryKind;
use crate::rule_fold::RuleFold;
use crate::rule_state::{StateKey, StateValue};

#[derive(Debug, Clone)]
enum Step {
    Claim {
        lease: i64,
    },
    /// With the `k`-th token handed out (modulo how many there are).
    Complete {
        token: usize,
    },
    Fail {
        token: usize,
        retryable: bool,
    },
    Heartbeat {
        token: usize,
        lease: i64,
    },
    Wait {
        seconds: i64,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1i64..5).prop_map(|lease| Step::Claim { lease }),
        (0usize..8).prop_map(|token| Step::Complete { token }),
        (0usize..8, any::<bool>()).prop_map(|(token, retryable)| Step::Fail { token, retryable }),
        (0usize..8, 1i64..5).prop_map(|(token, lease)| Step::Heartbeat { token, lease }),
        (0i64..7).prop_map(|seconds| Step::Wait { seconds }),
    ]
}

fn token(n: usize) -> LeaseToken {
    let secret = format!("lease_{n}");
    LeaseToken {
        sha256: LeaseToken::digest(&secret),
        secret,
    }
}

fn record(state: &GroupState) -> Option<crate::intents::IntentRecord> {
    match state.records.get(&StateKey::Intent("i".into())) {
        Some(StateValue::Intent(r)) => Some(r.as_ref().clone()),
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the order: one live lease at a time, fences grow with each
    /// claim, an outcome once stored never changes and is logged once, a
    /// refused operation writes nothing, and the fold of the log is the
    /// record (its lease's end aside, which heartbeats move).
    #[test]
    fn any_sequence_keeps_one_outcome_and_the_record_folds_from_the_log(
        steps in proptest::collection::vec(step(), 1..40),
        max_attempts in 1i64..4,
    ) {
        let mut state = GroupState::new("t", Head::EMPTY);
        let mut now: DateTime<Utc> = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let mut tokens: Vec<String> = Vec::new();
        let mut n = 0;
        let mut ids = move || { n += 1; format!("ent_{n}") };
        let mut log = Vec::new();
        let mut outcome = None;
        for step in steps {
            let op = match step {
                Step::Wait { seconds } => { now += Duration::seconds(seconds); continue; }
                Step::Claim { lease } => {
                    let t = token(tokens.len());
                    tokens.push(t.secret.clone());
                    let mut body = Map::new();
                    body.insert("intent_id".into(), json!("i"));
                    body.insert("action".into(), json!("a"));
                    body.insert("lease_seconds".into(), json!(lease));
                    body.insert("max_attempts".into(), json!(max_attempts));
                    IntentOp::Claim(ClaimOp::parse(body, t).unwrap())
                }
                Step::Complete { token } | Step::Fail { token, .. } | Step::Heartbeat { token, .. }
                    if tokens.is_empty() => { let _ = token; continue; }
                Step::Complete { token } => {
                    let t = &tokens[token % tokens.len()];
                    let body = json!({"token": t, "result": {"by": t}});
                    IntentOp::Complete(CompleteOp::parse("i", body.as_object().unwrap().clone(), 0).unwrap())
                }
                Step::Fail { token, retryable } => {
                    let t = &tokens[token % tokens.len()];
                    let body = json!({"token": t, "error": {"code": "e", "message": "m"}, "retryable": retryable});
                    IntentOp::Fail(FailOp::parse("i", body.as_object().unwrap().clone()).unwrap())
                }
                Step::Heartbeat { token, lease } => {
                    let t = &tokens[token % tokens.len()];
                    let body = json!({"token": t, "lease_seconds": lease});
                    IntentOp::Heartbeat(HeartbeatOp::parse("i", body.as_object().unwrap().clone()).unwrap())
                }
            };
            let before = record(&state);
            let request = EntryRequest::intent(op);
            let out = decide_group(&mut state, &[&request], now, &mut ids);
            let Decision::Intent(answer) = &out.decisions[0] else { panic!("an intent answer") };
            let after = record(&state);
            match answer {
                IntentAnswer::InProgress { .. } | IntentAnswer::LeaseLost
                | IntentAnswer::Conflict { .. } | IntentAnswer::NotFound => {
                    prop_assert!(out.new_entries.is_empty(), "a refusal writes nothing");
                    prop_assert_eq!(&before, &after);
                }
                IntentAnswer::Claimed { record, .. } => {
                    let before = before.as_ref();
                    prop_assert!(before.is_none_or(|b| !b.lease_live(now)), "one live lease");
                    prop_assert_eq!(record.fence, before.map_or(1, |b| b.fence + 1));
                    prop_assert!(record.attempt <= max_attempts);
                }
                IntentAnswer::Replayed { .. } | IntentAnswer::Applied { .. } => {}
            }
            if let (Some(stored), Some(r)) = (&outcome, &after) {
                prop_assert_eq!(Some(stored), r.outcome.as_ref(), "an outcome never changes");
            }
            if let Some(r) = &after {
                if r.outcome.is_some() { outcome = r.outcome.clone(); }
                prop_assert_eq!(r.outcome.is_some(), matches!(r.status, IntentStatus::Succeeded | IntentStatus::Failed));
            }
            log.extend(out.new_entries);
        }
        let outcomes = log.iter().filter(|e| matches!(e.kind, EntryKind::IntentSucceeded | EntryKind::IntentFailed)).count();
        prop_assert!(outcomes <= 1, "one outcome in the log");
        let mut fold = RuleFold::new();
        for e in &log {
            fold.apply(e).unwrap();
        }
        match (fold.records.get(&StateKey::Intent("i".into())), record(&state)) {
            (None, None) => {}
            (Some(StateValue::Intent(folded)), Some(stored)) => {
                prop_assert!(stored.lease_expires_at >= folded.lease_expires_at);
                let stored = crate::intents::IntentRecord { lease_expires_at: folded.lease_expires_at, ..stored };
                prop_assert_eq!(folded.as_ref(), &stored);
            }
            other => prop_assert!(false, "fold and record disagree: {other:?}"),
        }
    }
}
