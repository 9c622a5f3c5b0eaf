//! The body of `PUT /v1/integrations/stripe` (scope `admin`).

use serde::Deserialize;
use serde_json::{Map, Value};
use tally_ledger::fields::{Fields, ValidationErrors};
use utoipa::ToSchema;

use super::raw::Raw;

/// The fields of `PUT /v1/integrations/stripe`.
pub const STRIPE_FIELDS: &[&str] = &["signing_secrets", "account_metadata_key"];
/// Signing secrets one endpoint may hold while they rotate.
pub const MAX_SIGNING_SECRETS: usize = 5;

/// `PUT /v1/integrations/stripe` (scope `admin`).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"signing_secrets": ["whsec_…"], "account_metadata_key": "tally_account"}))]
pub struct StripeIntegrationRequest {
    /// The endpoint's signing secrets from Stripe's dashboard (`whsec_…`),
    /// 1 to 5 while they rotate: a delivery signed by any one is accepted.
    /// Write-only: never shown again, never logged.
    #[schema(value_type = Vec<String>, required = true, min_items = 1, max_items = 5)]
    pub signing_secrets: Option<Raw>,
    /// The PaymentIntent metadata key whose value is the ledger account
    /// (1–40 bytes, Stripe's limit for a key).
    #[schema(value_type = String, required = true, min_length = 1, max_length = 40, example = "tally_account")]
    pub account_metadata_key: Option<Raw>,
}

/// A Stripe integration's settings, read from a body.
pub struct StripeSettings {
    pub signing_secrets: Vec<String>,
    pub account_metadata_key: String,
}

fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > 40 {
        return Err("must be 1 to 40 bytes".into());
    }
    if key.chars().any(char::is_control) {
        return Err("must not contain control characters".into());
    }
    Ok(())
}

fn secrets(f: &mut Fields, v: Option<Value>) -> Option<Vec<String>> {
    let shape = format!(
        "must be an array of 1 to {MAX_SIGNING_SECRETS} distinct signing secrets (whsec_…)"
    );
    let Some(Value::Array(items)) = v else {
        f.error(
            "signing_secrets",
            if v.is_some() {
                shape
            } else {
                "is required".into()
            },
        );
        return None;
    };
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        match item {
            // The secret itself is never echoed in an error.
            Value::String(s)
                if s.starts_with("whsec_")
                    && s.len() > 6
                    && s.len() <= 255
                    && s.bytes().all(|b| b.is_ascii_graphic())
                    && !out.contains(&s) =>
            {
                out.push(s)
            }
            _ => {
                f.error("signing_secrets", shape);
                return None;
            }
        }
    }
    if out.is_empty() || out.len() > MAX_SIGNING_SECRETS {
        f.error("signing_secrets", shape);
        return None;
    }
    Some(out)
}

/// `PUT /v1/integrations/stripe`.
pub fn stripe_settings(body: Map<String, Value>) -> Result<StripeSettings, ValidationErrors> {
    let mut f = Fields::new(body, STRIPE_FIELDS);
    let raw = f.optional_value("signing_secrets");
    let signing_secrets = secrets(&mut f, raw);
    let key = f.required_str("account_metadata_key", check_key);
    f.finish()?;
    match (signing_secrets, key) {
        (Some(signing_secrets), Some(account_metadata_key)) => Ok(StripeSettings {
            signing_secrets,
            account_metadata_key,
        }),
        _ => Err(ValidationErrors::single("body", "is invalid")),
    }
}

/// A Stripe event as Stripe sends it to `POST /v1/ingest/stripe/{endpoint_id}`
/// (Stripe's "Event object"; other members are kept and ignored). The raw
/// bytes are what `Stripe-Signature` signs, so the body is read as bytes.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"id": "evt_1NG8Du2eZvKYlo2CUI79vXWy", "object": "event",
    "type": "payment_intent.succeeded", "created": 1_733_500_000,
    "data": {"object": {"id": "pi_3MtwBwLkdIwHu7ix28a3tqPa", "object": "payment_intent",
        "amount_received": 1999, "currency": "usd", "created": 1_733_499_990,
        "metadata": {"tally_account": "cust_42"}, "status": "succeeded"}}}))]
pub struct StripeEventRequest {
    /// The event's id (`evt_…`): a redelivery carries the same one.
    pub id: String,
    /// `payment_intent.succeeded` and `charge.refunded` are mapped; others
    /// are acknowledged as `ignored`.
    pub r#type: String,
    /// `{"object": …}`: the PaymentIntent or the Charge.
    #[schema(value_type = Object)]
    pub data: Value,
}
