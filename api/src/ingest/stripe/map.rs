//! A Stripe event as the batch operations it stands for (docs/ingest.md):
//! `payment_intent.succeeded` is a `payment` keyed by the PaymentIntent's
//! id; `charge.refunded` is one `refund` per refund of the charge, keyed by
//! the refund's id, against the payment of the charge's PaymentIntent.
//! Every other type is ignored. Pure: the shapes are Stripe's documented
//! event objects, and nothing here reads or writes the ledger.

use chrono::{DateTime, SecondsFormat, Utc};
use rust_decimal::Decimal;
use serde_json::{json, Value};

/// What an event comes to before the ledger decides anything.
#[derive(Debug, Clone, PartialEq)]
pub enum Mapping {
    /// Operations for the batch path, in order.
    Operations(Vec<Value>),
    /// A type tally does not map: acknowledged and recorded.
    Ignored,
    /// A type tally maps, but this event can't be: why.
    Unmapped(String),
}

/// The event's id and type, which every delivery must carry.
pub fn identity(event: &Value) -> Option<(&str, &str)> {
    let id = event
        .get("id")?
        .as_str()
        .filter(|s| !s.is_empty() && s.len() <= 255)?;
    let kind = event.get("type")?.as_str().filter(|s| s.len() <= 255)?;
    Some((id, kind))
}

/// Maps `event`, taking the ledger account from the PaymentIntent's
/// `metadata[account_key]`.
pub fn map(event: &Value, account_key: &str) -> Mapping {
    let object = &event["data"]["object"];
    match event["type"].as_str() {
        Some("payment_intent.succeeded") => payment(object, account_key),
        Some("charge.refunded") => refunds(object),
        _ => Mapping::Ignored,
    }
}

fn payment(intent: &Value, account_key: &str) -> Mapping {
    let Some(id) = intent["id"].as_str() else {
        return Mapping::Unmapped("the PaymentIntent has no id".into());
    };
    let Some(account) = intent["metadata"][account_key].as_str() else {
        return Mapping::Unmapped(format!(
            "the PaymentIntent has no metadata[{account_key}] naming the account"
        ));
    };
    let (amount, unit) = match money(intent["amount_received"].as_i64(), &intent["currency"]) {
        Ok(m) => m,
        Err(why) => return Mapping::Unmapped(format!("amount_received: {why}")),
    };
    let mut op = json!({
        "type": "payment",
        "payment_id": id,
        "account": account,
        "amount": amount,
        "unit": unit,
        "processor": "stripe",
    });
    if let Some(at) = intent["created"].as_i64().and_then(rfc3339) {
        op["occurred_at"] = json!(at);
    }
    Mapping::Operations(vec![op])
}

fn refunds(charge: &Value) -> Mapping {
    // `payment_intent` is an id, or the object itself when expanded.
    let payment_id = charge["payment_intent"]
        .as_str()
        .or_else(|| charge["payment_intent"]["id"].as_str());
    let Some(payment_id) = payment_id else {
        return Mapping::Unmapped("the charge has no payment_intent".into());
    };
    let Some(list) = charge["refunds"]["data"].as_array() else {
        return Mapping::Unmapped("the charge carries no refunds.data".into());
    };
    let mut ops = Vec::with_capacity(list.len());
    for refund in list {
        // Only money that left: a pending refund can still fail, and a
        // failed or canceled one moved nothing.
        if refund["status"].as_str().is_some_and(|s| s != "succeeded") {
            continue;
        }
        let Some(id) = refund["id"].as_str() else {
            return Mapping::Unmapped("a refund has no id".into());
        };
        let (amount, _) = match money(refund["amount"].as_i64(), &refund["currency"]) {
            Ok(m) => m,
            Err(why) => return Mapping::Unmapped(format!("refund {id}: amount: {why}")),
        };
        let mut op = json!({
            "type": "refund",
            "refund_id": id,
            "payment_id": payment_id,
            "amount": amount,
        });
        if let Some(reason) = refund["reason"].as_str() {
            op["reason"] = json!(reason);
        }
        ops.push(op);
    }
    if ops.is_empty() {
        return Mapping::Ignored;
    }
    Mapping::Operations(ops)
}

/// An amount in a currency's minor units as a decimal string and the
/// unit (the currency in upper case).
pub fn money(minor: Option<i64>, currency: &Value) -> Result<(String, String), String> {
    let minor = minor.ok_or("is not an integer of minor units")?;
    if minor < 0 {
        return Err("is negative".into());
    }
    let currency = currency
        .as_str()
        .filter(|c| c.len() == 3 && c.bytes().all(|b| b.is_ascii_alphabetic()))
        .ok_or("the currency is not a three-letter code")?
        .to_ascii_uppercase();
    let amount = Decimal::new(minor, exponent(&currency));
    Ok((amount.to_string(), currency))
}

/// Digits after the decimal point of a currency's minor unit, as Stripe
/// counts them ("Zero-decimal currencies", "Three-decimal currencies").
pub fn exponent(currency: &str) -> u32 {
    const ZERO: &[&str] = &[
        "BIF", "CLP", "DJF", "GNF", "JPY", "KMF", "KRW", "MGA", "PYG", "RWF", "UGX", "VND", "VUV",
        "XAF", "XOF", "XPF",
    ];
    const THREE: &[&str] = &["BHD", "JOD", "KWD", "OMR", "TND"];
    if ZERO.contains(&currency) {
        0
    } else if THREE.contains(&currency) {
        3
    } else {
        2
    }
}

fn rfc3339(unix: i64) -> Option<String> {
    DateTime::<Utc>::from_timestamp(unix, 0).map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
}

/// The payment a mapped event's refunds wait for, if it is a refund event.
pub fn refunded_payment(operations: &[Value]) -> Option<&str> {
    operations
        .iter()
        .find(|op| op["type"] == "refund")
        .and_then(|op| op["payment_id"].as_str())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn minor_units_follow_the_currency_exponent() {
        let m = |n, c: &str| money(Some(n), &json!(c)).unwrap();
        assert_eq!(m(500, "jpy"), ("500".into(), "JPY".into()));
        assert_eq!(m(1999, "usd"), ("19.99".into(), "USD".into()));
        assert_eq!(m(1999, "kwd"), ("1.999".into(), "KWD".into()));
        assert_eq!(m(500, "krw").0, "500");
        assert_eq!(m(5, "eur").0, "0.05");
        assert!(money(Some(-1), &json!("usd")).is_err());
        assert!(money(None, &json!("usd")).is_err());
        assert!(money(Some(1), &json!("dollars")).is_err());
    }

    #[test]
    fn a_succeeded_payment_intent_is_a_payment() {
        let event = json!({
            "id": "evt_1", "type": "payment_intent.succeeded",
            "data": {"object": {
                "id": "pi_1", "object": "payment_intent", "amount": 2000,
                "amount_received": 1999, "currency": "usd", "created": 1_700_000_000,
                "metadata": {"tally_account": "cust_1"}
            }}
        });
        let Mapping::Operations(ops) = map(&event, "tally_account") else {
            panic!("not mapped");
        };
        assert_eq!(
            ops[0],
            json!({"type": "payment", "payment_id": "pi_1", "account": "cust_1",
                   "amount": "19.99", "unit": "USD", "processor": "stripe",
                   "occurred_at": "2023-11-14T22:13:20Z"})
        );
        assert!(matches!(map(&event, "other_key"), Mapping::Unmapped(_)));
    }

    #[test]
    fn a_refunded_charge_is_one_refund_per_succeeded_refund() {
        let event = json!({
            "id": "evt_2", "type": "charge.refunded",
            "data": {"object": {
                "id": "ch_1", "object": "charge", "payment_intent": "pi_1",
                "refunds": {"object": "list", "data": [
                    {"id": "re_1", "amount": 500, "currency": "usd", "status": "succeeded", "reason": "requested_by_customer"},
                    {"id": "re_2", "amount": 100, "currency": "usd", "status": "failed"},
                    {"id": "re_3", "amount": 250, "currency": "usd", "status": "succeeded"}
                ]}
            }}
        });
        let Mapping::Operations(ops) = map(&event, "tally_account") else {
            panic!("not mapped");
        };
        let ids: Vec<&str> = ops
            .iter()
            .map(|o| o["refund_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["re_1", "re_3"]);
        assert_eq!(ops[0]["amount"], "5.00");
        assert_eq!(refunded_payment(&ops), Some("pi_1"));
    }

    #[test]
    fn other_types_are_ignored() {
        let event = json!({"id": "evt_3", "type": "customer.created", "data": {"object": {}}});
        assert_eq!(map(&event, "k"), Mapping::Ignored);
        assert_eq!(identity(&event), Some(("evt_3", "customer.created")));
        assert_eq!(identity(&json!({"type": "x"})), None);
    }
}
