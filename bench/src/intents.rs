//! The intent scenario: each client claims a new intent and completes it
//! with the token the claim answered, on the same connection (two round
//! trips per intent; docs/intents.md).

use serde_json::{json, Value};

use crate::http_load::Request;
use crate::workload::Rng;

/// A claim of a new intent; its follow-up is the completion.
pub fn claim(rng: &mut Rng) -> Request {
    let intent_id = format!("bench_{:016x}{:016x}", rng.next(), rng.next());
    let body = json!({
        "intent_id": intent_id,
        "action": "bench.charge",
        "params": {"amount": "1.25", "currency": "USD"},
        "lease_seconds": 60,
    });
    Request {
        path: "/v1/intents".into(),
        body: body.to_string().into(),
        rows: 1,
        auth: None,
        then: Some(complete),
    }
}

/// `complete` of the intent the claim's answer names, with its token;
/// `None` if the answer holds no lease (a replay: nothing to complete).
fn complete(answer: &[u8]) -> Option<Request> {
    let claimed: Value = serde_json::from_slice(answer).ok()?;
    let intent_id = claimed.get("intent_id")?.as_str()?;
    let token = claimed.get("lease")?.get("token")?.as_str()?;
    let body = json!({ "token": token, "result": {"charge": "ch_bench"} });
    Some(Request {
        path: format!("/v1/intents/{intent_id}/complete").into(),
        body: body.to_string().into(),
        rows: 1,
        auth: None,
        then: None,
    })
}
