//! The heads this process's commits move, which long polls of the log wait
//! on.

use serde_json::{json, Map};

use super::*;
use crate::intents::{ClaimOp, IntentOp, LeaseToken};

fn claim(intent_id: &str) -> EntryRequest {
    let mut body = Map::new();
    body.insert("intent_id".into(), json!(intent_id));
    body.insert("action".into(), json!("email"));
    let secret = format!("lease_{intent_id}");
    let token = LeaseToken {
        sha256: LeaseToken::digest(&secret),
        secret,
    };
    EntryRequest::intent(IntentOp::Claim(
        ClaimOp::parse(body, token).expect("a valid claim"),
    ))
}

/// A group that appends only the log entries of intent operations (an
/// `intent_claimed`, answered as an intent, not as a created entry) moves
/// the head its waiters watch, before its callers are answered; one that
/// appends nothing (a claim refused while another holds the lease) does
/// not.
#[tokio::test]
async fn an_intent_operation_moves_the_head_its_waiters_watch() {
    for db in TestDb::every_engine(2).await {
        let writers = Writers::new(db.storage.clone(), WriterConfig::default());
        let head = writers.heads().subscribe("t");
        let claimed = writers.decide("t", claim("i1")).await.unwrap();
        assert!(matches!(claimed, Decision::Intent(_)), "{claimed:?}");
        assert_eq!(*head.borrow(), 1, "the claim's entry is seq 1");

        let created = writers.decide("t", debit("u1", "1")).await.unwrap();
        assert!(matches!(created, Decision::Created(_)), "{created:?}");
        assert_eq!(*head.borrow(), 2);

        let refused = writers.decide("t", claim("i1")).await.unwrap();
        assert!(matches!(refused, Decision::Intent(_)), "{refused:?}");
        assert_eq!(*head.borrow(), 2, "a claim in progress appends nothing");
        assert_eq!(entries(&db.storage).await, 2);
        db.remove().await;
    }
}
