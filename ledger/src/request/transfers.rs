//! Usage debits and payments: the requests that move money between a
//! customer and a system account, and the dispatch of a request body by kind.

use serde_json::{Map, Value};

use super::model::{
    read_counter, request_fields, timestamp, Action, Common, EntryKind, EntryRequest, Transfer,
};
use crate::amount::canonical;
use crate::fields::{Fields, ValidationErrors};
use crate::names::{self, PAYMENTS_ACCOUNT, REVENUE_ACCOUNT};

impl EntryRequest {
    /// Validates a request body of the given kind (the kinds whose whole
    /// request is the body).
    pub fn parse(
        kind: EntryKind,
        body: Map<String, Value>,
    ) -> Result<EntryRequest, ValidationErrors> {
        match kind {
            EntryKind::UsageDebit => Self::usage_debit(body),
            EntryKind::Payment => Self::payment(body),
            EntryKind::Hold => Self::hold(body),
            EntryKind::Refund => Self::refund(body),
            EntryKind::Reversal => Self::reversal(body),
            EntryKind::Adjustment => Self::adjustment(body),
            // Their keys or accounts come from the URL: see `capture`,
            // `release` and `settings`.
            EntryKind::AccountSettings
            | EntryKind::HoldCapture
            | EntryKind::HoldRelease
            | EntryKind::IntentClaimed
            | EntryKind::IntentReleased
            | EntryKind::IntentSucceeded
            | EntryKind::IntentFailed => Err(ValidationErrors::single(
                "type",
                format!("{} is not accepted here", kind.as_str()),
            )),
        }
    }

    /// `POST /v1/usage-debits`: debits `account`, credits `@revenue` or `counter_account`.
    pub fn usage_debit(body: Map<String, Value>) -> Result<EntryRequest, ValidationErrors> {
        let mut f = Fields::new(body, request_fields::USAGE_DEBIT);
        let upstream_id = f.required_str("usage_record_id", names::check_upstream_id);
        let common = Common::read(&mut f);
        let meter = f.optional_str("meter", names::check_label);
        let quantity = f.optional_non_negative("quantity");
        let occurred_at = f.optional_timestamp("occurred_at");
        let counter = read_counter(&mut f, common.account.as_deref());
        let metadata = f.optional_metadata("metadata");
        f.finish()?;
        let (
            Some(upstream_id),
            Some(account),
            Some(amount),
            Some(unit),
            Some(meter),
            Some(quantity),
            Some(occurred_at),
            Some(counter),
            Some(metadata),
        ) = (
            upstream_id,
            common.account,
            common.amount,
            common.unit,
            meter,
            quantity,
            occurred_at,
            counter,
            metadata,
        )
        else {
            // Every None above recorded an error, so finish() returned it.
            return Err(ValidationErrors::single("body", "is invalid"));
        };
        let mut params = Map::new();
        params.insert("account".into(), Value::String(account.clone()));
        params.insert("amount".into(), Value::String(canonical(amount)));
        params.insert("unit".into(), Value::String(unit.clone()));
        if let Some(m) = meter {
            params.insert("meter".into(), Value::String(m));
        }
        if let Some(q) = quantity {
            params.insert("quantity".into(), Value::String(canonical(q)));
        }
        if let Some(t) = occurred_at {
            params.insert("occurred_at".into(), Value::String(timestamp(t)));
        }
        if let Some(c) = &counter {
            params.insert("counter_account".into(), Value::String(c.clone()));
        }
        if let Some(m) = metadata {
            params.insert("metadata".into(), Value::Object(m));
        }
        let credit_account = counter.unwrap_or_else(|| REVENUE_ACCOUNT.to_owned());
        Ok(Self::build(
            EntryKind::UsageDebit,
            upstream_id,
            Action::Transfer(Transfer {
                account: account.clone(),
                debit_account: account,
                credit_account,
                amount,
                unit,
            }),
            params,
        ))
    }

    /// `POST /v1/payments`: debits `@payments` or `counter_account`, credits `account`.
    pub fn payment(body: Map<String, Value>) -> Result<EntryRequest, ValidationErrors> {
        let mut f = Fields::new(body, request_fields::PAYMENT);
        let upstream_id = f.required_str("payment_id", names::check_upstream_id);
        let common = Common::read(&mut f);
        let processor = f.optional_str("processor", names::check_label);
        let occurred_at = f.optional_timestamp("occurred_at");
        let counter = read_counter(&mut f, common.account.as_deref());
        let metadata = f.optional_metadata("metadata");
        f.finish()?;
        let (
            Some(upstream_id),
            Some(account),
            Some(amount),
            Some(unit),
            Some(processor),
            Some(occurred_at),
            Some(counter),
            Some(metadata),
        ) = (
            upstream_id,
            common.account,
            common.amount,
            common.unit,
            processor,
            occurred_at,
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
        if let Some(p) = processor {
            params.insert("processor".into(), Value::String(p));
        }
        if let Some(t) = occurred_at {
            params.insert("occurred_at".into(), Value::String(timestamp(t)));
        }
        if let Some(c) = &counter {
            params.insert("counter_account".into(), Value::String(c.clone()));
        }
        if let Some(m) = metadata {
            params.insert("metadata".into(), Value::Object(m));
        }
        let debit_account = counter.unwrap_or_else(|| PAYMENTS_ACCOUNT.to_owned());
        Ok(Self::build(
            EntryKind::Payment,
            upstream_id,
            Action::Transfer(Transfer {
                account: account.clone(),
                debit_account,
                credit_account: account,
                amount,
                unit,
            }),
            params,
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn debit(v: Value) -> Result<EntryRequest, ValidationErrors> {
        EntryRequest::usage_debit(v.as_object().unwrap().clone())
    }

    #[test]
    fn equal_decimals_and_instants_give_one_fingerprint() {
        let a = debit(
            json!({"usage_record_id": "u1", "account": "c", "amount": "1.50", "unit": "USD",
            "occurred_at": "2026-11-29T11:00:00+01:00", "metadata": {"b": "1", "a": "2"}}),
        )
        .unwrap();
        let b = debit(
            json!({"metadata": {"a": "2", "b": "1"}, "unit": "USD", "amount": 1.5,
            "account": "c", "usage_record_id": "u1", "occurred_at": "2026-11-29T10:00:00Z"}),
        )
        .unwrap();
        assert_eq!(a.fingerprint, b.fingerprint);
        assert_eq!(
            a.params,
            r#"{"account":"c","amount":"1.5","metadata":{"a":"2","b":"1"},"occurred_at":"2026-11-29T10:00:00Z","unit":"USD"}"#
        );
        let Action::Transfer(t) = &a.action else {
            panic!("a debit is a transfer")
        };
        assert_eq!(t.credit_account, "@revenue");
    }

    #[test]
    fn absent_and_present_optional_fields_differ() {
        let a =
            debit(json!({"usage_record_id": "u1", "account": "c", "amount": "1", "unit": "USD"}))
                .unwrap();
        let b = debit(
            json!({"usage_record_id": "u1", "account": "c", "amount": "1", "unit": "USD",
            "counter_account": "@revenue"}),
        )
        .unwrap();
        assert_ne!(a.fingerprint, b.fingerprint);
        let (Action::Transfer(ta), Action::Transfer(tb)) = (&a.action, &b.action) else {
            panic!("debits are transfers")
        };
        assert_eq!(ta.credit_account, tb.credit_account);
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let errs =
            debit(json!({"account": "@revenue", "amount": "0", "unit": "", "colour": "red"}))
                .unwrap_err();
        let fields: Vec<&str> = errs.errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            vec!["colour", "usage_record_id", "account", "amount", "unit"]
        );
    }

    #[test]
    fn a_payment_credits_the_customer() {
        let p = EntryRequest::payment(
            json!({"payment_id": "p1", "account": "c", "amount": "10", "unit": "USD"})
                .as_object()
                .unwrap()
                .clone(),
        )
        .unwrap();
        let Action::Transfer(t) = &p.action else {
            panic!("a payment is a transfer")
        };
        assert_eq!(t.debit_account, "@payments");
        assert_eq!(t.credit_account, "c");
    }
}
