//! An operation on an intent as the request the tenant's writer queues
//! (the operations themselves: `crate::intents`).

use serde_json::Map;

use super::model::{Action, EntryKind, EntryRequest};
use crate::intents::IntentOp;

impl EntryRequest {
    /// `op` queued like an entry request: decided against the intent's
    /// record, never answered by its key (see `EntryKind::keyed_by_request`).
    pub fn intent(op: IntentOp) -> EntryRequest {
        let kind = match &op {
            IntentOp::Claim(_) | IntentOp::Heartbeat(_) => EntryKind::IntentClaimed,
            IntentOp::Complete(_) => EntryKind::IntentSucceeded,
            IntentOp::Fail(_) => EntryKind::IntentFailed,
        };
        let intent_id = op.intent_id().to_owned();
        EntryRequest::build(kind, intent_id, Action::Intent(Box::new(op)), Map::new())
    }
}
