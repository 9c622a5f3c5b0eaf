//! An intent's record: what its log entries folded to, and the status a
//! reader sees at a given time.

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use crate::clock::format_recorded_at;

/// The status as stored. A `Claimed` intent whose lease ran out reads as
/// `Released` (or `Failed` at its last attempt): see [`IntentRecord::status_at`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IntentStatus {
    Claimed,
    Released,
    Succeeded,
    Failed,
}

impl IntentStatus {
    pub const ALL: [IntentStatus; 4] = [
        IntentStatus::Claimed,
        IntentStatus::Released,
        IntentStatus::Succeeded,
        IntentStatus::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            IntentStatus::Claimed => "claimed",
            IntentStatus::Released => "released",
            IntentStatus::Succeeded => "succeeded",
            IntentStatus::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// `error` of a failed or released intent: the worker's code and message,
/// or the server's `lease_expired`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentError {
    pub code: String,
    pub message: String,
}

impl IntentError {
    /// The failure of an intent whose last allowed lease ran out.
    pub fn lease_expired() -> Self {
        IntentError {
            code: "lease_expired".to_owned(),
            message: "the lease of the last allowed attempt expired without an outcome".to_owned(),
        }
    }

    pub fn to_json(&self) -> Value {
        json!({"code": self.code, "message": self.message})
    }

    pub fn from_json(v: &Value) -> Option<Self> {
        Some(IntentError {
            code: v.get("code")?.as_str()?.to_owned(),
            message: v.get("message")?.as_str()?.to_owned(),
        })
    }
}

/// What an intent came to, stored for ever.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntentOutcome {
    Succeeded { result: Value },
    Failed { error: IntentError },
}

/// One intent as its entries left it (`rule_state` kind `intent`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentRecord {
    pub intent_id: String,
    pub action: String,
    /// The caller's parameters, canonical JSON text.
    pub params: String,
    pub max_attempts: i64,
    pub status: IntentStatus,
    /// Claims so far (the attempt of the current or last claim).
    pub attempt: i64,
    /// The current claim's fence: 1 for the first claim, +1 for each.
    pub fence: i64,
    /// Hex SHA-256 of the current claim's token (the token is never stored).
    pub token_sha256: String,
    /// When the current claim's lease runs out (moved by heartbeats).
    pub lease_expires_at: DateTime<Utc>,
    /// The last release's error, if it said one.
    pub released_error: Option<IntentError>,
    /// The fingerprint of the call that released or finished the intent,
    /// so that call replayed is answered as before.
    pub last_call: Option<String>,
    pub outcome: Option<IntentOutcome>,
    /// The outcome entry's seq, and the number of ledger entries its
    /// `complete` asked for (committed right after it).
    pub outcome_seq: Option<i64>,
    pub outcome_entries: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl IntentRecord {
    /// The status a reader sees at `now`: a claim whose lease ran out is
    /// released, or failed (`lease_expired`) when it was the last attempt.
    pub fn status_at(&self, now: DateTime<Utc>) -> IntentStatus {
        match self.status {
            IntentStatus::Claimed if self.lease_expires_at <= now => {
                if self.attempt >= self.max_attempts {
                    IntentStatus::Failed
                } else {
                    IntentStatus::Released
                }
            }
            s => s,
        }
    }

    /// Whether a claim holds a lease that has not run out at `now`.
    pub fn lease_live(&self, now: DateTime<Utc>) -> bool {
        self.status == IntentStatus::Claimed && self.lease_expires_at > now
    }

    /// The error a reader sees at `now`: the stored one, or `lease_expired`.
    pub fn error_at(&self, now: DateTime<Utc>) -> Option<IntentError> {
        match (&self.outcome, self.status_at(now)) {
            (Some(IntentOutcome::Failed { error }), _) => Some(error.clone()),
            (None, IntentStatus::Failed) => Some(IntentError::lease_expired()),
            (None, IntentStatus::Released) => self.released_error.clone(),
            _ => None,
        }
    }

    pub fn to_json(&self) -> Value {
        let (result, error) = match &self.outcome {
            Some(IntentOutcome::Succeeded { result }) => (Some(result.clone()), None),
            Some(IntentOutcome::Failed { error }) => (None, Some(error.to_json())),
            None => (None, None),
        };
        json!({
            "action": self.action,
            "params": self.params,
            "max_attempts": self.max_attempts,
            "status": self.status.as_str(),
            "attempt": self.attempt,
            "fence": self.fence,
            "token_sha256": self.token_sha256,
            "lease_expires_at": format_recorded_at(&self.lease_expires_at),
            "released_error": self.released_error.as_ref().map(IntentError::to_json),
            "last_call": self.last_call,
            "result": result,
            "error": error,
            "outcome_seq": self.outcome_seq,
            "outcome_entries": self.outcome_entries,
            "created_at": format_recorded_at(&self.created_at),
            "updated_at": format_recorded_at(&self.updated_at),
        })
    }

    /// Reads a stored record back; `None` if it is not one.
    pub fn from_json(intent_id: &str, v: &Value) -> Option<Self> {
        let m: &Map<String, Value> = v.as_object()?;
        let s = |k: &str| m.get(k).and_then(Value::as_str);
        let i = |k: &str| m.get(k).and_then(Value::as_i64);
        let t = |k: &str| {
            DateTime::parse_from_rfc3339(s(k)?)
                .ok()
                .map(|t| t.with_timezone(&Utc))
        };
        let status = IntentStatus::parse(s("status")?)?;
        let outcome = match status {
            IntentStatus::Succeeded => Some(IntentOutcome::Succeeded {
                result: m.get("result")?.clone(),
            }),
            IntentStatus::Failed => Some(IntentOutcome::Failed {
                error: IntentError::from_json(m.get("error")?)?,
            }),
            _ => None,
        };
        Some(IntentRecord {
            intent_id: intent_id.to_owned(),
            action: s("action")?.to_owned(),
            params: s("params")?.to_owned(),
            max_attempts: i("max_attempts")?,
            status,
            attempt: i("attempt")?,
            fence: i("fence")?,
            token_sha256: s("token_sha256")?.to_owned(),
            lease_expires_at: t("lease_expires_at")?,
            released_error: m.get("released_error").and_then(IntentError::from_json),
            last_call: s("last_call").map(str::to_owned),
            outcome,
            outcome_seq: i("outcome_seq"),
            outcome_entries: i("outcome_entries").unwrap_or(0),
            created_at: t("created_at")?,
            updated_at: t("updated_at")?,
        })
    }
}

/// The upstream ID of a claim or release entry: the intent's ID, `#`, and
/// the claim's fence (one entry per claim under the log's UNIQUE key; the
/// outcome entries take the bare ID, so the key itself allows one outcome).
pub fn claim_upstream_id(intent_id: &str, fence: i64) -> String {
    format!("{intent_id}#{fence}")
}

/// The intent ID an intent entry's upstream ID names.
pub fn intent_id_of_upstream(upstream_id: &str, with_fence: bool) -> &str {
    if with_fence {
        upstream_id
            .rsplit_once('#')
            .map_or(upstream_id, |(id, _)| id)
    } else {
        upstream_id
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn record() -> IntentRecord {
        let t = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        IntentRecord {
            intent_id: "inv_1#x".into(),
            action: "invoice.charge".into(),
            params: r#"{"a":1}"#.into(),
            max_attempts: 2,
            status: IntentStatus::Claimed,
            attempt: 1,
            fence: 1,
            token_sha256: "ab".repeat(32),
            lease_expires_at: t + chrono::Duration::seconds(60),
            released_error: None,
            last_call: None,
            outcome: None,
            outcome_seq: None,
            outcome_entries: 0,
            created_at: t,
            updated_at: t,
        }
    }

    #[test]
    fn a_record_round_trips_and_an_expired_lease_reads_released_then_failed() {
        let r = record();
        assert_eq!(
            IntentRecord::from_json(&r.intent_id, &r.to_json()),
            Some(r.clone())
        );
        let after = r.lease_expires_at;
        assert_eq!(
            r.status_at(after - chrono::Duration::seconds(1)),
            IntentStatus::Claimed
        );
        assert_eq!(r.status_at(after), IntentStatus::Released);
        let last = IntentRecord {
            attempt: 2,
            ..r.clone()
        };
        assert_eq!(last.status_at(after), IntentStatus::Failed);
        assert_eq!(last.error_at(after), Some(IntentError::lease_expired()));
        let done = IntentRecord {
            status: IntentStatus::Succeeded,
            outcome: Some(IntentOutcome::Succeeded {
                result: json!({"id": "ch_1"}),
            }),
            outcome_seq: Some(4),
            outcome_entries: 1,
            ..r
        };
        assert_eq!(
            IntentRecord::from_json(&done.intent_id, &done.to_json()),
            Some(done.clone())
        );
        assert_eq!(done.status_at(after), IntentStatus::Succeeded);
    }

    #[test]
    fn the_intent_id_is_read_back_from_an_upstream_id_with_a_hash_in_it() {
        let up = claim_upstream_id("a#b", 12);
        assert_eq!(up, "a#b#12");
        assert_eq!(intent_id_of_upstream(&up, true), "a#b");
        assert_eq!(intent_id_of_upstream("a#b", false), "a#b");
    }
}
