//! Requests turned into intents: validated, normalised and fingerprinted,
//! without touching the database (this runs in parallel in the handlers).

use chrono::{DateTime, SecondsFormat, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::amount::canonical;
use crate::fields::{Fields, ValidationErrors};
use crate::fingerprint::{canonical_params, Fingerprint};
use crate::names::{self, ADJUSTMENTS_ACCOUNT, PAYMENTS_ACCOUNT, REVENUE_ACCOUNT};

mod holds;
mod rules;

pub use holds::{HoldExpiry, HoldRequest};
pub use rules::{AdjustmentRequest, Direction, SettingsChange};

/// The fields each request body may carry; any other is refused with "is
/// not a known field". The OpenAPI request schemas of tally-api are checked
/// against these lists (tests/openapi.rs).
pub mod request_fields {
    /// `POST /v1/usage-debits`.
    pub const USAGE_DEBIT: &[&str] = &[
        "usage_record_id",
        "account",
        "amount",
        "unit",
        "meter",
        "quantity",
        "occurred_at",
        "counter_account",
        "metadata",
    ];
    /// `POST /v1/payments`.
    pub const PAYMENT: &[&str] = &[
        "payment_id",
        "account",
        "amount",
        "unit",
        "processor",
        "occurred_at",
        "counter_account",
        "metadata",
    ];
    /// `POST /v1/holds`.
    pub const HOLD: &[&str] = &[
        "hold_id",
        "account",
        "amount",
        "unit",
        "expires_at",
        "ttl_seconds",
        "counter_account",
        "metadata",
    ];
    /// `POST /v1/holds/{hold_id}/capture`.
    pub const CAPTURE: &[&str] = &["capture_id", "amount", "metadata"];
    /// `POST /v1/holds/{hold_id}/release`.
    pub const RELEASE: &[&str] = &["release_id", "metadata"];
    /// `POST /v1/refunds`.
    pub const REFUND: &[&str] = &["refund_id", "payment_id", "amount", "reason", "metadata"];
    /// `POST /v1/reversals`.
    pub const REVERSAL: &[&str] = &["reversal_id", "entry_id", "reason", "metadata"];
    /// `POST /v1/adjustments`.
    pub const ADJUSTMENT: &[&str] = &[
        "adjustment_id",
        "account",
        "amount",
        "unit",
        "direction",
        "reason",
        "metadata",
    ];
    /// `PUT /v1/accounts/{account}`.
    pub const SETTINGS: &[&str] = &["unit", "overdraft", "metadata"];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    UsageDebit,
    Payment,
    /// A change of an account's settings (unit, overdraft, metadata).
    AccountSettings,
    Hold,
    HoldCapture,
    HoldRelease,
    Refund,
    Reversal,
    Adjustment,
}

impl EntryKind {
    pub const ALL: [EntryKind; 9] = [
        EntryKind::UsageDebit,
        EntryKind::Payment,
        EntryKind::AccountSettings,
        EntryKind::Hold,
        EntryKind::HoldCapture,
        EntryKind::HoldRelease,
        EntryKind::Refund,
        EntryKind::Reversal,
        EntryKind::Adjustment,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::UsageDebit => "usage_debit",
            EntryKind::Payment => "payment",
            EntryKind::AccountSettings => "account_settings",
            EntryKind::Hold => "hold",
            EntryKind::HoldCapture => "hold_capture",
            EntryKind::HoldRelease => "hold_release",
            EntryKind::Refund => "refund",
            EntryKind::Reversal => "reversal",
            EntryKind::Adjustment => "adjustment",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == text)
    }

    /// The request field that carries the upstream ID of this kind.
    pub fn key_field(self) -> &'static str {
        match self {
            EntryKind::UsageDebit => "usage_record_id",
            EntryKind::Payment => "payment_id",
            EntryKind::AccountSettings => "account",
            EntryKind::Hold => "hold_id",
            EntryKind::HoldCapture => "capture_id",
            EntryKind::HoldRelease => "release_id",
            EntryKind::Refund => "refund_id",
            EntryKind::Reversal => "reversal_id",
            EntryKind::Adjustment => "adjustment_id",
        }
    }
}

/// A validated request, not yet decided: its key, its fingerprinted
/// parameters, and what it asks the ledger to do.
#[derive(Debug, Clone)]
pub struct Intent {
    pub kind: EntryKind,
    pub upstream_id: String,
    pub action: Action,
    /// Normalised business parameters, as canonical JSON text.
    pub params: String,
    pub params_map: Map<String, Value>,
    pub fingerprint: Fingerprint,
}

/// What an intent asks for. Kinds whose accounts are fixed by the request
/// are a [`Transfer`]; the others name something already in the ledger (a
/// hold, a payment, an entry) that the writer looks up under its lock.
#[derive(Debug, Clone)]
pub enum Action {
    Transfer(Transfer),
    Settings(SettingsChange),
    Hold(HoldRequest),
    Capture {
        hold_id: String,
        amount: Decimal,
    },
    /// `expiry` is the server's own release of an expired hold.
    Release {
        hold_id: String,
        expiry: bool,
    },
    Refund {
        payment_id: String,
        amount: Decimal,
    },
    Reversal {
        entry_id: String,
    },
    Adjustment(AdjustmentRequest),
}

/// Money moved between two accounts named by the request.
#[derive(Debug, Clone)]
pub struct Transfer {
    /// The customer account the request is about.
    pub account: String,
    pub debit_account: String,
    pub credit_account: String,
    pub amount: Decimal,
    pub unit: String,
}

impl Intent {
    /// Every account the request itself names (the writer loads their
    /// balances and settings; referenced objects add theirs later).
    pub fn named_accounts(&self) -> Vec<&str> {
        match &self.action {
            Action::Transfer(t) => vec![&t.debit_account, &t.credit_account],
            Action::Settings(s) => vec![&s.account],
            Action::Hold(h) => vec![&h.account],
            Action::Adjustment(a) => vec![&a.account, ADJUSTMENTS_ACCOUNT],
            Action::Capture { .. }
            | Action::Release { .. }
            | Action::Refund { .. }
            | Action::Reversal { .. } => Vec::new(),
        }
    }
}

pub(crate) fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

impl Intent {
    /// Validates a request body of the given kind (the kinds whose whole
    /// request is the body).
    pub fn parse(kind: EntryKind, body: Map<String, Value>) -> Result<Intent, ValidationErrors> {
        match kind {
            EntryKind::UsageDebit => Self::usage_debit(body),
            EntryKind::Payment => Self::payment(body),
            EntryKind::Hold => Self::hold(body),
            EntryKind::Refund => Self::refund(body),
            EntryKind::Reversal => Self::reversal(body),
            EntryKind::Adjustment => Self::adjustment(body),
            // Their keys or accounts come from the URL: see `capture`,
            // `release` and `settings`.
            EntryKind::AccountSettings | EntryKind::HoldCapture | EntryKind::HoldRelease => Err(
                ValidationErrors::single("type", format!("{} is not accepted here", kind.as_str())),
            ),
        }
    }

    /// `POST /v1/usage-debits`: debits `account`, credits `@revenue` or `counter_account`.
    pub fn usage_debit(body: Map<String, Value>) -> Result<Intent, ValidationErrors> {
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
    pub fn payment(body: Map<String, Value>) -> Result<Intent, ValidationErrors> {
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

    pub(crate) fn build(
        kind: EntryKind,
        upstream_id: String,
        action: Action,
        params_map: Map<String, Value>,
    ) -> Intent {
        let params = canonical_params(&params_map);
        let fingerprint = Fingerprint::of_canonical(&params);
        Intent {
            kind,
            upstream_id,
            action,
            params,
            params_map,
            fingerprint,
        }
    }
}

/// The fields every money-moving request shares.
pub(crate) struct Common {
    pub(crate) account: Option<String>,
    pub(crate) amount: Option<Decimal>,
    pub(crate) unit: Option<String>,
}

impl Common {
    pub(crate) fn read(f: &mut Fields) -> Self {
        Common {
            account: f.required_str("account", names::check_customer_account),
            amount: f.required_amount("amount"),
            unit: f.required_str("unit", names::check_unit),
        }
    }
}

pub(crate) fn read_counter(f: &mut Fields, account: Option<&str>) -> Option<Option<String>> {
    let counter = f.optional_str("counter_account", names::check_counter_account)?;
    if let (Some(c), Some(a)) = (&counter, account) {
        if c == a {
            f.error("counter_account", "must differ from account");
            return None;
        }
    }
    Some(counter)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn debit(v: Value) -> Result<Intent, ValidationErrors> {
        Intent::usage_debit(v.as_object().unwrap().clone())
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
        let p = Intent::payment(
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
