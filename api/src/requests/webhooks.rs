//! The bodies of the webhook endpoints' operations (scope `admin`),
//! checked field by field like every other body: each problem named at
//! once, unknown fields refused.

use serde::Deserialize;
use serde_json::{Map, Value};
use tally_ledger::fields::{Fields, ValidationErrors};
use tally_webhooks::event::EventType;
use tally_webhooks::store::EndpointChange;
use tally_webhooks::url_guard::refuse_url;
use utoipa::ToSchema;

use super::raw::Raw;
use crate::views::WebhookEventType;

/// The fields of `POST /v1/webhook-endpoints`.
pub const ENDPOINT_FIELDS: &[&str] = &["url", "event_types", "description"];
/// The fields of `PATCH /v1/webhook-endpoints/{id}`.
pub const ENDPOINT_CHANGE_FIELDS: &[&str] = &["url", "event_types", "description", "enabled"];
/// The fields of `POST /v1/webhook-endpoints/{id}/replay`.
pub const REPLAY_FIELDS: &[&str] = &["from_seq"];

/// `POST /v1/webhook-endpoints` (scope `admin`).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"url": "https://hooks.example.com/tally", "event_types": ["entry.posted", "balance.low"], "description": "billing"}))]
pub struct WebhookEndpointRequest {
    /// `https://` (`http://` only with the server's
    /// `--webhook-allow-insecure`); never a loopback, private, link-local or
    /// metadata address. At most 2,048 bytes.
    #[schema(value_type = String, required = true, max_length = 2048)]
    pub url: Option<Raw>,
    /// The events sent to it; at least one, no repeats.
    #[schema(value_type = Vec<WebhookEventType>, required = true, min_items = 1)]
    pub event_types: Option<Raw>,
    /// Free text for people, ≤ 500 bytes.
    #[schema(value_type = Option<String>, max_length = 500)]
    pub description: Option<Raw>,
}

/// `PATCH /v1/webhook-endpoints/{id}` (scope `admin`): what is given
/// changes; at least one field.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"enabled": true, "event_types": ["entry.posted"]}))]
pub struct WebhookEndpointChangeRequest {
    #[schema(value_type = Option<String>, max_length = 2048)]
    pub url: Option<Raw>,
    #[schema(value_type = Option<Vec<WebhookEventType>>, min_items = 1)]
    pub event_types: Option<Raw>,
    /// `null` clears it.
    #[schema(value_type = Option<String>, max_length = 500)]
    pub description: Option<Raw>,
    /// `false` stops deliveries (they wait); `true` sends them again.
    #[schema(value_type = Option<bool>)]
    pub enabled: Option<Raw>,
}

/// `POST /v1/webhook-endpoints/{id}/replay` (scope `admin`).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"from_seq": 1}))]
pub struct WebhookReplayRequest {
    /// The first `seq` whose events are sent again (≥ 1).
    #[schema(value_type = i64, required = true, minimum = 1)]
    pub from_seq: Option<Raw>,
}

/// A new endpoint, read from a body.
pub struct NewEndpoint {
    pub url: String,
    pub event_types: Vec<EventType>,
    pub description: Option<String>,
}

fn check_description(d: &str) -> Result<(), String> {
    if d.len() > 500 {
        return Err("must be at most 500 bytes".into());
    }
    if d.chars().any(char::is_control) {
        return Err("must not contain control characters".into());
    }
    Ok(())
}

fn url(f: &mut Fields, v: Option<Value>, allow_insecure: bool) -> Option<String> {
    match v {
        Some(Value::String(s)) => match refuse_url(&s, allow_insecure) {
            None => Some(s),
            Some(why) => {
                f.error("url", why);
                None
            }
        },
        Some(_) => {
            f.error("url", "must be a string");
            None
        }
        None => None,
    }
}

fn event_types(f: &mut Fields, v: Option<Value>) -> Option<Vec<EventType>> {
    let names: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
    let shape = format!("must be a non-empty array of {}", names.join(", "));
    let Some(Value::Array(items)) = v else {
        if v.is_some() {
            f.error("event_types", shape);
        }
        return None;
    };
    let mut out = Vec::new();
    for item in &items {
        match item.as_str().and_then(EventType::parse) {
            Some(t) if !out.contains(&t) => out.push(t),
            Some(t) => {
                f.error("event_types", format!("names {} twice", t.as_str()));
                return None;
            }
            None => {
                f.error("event_types", shape);
                return None;
            }
        }
    }
    if out.is_empty() {
        f.error("event_types", shape);
        return None;
    }
    Some(out)
}

/// `POST /v1/webhook-endpoints`.
pub fn new_endpoint(
    body: Map<String, Value>,
    allow_insecure: bool,
) -> Result<NewEndpoint, ValidationErrors> {
    let mut f = Fields::new(body, ENDPOINT_FIELDS);
    let raw_url = f.optional_value("url");
    if raw_url.is_none() {
        f.error("url", "is required");
    }
    let url = url(&mut f, raw_url, allow_insecure);
    let raw_types = f.optional_value("event_types");
    if raw_types.is_none() {
        f.error("event_types", "is required");
    }
    let types = event_types(&mut f, raw_types);
    let description = f.optional_str("description", check_description);
    f.finish()?;
    match (url, types, description) {
        (Some(url), Some(event_types), Some(description)) => Ok(NewEndpoint {
            url,
            event_types,
            description,
        }),
        _ => Err(ValidationErrors::single("body", "is invalid")),
    }
}

/// `PATCH /v1/webhook-endpoints/{id}`.
pub fn endpoint_change(
    body: Map<String, Value>,
    allow_insecure: bool,
) -> Result<EndpointChange, ValidationErrors> {
    // `description: null` clears it, so its presence is read first.
    let clears_description = matches!(body.get("description"), Some(Value::Null));
    let empty = body.is_empty();
    let mut f = Fields::new(body, ENDPOINT_CHANGE_FIELDS);
    let raw_url = f.optional_value("url");
    let changes_url = raw_url.is_some();
    let url = url(&mut f, raw_url, allow_insecure);
    let raw_types = f.optional_value("event_types");
    let changes_types = raw_types.is_some();
    let types = event_types(&mut f, raw_types);
    let description = f.optional_str("description", check_description);
    let enabled = match f.optional_value("enabled") {
        None => Some(None),
        Some(Value::Bool(b)) => Some(Some(b)),
        Some(_) => {
            f.error("enabled", "must be true or false");
            None
        }
    };
    if empty {
        f.error(
            "body",
            "must change at least one of url, event_types, description, enabled",
        );
    }
    f.finish()?;
    let (Some(description), Some(enabled)) = (description, enabled) else {
        return Err(ValidationErrors::single("body", "is invalid"));
    };
    if (changes_url && url.is_none()) || (changes_types && types.is_none()) {
        return Err(ValidationErrors::single("body", "is invalid"));
    }
    Ok(EndpointChange {
        url,
        event_types: types,
        description: if clears_description {
            Some(None)
        } else {
            description.map(Some)
        },
        enabled,
    })
}

/// `POST /v1/webhook-endpoints/{id}/replay`: `from_seq`.
pub fn replay_from(body: Map<String, Value>) -> Result<i64, ValidationErrors> {
    let mut f = Fields::new(body, REPLAY_FIELDS);
    let from = f.optional_int("from_seq", 1, i64::MAX);
    if matches!(from, Some(None)) {
        f.error("from_seq", "is required");
    }
    f.finish()?;
    from.flatten()
        .ok_or_else(|| ValidationErrors::single("from_seq", "is required"))
}
