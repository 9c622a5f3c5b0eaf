//! Hold requests: reserve, capture, release (and the server's own release
//! of an expired hold).

use serde_json::{Map, Value};

use super::model::{
    read_counter, request_fields, timestamp, Action, Common, EntryKind, EntryRequest, HoldExpiry,
    HoldRequest,
};
use crate::amount::canonical;
use crate::fields::{Fields, ValidationErrors};
use crate::names::{self, REVENUE_ACCOUNT};

/// Longest `ttl_seconds` a hold may ask for: 30 days.
pub const MAX_HOLD_TTL_SECONDS: i64 = 30 * 24 * 3600;

impl EntryRequest {
    /// `POST /v1/holds`.
    pub fn hold(body: Map<String, Value>) -> Result<EntryRequest, ValidationErrors> {
        let mut f = Fields::new(body, request_fields::HOLD);
        let upstream_id = f.required_str("hold_id", names::check_upstream_id);
        let common = Common::read(&mut f);
        let expires_at = f.optional_timestamp("expires_at");
        let ttl = f.optional_int("ttl_seconds", 1, MAX_HOLD_TTL_SECONDS);
        let counter = read_counter(&mut f, common.account.as_deref());
        let metadata = f.optional_metadata("metadata");
        let expiry = match (expires_at, ttl) {
            (Some(Some(at)), Some(None)) => Some(HoldExpiry::At(at)),
            (Some(None), Some(Some(ttl))) => Some(HoldExpiry::Ttl(ttl)),
            (Some(Some(_)), Some(Some(_))) => {
                f.error(
                    "ttl_seconds",
                    "give either expires_at or ttl_seconds, not both",
                );
                None
            }
            (Some(None), Some(None)) => {
                f.error("expires_at", "is required (or ttl_seconds)");
                None
            }
            _ => None,
        };
        f.finish()?;
        let (
            Some(upstream_id),
            Some(account),
            Some(amount),
            Some(unit),
            Some(expiry),
            Some(counter),
            Some(metadata),
        ) = (
            upstream_id,
            common.account,
            common.amount,
            common.unit,
            expiry,
            counter,
            metadata,
        )
        else {
            return Err(ValidationErrors::single("body", "is invalid"));
        };
        let mut params = Map::new();
        params.insert("account".into(), Value::String(account.clone()));
        params.insert("amount".into(), Value::String(canonical(amount)));
        params.insert("unit".into(), Value::String(unit.clone()));
        match expiry {
            HoldExpiry::At(t) => params.insert("expires_at".into(), Value::String(timestamp(t))),
            HoldExpiry::Ttl(s) => params.insert("ttl_seconds".into(), Value::from(s)),
        };
        if let Some(c) = &counter {
            params.insert("counter_account".into(), Value::String(c.clone()));
        }
        if let Some(m) = metadata {
            params.insert("metadata".into(), Value::Object(m));
        }
        let request = HoldRequest {
            account,
            amount,
            unit,
            counter_account: counter.unwrap_or_else(|| REVENUE_ACCOUNT.to_owned()),
            expiry,
        };
        Ok(Self::build(
            EntryKind::Hold,
            upstream_id,
            Action::Hold(request),
            params,
        ))
    }

    /// `POST /v1/holds/{hold_id}/capture`.
    pub fn capture(
        hold_id: &str,
        body: Map<String, Value>,
    ) -> Result<EntryRequest, ValidationErrors> {
        let mut f = Fields::new(body, request_fields::CAPTURE);
        if let Err(m) = names::check_upstream_id(hold_id) {
            f.error("hold_id", m);
        }
        let upstream_id = f.required_str("capture_id", names::check_upstream_id);
        let amount = f.required_amount("amount");
        let metadata = f.optional_metadata("metadata");
        f.finish()?;
        let (Some(upstream_id), Some(amount), Some(metadata)) = (upstream_id, amount, metadata)
        else {
            return Err(ValidationErrors::single("body", "is invalid"));
        };
        let mut params = Map::new();
        params.insert("hold_id".into(), Value::String(hold_id.to_owned()));
        params.insert("amount".into(), Value::String(canonical(amount)));
        if let Some(m) = metadata {
            params.insert("metadata".into(), Value::Object(m));
        }
        Ok(Self::build(
            EntryKind::HoldCapture,
            upstream_id,
            Action::Capture {
                hold_id: hold_id.to_owned(),
                amount,
            },
            params,
        ))
    }

    /// `POST /v1/holds/{hold_id}/release`.
    pub fn release(
        hold_id: &str,
        body: Map<String, Value>,
    ) -> Result<EntryRequest, ValidationErrors> {
        let mut f = Fields::new(body, request_fields::RELEASE);
        if let Err(m) = names::check_upstream_id(hold_id) {
            f.error("hold_id", m);
        }
        let upstream_id = f.required_str("release_id", names::check_client_release_id);
        let metadata = f.optional_metadata("metadata");
        f.finish()?;
        let (Some(upstream_id), Some(metadata)) = (upstream_id, metadata) else {
            return Err(ValidationErrors::single("body", "is invalid"));
        };
        let mut params = Map::new();
        params.insert("hold_id".into(), Value::String(hold_id.to_owned()));
        if let Some(m) = metadata {
            params.insert("metadata".into(), Value::Object(m));
        }
        Ok(Self::build(
            EntryKind::HoldRelease,
            upstream_id,
            Action::Release {
                hold_id: hold_id.to_owned(),
                expiry: false,
            },
            params,
        ))
    }

    /// The server's release of an expired hold. Its key is derived from the
    /// hold, so every process that notices the expiry submits the same
    /// request and the UNIQUE key lets exactly one of them through.
    pub fn expiry_release(hold_id: &str) -> EntryRequest {
        let mut params = Map::new();
        params.insert("hold_id".into(), Value::String(hold_id.to_owned()));
        params.insert("reason".into(), Value::String("expired".into()));
        Self::build(
            EntryKind::HoldRelease,
            format!("{}expired:{hold_id}", names::SERVER_KEY_PREFIX),
            Action::Release {
                hold_id: hold_id.to_owned(),
                expiry: true,
            },
            params,
        )
    }
}
